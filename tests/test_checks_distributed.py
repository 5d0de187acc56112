"""The checkers of ``course_utils.checks.distributed``, data-parallel training (chapter 11), against students'
answers: right answers written in other styles pass, each classic mistake fails with a message that names it, and an
unwritten stub is reported as not attempted.

``check_average_gradients`` runs an answer's *code* in two new processes (``spawn``): each answer below is a function
of this module whose code stands alone, as a notebook cell's would, with ``torch``, ``dist``, ``nn``, ``F``, ``math``
and what this module imports. Its tests start processes, a few seconds each: they are marked slow.
"""

import math
import os
import random

import helpers
import numpy as np
import pytest
import torch
import torch.distributed as dist
from helpers import judged, todo, verdict, verdict_rows, verdict_table_test
from torch.distributed import all_reduce, get_world_size
from torch.utils.data import DistributedSampler

import course_utils.checks.distributed as distributed
from course_utils.checks import check_average_gradients, check_bytes_per_rank, check_shard_indices
from course_utils.remote import loopback
from course_utils.training.distributed import spawn

# gloo averages in the all_reduce (ReduceOp.AVG) since PyTorch 2.8; before, it raises
GLOO_AVERAGES = torch.__version__ >= "2.8"


# --- chapter 11: gradients averaged over the ranks -------------------------------------------------------------------


def average_solution(model):  # the notebook's solution
    world_size = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)  # every rank now holds the sum
            p.grad /= world_size


def average_divided_first(model):
    for p in model.parameters():
        p.grad.div_(dist.get_world_size())
        dist.all_reduce(p.grad)


def average_one_buffer(model):  # one all_reduce for every gradient, as DDP's buckets do
    grads = [p.grad for p in model.parameters()]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    for g, piece in zip(grads, flat.split([g.numel() for g in grads])):
        g.copy_(piece.view_as(g))


def average_all_gather(model):
    world = dist.get_world_size()
    for p in model.parameters():
        gathered = [torch.zeros_like(p.grad) for _ in range(world)]
        dist.all_gather(gathered, p.grad)
        p.grad = torch.stack(gathered).mean(0)


def average_imported_names(model):  # from torch.distributed import all_reduce, get_world_size, in the notebook
    for p in model.parameters():
        all_reduce(p.grad)
        p.grad = p.grad / get_world_size()


def average_avg_op(model):
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)


def average_summed(model):
    for p in model.parameters():
        dist.all_reduce(p.grad)


def average_divided_twice(model):
    for p in model.parameters():
        p.grad /= dist.get_world_size()
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()


def average_a_copy(model):  # the all_reduce writes into a temporary, thrown away
    for p in model.parameters():
        dist.all_reduce(p.grad / dist.get_world_size())


def average_nothing(model):
    return model


def average_weights_only(model):
    for p in model.parameters():
        if p.dim() > 1:
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()


def average_last_only(model):  # the all_reduce indented out of the loop
    for p in model.parameters():
        grad = p.grad
    dist.all_reduce(grad)
    grad /= dist.get_world_size()


def average_on_rank_0(model):  # rank 0 waits in an all_reduce that rank 1 never calls
    for p in model.parameters():
        if dist.get_rank() == 0:
            dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()


def average_by_rank(model):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= dist.get_rank() + 1


def average_zeroed(model):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad.zero_()


def average_ddp_attribute(model):
    for p in model.module.parameters():
        dist.all_reduce(p.grad)


def average_notebook_global(model):
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= WORLD_SIZE  # noqa: F821 (a variable of the notebook: the new processes do not have it)


def average_init_again(model):  # the process group set up once more, as a script's main() does
    dist.init_process_group("gloo")


def average_on_old_gloo(model):  # what gloo said of ReduceOp.AVG before PyTorch 2.8
    raise RuntimeError("Cannot use ReduceOp.AVG with Gloo")


def average_half_written(model):
    world_size = dist.get_world_size()
    for _ in model.parameters():
        raise NotImplementedError
    return world_size


def average_world_size_from_torchrun(model):  # torchrun's WORLD_SIZE, which spawn sets too
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= int(os.environ["WORLD_SIZE"])


def average_divided_by_2(model):  # the number of ranks written in
    for p in model.parameters():
        dist.all_reduce(p.grad)
        p.grad /= 2


def average_stub(model):
    # your code here
    raise NotImplementedError


AVG_OP = (average_avg_op,) if GLOO_AVERAGES else (average_avg_op, "sum with the default ReduceOp.SUM")
AVERAGE_RIGHT = [
    average_solution,
    average_divided_first,
    average_one_buffer,
    average_all_gather,
    average_imported_names,
    average_world_size_from_torchrun,
    *([AVG_OP[0]] if GLOO_AVERAGES else []),
]
AVERAGE_WRONG = [
    ("summed", average_summed, "the gradients are summed, not averaged"),
    ("divided-by-2", average_divided_by_2, "right on 2 ranks, but not on 3"),
    ("divided-twice", average_divided_twice, "divided twice"),
    ("all-reduce-of-a-copy", average_a_copy, "the gradients are left as they are"),
    ("nothing", average_nothing, "each rank trained on its own half of the batch"),
    ("weights-only", average_weights_only, "only some parameters are averaged (0.weight, 2.weight, of"),
    ("last-only", average_last_only, "only some parameters are averaged (2.bias, of"),
    ("rank-0-only", average_on_rank_0, "the run hangs: rank 0 waited in a collective"),
    ("divided-by-rank", average_by_rank, "ranks' weights differ after training"),
    ("zeroed", average_zeroed, "the weights did not move"),
    ("ddp-attribute", average_ddp_attribute, "raised AttributeError: 'Sequential' object has no attribute 'module'"),
    ("notebook-global", average_notebook_global, "define what else it needs inside the function"),
    ("init-again", average_init_again, "group twice. The process group is already set up"),
    ("avg-on-old-gloo", average_on_old_gloo, "sum with the default ReduceOp.SUM, then divide"),
    ("lambda", lambda model: None, "your function is a lambda"),
    *([] if GLOO_AVERAGES else [("avg-op", *AVG_OP)]),
]


ALONE = {average_on_rank_0}  # leaves a collective waiting: it needs a process group of its own


def each_answer_on_one_group(rank, world_size, answers):
    """On each rank of one ``spawn``: every answer in turn, as ``check_average_gradients`` runs each on 2 new
    processes, so that the table below starts 2 processes instead of 2 per answer."""
    results = []
    for answer in answers:
        results.append(distributed._gradients_averaged_with(rank, world_size, *answer))
        dist.barrier()
    return results


@pytest.fixture(scope="module")
def ranks_per_answer():
    """Each answer of the table's source, to what its 2 ranks return: computed for them all on one process group."""
    answers = [
        (distributed._source(fn), fn.__name__, distributed._imports(fn))
        for fn in [*AVERAGE_RIGHT, *(wrong[1] for wrong in AVERAGE_WRONG)]
        if fn not in ALONE and fn.__name__ != "<lambda>"
    ]
    found = {}
    for world_size in (2, 3):  # the check runs a right answer on 3 ranks too
        per_rank = spawn(each_answer_on_one_group, world_size, answers)
        for i, (source, *_) in enumerate(answers):
            found[source, world_size] = [per_rank[rank][i] for rank in range(world_size)]
    return found


@pytest.mark.slow  # the answers run on 2 new processes (one group for them all, one more for the answer that hangs)
@pytest.mark.parametrize(
    "check, answer, expected, says",
    verdict_rows(check_average_gradients, AVERAGE_RIGHT, AVERAGE_WRONG, says="is right: 2 ranks, each on half"),
)
def test_each_averaging_answer_gets_its_verdict(check, answer, expected, says, ranks_per_answer, monkeypatch, capsys):
    if helpers.ACROSS_THE_LINK:  # 2 processes per answer, twice: the test below crosses the link with a right answer
        pytest.skip("run once, in one process; the grader's path is tested below")  # and a stub

    def spawned_once(fn, world_size, source, *args, **kwargs):  # what spawn returned for this answer in the fixture
        if fn is distributed._gradients_averaged_with and (source, world_size) in ranks_per_answer:
            return ranks_per_answer[source, world_size]
        return spawn(fn, world_size, source, *args, **kwargs)

    monkeypatch.setattr(distributed, "spawn", spawned_once)
    judged(check, answer, expected, capsys, says)


@pytest.mark.slow
def test_an_answer_run_on_the_shared_group_returns_what_it_returns_on_a_group_of_its_own(ranks_per_answer):
    source = distributed._source(average_by_rank)  # each rank's weights its own: ranks mixed up would show
    alone = spawn(distributed._gradients_averaged_with, 2, source, "average_by_rank", {})
    shared = ranks_per_answer[source, 2]
    assert not torch.equal(alone[0]["weights"]["0.weight"], alone[1]["weights"]["0.weight"])
    for mine, theirs in zip(alone, shared, strict=True):
        assert mine["weights"].keys() == theirs["weights"].keys()
        assert all(torch.equal(w, theirs["weights"][name]) for name, w in mine["weights"].items())


@pytest.mark.parametrize(
    "stub", [todo, average_stub, pytest.param(average_half_written, marks=pytest.mark.slow)]
)  # a stub is seen in its code; a function that raises NotImplementedError further on, when it runs
def test_an_unwritten_averaging_is_not_attempted(stub, capsys):
    result = check_average_gradients(stub)
    assert not result and result.status == "not attempted", result.message
    assert "not written yet" in capsys.readouterr().out


def test_averaging_code_that_cannot_be_read_is_told_to_be_written_in_a_cell(capsys):
    namespace = {}
    exec("def typed_at_a_console(model):\n    pass\n", namespace)  # no file holds its source
    result = check_average_gradients(namespace["typed_at_a_console"])
    assert not result and result.status == "fail"
    assert "could not read the code of typed_at_a_console" in result.message and "with def" in result.message
    # Across the grader's link (course_utils.remote) only calls cross, never code: the checker has the kernel, which
    # holds the answer and its code, start the ranks, and reads their weights back as data
    remote = loopback({"answer": average_solution}).hold("answer")
    result = check_average_gradients(remote)
    assert result, result.message
    stub = loopback({"answer": average_stub}).hold("answer")
    result = check_average_gradients(stub)
    assert not result and result.status == "not attempted", result.message
    capsys.readouterr()


def test_a_rank_that_never_finishes_is_named_as_a_hang(monkeypatch, capsys):
    def hangs(*args, **kwargs):
        raise TimeoutError("rank(s) [1] of 2 did not finish within 60 s: a collective that some rank never joined")

    monkeypatch.setattr(distributed, "spawn", hangs)
    monkeypatch.setattr(distributed, "TIMEOUT", 0.0)  # the time limit passed, as when a rank waits
    result = check_average_gradients(average_solution)
    assert not result and "the run hangs: rank(s) [1] of 2 did not finish within 0 s" in result.message
    assert "no all_reduce under `if dist.get_rank() == ...`" in result.message
    monkeypatch.setattr(distributed, "TIMEOUT", 60.0)  # "timed out" at once: the processes ended, they did not wait
    result = check_average_gradients(average_solution)
    assert not result and "could not be tested" in result.message and "ended before they reported" in result.message
    capsys.readouterr()


# --- each rank's shard of a data set ---------------------------------------------------------------------------------


def shard_solution(n, rank, world_size, epoch, seed=0):  # the notebook's solution
    g = torch.Generator()
    g.manual_seed(seed + epoch)  # a new order every epoch, the same on every rank
    indices = torch.randperm(n, generator=g).tolist()
    total = math.ceil(n / world_size) * world_size
    indices = (indices * math.ceil(total / n))[:total]  # padded from the start, even when n < world_size
    return indices[rank:total:world_size]


def shard_sampler(n, rank, world_size, epoch, seed=0):
    sampler = DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
    sampler.set_epoch(epoch)
    return list(sampler)


def shard_tensor(n, rank, world_size, epoch, seed=0):
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch))
    per = -(-n // world_size)
    return perm.repeat(-(-per * world_size // n))[: per * world_size][rank::world_size]


def shard_numpy_padded_in_a_loop(n, rank, world_size, epoch, seed=0):
    indices = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    i = 0
    while len(indices) % world_size:
        indices.append(indices[i])
        i += 1
    return np.array(indices[rank::world_size])


def shard(*, contiguous=False, pad="right", seed_with=lambda seed, epoch, rank: seed + epoch, shuffle=True,
          as_float=False):  # fmt: skip
    """A rank's indices, with one switch per classic mistake."""

    def fn(n, rank, world_size, epoch, seed=0):
        if shuffle:
            indices = torch.randperm(n, generator=torch.Generator().manual_seed(seed_with(seed, epoch, rank))).tolist()
        else:
            indices = list(range(n))
        per = math.ceil(n / world_size)
        if pad == "right":
            indices = (indices * math.ceil(per * world_size / n))[: per * world_size]
        elif pad == "short":
            indices = indices + indices[: per * world_size - n]
        elif pad == "drop":
            per = n // world_size
            indices = indices[: per * world_size]
        if contiguous:
            mine = indices[rank * per : (rank + 1) * per]
        else:
            mine = indices[rank::world_size]
        return [float(i) for i in mine] if as_float else mine

    return fn


def shard_python_random(n, rank, world_size, epoch, seed=0):
    indices = list(range(n))
    random.Random(seed + epoch).shuffle(indices)  # the same on every rank, but not torch's permutation
    indices = (indices * math.ceil(world_size / n + 1))[: math.ceil(n / world_size) * world_size]
    return indices[rank::world_size]


def shard_global_generator(n, rank, world_size, epoch, seed=0):
    indices = torch.randperm(n).tolist()  # the global random state: a new permutation on every call
    indices = (indices * world_size)[: math.ceil(n / world_size) * world_size]
    return indices[rank::world_size]


def shard_global_seed(n, rank, world_size, epoch, seed=0):
    torch.manual_seed(seed + epoch)  # the right permutation, but the whole run's generator reseeded
    indices = torch.randperm(n).tolist()
    total = math.ceil(n / world_size) * world_size
    return (indices * math.ceil(total / n))[:total][rank::world_size]


def shard_next_rank(n, rank, world_size, epoch, seed=0):
    return shard_solution(n, (rank + 1) % world_size, world_size, epoch, seed)


def shard_padded_past(n, rank, world_size, epoch, seed=0):
    indices = torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch)).tolist()
    total = (n // world_size + 1) * world_size  # one row of padding too many when world_size divides n
    return (indices * math.ceil(total / n + 1))[:total][rank::world_size]


SHARD_WRONG = [
    ("global-seed", shard_global_seed, "drawn from PyTorch's global generator"),
    ("next-rank", shard_next_rank, "each rank reads the next rank's indices"),
    ("padded-past", shard_padded_past, "the padding goes past the next multiple of world_size"),
    ("contiguous-blocks", shard(contiguous=True), "each rank reads a contiguous block of the permutation"),
    ("contiguous-unpadded", shard(contiguous=True, pad="none"), "contiguous block"),
    ("no-padding", shard(pad="none"), "the run hangs"),
    ("padding-too-short", shard(pad="short"), "too short when n < world_size"),
    ("drop-last", shard(pad="drop"), "the last indices are dropped"),
    ("same-every-epoch", shard(seed_with=lambda seed, epoch, rank: seed), "the order is the same every epoch"),
    ("seed-ignored", shard(seed_with=lambda seed, epoch, rank: epoch), "the seed is ignored"),
    ("seed-per-rank", shard(seed_with=lambda seed, epoch, rank: seed + epoch + rank), "shards overlap"),
    ("global-generator", shard_global_generator, "shards overlap and some examples are never read"),
    ("not-shuffled", shard(shuffle=False), "the indices are not shuffled"),
    ("python-random", shard_python_random, "not in DistributedSampler's order"),
    ("floats", shard(as_float=True), "indices should be ints"),
    (
        "a-set",
        lambda n, rank, world_size, epoch, seed=0: set(shard_solution(n, rank, world_size, epoch, seed)),
        "as a list of ints",
    ),
    (
        "out-of-range",
        lambda n, rank, world_size, epoch, seed=0: [i + 1 for i in shard_solution(n, rank, world_size, epoch, seed)],
        "outside the data set",
    ),
]


# --- the memory each rank holds --------------------------------------------------------------------------------------


def bytes_solution(n_params, world_size, strategy):  # the notebook's solution
    per_parameter = 4 + 4 + 2 * 4  # float32 parameter, its gradient, AdamW's exp_avg and exp_avg_sq
    total = per_parameter * n_params
    return total if strategy == "ddp" else total / world_size


def bytes_ceil_per_tensor(n_params, world_size, strategy):  # fully_shard pads each tensor to split it evenly
    held = n_params if strategy == "ddp" else math.ceil(n_params / world_size)
    return sum(4 * held for _tensor in ("parameter", "gradient", "exp_avg", "exp_avg_sq"))


def bytes_floor_division(n_params, world_size, strategy):
    return {"ddp": 16 * n_params, "fsdp": 16 * n_params // world_size}[strategy]


def bytes_tensor(n_params, world_size, strategy):
    return torch.tensor(16.0 * n_params / (world_size if strategy == "fsdp" else 1), dtype=torch.float64)


def bytes_per(per_parameter=16, *, ddp_divided=False, fsdp_divided=True, unit=1):
    """Bytes per rank with one switch per classic mistake."""

    def fn(n_params, world_size, strategy):
        divided = fsdp_divided if strategy == "fsdp" else ddp_divided
        return per_parameter * n_params / (world_size if divided else 1) / unit

    return fn


BYTES_WRONG = [
    ("adamw-forgotten", bytes_per(8), "AdamW's state is forgotten"),
    ("gradients-forgotten", bytes_per(12), "the gradients are forgotten"),
    ("parameters-only", bytes_per(4), "only the parameters are counted"),
    ("bfloat16", bytes_per(2 * 4), "counted as 2 bytes (bfloat16)"),
    ("float64", bytes_per(8 * 4), "float64"),
    ("ddp-divided", bytes_per(ddp_divided=True), "DDP replicates everything"),
    ("fsdp-not-divided", bytes_per(fsdp_divided=False), "FSDP is not divided"),
    (
        "ddp-divided-adamw-forgotten",
        bytes_per(8, ddp_divided=True),
        "only FSDP divides them by the world size; and 8 bytes",
    ),
    ("megabytes", bytes_per(unit=1e6), "the answer in megabytes"),
    ("mebibytes", bytes_per(unit=2**20), "the answer in MiB"),
    ("gigabytes", bytes_per(unit=1e9), "the answer in gigabytes"),
    ("bits", bytes_per(16 * 8), "the answer in bits"),
    ("a-string", lambda n, w, s: f"{bytes_solution(n, w, s) / 1e9:.1f} GB", "return the number of bytes"),
    ("strategy-unknown", lambda n, w, s: {"ddp": 16 * n}[s], "raised KeyError"),
    ("world-size-hard-coded", lambda n, w, s: 16 * n / (8 if s == "fsdp" else 1), "each rank holds"),
    ("zero-1", lambda n, w, s: 16 * n if s == "ddp" else 8 * n + 8 * n / w, "that is ZeRO stage 1"),
    ("zero-2", lambda n, w, s: 16 * n if s == "ddp" else 4 * n + 12 * n / w, "that is ZeRO stage 2"),
]


@pytest.mark.parametrize("check", [check_shard_indices, check_bytes_per_rank])
def test_an_unwritten_stub_is_not_attempted(check, capsys):
    result = check(todo)
    assert not result and result.status == "not attempted" and "not written yet" in capsys.readouterr().out


def test_the_reference_is_what_distributed_sampler_yields_to_each_rank():
    for n, world_size, epoch, seed in [(10, 3, 2, 5), (2, 5, 1, 0), (100, 8, 7, 1234)]:
        ranks = [shard_solution(n, rank, world_size, epoch, seed) for rank in range(world_size)]
        assert ranks == [shard_sampler(n, rank, world_size, epoch, seed) for rank in range(world_size)]
        assert len({len(r) for r in ranks}) == 1 and set().union(*map(set, ranks)) == set(range(n))


def test_shard_mistakes_are_told_with_the_case_that_shows_them(capsys):
    ok, out = verdict(check_shard_indices, shard(pad="short"), capsys)
    assert not ok and "with n=2, world_size=5, epoch=1, seed=0" in out  # right until fewer examples than ranks
    ok, out = verdict(check_shard_indices, shard(pad="none"), capsys)
    assert not ok and "rank 1 reads 3 indices and rank 0 4" in out


# --- the verdict table: every answer above, the verdict it must get and the words its message must hold ---------

VERDICTS = [
    *verdict_rows(
        check_shard_indices,
        [shard_solution, shard_sampler, shard_tensor, shard_numpy_padded_in_a_loop, shard()],
        SHARD_WRONG,
        says="✅ every rank reads what DistributedSampler gives it, epoch after epoch.",
    ),
    *verdict_rows(
        check_bytes_per_rank,
        [bytes_solution, bytes_ceil_per_tensor, bytes_floor_division, bytes_tensor, bytes_per()],
        BYTES_WRONG,
        says="✅ bytes per rank are right",
    ),
]


test_each_answer_gets_its_verdict = verdict_table_test(VERDICTS)
