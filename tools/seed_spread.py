"""How much a chapter's trained figure varies from run to run: its recipe trained with several seeds, on the CPU.

    python tools/seed_spread.py dates 0 1 2 3 4      # chapter 06: held-out exact match of DATE_TRANSFORMER
    python tools/seed_spread.py shakespeare 0 1 2 3  # chapter 07: best validation loss of SHAKESPEARE_GPT_CPU

Another processor rounds the last bits of every sum in its own way, and a few hundred training steps carry those
differences into other weights: a reader's run lands somewhere in the spread of other seeds, not on the figure saved
in the notebook. The bounds the notebooks assert (and the ranges their prose quotes) come from this spread. Each run
is the one ``tools/build_checkpoints.py`` trains for the shipped weights (seed 0), with another seed for the initial
weights and the order of the batches; the data and its held-out split stay the chapter's. Run it with
``ATEN_CPU_CAPABILITY=default`` (or ``avx2``) to see other kernels too.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable

from build_checkpoints import best_val_loss, train_date_transformer, train_shakespeare_gpt

RUNS: dict[str, tuple[str, Callable[[int], float]]] = {
    "dates": ("held-out exact match", lambda seed: train_date_transformer(seed)[2]),
    "shakespeare": ("best validation loss", lambda seed: best_val_loss(train_shakespeare_gpt(seed)[1])),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", choices=sorted(RUNS))
    parser.add_argument("seeds", nargs="+", type=int)
    args = parser.parse_args()
    figure, run = RUNS[args.run]
    values = []
    for seed in args.seeds:
        values.append(run(seed))
        print(f"seed {seed}: {figure} {values[-1]:.4g}", flush=True)
    kernels = os.environ.get("ATEN_CPU_CAPABILITY", "the processor's own")
    print(
        f"{args.run}, {len(values)} seeds, {kernels} kernels: {figure} from {min(values):.4g} to {max(values):.4g}, "
        f"mean {statistics.mean(values):.4g}"
    )


if __name__ == "__main__":
    main()
