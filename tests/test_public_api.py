"""The public names are a contract: notebooks and other chapters rely on them."""

import inspect
import re
from pathlib import Path

import torch
from torch import nn

import course_utils

ROOT = Path(__file__).resolve().parent.parent
# The chapters' code: their sources without the Markdown and comment lines.
CHAPTERS = "\n".join(
    line
    for path in sorted((ROOT / "notebooks" / "src").glob("*.py"))
    for line in path.read_text(encoding="utf-8").splitlines()
    if not line.lstrip().startswith("#")
)


def _documented(obj) -> bool:
    """A docstring of its own: not inherited (an nn.Module subclass would show nn.Module's) nor the signature a
    dataclass writes when it has none."""
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
    return bool(doc and doc.strip()) and not (inspect.isclass(obj) and doc.startswith(f"{obj.__name__}("))


def test_every_public_name_is_importable_and_documented():
    """What the front door exports exists and says what it is; which chapter teaches each name is the audit's
    table (tools/audit_notebooks.py, TAUGHT_IN), tested in test_notebook_audit.py."""
    assert len(set(course_utils.__all__)) == len(course_utils.__all__)
    undocumented = [
        name
        for name in course_utils.__all__
        if (inspect.isfunction(obj := getattr(course_utils, name)) or inspect.isclass(obj)) and not _documented(obj)
    ]
    assert undocumented == []


def test_the_graders_live_in_checks_and_only_there_and_a_chapter_uses_each():
    import course_utils.checks

    graders = {name for name in course_utils.checks.__all__ if name.startswith("check_")}
    assert set(course_utils.checks.__all__) == graders | {"Verdict"}
    assert all(callable(getattr(course_utils.checks, name)) for name in graders)
    assert all(_documented(getattr(course_utils.checks, name)) for name in graders)
    assert not [name for name in dir(course_utils) if name.startswith("check_")]
    assert [name for name in sorted(graders) if not re.search(rf"\b{name}\(", CHAPTERS)] == []


def test_only_graders_are_named_check():
    """Input validators say `validate_`; a name starting with `check_` is always an exercise grader."""
    import pkgutil

    for info in pkgutil.walk_packages(course_utils.__path__, "course_utils."):
        if info.name.startswith("course_utils.checks"):
            continue
        module = __import__(info.name, fromlist=["_"])
        assert not [n for n in vars(module) if n.startswith("check_")], info.name


def test_contract_signatures():
    sig = lambda f: list(inspect.signature(f).parameters)  # noqa: E731
    assert sig(course_utils.scaled_dot_product_attention)[:4] == ["query", "key", "value", "mask"]
    assert sig(course_utils.MultiHeadAttention)[:3] == ["d_model", "n_heads", "dropout"]
    assert sig(course_utils.MultiHeadAttention.forward)[1:6] == ["query", "key", "value", "mask", "need_weights"]
    assert inspect.signature(course_utils.MultiHeadAttention.forward).parameters["need_weights"].default is False
    assert sig(course_utils.DecoderLayer.forward)[1:5] == ["x", "memory", "src_mask", "tgt_mask"]
    assert sig(course_utils.Transformer)[:8] == [
        "src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "dropout", "max_len",
    ]  # fmt: skip
    assert sig(course_utils.greedy_decode)[:6] == ["model", "src", "src_mask", "max_len", "bos_id", "eos_id"]
    for decode in (course_utils.greedy_decode, course_utils.beam_search):  # after the source mask: keywords only
        parameters = list(inspect.signature(decode).parameters.values())[3:]
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters), decode.__name__


def test_every_public_module_builds_and_runs():
    x = torch.randn(2, 4, 8)
    modules = [
        course_utils.MultiHeadAttention(8, 2), course_utils.PositionalEncoding(8),
        course_utils.LayerNorm(8), course_utils.FeedForward(8, 16),
        course_utils.EncoderLayer(8, 2, 16), course_utils.Encoder(8, 2, 16, 2),
    ]  # fmt: skip
    for m in modules:
        assert isinstance(m, nn.Module)
        out = m(x, x, x)[0] if isinstance(m, course_utils.MultiHeadAttention) else m(x)
        assert out.shape == x.shape
    assert course_utils.DecoderLayer(8, 2, 16)(x, torch.randn(2, 3, 8)).shape == x.shape
    assert course_utils.Decoder(8, 2, 16, 2)(x, torch.randn(2, 3, 8)).shape == x.shape
    for cls in (course_utils.Transformer, course_utils.TorchTransformer):
        model = cls(5, 6, d_model=8, n_heads=2, n_layers=1, d_ff=16)
        assert model(torch.randint(0, 5, (2, 3)), torch.randint(0, 6, (2, 4))).shape == (2, 4, 6)


def test_no_misspelled_names_ship():
    import pkgutil

    import course_utils.checks

    modules = [info.name for info in pkgutil.walk_packages(course_utils.__path__, "course_utils.")]
    names = " ".join([*dir(course_utils), *course_utils.checks.__all__, *modules]).lower()
    assert "casual" not in names


def test_get_device_prefers_a_gpu_unless_told_otherwise(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # pretend there is a GPU
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    assert course_utils.get_device() == torch.device("cuda")
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert course_utils.get_device() == torch.device("cpu")


def test_get_device_falls_back_to_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    assert course_utils.get_device() == torch.device("cpu")
