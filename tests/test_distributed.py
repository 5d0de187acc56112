"""Data-parallel training on 2 CPU processes (gloo), proven equal to what it replaces: gradients averaged by hand and
DDP; DDP on 2 ranks of B rows and one process of 2B; gradient accumulation and one big batch, DDP's ``no_sync``
communicating once; FSDP2 (``fully_shard``) and DDP, each rank holding half the parameters; a distributed checkpoint
saved by 2 ranks and loaded into 1 process, and one saved by 1 process loaded into 2 ranks. Every collective runs under a timeout: nothing here can hang CI."""

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from course_utils.training.checkpoint import load_checkpoint
from course_utils.training.distributed import average_gradients, backend_for, same_on_every_rank, shard, spawn

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow  # each test starts processes

STEPS, ROWS = 5, 8  # optimizer steps; rows per rank


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2))  # FSDP2 shards dim 0: even sizes split evenly


def data(steps: int = STEPS, rows: int = 2 * ROWS) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(rows, 6, generator=g), torch.randn(rows, 2, generator=g)) for _ in range(steps)]


def loss_of(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return nn.functional.mse_loss(net(x), y)  # the mean over the rows


def one_process() -> nn.Module:
    """The model trained in one process, each step on the 2B rows that the two ranks share."""
    single = model()
    opt = torch.optim.SGD(single.parameters(), lr=0.1)
    for x, y in data():
        opt.zero_grad()
        loss_of(single, x, y).backward()
        opt.step()
    return single


def _data_parallel(rank: int, world: int) -> dict:
    """On each rank: the same model trained by hand-averaged gradients, and by DDP, on this rank's rows; then
    DDP's communication counted with and without ``no_sync`` over 4 micro-batches."""
    by_hand, ddp = model(), DDP(model())
    opt_hand = torch.optim.SGD(by_hand.parameters(), lr=0.1)
    opt_ddp = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for x, y in data():
        x, y = shard(x, rank, world), shard(y, rank, world)
        opt_hand.zero_grad()
        loss_of(by_hand, x, y).backward()
        average_gradients(by_hand)
        opt_hand.step()
        opt_ddp.zero_grad()
        loss_of(ddp, x, y).backward()  # DDP averages the gradients in its backward hooks
        opt_ddp.step()

    calls = []

    def counting(state, bucket):  # DDP's communication hook: one call per bucket all-reduced, its bytes counted
        calls.append(bucket.buffer().numel() * bucket.buffer().element_size())
        return default_hooks.allreduce_hook(state, bucket)

    counted = DDP(model())
    counted.register_comm_hook(None, counting)
    micro = [(shard(x, rank, world), shard(y, rank, world)) for x, y in data(steps=4)]
    for x, y in micro:  # without no_sync: every backward all-reduces
        (loss_of(counted, x, y) / 4).backward()
    without = len(calls)
    calls.clear()
    with counted.no_sync():
        for x, y in micro[:-1]:  # gradients accumulate locally
            (loss_of(counted, x, y) / 4).backward()
    (loss_of(counted, *micro[-1]) / 4).backward()  # the last one all-reduces the sum
    sent = sum(calls)
    return {"hand": by_hand.state_dict(), "ddp": ddp.module.state_dict(), "calls": (without, len(calls)), "bytes": sent}


def test_gradients_averaged_by_hand_ddp_and_one_process_with_the_whole_batch_train_the_same_weights():
    ranks = spawn(_data_parallel, 2, timeout=60)
    single = one_process()
    for result in ranks:
        for name, weight in single.state_dict().items():
            torch.testing.assert_close(result["hand"][name], weight, rtol=0, atol=1e-6)  # (a) and (b): rounding only
            torch.testing.assert_close(result["ddp"][name], weight, rtol=0, atol=1e-6)
        assert result["calls"] == (4, 1)  # (c) no_sync: one all-reduce for 4 micro-batches, not 4
        # the bytes all-reduced per step: every gradient once, float32. A ring all-reduce sends (and receives)
        # 2 (N - 1) / N times that per rank: here N = 2, so each rank sends as many bytes as the model has.
        assert result["bytes"] == 4 * sum(p.numel() for p in single.parameters())
    assert all(torch.equal(ranks[0]["ddp"][k], ranks[1]["ddp"][k]) for k in single.state_dict())  # ranks agree


def test_gradient_accumulation_over_micro_batches_is_one_big_batch():
    big, accumulated = model(), model()
    x, y = data(steps=1, rows=16)[0]
    loss_of(big, x, y).backward()
    for xs, ys in zip(x.split(4), y.split(4), strict=True):
        (loss_of(accumulated, xs, ys) / 4).backward()  # each micro-batch's mean, divided by their number
    for a, b in zip(big.parameters(), accumulated.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=1e-7)


def _sharded(rank: int, world: int, folder: str) -> dict:
    """FSDP2 on each rank: trained as DDP was, its parameters held in shards; then a distributed checkpoint."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.fsdp import fully_shard

    net = model()
    whole = sum(p.numel() for p in net.parameters())
    for layer in (net[0], net[2]):
        fully_shard(layer)
    fully_shard(net)
    held = sum(p.to_local().numel() for p in net.parameters())  # this rank's shard of every parameter
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for x, y in data():
        opt.zero_grad()
        loss_of(net, shard(x, rank, world), shard(y, rank, world)).backward()  # FSDP reduce-scatters the gradients
        opt.step()
    dcp.save({"model": net.state_dict()}, checkpoint_id=folder)  # each rank writes its own shards
    full = {k: v.full_tensor() for k, v in net.state_dict().items()}  # gathered from both ranks
    return {"full": full, "held": held, "whole": whole}


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # loading in one process is the point
def test_fsdp2_trains_the_weights_ddp_does_holding_half_of_them_per_rank_and_its_checkpoint_loads_in_one_process(
    tmp_path,
):
    import torch.distributed.checkpoint as dcp

    ranks = spawn(_sharded, 2, str(tmp_path / "ckpt"), timeout=90)
    single = one_process()
    for result in ranks:
        for name, weight in single.state_dict().items():
            torch.testing.assert_close(result["full"][name], weight, rtol=0, atol=1e-6)  # (d)
        assert result["held"] * 2 == result["whole"]  # each rank holds half of every parameter (and of its gradient
        # and of SGD's state, were there momentum): the memory per rank falls as 1/N, ZeRO-3's arithmetic
    # (e) the two ranks' checkpoint, loaded into one process with no process group, and training goes on from it
    loaded = model()
    state = {"model": loaded.state_dict()}
    dcp.load(state, checkpoint_id=str(tmp_path / "ckpt"), no_dist=True)
    loaded.load_state_dict(state["model"])
    for name, weight in loaded.state_dict().items():
        assert torch.equal(weight, ranks[0]["full"][name]), name
    x, y = data(steps=1)[0]
    continued = copy.deepcopy(loaded)
    loss_of(continued, x, y).backward()
    assert all(p.grad is not None for p in continued.parameters())
    # ... and back: one process's checkpoint (of other weights, to tell them apart), read by 2 ranks into their shards
    for p in loaded.parameters():
        p.data.add_(1.0)
    dcp.save({"model": loaded.state_dict()}, checkpoint_id=str(tmp_path / "one"), no_dist=True)
    for full in spawn(_resharded, 2, str(tmp_path / "one"), timeout=90):
        for name, weight in loaded.state_dict().items():
            assert torch.equal(full[name], weight), name


def _resharded(rank: int, world: int, folder: str) -> dict:
    """A checkpoint written by one process, read by 2 ranks into FSDP2's shards (DCP reshards on load)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.fsdp import fully_shard

    net = model()
    for layer in (net[0], net[2]):
        fully_shard(layer)
    fully_shard(net)
    state = {"model": net.state_dict()}  # this rank's shards, to be filled
    dcp.load(state, checkpoint_id=folder)
    net.load_state_dict(state["model"])
    return {k: v.full_tensor() for k, v in net.state_dict().items()}


def _hangs(rank: int, world: int) -> None:
    if rank == 0:  # an uneven last batch: rank 0 waits in an all-reduce that rank 1 never joins
        dist.all_reduce(torch.ones(1))


def _environment(rank: int, world: int) -> dict:
    import numpy as np

    return {"said": os.environ.get("TESTS_SPAWN_SAYS"), "threads": torch.get_num_threads(), "pid": os.getpid(),
            "draw": float(np.random.rand())}  # fmt: skip


def test_each_spawn_starts_new_ranks_with_the_callers_environment_of_the_moment(monkeypatch):
    """Where the ranks fork from a server that imported PyTorch once (Linux), each still sees the environment its
    caller has when it calls, not the one the server started with, and draws its own random numbers."""
    monkeypatch.setenv("TESTS_SPAWN_SAYS", "first")
    first = spawn(_environment, 2, timeout=60)
    monkeypatch.setenv("TESTS_SPAWN_SAYS", "second")
    second = spawn(_environment, 2, timeout=60)
    assert [r["said"] for r in first + second] == ["first", "first", "second", "second"]
    assert all(r["threads"] == 1 for r in first + second)
    assert len({r["pid"] for r in first + second} | {os.getpid()}) == 5  # new processes each time
    assert len({r["draw"] for r in first + second}) == 4  # no rank repeats another's numpy random state


def _compared(rank: int, world: int) -> list[bool]:
    """``same_on_every_rank`` on equal weights; then with rank 1's last layer's bias one step of float32 off; then
    with two of rank 1's weights swapped, which keeps their sum (a checksum of the sum would miss it)."""
    net = model()
    verdicts = [same_on_every_rank(net)]
    last = net[2].bias
    with torch.no_grad():
        if rank == 1:
            last.copy_(torch.nextafter(last, torch.full_like(last, float("inf"))))  # each element, one step up
    verdicts.append(same_on_every_rank(net))
    net = model()
    with torch.no_grad():
        if rank == 1:
            net[0].bias[[0, 1]] = net[0].bias[[1, 0]].clone()  # the same numbers, so the same sum, in other places
    verdicts.append(same_on_every_rank(net))
    return verdicts


def test_weights_equal_on_every_rank_are_told_from_weights_one_bit_off_or_swapped():
    assert spawn(_compared, 2, timeout=60) == [[True, False, False], [True, False, False]]  # both ranks told the same


def test_what_would_hang_or_split_wrongly_is_a_clear_error():
    with pytest.raises((TimeoutError, RuntimeError), match=r"rank(\(s\))? \[?0"):
        spawn(_hangs, 2, timeout=5)
    with pytest.raises(ValueError, match="a batch of 10 rows does not split over 4 ranks"):
        shard(torch.zeros(10, 3), 0, 4)
    assert backend_for("cpu") == "gloo"
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="NCCL needs a CUDA GPU"):
            backend_for("cuda")


@pytest.mark.skipif(not os.environ.get("COURSE_DATA_MIRROR"), reason="needs the Tiny Shakespeare mirror (CI sets it)")
def test_chapter_07s_gpt_trains_under_torchrun_on_two_processes_and_resumes_from_rank_0s_checkpoint(tmp_path):
    """The script a learner runs next: torchrun, 2 gloo processes, DDP, the course's loop and checkpoints."""
    command = [str(Path(sys.executable).parent / "torchrun"), "--standalone", "--nproc-per-node=2", "-m",
               "course_utils.training.train_gpt", "--recipe", "cpu", "--steps", "6", "--batch-size", "2",
               "--checkpoint", str(tmp_path / "gpt.ckpt"), "--checkpoint-every", "3", "--out", str(tmp_path / "gpt.pt")]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "COURSE_PROGRESS": "text",
           "TMPDIR": str(tmp_path)}  # torchrun's folder of logs (torchelastic_*) goes with the test's  # fmt: skip
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    assert "2 ranks on cpu (gloo): 2 rows each, 4 a step" in first.stdout
    assert "weights identical on 2 ranks: True" in first.stdout
    assert load_checkpoint(tmp_path / "gpt.ckpt")["step"] == 6
    trained = torch.load(tmp_path / "gpt.pt")
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert again.returncode == 0 and "at step 6 of 6" in again.stdout, again.stderr[-2000:]
    assert all(torch.equal(v, torch.load(tmp_path / "gpt.pt")[k]) for k, v in trained.items())
    alone = subprocess.run([sys.executable, "-m", "course_utils.training.train_gpt"], env=env, capture_output=True,
                           text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    assert alone.returncode == 2 and "start it with torchrun" in alone.stderr
