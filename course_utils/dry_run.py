"""What a GPU dry run cuts short (``COURSE_GPU_DRY_RUN=1``, ``make gpu-dry-run``), and the record of each cut.

A dry run takes a GPU's code paths on a CPU to see that they run, not what they compute. ``train`` stops after
``DRY_RUN_STEPS`` steps on ``DRY_RUN_ROWS`` rows of each batch, ``estimate_loss`` after as many batches of as many
rows, and generation and decoding (``generate``, ``beam_search``, ``greedy_decode``, ``translate``) after
``DRY_RUN_TOKENS`` new tokens: each loop's body runs, for fewer rounds (what only a long output reaches does not: a
text outgrowing ``block_size``, a beam whose hypotheses all ended). ``DRY_RUN_CUTS`` records what was cut in this
process, so that tools/gpu_dry_run.py can tell a check that fails because something was cut short (a trained figure,
a BLEU score) from a check of code, which must hold.
"""

from __future__ import annotations

from .settings import GPU_DRY_RUN

__all__ = ["DRY_RUN_CUTS", "DRY_RUN_ROWS", "DRY_RUN_STEPS", "DRY_RUN_TOKENS", "GENERATION_CUTS", "at_most", "cut_short"]

DRY_RUN_STEPS = 3  # a dry run trains this many steps: enough to pass every code path, too few to learn
# and on this many rows of each batch: the model keeps its real size, but a CPU emulating bfloat16 takes minutes for
# one step of a GPU recipe's full batch (64 windows of 256 characters in chapter 07)
DRY_RUN_ROWS = 2
# new tokens a generation or a decoding writes: words enough for BLEU's 4-grams, whose log a cell takes
DRY_RUN_TOKENS = 8
DRY_RUN_CUTS: list[str] = []  # what this process has cut short so far: "train", "estimate_loss", "generate", "decode"
GENERATION_CUTS = ("generate", "decode")  # the cuts of what a model writes (the others: of training and measuring)


def cut_short(what: str) -> None:
    """Record that ``what`` ran cut short."""
    DRY_RUN_CUTS.append(what)


def at_most(what: str, n: int, limit: int) -> int:
    """``n``, or in a dry run no more than ``limit`` (a cut recorded as ``what`` when it takes something away)."""
    if not GPU_DRY_RUN.is_on() or n <= limit:
        return n
    cut_short(what)
    return limit
