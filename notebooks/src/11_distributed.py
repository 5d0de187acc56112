# %% [markdown]
# # 11 · Beyond one GPU: data-parallel and sharded training
#
# {{COLAB_BADGE}}
#
# *Transformers from Scratch*, Part II, chapter 11 · previous: [10 · GPT-2 and Llama](10_gpt2_and_llama.ipynb) ·
# next: [12 · Adapting a pretrained model](12_fine_tuning.ipynb)
#
# Chapter 07 trained a GPT in one process. The next wall a learner meets is a model or a data set that one GPU cannot
# train in time, and a Colab runtime that disconnects and loses an hour of training. This chapter climbs both on
# PyTorch's own engine, `torch.distributed`: several processes, each with its share of every batch, kept in step by
# **collectives**; DDP, which does that for you; FSDP2's `fully_shard`, which also splits the model's memory between
# the processes; and checkpoints that let a killed run go on where it stopped. Nothing here is taken on trust: each way
# of training in parallel (gradients averaged by hand, DDP, FSDP2) is proven to compute what one process computes,
# within float rounding, and a run killed and resumed to end with the weights of a run never stopped, each by a cell
# that asserts it.
#
# Everything runs on a CPU: two processes that talk through `gloo`, PyTorch's CPU backend, stand in for two GPUs that
# would talk through NCCL (NVIDIA's library of collectives, PyTorch's backend on its GPUs). The code is the same; only
# the backend's name changes.
#
# **You will learn**
# - processes, ranks and world size, and the four collectives (all-reduce, all-gather, reduce-scatter, broadcast), run
#   with `torchrun` from the notebook;
# - why averaging gradients over ranks is training on one bigger batch, proven three ways: by hand, with DDP, with
#   one process; gradient accumulation, and DDP's `no_sync`;
# - sharding: FSDP2 trains the same weights while each rank holds half of the parameters, gradients and optimizer
#   state, measured against the ZeRO arithmetic; a distributed checkpoint written by 2 ranks, read by 1;
# - training that survives being killed: a run stopped with `SIGKILL` and resumed ends with exactly the weights of a
#   run never stopped;
# - six classic distributed bugs, each run and measured, and what communication costs.
#
# **Prerequisites:** chapters 01–07 (the GPT and `train` of chapter 07). **Time:** about 60 minutes; each run here
# takes seconds to a minute on a CPU.

# %% [markdown]
# ## Setup
#
# The chapter writes small scripts next to the notebook (their names start with `dp_`) and runs them as separate
# processes. `torchrun` is PyTorch's launcher; `python -m torch.distributed.run` is the same program, called through
# the Python that runs this notebook, so that it finds the same packages.

# %% tags=["nbval-ignore-output"]
import subprocess
import sys

if "google.colab" in sys.modules:  # on Colab: install course_utils from the repository
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{PIP_SPEC}}"], check=True)

import datetime
import os
import re
import shutil
import signal
import socket
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from course_utils import (
    CheckpointMismatch,
    TrainConfig,
    backend_for,
    get_device,
    load_checkpoint,
    load_tiny_shakespeare,
    set_seed,
    spawn,
    train,
)
from course_utils.checks import check_average_gradients, check_bytes_per_rank, check_prediction, check_shard_indices

TORCHRUN = f"{sys.executable} -m torch.distributed.run"  # torchrun, with this notebook's Python
load_tiny_shakespeare()  # downloaded once, here, before the processes that read it start
set_seed(0)
device = get_device()
print(f"PyTorch {torch.__version__}, running on {device}, {os.cpu_count()} CPU cores")

# %% [markdown]
# ## 1. Processes, ranks and collectives
#
# A distributed run is several copies of one program, started together. Each copy is a **process** with a **rank**,
# its number from 0 to **world size** − 1. On one machine with 8 GPUs, `torchrun --nproc-per-node=8` starts 8
# processes and tells each, through environment variables, who it is (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`: its number
# on this machine, which picks its GPU) and where to meet the others (`MASTER_ADDR`, `MASTER_PORT`).
# `dist.init_process_group(backend)` makes the meeting: a **process group**, through which the processes call
# **collectives**, operations every rank of the group must join:
#
# | collective | each rank gives | each rank gets |
# | --- | --- | --- |
# | `all_reduce` | a tensor $x_r$ | the sum $\sum_r x_r$ (in place) |
# | `all_gather` | a tensor $x_r$ | the list $[x_0, \dots, x_{N-1}]$ |
# | `reduce_scatter` | $N$ pieces $x_r^{(0)}, \dots, x_r^{(N-1)}$ | its piece of the sum: $\sum_{r'} x_{r'}^{(r)}$ |
# | `broadcast` | rank `src`'s tensor, or a buffer | rank `src`'s tensor |
#
# An all-reduce can be run as a reduce-scatter followed by an all-gather, and the ring algorithm NCCL uses for large
# tensors does just that (section 7); section 4's sharding is built on that split. A collective blocks until every
# rank has called it: a rank that never calls it leaves the others waiting, which is why every group here has a
# timeout.
#
# The script below is what every one of the two processes runs. Each prints what it holds (all of them print: the
# lines come in whatever order the processes reach them), and rank 0 saves every rank's results, gathered, for the
# cell after it.

# %% tags=["nbval-ignore-output"]
# %%writefile dp_collectives.py
import datetime

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))  # torchrun's variables say the rest
rank, world = dist.get_rank(), dist.get_world_size()
x = torch.tensor([1.0, 2.0]) * (rank + 1)  # rank 0: [1, 2]; rank 1: [2, 4]
print(f"rank {rank} of {world} holds {x.tolist()}\n", end="", flush=True)  # one write: two ranks' lines never merge

summed = x.clone()
dist.all_reduce(summed)  # in place: every rank ends with the sum
gathered = [torch.zeros(2) for _ in range(world)]
dist.all_gather(gathered, x)  # every rank ends with every rank's x
piece = torch.zeros(1)
dist.reduce_scatter(piece, list(x.chunk(world)))  # rank r gets the sum of everyone's r-th piece
sent = x.clone()
dist.broadcast(sent, src=0)  # every rank ends with rank 0's x

mine = {"x": x, "all_reduce": summed, "all_gather": torch.stack(gathered), "reduce_scatter": piece, "broadcast": sent}
everyone = [None] * world
dist.all_gather_object(everyone, mine)  # any picklable object, gathered the same way
if rank == 0:
    torch.save(everyone, "dp_collectives.pt")
dist.destroy_process_group()

# %% tags=["nbval-ignore-output"]
# !{TORCHRUN} --standalone --nproc-per-node=2 dp_collectives.py
assert _exit_code == 0, "torchrun failed: its error is printed above"  # IPython's exit status of the last ! command

# %% [markdown]
# `--standalone` lets `torchrun` pick a free port on this machine for the meeting. Above, both ranks printed, in an
# order that changes from run to run: logging from every rank multiplies the lines by the world size, so real scripts
# print from rank 0 alone. What each rank ended with:

# %%
results = torch.load("dp_collectives.pt")
for rank, mine in enumerate(results):
    print(f"rank {rank}: " + " | ".join(f"{name} {value.tolist()}" for name, value in mine.items()))
x0, x1 = results[0]["x"], results[1]["x"]
for mine in results:
    assert torch.equal(mine["all_reduce"], x0 + x1) and torch.equal(mine["broadcast"], x0)
    assert torch.equal(mine["all_gather"], torch.stack([x0, x1]))
assert [mine["reduce_scatter"].item() for mine in results] == (x0 + x1).tolist()  # the sum, split over the ranks

# %% [markdown]
# ## 2. Data parallelism: an average of gradients is a bigger batch
#
# Each rank holds a whole copy of the model and takes its own $B$ rows of a global batch of $NB$. The loss over the
# global batch is the mean of the per-row losses $\ell_i$, so its gradient is the mean of the ranks' gradients:
#
# $$\nabla \frac{1}{NB} \sum_{i=1}^{NB} \ell_i \;=\; \frac{1}{N} \sum_{r=0}^{N-1} \underbrace{\nabla \frac{1}{B}
# \sum_{i \in \text{rank } r} \ell_i}_{g_r,\ \text{rank } r\text{'s gradient}}$$
#
# After `backward`, all-reduce each gradient and divide by $N$: every rank then holds the global batch's gradient, the
# same optimizer step keeps every copy equal, and $N$ processes train exactly as one process with $N$ times the batch.
# `course_utils`' `average_gradients` does that, one `all_reduce` per parameter. PyTorch's
# `DistributedDataParallel` (DDP) does the same with three refinements: it sends rank 0's weights to every rank when it
# wraps the model, it packs gradients into **buckets** (25 MiB by default) to send fewer, larger messages, and it
# starts all-reducing a bucket as soon as the backward pass has filled it, while the rest of the backward still runs.
#
# The model is chapter 07's GPT, small (2 layers, `d_model` 32) on Tiny Shakespeare's characters. A module that every
# process imports builds it, and the data, the same way:

# %% tags=["nbval-ignore-output"]
# %%writefile dp_setup.py
"""What every process of chapter 11 builds the same way: the data, the model, the batches, the loss."""

import torch

from course_utils import GPT, CharTokenizer, load_tiny_shakespeare, random_windows, split_ids

STEPS, ROWS, BLOCK = 5, 8, 32  # optimizer steps; rows per rank and step; characters per row


def data():
    text = load_tiny_shakespeare()
    tokenizer = CharTokenizer(text, specials=False)
    train_ids, _ = split_ids(text, tokenizer)
    return tokenizer.vocab_size, train_ids


def make_model(vocab_size, seed=0, dropout=0.0):
    torch.manual_seed(seed)  # the same seed, the same initial weights
    return GPT(vocab_size, block_size=BLOCK, d_model=32, n_heads=2, n_layers=2, dropout=dropout)


def batches(train_ids, rows, seed=0):
    return random_windows(train_ids, BLOCK, rows, seed=seed)  # endless (x, y), each (rows, BLOCK)


def loss_of(model, x, y):
    return model(x, y)[1]  # the mean cross-entropy over the rows and positions


# %% [markdown]
# **Your turn: one all-reduce for all the gradients.** Write `my_average_gradients(model)`: after `backward` on each
# rank, every parameter's `.grad` must hold its mean over the ranks of the default process group. `average_gradients`
# calls `all_reduce` once per parameter; yours calls it once in all, as DDP's buckets do in miniature (the checker
# tests the average your function leaves, not how many calls it made): flatten every
# gradient into one buffer (`torch.cat` of `p.grad.flatten()`), all-reduce it (a sum, the default), divide by
# `dist.get_world_size()`, and copy each slice back into its `.grad` (`view_as`). The checker runs your function's
# code on 2 new processes, then on 3, and compares the weights with one process on the whole batch; those processes
# have `torch`, `dist`, `nn`, `F`, `math` and the modules this notebook imported, so define any helper inside the
# function. The script below uses `course_utils`' own.


# %% tags=["exercise"]
def my_average_gradients(model):
    ### BEGIN SOLUTION
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.flatten() for g in grads])  # (total,): one message instead of one per parameter
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= dist.get_world_size()
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()
    ### END SOLUTION


check_average_gradients(my_average_gradients)


# %% [markdown]
# The script trains two copies side by side on each rank, for 5 steps of AdamW: one with `average_gradients` called
# after `backward`, one wrapped in DDP. Each rank reads the same stream of global batches of $2 \times 8$ rows and keeps
# its 8 with `shard` (rank $r$ takes rows $8r$ to $8r + 7$); a `DistributedSampler` also gives each rank rows of its
# own for a `DataLoader`, dealt out like cards (exercise 1 at the end). A **communication hook** counts the bytes DDP
# all-reduces. At the end, `same_on_every_rank` compares the ranks' weights bit for bit: rank 0 broadcasts each
# parameter, every rank checks it against its own with `torch.equal`, and an all-reduce of the mismatches gives every
# rank the verdict. (A checksum, a sum of the weights, could match weights that differ: `[1, 2]` and `[2, 1]` have the
# same sum.) The script's last part, on gradient accumulation, is the subject of section 3; it takes no optimizer
# step, so the weights compared are those of the 5 steps.

# %% tags=["nbval-ignore-output"]
# %%writefile dp_ddp.py
import datetime

import dp_setup as setup
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from course_utils import average_gradients, same_on_every_rank, shard

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
vocab_size, train_ids = setup.data()

by_hand = setup.make_model(vocab_size)
ddp = DDP(setup.make_model(vocab_size))  # rank 0's weights sent to every rank; hooks added to backward
opt_hand = torch.optim.AdamW(by_hand.parameters(), lr=1e-3)
opt_ddp = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
sent = []  # the bytes of each bucket DDP all-reduces


def counting_hook(state, bucket):  # DDP calls it with each bucket of gradients that is ready to be all-reduced
    sent.append(bucket.buffer().numel() * bucket.buffer().element_size())
    return default_hooks.allreduce_hook(state, bucket)  # ... and all-reduces it as DDP would (a mean)


ddp.register_comm_hook(None, counting_hook)
stream = setup.batches(train_ids, setup.ROWS * world)  # the global batch, the same stream on every rank
for _ in range(setup.STEPS):
    x, y = next(stream)  # (ROWS * world, BLOCK)
    x, y = shard(x, rank, world), shard(y, rank, world)  # (ROWS, BLOCK): this rank's rows
    opt_hand.zero_grad()
    setup.loss_of(by_hand, x, y).backward()
    average_gradients(by_hand)  # all_reduce (a sum) per parameter, then / world
    opt_hand.step()
    opt_ddp.zero_grad()
    setup.loss_of(ddp, x, y).backward()  # DDP all-reduces and averages during the backward pass
    opt_ddp.step()
bytes_per_step = sum(sent) // setup.STEPS

# Section 3: 4 micro-batches accumulated; DDP all-reduces after every backward, unless inside no_sync()
calls = {}
for name, quiet in (("without no_sync", False), ("with no_sync", True)):
    sent.clear()
    for i in range(4):
        x, y = (shard(t, rank, world) for t in next(stream))
        if quiet and i < 3:
            with ddp.no_sync():  # the gradients add up on each rank; nothing is sent
                (setup.loss_of(ddp, x, y) / 4).backward()
        else:
            (setup.loss_of(ddp, x, y) / 4).backward()
    calls[name] = len(sent)  # buckets all-reduced over the 4 micro-batches
    ddp.zero_grad()

identical = same_on_every_rank(ddp)  # rank 0's weights broadcast, compared bit for bit on every rank
if rank == 0:
    torch.save({"by_hand": by_hand.state_dict(), "ddp": ddp.module.state_dict(), "calls": calls,
                "bytes_per_step": bytes_per_step, "identical": identical}, "dp_ddp.pt")  # fmt: skip
dist.destroy_process_group()

# %% tags=["nbval-ignore-output"]
# !{TORCHRUN} --standalone --nproc-per-node=2 dp_ddp.py
assert _exit_code == 0, "torchrun failed: its error is printed above"

# %% [markdown]
# Now the third way, in this notebook's own process: one model, the same 5 global batches, all 16 rows at once.

# %%
import dp_setup as setup

vocab_size, train_ids = setup.data()
single = setup.make_model(vocab_size)
opt = torch.optim.AdamW(single.parameters(), lr=1e-3)
stream = setup.batches(train_ids, setup.ROWS * 2)
for _ in range(setup.STEPS):
    x, y = next(stream)  # (16, BLOCK): both ranks' rows
    opt.zero_grad()
    setup.loss_of(single, x, y).backward()
    opt.step()

ran = torch.load("dp_ddp.pt")


def largest_gap(state, reference):
    return max((state[name] - weight).abs().max().item() for name, weight in reference.state_dict().items())


started = setup.make_model(vocab_size)
print(f"the weights moved by up to {largest_gap(started.state_dict(), single):.1e} in 5 steps")
for way in ("by_hand", "ddp"):
    gap = largest_gap(ran[way], single)
    print(f"2 ranks, {way:7}: largest difference from one process on 16 rows below 1e-5: {gap < 1e-5}")
    assert gap < 1e-5
print("the two ranks' DDP weights identical, bit for bit:", ran["identical"])
assert ran["identical"]

# %% [markdown]
# The differences are float rounding (below $10^{-5}$, where the weights moved by thousandths): a sum over two ranks adds
# the rows in another order than a sum over one batch, and AdamW's step divides by the root mean square of each
# gradient, which magnifies the rounding of tiny ones. The two ranks' weights are equal to the last bit: they applied
# identical averaged gradients.
#
# ## 3. Gradient accumulation, and DDP's `no_sync`
#
# When the batch you want does not fit in memory, split it into $k$ **micro-batches**, call `backward` on each loss
# divided by $k$, and step once: gradients add up in `.grad`, so the sum is the big batch's gradient. Proven in this
# process, on a batch of 16 rows in 4 micro-batches of 4:

# %%
big, accumulated = setup.make_model(vocab_size), setup.make_model(vocab_size)
x, y = next(setup.batches(train_ids, 16, seed=5))  # (16, BLOCK)
setup.loss_of(big, x, y).backward()
for xs, ys in zip(x.split(4), y.split(4), strict=True):  # 4 micro-batches of (4, BLOCK)
    (setup.loss_of(accumulated, xs, ys) / 4).backward()  # each micro-batch's mean, over their number
gap = max((a.grad - b.grad).abs().max().item() for a, b in zip(big.parameters(), accumulated.parameters(), strict=True))
print(f"largest gradient difference, one batch of 16 against 4 micro-batches of 4, below 1e-6: {gap < 1e-6}")
assert gap < 1e-6

# %% [markdown]
# Under DDP each `backward` all-reduces, so $k$ micro-batches would communicate $k$ times for one step. Inside
# `with ddp.no_sync():` the backward pass only adds to `.grad`; the last micro-batch's backward, outside it,
# all-reduces the sum once. The script above counted the buckets DDP sent over 4 micro-batches:

# %%
print(ran["calls"])
assert ran["calls"]["with no_sync"] * 4 == ran["calls"]["without no_sync"]

# %% [markdown]
# ## 4. Sharding: FSDP2 holds 1/N of everything
#
# DDP keeps a whole copy of everything on every rank. In float32 with AdamW, a parameter costs 4 bytes, its gradient 4,
# and AdamW's two moving averages 8: **16 bytes per parameter on every rank**, whatever the number of ranks. A model of
# 1 billion parameters needs 16 GB before a single activation is stored. The **ZeRO** paper (Rajbhandari et al., 2020)
# removed the copies, in stages: shard the optimizer state (stage 1: $8 + 8/N$ bytes per parameter on each of $N$
# ranks), the gradients too (stage 2: $4 + 12/N$), the parameters too (stage 3: $16/N$, every byte divided).
# PyTorch's FSDP2 (`fully_shard`) is stage 3:
#
# - each rank keeps $1/N$ of every parameter, and so of its gradient and AdamW state: each is a `DTensor`, a tensor
#   that knows it is a shard of a larger one (its `.to_local()` is this rank's shard, a plain tensor, and its
#   `.full_tensor()` all-gathers the whole), and so is each entry of the model's `state_dict()`;
# - before a wrapped block's forward (and again in backward) the ranks **all-gather** its full weights, and free them
#   after;
# - in backward, as soon as a block's gradients are computed, they are **reduce-scattered**: each rank receives the
#   sum of its own shard only, divided by $N$, and its optimizer updates only its shard.
#
# A reduce-scatter and an all-gather make one all-reduce (section 1), and move its bytes (section 7 counts them). So FSDP's reduce-scatter of the
# gradients and its all-gather of the weights before the forward send what DDP's all-reduce sends, and the second
# all-gather, before the backward, adds half as much again: about 1.5 times DDP's bytes. It saves memory, not
# communication. The script wraps
# each of the GPT's blocks, then the whole model (embeddings and final norm), trains the same 5 steps, counts what
# each rank holds, and saves a **distributed checkpoint**: every rank writes its own shards into one folder.

# %% tags=["nbval-ignore-output"]
# %%writefile dp_fsdp.py
import datetime

import dp_setup as setup
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.fsdp import fully_shard

from course_utils import shard

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
vocab_size, train_ids = setup.data()
model = setup.make_model(vocab_size)
for block in model.blocks:
    fully_shard(block)  # each block's parameters split over the ranks, all-gathered around its forward and backward
fully_shard(model)  # the rest: embeddings (tied to the head) and the final norm
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)  # created after sharding: it sees, and keeps state for, shards
stream = setup.batches(train_ids, setup.ROWS * world)
for _ in range(setup.STEPS):
    x, y = next(stream)
    opt.zero_grad()
    setup.loss_of(model, shard(x, rank, world), shard(y, rank, world)).backward()  # gradients reduce-scattered
    opt.step()


def elements_here(tensors):  # the elements this rank stores: its shard of each DTensor
    return sum(t.to_local().numel() for t in tensors)


held = {
    "parameters": elements_here(model.parameters()),
    "gradients": elements_here(p.grad for p in model.parameters()),
    "AdamW state": elements_here(v for state in opt.state.values() for k, v in state.items() if k != "step"),
}
dcp.save({"model": model.state_dict()}, checkpoint_id="dp_checkpoint")  # every rank writes its shards
full = {name: shard_.full_tensor() for name, shard_ in model.state_dict().items()}  # all-gathered, on every rank
every = [None] * world
dist.all_gather_object(every, held)
if rank == 0:
    torch.save({"full": full, "held": every}, "dp_fsdp.pt")
dist.destroy_process_group()

# %% tags=["nbval-ignore-output"]
shutil.rmtree("dp_checkpoint", ignore_errors=True)  # a previous run's checkpoint
# !{TORCHRUN} --standalone --nproc-per-node=2 dp_fsdp.py
assert _exit_code == 0, "torchrun failed: its error is printed above"

# %%
sharded = torch.load("dp_fsdp.pt")
gap = largest_gap(sharded["full"], single)
print(f"FSDP2 on 2 ranks: largest difference from one process on 16 rows below 1e-5: {gap < 1e-5}")
assert gap < 1e-5
n_params = sum(p.numel() for p in single.parameters())
print(f"\nthe model: {n_params:,} parameters; 16 bytes each = {16 * n_params:,} bytes on every rank under DDP")
print(f"{'elements held':14} {'rank 0':>8} {'rank 1':>8} {'both':>8}")
for kind in ("parameters", "gradients", "AdamW state"):
    counts = [held[kind] for held in sharded["held"]]
    print(f"{kind:14} {counts[0]:>8,} {counts[1]:>8,} {sum(counts):>8,}")
    assert sum(counts) == n_params * (2 if kind == "AdamW state" else 1)  # together, exactly one copy
    assert max(counts) <= n_params * (2 if kind == "AdamW state" else 1) / 2 * 1.01  # each, half (within rounding)
bytes_rank0 = 4 * sharded["held"][0]["parameters"] + 4 * sharded["held"][0]["gradients"]
bytes_rank0 += 4 * sharded["held"][0]["AdamW state"]
print(f"bytes on rank 0: {bytes_rank0:,} = {bytes_rank0 / (16 * n_params):.1%} of DDP's {16 * n_params:,}")

# %% [markdown]
# Each rank holds half, not exactly: `fully_shard` splits each parameter along its first dimension, and a dimension of
# odd size leaves one rank a row more. Together the two ranks hold one copy, not two. The weights are the one-process
# weights again, to rounding.
#
# **A checkpoint written by 2 ranks, read by 1.** The folder `dp_checkpoint` holds each rank's shards and a metadata
# file saying where each piece of each tensor lies. `dcp.load` reads it into whatever layout the reader has: here one
# process, whole tensors, with no process group at all (`no_dist=True`); a run on 4 or 8 ranks would read the same
# folder into its own shards. Training then goes on from it as from the one-process weights:

# %%
import torch.distributed.checkpoint as dcp

reader = setup.make_model(vocab_size, seed=123)  # other weights, overwritten by the load
state = {"model": reader.state_dict()}
with warnings.catch_warnings():  # "torch.distributed is ... uninitialized, assuming ... a single process": yes
    warnings.filterwarnings("ignore", "torch.distributed is disabled")
    dcp.load(state, checkpoint_id="dp_checkpoint", no_dist=True)
reader.load_state_dict(state["model"])
print("loaded weights equal the 2 ranks' gathered weights:",
      all(torch.equal(w, sharded["full"][k]) for k, w in reader.state_dict().items()))  # fmt: skip
assert all(torch.equal(w, sharded["full"][k]) for k, w in reader.state_dict().items())
x, y = next(setup.batches(train_ids, 16, seed=9))
with torch.no_grad():
    loss_loaded, loss_single = setup.loss_of(reader, x, y).item(), setup.loss_of(single, x, y).item()
print(f"loss on a new batch: loaded {loss_loaded:.4f}, one-process weights {loss_single:.4f}")
assert abs(loss_loaded - loss_single) < 1e-4

# %% [markdown]
# ## 5. Training that survives a disconnect
#
# Colab disconnects an idle or long session, and a cloud machine can be taken back; a run that keeps its state only in
# memory starts again from zero. `train(..., checkpoint=path, checkpoint_every=n)` writes, every $n$ steps, everything
# the run needs to go on as if nothing happened: the model, AdamW's state, the step, the loss history, and the state of
# every random generator (PyTorch's, Python's, NumPy's, each GPU's), so that the next dropout mask and the next batch
# are the ones the uninterrupted run would have drawn. It writes to a temporary file and renames it over the old
# one: a run killed while writing leaves the previous checkpoint whole. Started again with the file there, `train`
# reads it, skips the batches already used and goes on. On Colab, put the file on Google Drive
# (`from google.colab import drive; drive.mount("/content/drive")`, then a path under `/content/drive/MyDrive/`), which
# outlives the runtime.
#
# The proof: a script that trains the small GPT with dropout for 60 steps. Run once without a checkpoint; run again,
# killed with `SIGKILL` (no chance to clean up) as soon as it has written a checkpoint, then started again.

# %% tags=["nbval-ignore-output"]
# %%writefile dp_resumable.py
"""python dp_resumable.py OUT [CHECKPOINT]: 60 steps of a small GPT with dropout, its weights saved to OUT."""

import sys
import time

import dp_setup as setup
import torch

from course_utils import TrainConfig, train

out, checkpoint = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
torch.set_num_threads(1)  # the same arithmetic in every run
vocab_size, train_ids = setup.data()
model = setup.make_model(vocab_size, dropout=0.1)  # dropout: the random generators' state matters
config = TrainConfig(steps=60, batch_size=setup.ROWS, lr=3e-3, warmup_steps=5, schedule="cosine", label_smoothing=0.0)


def loss_fn(model, x, y):
    time.sleep(0.02)  # a slower step, so that the run can be killed in the middle
    return setup.loss_of(model, x, y)


history = train(model, setup.batches(train_ids, setup.ROWS, seed=1), loss_fn, config, progress=checkpoint is not None,
                checkpoint=checkpoint, checkpoint_every=10 if checkpoint else 0)  # fmt: skip
torch.save(model.state_dict(), out)
print(f"done: step {history.steps[-1]}, last loss {history.loss[-1]:.4f}")

# %% tags=["nbval-ignore-output"]
for leftover in ("dp_resumable.ckpt", "dp_uninterrupted.pt", "dp_resumed.pt"):
    Path(leftover).unlink(missing_ok=True)
env = {**os.environ, "OMP_NUM_THREADS": "1", "COURSE_PROGRESS": "text"}
command = [sys.executable, "dp_resumable.py"]
subprocess.run([*command, "dp_uninterrupted.pt"], env=env, check=True)

killed = subprocess.Popen([*command, "dp_resumed.pt", "dp_resumable.ckpt"], env=env, stdout=subprocess.DEVNULL)
while not Path("dp_resumable.ckpt").exists() and killed.poll() is None:
    time.sleep(0.01)
killed.send_signal(signal.SIGKILL)  # as a disconnect would: no cleanup, no last save
killed.wait()
print(f"killed, exit status {killed.returncode}; the checkpoint on disk is at step "
      f"{load_checkpoint('dp_resumable.ckpt')['step']} of 60")  # fmt: skip
resumed = subprocess.run([*command, "dp_resumed.pt", "dp_resumable.ckpt"], env=env, check=True,
                         capture_output=True, text=True)  # fmt: skip
print(next(line for line in resumed.stdout.splitlines() if line.startswith("resumed from")))

# %%
uninterrupted, after_kill = torch.load("dp_uninterrupted.pt"), torch.load("dp_resumed.pt")
same = all(torch.equal(w, after_kill[k]) for k, w in uninterrupted.items())
print(f"killed and resumed, the weights equal those of the run never stopped, bit for bit: {same}")
assert killed.returncode == -signal.SIGKILL and same

# %% [markdown]
# Bit for bit, not to rounding: the resumed run computes the same operations on the same numbers in the same order.
# That holds on one CPU with one thread; on a GPU, some kernels (atomic additions in a backward pass) add in an order
# that changes from run to run, and a resumed run ends as close as two uninterrupted GPU runs are to each other.
#
# A checkpoint of another run is never silently taken for this one, nor silently replaced by a fresh start: a different
# recipe (here another learning rate) is refused, naming the difference and the fix.

# %%
other = setup.make_model(vocab_size, dropout=0.1)
try:
    train(other, setup.batches(train_ids, setup.ROWS, seed=1), setup.loss_of,
          TrainConfig(steps=60, batch_size=setup.ROWS, lr=1e-3, warmup_steps=5, schedule="cosine", label_smoothing=0.0),
          progress=False, checkpoint="dp_resumable.ckpt")  # fmt: skip
except CheckpointMismatch as error:
    print("CheckpointMismatch:", str(error).replace(", ", ",\n    ", 1)[:400])

# %% [markdown]
# ## 6. Six classic distributed bugs, run and measured
#
# None of these raises an error at once; most let training run with a loss that falls. Each is run below on 2 ranks,
# with the functions of a module started by `course_utils`' `spawn` (a function run on $N$ new processes joined in one
# group, every rank's result returned, and a rank that hangs named after a timeout): it teaches better than a script
# here because each experiment returns numbers to compare.
#
# 1. **Every rank reads the same batches.** Each rank seeds its data stream alike, or a `DataLoader` has no
#    `DistributedSampler`. The gradients averaged are equal, so the average is one of them.
# 2. **Ranks start from different weights.** Each rank seeds its model with its rank (or not at all), and gradients are
#    averaged by hand. Equal updates keep unequal weights unequal. DDP is immune: it broadcasts rank 0's weights when
#    it wraps the model.
# 3. **The sum never divided by the number of ranks.** The gradient is $N$ times too large.
# 4. **The same dropout masks on every rank.** Every rank calls `torch.manual_seed(0)`: the ranks drop the same units,
#    so dropout's noise is no longer independent from one half of the batch to the other. Seed each rank with the seed
#    plus its rank.
# 5. **A checkpoint saved by every rank at once.** $N$ writers of one file: $N$ times the writing, and the file holds
#    whichever rank finished last (FSDP's distributed checkpoint is the exception: every rank writes its own shards).
# 6. **An uneven last batch.** A data set of 10 batches over 4 ranks gives some ranks 3 and others 2; a rank with a
#    batch left waits in the all-reduce that the others never call. `DistributedSampler` pads the data so every rank
#    gets as many (exercise 1 at the end), or `drop_last=True` drops the rest.

# %% tags=["nbval-ignore-output"]
# %%writefile dp_bugs.py
"""Classic data-parallel bugs: each function runs on every rank (course_utils' spawn) and returns what it measured."""

import dp_setup as setup
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from course_utils import average_gradients, shard


def trained(model, stream, rank, world, sync, optimizer=torch.optim.AdamW, lr=1e-3, own_rows=False):
    """setup.STEPS steps; sync(model) after each backward (None: DDP did it). own_rows: the stream gives this rank's
    rows; otherwise the rank keeps its shard of each global batch."""
    opt = optimizer(model.parameters(), lr=lr)
    for _ in range(setup.STEPS):
        x, y = next(stream)
        if not own_rows:
            x, y = shard(x, rank, world), shard(y, rank, world)
        opt.zero_grad()
        setup.loss_of(model, x, y).backward()
        if sync is not None:
            sync(model)
        opt.step()
    return model


def weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def gap_to_rank_0(model):
    """The largest difference between this rank's weights and rank 0's (broadcast from rank 0)."""
    gap = 0.0
    for p in model.parameters():
        rank_0s = p.detach().clone()
        dist.broadcast(rank_0s, src=0)
        gap = max(gap, (p.detach() - rank_0s).abs().max().item())
    return gap


def sum_only(model):  # bug 3: the all-reduced sum, never divided
    for p in model.parameters():
        dist.all_reduce(p.grad)


def run(rank, world):
    vocab_size, train_ids = setup.data()
    found = {}
    # 1: both ranks' streams seeded alike, and each rank uses all it reads
    same = DDP(setup.make_model(vocab_size))
    trained(same, setup.batches(train_ids, setup.ROWS, seed=0), rank, world, None, own_rows=True)
    found["same batches"] = weights(same.module)
    # 2: each rank seeds its model with its rank
    apart = trained(setup.make_model(vocab_size, seed=rank), setup.batches(train_ids, setup.ROWS * world), rank,
                    world, average_gradients)  # fmt: skip
    found["different starts, averaged by hand"] = gap_to_rank_0(apart)
    found["different starts, DDP"] = gap_to_rank_0(DDP(setup.make_model(vocab_size, seed=rank)))
    # 3: the sum, with SGD and with AdamW
    for name, optimizer, lr in (("SGD", torch.optim.SGD, 0.5), ("AdamW", torch.optim.AdamW, 1e-3)):
        model = trained(setup.make_model(vocab_size), setup.batches(train_ids, setup.ROWS * world), rank, world,
                        sum_only, optimizer=optimizer, lr=lr)  # fmt: skip
        found[f"sum, {name}"] = weights(model)
    # 4: dropout masks under the same seed, and under the seed plus the rank
    for name, seed in (("same seed", 0), ("seed + rank", rank)):
        torch.manual_seed(seed)
        dropped = (torch.nn.functional.dropout(torch.ones(10_000), p=0.1) == 0).float()  # 1 where dropped
        rank_0s = dropped.clone()
        dist.broadcast(rank_0s, src=0)
        found[f"dropout, {name}"] = ((dropped * rank_0s).sum() / rank_0s.sum()).item()  # of rank 0's, dropped here
    # 5: every rank saves "the checkpoint" to one path at once, 20 times
    survived = []
    for _ in range(20):
        dist.barrier()  # all start together, as at the end of a step
        torch.save({"rank": rank, "weights": weights(apart)}, "dp_everyone.pt")
        dist.barrier()
        try:
            survived.append(str(torch.load("dp_everyone.pt")["rank"]))
        except Exception:  # two writers interleaved: a file neither rank wrote
            survived.append("x")
    found["whose checkpoint"] = survived
    return found


def uneven(rank, world):
    """Bug 6: rank 0 has 3 batches, rank 1 only 2; then the epoch ends with a barrier. Collectives in a group that
    waits 3 seconds on rank 0, not the default 30 minutes (10 on the others: rank 0 is the one that gives up)."""
    import datetime

    group = dist.new_group(timeout=datetime.timedelta(seconds=3 if rank == 0 else 10))
    for _ in range(3 if rank == 0 else 2):
        dist.all_reduce(torch.ones(1), group=group)  # the gradients of one batch
    dist.barrier(group=group)  # the end of the epoch


def step_time(rank, world, rows=32, steps=10, d_model=128):
    """Seconds per training step of DDP on `world` processes, each with its own `rows` rows, for a GPT wider than
    setup's (d_model 128, not 32), so that each step has computing enough to share."""
    import time

    from course_utils import GPT

    vocab_size, train_ids = setup.data()
    torch.manual_seed(0)
    model = DDP(GPT(vocab_size, block_size=setup.BLOCK, d_model=d_model, n_heads=4, n_layers=2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    stream = setup.batches(train_ids, rows, seed=rank)
    for step in range(steps + 2):  # 2 steps to warm up
        if step == 2:
            dist.barrier()
            start = time.perf_counter()
        x, y = next(stream)
        opt.zero_grad()
        setup.loss_of(model, x, y).backward()
        opt.step()
    dist.barrier()
    return (time.perf_counter() - start) / steps


# %% [markdown]
# **Predict, then run.** Bug 1: two ranks train with DDP, but both build their batches with the same seed, so at each
# step both read the same 8 rows. After 5 steps, the weights equal those of:
#
# - (a) one process trained on batches of 16 rows (two different batches of 8 per step);
# - (b) one process trained on the same batches of 8 rows;
# - (c) nothing a single process computes: the ranks' weights drift apart;
# - (d) no weights at all: the run hangs.
#
# Write your letter below; the cell after it runs the bugs.

# %% tags=["exercise"]
### BEGIN SOLUTION
my_prediction = "b"
### END SOLUTION
check_prediction("same-batches", my_prediction)  # your answer: "a", "b", "c" or "d"

# %%
import dp_bugs


def one_process(rows, optimizer=torch.optim.AdamW, lr=1e-3, seed=0):
    """The reference: setup.STEPS steps in this process, on batches of `rows` rows."""
    model = setup.make_model(vocab_size)
    return dp_bugs.trained(model, setup.batches(train_ids, rows, seed=seed), 0, 1, None, optimizer=optimizer, lr=lr)


ranks = spawn(dp_bugs.run, 2, timeout=120)  # each rank's dict of results
of_8, of_16 = one_process(8), one_process(16)
same = ranks[0]["same batches"]
print("1. same batches on both ranks: the weights of one process on")
print(f"   batches of 8 rows (the same 8):  largest difference below 1e-5: {largest_gap(same, of_8) < 1e-5}")
print(f"   batches of 16 rows (2 x 8):      largest difference {largest_gap(same, of_16):.1e}")
assert largest_gap(same, of_8) < 1e-5 < 1e-3 < largest_gap(same, of_16)

# %% [markdown]
# Two processes did the work of one: the effective batch did not grow. The loss falls as it would in one process, so
# only the throughput, or a comparison like this one, shows it.
#
# Bugs 2 to 4, from the same run. For bug 2, how far rank 1's weights are from rank 0's; for bug 3, the weights
# compared with one process on the whole batch at the learning rate used, and at twice it; for bug 4, the share of
# the units rank 0 dropped that rank 1 dropped too.

# %%
rank_1 = ranks[1]
print(f"2. different starts, averaged by hand: rank 1's weights differ from rank 0's by up to "
      f"{rank_1['different starts, averaged by hand']:.2f}; with DDP by {rank_1['different starts, DDP']}")  # fmt: skip
assert rank_1["different starts, averaged by hand"] > 0.05 and rank_1["different starts, DDP"] == 0.0

sgd, sgd_twice = one_process(16, torch.optim.SGD, 0.5), one_process(16, torch.optim.SGD, 1.0)
adamw, adamw_twice = one_process(16), one_process(16, lr=2e-3)
print("3. the sum never divided, with SGD (lr 0.5):   "
      f"the weights of lr 1.0 (below 1e-5: {largest_gap(ranks[0]['sum, SGD'], sgd_twice) < 1e-5}); "
      f"of lr 0.5: off by {largest_gap(ranks[0]['sum, SGD'], sgd):.1e}")  # fmt: skip
print("   the sum never divided, with AdamW (1e-3): "
      f"off by {largest_gap(ranks[0]['sum, AdamW'], adamw):.1e} from lr 1e-3, "
      f"by {largest_gap(ranks[0]['sum, AdamW'], adamw_twice):.1e} from lr 2e-3")  # fmt: skip
assert largest_gap(ranks[0]["sum, SGD"], sgd_twice) < 1e-5 < 1e-3 < largest_gap(ranks[0]["sum, SGD"], sgd)
assert 10 * largest_gap(ranks[0]["sum, AdamW"], adamw) < largest_gap(ranks[0]["sum, AdamW"], adamw_twice)

print(f"4. of the units rank 0 dropped, rank 1 dropped {rank_1['dropout, same seed']:.0%} under the same seed, "
      f"{rank_1['dropout, seed + rank']:.0%} under the seed plus the rank")  # fmt: skip
assert rank_1["dropout, same seed"] == 1.0 and 0.05 < rank_1["dropout, seed + rank"] < 0.2

# %% [markdown]
# Bug 3 hides behind Adam: Adam divides each gradient by its own root mean square, so a gradient twice too large gives
# almost the same step, and the bug waits for the day someone switches to SGD, or to gradient clipping with a fixed
# threshold, which a doubled gradient norm crosses sooner. With SGD it is a learning rate $N$ times too large, and changes with the
# number of GPUs. Bug 4's 10% is what two independent masks share when each drops 10% of the units.
#
# Bug 5: which rank's file survived each of the 20 saves, in this run (it changes from run to run; that is the bug),
# and an `x` where two writes interleaved into a file that neither rank wrote and that cannot be read (it can happen;
# many runs show none):

# %% tags=["nbval-ignore-output"]
whose = ranks[0]["whose checkpoint"]
print("".join(whose), f"(rank 0's file survived {whose.count('0')} of the 20 saves, rank 1's {whose.count('1')}, "
      f"and {whose.count('x')} files were neither: unreadable)")  # fmt: skip
Path("dp_everyone.pt").unlink(missing_ok=True)

# %% [markdown]
# The fix is one line, `if dist.get_rank() == 0:` before the save, and `train` has it: in a process group only rank 0
# writes the checkpoint, and every rank reads it back to resume.
#
# Bug 6, the uneven last batch, under a timeout of 3 seconds on rank 0 (without one, gloo waits 30 minutes and NCCL 10
# by default, and a CI job simply stops at its own limit, naming nothing). The other rank waits 10 seconds, so that
# rank 0 is always the one to give up: with equal timeouts either may, and the other then reads only "connection
# closed by peer":

# %%
try:
    spawn(dp_bugs.uneven, 2, timeout=60)
except (RuntimeError, TimeoutError) as error:
    said = str(error)
    print(said.split(": ")[0] + ":", re.search(r"Timed out.*", said).group(0))  # rank N of 2 failed: what gloo said
    print("   where:", re.search(r'dp_bugs\.py", line \d+, in \w+', said).group(0))  # the line it waited in
assert "rank 0 of 2" in said

# %% [markdown]
# The timeout turns a hang into an error that names the rank, and its traceback names the line: the all-reduce of
# rank 0's third batch, which rank 1 never joined.
#
# ## 7. What communication costs
#
# **Bytes.** DDP's hook counted the bytes all-reduced per step in section 2: every gradient once, in float32.

# %%
print(f"bytes all-reduced per step: {ran['bytes_per_step']:,} = 4 bytes x {n_params:,} parameters: "
      f"{ran['bytes_per_step'] == 4 * n_params}")  # fmt: skip
assert ran["bytes_per_step"] == 4 * n_params
for world in (2, 4, 8, 64):
    print(
        f"N = {world:2}: each rank sends (and receives) 2(N-1)/N x that = {2 * (world - 1) / world * 4 * n_params:>10,.0f} bytes"
    )

# %% [markdown]
# How an all-reduce moves those bytes: in a **ring** all-reduce, the tensor is cut in $N$ pieces and passed around the
# ring of ranks twice, once to add the pieces up (a reduce-scatter), once to hand the sums out (an all-gather). Each
# rank sends $2(N-1)/N$ times the tensor's size, which approaches twice the size as $N$ grows but never more (Patarasuk
# and Yuan, 2009): the bandwidth part of each step's communication stays about the same from 8 GPUs to 64 (its
# latency part, a fixed cost per message passed on, grows with $N$), if the links keep
# their bandwidth.
#
# **Time on this machine.** One DDP step of a wider GPT than the one above (`d_model` 128 instead of 32), 32 rows per
# process, on 1, 2 and 4 processes of one thread each; the rows per second are what a data-parallel run is for:

# %% tags=["nbval-ignore-output"]
print(f"{os.cpu_count()} CPU cores")
print(f"{'processes':>9} {'rows a step':>11} {'ms a step':>9} {'rows per second':>15}")
rate = {}
for world in (1, 2, 4):
    seconds = max(spawn(dp_bugs.step_time, world, timeout=120))  # the slowest rank sets the pace
    rate[world] = 32 * world / seconds
    print(f"{world:>9} {32 * world:>11} {1000 * seconds:>9.1f} {rate[world]:>15,.0f}")
print(f"rows per second: x{rate[2] / rate[1]:.2f} from 1 to 2 processes, x{rate[4] / rate[2]:.2f} from 2 to 4")

# %% [markdown]
# Read it against the number of cores printed above. While each process has a core of its own, the rows per second
# can grow with the processes, at best in proportion: every step also waits for the all-reduce, and the processes
# share the machine's memory bandwidth. Once there are more processes than cores, they take turns on the cores, and
# more processes add no computing power: the last ratio shows what the turns cost on this machine. Timings like these
# are noisy: on a machine busy with other work the ratios can even reverse, so run the cell again on an idle one
# before reading much into them. (To see the all-reduce take a larger share of each step, run
# `spawn(dp_bugs.step_time, 2, 32, 10, 32)`: 2 processes, 32 rows, 10 steps, `d_model` 32 as above.) What this
# machine cannot show is a GPU's case, where the bytes go through NVLink or the network and DDP can hide most of their
# time behind the backward pass (estimated at the end of this section).
#
# DDP's machinery itself, in one process (world size 1: nothing to send), against the same steps without it, on this
# notebook's device (a GPU's with NCCL, where there is one):


# %% tags=["nbval-ignore-output"]
def seconds_per_step(model, steps=20):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    stream = setup.batches(train_ids, setup.ROWS)
    for step in range(steps + 3):
        if step == 3:
            synchronize()
            start = time.perf_counter()
        x, y = (t.to(here) for t in next(stream))
        opt.zero_grad()
        setup.loss_of(model, x, y).backward()
        opt.step()
    synchronize()
    return (time.perf_counter() - start) / steps


def synchronize():
    if here.type == "cuda":
        torch.cuda.synchronize()


here = device if device.type in ("cpu", "cuda") else torch.device("cpu")  # torch.distributed has no Apple GPU backend
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
dist.init_process_group(backend_for(here), init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=60))  # fmt: skip
try:
    timings = {"plain": [], "DDP": []}
    for _ in range(2):  # twice each, alternating, the faster of each kept: the first steps of a process warm it up
        timings["plain"].append(seconds_per_step(setup.make_model(vocab_size).to(here)))
        timings["DDP"].append(seconds_per_step(DDP(setup.make_model(vocab_size).to(here))))
    plain, wrapped = min(timings["plain"]), min(timings["DDP"])
finally:
    dist.destroy_process_group()
print(f"one process on {here} ({backend_for(here)}): {1000 * plain:.1f} ms a step plain, {1000 * wrapped:.1f} ms "
      f"under DDP")  # fmt: skip

# %% [markdown]
# **Eight GPUs, estimated.** For GPT-2 small (124 M parameters, with its vocabulary of BPE tokens) on one node of 8 H100
# GPUs, and on two such nodes, the numbers below are each from a source or labelled as an assumption; change them to
# your hardware.
#
# Between nodes, count the all-reduce in three steps (a reduce-scatter and an all-gather make an all-reduce, section
# 1): a reduce-scatter within each node, over NVLink, after which each GPU holds its node's sum of $1/8$ of the
# gradients; an all-reduce of that $1/8$ among the GPUs of the same number, one on each node (a ring of `nodes` GPUs),
# over the network; an all-gather within each node, over NVLink. Only the middle step leaves the node: each GPU sends
# $2(M-1)/M$ times an eighth of the gradients for $M$ nodes, and the node's ports carry its 8 GPUs' bytes side by side,
# so a node's network time is those bytes over the ports' bandwidth added up. The node's network is counted two ways:
# a port for each GPU, or one port that its 8 GPUs share. NCCL picks its own algorithm, and it may send more over the
# network: a ring through all 16 GPUs (the last lines) passes $2(N-1)/N$ times the gradients out of each node, where
# the three steps pass only the node's share once. The three steps are the network's best case.

# %%
params = 124e6  # GPT-2 small (Radford et al., 2019)
gradient_bytes = 4 * params  # float32 gradients, as DDP all-reduces them under mixed precision
gpus, nodes = 8, 2  # GPUs per node; nodes
tokens = 8 * 1024  # per GPU and step: 8 rows of 1,024 tokens, the batch of train_gpt's gpt2-small recipe
flops = 6 * params * tokens  # a forward and backward pass: about 6 FLOPs per parameter and token (Kaplan et al., 2020)
peak, utilisation = 989e12, 0.4  # H100 SXM dense bfloat16 (datasheet); 40% of it is an assumption, typical of
compute = flops / (peak * utilisation)  # a well-tuned small-model run
backward = compute * 2 / 3  # the backward pass: about twice the forward's FLOPs
buckets = gradient_bytes / (25 * 2**20)  # DDP's default bucket: 25 MiB (bucket_cap_mb)
sent = 2 * (gpus - 1) / gpus * gradient_bytes  # per GPU and step, in a ring over one node's 8
print(f"all-reduced per step: {gradient_bytes / 1e6:.0f} MB of gradients, in about {buckets:.0f} buckets; each GPU "
      f"sends {sent / 1e6:.0f} MB in a ring over one node")  # fmt: skip
print(f"compute per step: {flops / 1e12:.1f} TFLOP = {1000 * compute:.1f} ms at {utilisation:.0%} of the peak, "
      f"{1000 * backward:.1f} ms of it the backward pass")  # fmt: skip

nvlink = 450e9  # bytes/s each way per H100 SXM: NVLink 4 is 900 GB/s in both directions together (NVIDIA's datasheet)
in_node = sent / nvlink  # a ring over one node's 8, or steps 1 and 3 above together
print(f"one node: {1000 * in_node:.1f} ms over NVLink")
across = 2 * (nodes - 1) / nodes * gradient_bytes / gpus  # step 2: the bytes each GPU sends to the other nodes
ring_out = 2 * (nodes * gpus - 1) / (nodes * gpus) * gradient_bytes  # a ring through all 16: out of each node
network = {  # bytes/s out of one node
    "a 400 Gb/s InfiniBand port per GPU": gpus * 50e9,  # NDR, one port per GPU, as in NVIDIA's DGX H100
    "one 100 Gb/s Ethernet port per node": 12.5e9,  # an assumption: a cluster built without a port per GPU
}
two_nodes, ring_network = {}, {}
for name, bandwidth in network.items():
    on_network = gpus * across / bandwidth  # the node's 8 GPUs' bytes through the node's ports
    two_nodes[name], ring_network[name] = in_node + on_network, ring_out / bandwidth
    print(f"{nodes} nodes, {name}: {1000 * two_nodes[name]:.1f} ms, {1000 * on_network:.1f} ms of it on the network")
for name in network:
    print(f"  a ring through all {nodes * gpus} instead: {ring_out / 1e6:.0f} MB out of each node, "
          f"{1000 * ring_network[name]:.1f} ms on the network, {name}")  # fmt: skip
port_per_gpu, shared_port = network  # the two names
assert in_node < backward / 5 and two_nodes[port_per_gpu] < backward / 2  # hidden behind the backward pass
assert ring_network[port_per_gpu] < backward / 2  # ... whichever of the two algorithms (for any number of nodes)
assert backward < min(two_nodes[shared_port], ring_network[shared_port])  # not hidden: the step waits for the network

# %% [markdown]
# Within one node, the all-reduce takes under a fifth of the time of the backward pass, so DDP's overlap, bucket by
# bucket while the backward still runs, can hide nearly all of it: only the last bucket's all-reduce waits after the
# backward ends. Across two nodes with a network port per GPU, it takes under half of it, whichever algorithm: still
# hidden, because eight ports carry the node's bytes side by side. With one port for the whole node, all eight GPUs'
# shares queue for it, and the all-reduce takes longer than the backward pass at this batch: the step waits for the
# network. There the remedies are a larger batch per GPU (more compute per byte), gradient accumulation with `no_sync`
# (one all-reduce per $k$ micro-batches), or bfloat16 gradients (half the bytes). These are estimates: the sum of the
# three steps ignores that NCCL overlaps them, and real links deliver less than their peak bandwidth (NCCL's
# `all_reduce_perf` test measures what yours deliver). Change `nodes`, or the ports, and run the cell again.
#
# ## 8. The command lines you will use next
#
# One machine with 8 GPUs: `torchrun` starts one process per GPU.
#
# ```
# torchrun --standalone --nproc-per-node=8 -m course_utils.training.train_gpt --recipe gpt2-small --checkpoint gpt.ckpt
# ```
#
# Two machines with 8 GPUs each: the same command on both, with the address of a **rendezvous** endpoint that both can
# reach (a port on the first machine); the rendezvous numbers the machines:
#
# ```
# torchrun --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 \
#     -m course_utils.training.train_gpt --recipe gpt2-small --checkpoint /shared/gpt.ckpt   # on both machines
# ```
#
# `course_utils.training.train_gpt` is chapter 07's GPT trained with the pieces of this chapter: `torchrun`'s ranks,
# NCCL on GPUs or gloo on a CPU (`backend_for`), DDP, each rank reading its own random windows (its seed plus its
# rank), `train` with checkpoints written by rank 0, and, at the end, a check that every rank holds the same weights.
# Here it runs for 6 steps on 2 CPU processes (`CUDA_VISIBLE_DEVICES=` hides any GPU: on GPUs, the script refuses a
# process with no GPU of its own), with a checkpoint every 3 steps.

# %% tags=["nbval-ignore-output"]
Path("dp_gpt.ckpt").unlink(missing_ok=True)
# !CUDA_VISIBLE_DEVICES= {TORCHRUN} --standalone --nproc-per-node=2 -m course_utils.training.train_gpt --recipe cpu --steps 6 --batch-size 2 --checkpoint dp_gpt.ckpt --checkpoint-every 3 --out dp_gpt.pt
assert _exit_code == 0, "torchrun failed: its error is printed above"

# %%
print("the checkpoint holds step", load_checkpoint("dp_gpt.ckpt")["step"], "of 6")
assert load_checkpoint("dp_gpt.ckpt")["step"] == 6

# %% [markdown]
# ## Pitfalls
#
# | Mistake | What happens | Fix |
# | --- | --- | --- |
# | every rank reads the same batches | the run is one process's run, at $N$ times the cost | `DistributedSampler`, or each rank's shard of the global batch |
# | ranks start from different weights, gradients averaged by hand | the ranks train different models, no error | one seed for the model; DDP broadcasts rank 0's weights |
# | the all-reduced sum not divided by $N$ | a learning rate $N$ times too large with SGD; hidden by Adam | divide by `dist.get_world_size()` (DDP does) |
# | the same seed for dropout on every rank | the same units dropped on every rank | seed plus rank for the random generators of the step |
# | every rank saves or logs | $N$ writers of one file; $N$ copies of each line | `if dist.get_rank() == 0:` |
# | an uneven last batch, a collective called on some ranks only | a hang, by default for 10 to 30 minutes | pad (`DistributedSampler`) or `drop_last`; a timeout on the process group |
# | accumulation without `no_sync` | an all-reduce per micro-batch, $k$ times the communication | `with ddp.no_sync():` for all but the last micro-batch |
# | a checkpoint kept only in memory, or written in place | a disconnect loses the run; a kill while writing loses the checkpoint | `train(checkpoint=..., checkpoint_every=...)`: atomic, every generator's state |
#
# ## Summary
#
# - A data-parallel run is $N$ processes, each with a whole model and $1/N$ of each batch; averaging the gradients
#   (an all-reduce, then a division by $N$) makes it one process with $N$ times the batch. Proven here three ways, by
#   hand, with DDP and with one process, within $10^{-5}$.
# - Gradient accumulation is the same identity in time instead of space; `no_sync` sends once per step instead of once
#   per micro-batch (4 bucket all-reduces became 1).
# - FSDP2 (`fully_shard`) trains the same weights while each rank holds $1/N$ of the parameters, gradients and AdamW
#   state (measured: half on each of 2 ranks); its distributed checkpoint, written by 2 ranks, loads into 1.
# - `train(checkpoint=...)` makes a run survive being killed: resumed, it ends with the uninterrupted run's weights,
#   bit for bit on the CPU.
# - The classic bugs raise no error; each was measured here, and each has a one-line fix. A timeout turns a hang into
#   an error naming the rank.
# - An all-reduce sends about twice the gradients per rank and step ($2(N-1)/N$ times them in a ring): within a node
#   DDP hides it behind the backward pass; between nodes, only if the node's network ports carry its GPUs' shares
#   fast enough.
#
# ## Exercises
#
# {{EXERCISES}}
#
# **Exercise 1 · A sampler's shard of the indices.** A `DataLoader` under DDP takes a `DistributedSampler`, which gives
# each rank its indices of the data set. Write `my_shard_indices(n, rank, world_size, epoch, seed=0)` returning the
# list of indices rank `rank` reads in epoch `epoch`, exactly as
# `DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=True, seed=seed)` after
# `set_epoch(epoch)`: shuffle all $n$ indices with `torch.randperm(n, generator=g)`, where `g` is a `torch.Generator`
# seeded with `seed + epoch` (the same order on every rank, a new one each epoch); pad the list to a multiple of
# `world_size` by repeating it from its start (round and round if it is shorter than the padding) (so every rank gets as many, and none waits alone: bug 6); then deal the
# indices out like cards, rank $r$ taking positions $r$, $r + N$, $r + 2N$, …


# %% tags=["exercise"]
def my_shard_indices(n, rank, world_size, epoch, seed=0):
    ### BEGIN SOLUTION
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    order = torch.randperm(n, generator=g).tolist()
    total = -(-n // world_size) * world_size  # n rounded up to a multiple of world_size
    while len(order) < total:
        order += order[: total - len(order)]
    return order[rank:total:world_size]
    ### END SOLUTION


check_shard_indices(my_shard_indices)

# %% [markdown]
# **Exercise 2 · Memory per rank.** Write `my_bytes_per_rank(n_params, world_size, strategy)`, the bytes one rank holds
# for the parameters, their gradients and AdamW's state, all in float32, under `strategy` `"ddp"` or `"fsdp"` (FSDP2's
# `fully_shard`, ZeRO stage 3), ignoring the activations and the rounding of uneven shards. Then use it (not graded):
# how many parameters fit in 80 GB ($80 \times 10^9$ bytes) per GPU under each, on 8 GPUs? (Check yourself: with 16
# bytes a parameter, $5 \times 10^9$ under DDP and eight times as many under FSDP, before any activation.)


# %% tags=["exercise"]
def my_bytes_per_rank(n_params, world_size, strategy):
    ### BEGIN SOLUTION
    per_parameter = 4 + 4 + 8  # the weight, its gradient, AdamW's two averages
    if strategy == "ddp":
        return per_parameter * n_params  # a whole copy on every rank
    return per_parameter * n_params / world_size  # each rank its 1/N of all three
    ### END SOLUTION


check_bytes_per_rank(my_bytes_per_rank)

# %% [markdown]
# **Going further.** Run section 2's script with `--nproc-per-node=4` and a global batch of $4 \times 8$ rows (the
# notebook's one-process reference then needs 32 rows): does the proof still hold? Add `bucket_cap_mb=0.01` to `DDP(...)`
# and count the buckets with the hook. On Colab with a GPU, pass `"nccl"` and `device_ids=[local_rank]` and move the
# model to `cuda:{local_rank}`; `torch.cuda.device_count()` says how many processes to start.
