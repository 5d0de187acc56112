"""The link the grader calls students' functions through (course_utils.remote): what crosses, and what cannot.

Every checker's own tests also run across it (their [remote] runs, ``TESTS_REMOTE_ANSWERS=1``, in ``make test``); these tests hold what
those do not show: data only comes back, never an object that runs code, and a result file that is not a plain file
of data is refused."""

import gc
import os
import pickle

import numpy as np
import pytest
import torch
from torch import nn

from course_utils.remote import KernelSide, Link, loopback


def linked(fn, tmp_path):
    return loopback({"answer": fn}, tmp_path).hold("answer")


def test_results_cross_as_data_with_their_types(tmp_path):
    def answer(x, n):
        return x * 2, [n, "s", None], {"k": np.float64(1.5)}, np.arange(3), torch.Generator().manual_seed(n), object()

    got = linked(answer, tmp_path)(torch.ones(2), 3)
    assert torch.equal(got[0], torch.full((2,), 2.0)) and got[1] == [3, "s", None]
    assert type(got[2]["k"]) is np.float64 and isinstance(got[3], np.ndarray)
    assert got[4].initial_seed() == 3 and type(got[5]).__name__ == "object"  # an object: its type's name only


def test_a_loopback_given_no_folder_deletes_the_one_it_made_once_its_functions_are_gone():
    held = loopback({"answer": lambda x: x + 1}).hold("answer")
    assert held(1) == 2
    folder = held._link._folder  # pyright: ignore[reportAttributeAccessIssue]
    assert folder.is_dir() and any(folder.iterdir())
    del held
    gc.collect()
    assert not folder.exists()


def test_an_answers_error_is_raised_again_by_name_with_its_message(tmp_path):
    def answer(x):
        raise IndexError("index 9 is out of bounds")

    with pytest.raises(IndexError, match="out of bounds"):
        linked(answer, tmp_path)(torch.ones(1))

    def written_later(x):
        raise NotImplementedError

    with pytest.raises(NotImplementedError):
        linked(written_later, tmp_path)(torch.ones(1))

    def decodes_a_cut_character(chunk):  # UnicodeDecodeError is not built from a message: rebuilt by its name
        return chunk.decode("utf-8")

    with pytest.raises(RuntimeError, match="unexpected end of data") as raised:
        linked(decodes_a_cut_character, tmp_path)(b"\xf0\x9f")
    assert type(raised.value).__name__ == "UnicodeDecodeError"


def test_what_a_call_does_to_its_arguments_is_done_to_the_callers(tmp_path):
    def answer(x, items, table, layer):
        x.add_(1)
        items.append(5)
        table["new"] = 1
        layer.weight = nn.Parameter(torch.zeros(2, 2))

    x, items, table, layer = torch.zeros(2), [1], {"old": 0}, nn.Linear(2, 2)
    linked(answer, tmp_path)(x, items, table, layer)
    assert torch.equal(x, torch.ones(2)) and items == [1, 5] and table == {"old": 0, "new": 1}
    assert torch.equal(layer.weight, torch.zeros(2, 2))


def test_gradients_flow_back_through_the_kernel(tmp_path):
    def answer(x, w):
        return (x * w).sum(), (x * w).detach()

    x, w = torch.tensor([1.0, 2.0], requires_grad=True), torch.tensor([3.0, 4.0], requires_grad=True)
    out, cut = linked(answer, tmp_path)(x, w)
    gx, gw = torch.autograd.grad(out, [x, w])
    assert torch.equal(gx, w.detach()) and torch.equal(gw, x.detach()) and not cut.requires_grad


class Boom:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


@pytest.mark.parametrize("kind", ["code", "link", "pipe", "missing"])
def test_a_result_file_that_is_not_data_is_refused_and_nothing_runs(tmp_path, kind):
    """The kernel writes the result files: one that would run code when unpickled, a link to another file, a pipe
    that would block the reader, or none at all."""
    side = KernelSide()
    side.hold(str(tmp_path / "d"), "f", lambda: 1)

    def run(code):
        path = code.split("(")[1].split(",")[0].strip("')\"")
        if "serve" not in code:
            return
        out = path + ".out"
        if kind == "code":
            with open(out, "wb") as f:
                pickle.dump({"result": Boom()}, f)
        elif kind == "link":
            os.symlink("/etc/hostname", out)
        elif kind == "pipe":
            os.mkfifo(out)

    from course_utils.remote import RemoteFunction

    remote = RemoteFunction(Link(run, tmp_path), "f", {"callable": True, "name": "f"})
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(RuntimeError, match=r"gave no result|not data|not a file of data"):
            remote()
    finally:
        os.chdir(cwd)
    assert not (tmp_path / "pwned").exists()


def test_the_grader_never_writes_through_a_link_the_kernel_left(tmp_path):
    target = tmp_path / "instructors_file"
    target.write_text("mine")
    link = Link(lambda code: None, tmp_path)
    os.symlink(target, tmp_path / f"{link._prefix}0.in")  # where the first call's arguments would go
    from course_utils.remote import RemoteFunction

    with pytest.raises(OSError):
        RemoteFunction(link, "f", {"callable": True, "name": "f"})()
    assert target.read_text() == "mine"
