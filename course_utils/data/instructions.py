"""Instructions a model can be tuned on and scored on offline, built from the course's own data: dates to normalise
(chapter 06's task), words from Multi30k's English captions to reverse, sort, count or pick.

Each task has several **phrasings** of its instruction; the last is held out. Its **inputs** are split too: held-out
dates never occur in training (``DateTask``), and held-out words come from Multi30k's validation captions, not its
training ones. So a tuned model can be scored on three sets, each harder than the last: instructions seen in
training, new inputs in known phrasings, and new inputs in a phrasing it never saw. Every answer is exact: a
response is right or wrong.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

from .dates import DateTask
from .multi30k import load_multi30k
from .text import load_tiny_shakespeare

__all__ = ["PHRASINGS", "Instruction", "instruction_pairs", "pretraining_texts"]

# Each task's phrasings, {x} the input; the last phrasing is held out of training.
PHRASINGS: dict[str, tuple[str, ...]] = {
    "date": (
        "Normalise the date: {x}",
        "Write {x} as YYYY-MM-DD.",
        "What is {x} in ISO format?",
        "Convert this date to ISO 8601: {x}",
    ),
    "reverse": (
        "Reverse the words: {x}",
        "Say these words backwards: {x}",
        "Write the words in reverse order: {x}",
        "Turn the word order around: {x}",
    ),
    "sort": (
        "Sort the words: {x}",
        "Put these words in alphabetical order: {x}",
        "Alphabetise: {x}",
        "List the words from A to Z: {x}",
    ),
    "count": (
        "Count the words: {x}",
        "How many words are in: {x}",
        "Number of words in {x}?",
        "How many words does this have? {x}",
    ),
    "last": (
        "What is the last word of: {x}",
        "Last word: {x}",
        "Which word comes last? {x}",
        "Give the final word of {x}",
    ),
}


@dataclass(frozen=True)
class Instruction:
    """One example: its task, which phrasing (its index in ``PHRASINGS[task]``), the prompt and the one right
    response."""

    task: str
    phrasing: int
    prompt: str
    response: str


@cache
def _captions(split: str) -> tuple[tuple[str, ...], ...]:
    """Multi30k's English captions of ``split`` as lower-case words, punctuation dropped: those of 5 words or more."""
    captions = (tuple(re.findall(r"[a-z]+", en.lower())) for _, en in load_multi30k(split))
    return tuple(c for c in captions if len(c) >= 5)


@cache
def _dates() -> DateTask:
    """Chapter 06's split of the dates, the same whatever seed draws the examples: a held-out date stays held out."""
    return DateTask(seed=0)


def _words(rng: random.Random, split: str) -> list[str]:
    """3 to 5 consecutive words of a caption: training captions, or validation ones for held-out inputs."""
    words = rng.choice(_captions("train" if split == "train" else "val"))
    n = rng.randint(3, 5)
    start = rng.randint(0, len(words) - n)
    return list(words[start : start + n])


def _task_input(task: str, rng: random.Random, split: str) -> tuple[str, str]:
    if task == "date":
        dates = _dates()
        day = rng.choice(dates.train_dates if split == "train" else dates.test_dates)
        return dates.render(day, rng.choice(dates.formats))
    words = _words(rng, split)
    answers: dict[str, Callable[[list[str]], str]] = {
        "reverse": lambda w: " ".join(reversed(w)),
        "sort": lambda w: " ".join(sorted(w)),
        "count": lambda w: str(len(w)),
        "last": lambda w: w[-1],
    }
    return " ".join(words), answers[task](words)


def instruction_pairs(
    n: int, split: str = "train", phrasings: str = "seen", seed: int = 0, tasks: Sequence[str] | None = None
) -> list[Instruction]:
    """``n`` instructions, tasks in turn: inputs from ``split`` ("train", or "test": dates and captions never in
    training), phrased in one of the ``phrasings`` ("seen": all but each task's last, "held_out": the last)."""
    tasks = list(PHRASINGS) if tasks is None else list(tasks)
    unknown = [t for t in tasks if t not in PHRASINGS]
    if unknown or not tasks:
        raise ValueError(f"unknown tasks {unknown}; choose from {list(PHRASINGS)}")
    if split not in ("train", "test") or phrasings not in ("seen", "held_out"):
        raise ValueError(
            f"split must be 'train' or 'test', phrasings 'seen' or 'held_out'; got {split!r}, {phrasings!r}"
        )
    rng = random.Random(f"{seed}-{split}-{phrasings}")
    out = []
    for i in range(n):
        task = tasks[i % len(tasks)]
        choices = range(len(PHRASINGS[task]) - 1) if phrasings == "seen" else [len(PHRASINGS[task]) - 1]
        k = rng.choice(list(choices))
        x, answer = _task_input(task, rng, split)
        out.append(Instruction(task, k, PHRASINGS[task][k].format(x=x), answer))
    return out


def pretraining_texts(val_fraction: float = 0.1) -> dict[str, str]:
    """The text chapter 12's small model was pretrained on, before any instruction: ``"train"``, the first 90% of
    Tiny Shakespeare followed by Multi30k's English training captions (one per line), so that the model knows the
    words the instructions are made of; ``"val"``, the last 10% of Tiny Shakespeare (chapter 07's validation
    part), on which tuning's cost is measured."""
    text = load_tiny_shakespeare()
    n_train = int(len(text) * (1 - val_fraction))
    captions = "".join(f"{en}\n" for _, en in load_multi30k("train"))
    return {"train": text[:n_train] + "\n" + captions, "val": text[n_train:]}
