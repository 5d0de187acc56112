"""Chapter 07's GPT trained data-parallel under ``torchrun``, with the course's own model, loop and checkpoints.

    torchrun --standalone --nproc-per-node=2 -m course_utils.training.train_gpt --recipe cpu --checkpoint gpt.ckpt
    torchrun --standalone --nproc-per-node=8 -m course_utils.training.train_gpt --recipe gpt2-small  # 8 GPUs, 1 node
    torchrun --nnodes=2 --nproc-per-node=8 --rdzv-backend=c10d --rdzv-endpoint=HOST:29500 \\
        -m course_utils.training.train_gpt --recipe gpt2-small                     # the same on both machines

``torchrun`` starts one process per GPU (or, on a CPU, per ``--nproc-per-node``) and gives each its rank in the
environment; this script joins them in one process group (NCCL on GPUs, gloo on the CPU), wraps the model in DDP
and trains it with ``course_utils.train``. Each rank reads its own stream of random windows (its seed is the seed plus
its rank: ranks reading the same batches would add nothing), so a step sees ``world_size`` times the batch of one
process. Only rank 0 prints, evaluates and writes the checkpoint; every rank resumes from it. At the end the ranks
compare their weights bit for bit (``same_on_every_rank``) and rank 0 writes them to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict, replace
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from ..data.text import load_tiny_shakespeare, random_windows, split_ids
from ..data.tokenizers import CharTokenizer
from ..model import GPT, GPTConfig
from .distributed import backend_for, same_on_every_rank
from .loop import train
from .metrics import estimate_loss
from .recipes import SHAKESPEARE_GPT_CPU, SHAKESPEARE_GPT_GPU, Recipe

# GPT-2 small's shape (124 M parameters with its 50,257-token vocabulary; about 85 M on Shakespeare's 65 characters).
GPT2_SMALL = Recipe(
    model=GPTConfig(block_size=1024, d_model=768, n_heads=12, n_layers=12, dropout=0.0, bias=True),
    training=replace(SHAKESPEARE_GPT_GPU.training, steps=5000, batch_size=8, lr=6e-4, warmup_steps=200),
    eval_every=500,
)
RECIPES = {"cpu": SHAKESPEARE_GPT_CPU, "gpu": SHAKESPEARE_GPT_GPU, "gpt2-small": GPT2_SMALL}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="torchrun ... -m course_utils.training.train_gpt", description=__doc__)
    parser.add_argument("--recipe", choices=sorted(RECIPES), default="cpu")
    parser.add_argument("--steps", type=int, help="instead of the recipe's")
    parser.add_argument("--batch-size", type=int, help="rows per rank and step, instead of the recipe's")
    parser.add_argument("--checkpoint", type=Path, help="a checkpoint file to write, and to resume from if it is there")
    parser.add_argument("--checkpoint-every", type=int, default=0, help="steps between checkpoints (0: at the end)")
    parser.add_argument("--out", type=Path, help="where rank 0 writes the trained weights")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if "RANK" not in os.environ:
        parser.error("start it with torchrun (torchrun --standalone --nproc-per-node=2 -m course_utils.training."
                     "train_gpt ...), which gives each process its rank")  # fmt: skip
    rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    device = torch.device(f"cuda:{local}") if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda" and local >= torch.cuda.device_count():
        parser.error(f"process {local} on this machine, but it has {torch.cuda.device_count()} GPU(s): start one "
                     "process per GPU (--nproc-per-node), or run on the CPU with CUDA_VISIBLE_DEVICES= before "
                     "torchrun")  # fmt: skip
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend_for(device))
    try:
        recipe = RECIPES[args.recipe]
        config = replace(recipe.training, steps=args.steps or recipe.training.steps,
                         batch_size=args.batch_size or recipe.training.batch_size)  # fmt: skip
        text = load_tiny_shakespeare()
        tokenizer = CharTokenizer(text, specials=False)
        train_ids, val_ids = split_ids(text, tokenizer)
        torch.manual_seed(args.seed)  # the same initial weights on every rank (DDP also sends rank 0's to the others)
        model = GPT(tokenizer.vocab_size, **asdict(recipe.model)).to(device)
        ddp = DDP(model, device_ids=[local] if device.type == "cuda" else None)
        torch.manual_seed(args.seed + rank)  # each rank its own dropout masks
        batches = random_windows(train_ids, recipe.model.block_size, config.batch_size, seed=args.seed + rank)
        if rank == 0:
            print(f"{world} ranks on {device.type} ({dist.get_backend()}): {config.batch_size} rows each, "
                  f"{config.batch_size * world} a step", flush=True)  # fmt: skip

        def evaluate(net: torch.nn.Module) -> dict[str, float]:  # rank 0's model is every rank's: DDP keeps them equal
            return estimate_loss(model, {"val": val_ids}, config.batch_size, iters=10)

        history = train(
            ddp, batches, lambda net, x, y: net(x, y)[1], config, device=device, progress=rank == 0,
            eval_fn=evaluate if rank == 0 else None, eval_every=recipe.eval_every, desc=f"GPT on {world} ranks",
            checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every,
        )  # fmt: skip
        same = same_on_every_rank(model)  # rank 0's weights broadcast, compared bit for bit on every rank
        if rank == 0:
            print(f"weights identical on {world} ranks: {same}", flush=True)
            if history.evals:
                print(f"validation loss: {history.evals[-1][1]['val']:.3f} after {history.steps[-1]} steps")
            if args.out:
                torch.save(model.state_dict(), args.out)
        return 0 if same else 1
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
