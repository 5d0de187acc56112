"""Trained weights that ship with the course, for a class with no time or no GPU to train.

Chapter 06's date Transformer, chapter 07's CPU-sized GPT and chapter 08's Multi30k translator are trained by
``tools/build_checkpoints.py`` with exactly the recipes the notebooks use (``course_utils.training.recipes``), on the CPU,
and saved with what training measured: the loss history, evaluations and, for the GPT, its samples; the
translator also carries its tokenizer's merges and its test-set BLEU, and is stored in half precision. The
files hold plain tensors, numbers and strings only, so ``torch.load(..., weights_only=True)`` reads them.
Rebuild them with

    python tools/build_checkpoints.py date_transformer shakespeare_gpt   # about two minutes on a laptop CPU
    python tools/build_checkpoints.py multi30k_translator                # about an hour on a 2-core CPU

and the notebooks load them with ``load_pretrained(name)`` when ``SKIP_TRAINING`` is set.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .loop import History
from .recipes import BYTE_GPT, DATE_TRANSFORMER, MULTI30K_TRANSLATOR, SHAKESPEARE_GPT_CPU, Recipe

__all__ = ["PRETRAINED", "Pretrained", "load_pretrained"]

CHECKPOINTS = Path(__file__).resolve().parents[1] / "checkpoints"  # course_utils/checkpoints/

# name -> the recipe its weights were trained with
PRETRAINED: dict[str, Recipe[Any]] = {
    "date_transformer": DATE_TRANSFORMER,
    "shakespeare_gpt": SHAKESPEARE_GPT_CPU,
    "multi30k_translator": MULTI30K_TRANSLATOR,
    "byte_gpt": BYTE_GPT,
}


@dataclass
class Pretrained:
    """A shipped checkpoint: ``state_dict`` for the model its recipe builds, and what training measured."""

    name: str
    recipe: Recipe[Any]
    state_dict: dict[str, Tensor]
    history: History
    metrics: dict[str, float]
    samples: list[str] = field(default_factory=list)
    torch_version: str = ""
    tokenizer: dict[str, list[str]] = field(default_factory=dict)  # a BPETokenizer's to_dict(), where there is one

    def _distinct_tensors(self) -> dict[int, int]:
        """Size of each distinct tensor: a matrix shared by several layers (tied weights) counts once."""
        return {t.data_ptr(): t.numel() for t in self.state_dict.values()}

    def describe(self) -> str:
        metrics = ", ".join(f"{k} {v:.4g}" for k, v in self.metrics.items())
        return (
            f"{self.name}: {sum(self._distinct_tensors().values()):,} numbers, trained "
            f"{self.recipe.training.steps} steps on a CPU in {self.history.seconds:.0f} s "
            f"(PyTorch {self.torch_version}); {metrics}"
        )


def checkpoint_path(name: str) -> Path:
    if name not in PRETRAINED:
        raise ValueError(f"no pretrained weights called {name!r}; there are: {', '.join(PRETRAINED)}")
    return CHECKPOINTS / f"{name}.pt"


def load_pretrained(name: str, device: torch.device | str | None = None) -> Pretrained:
    """The shipped weights called ``name`` (``"date_transformer"``, ``"shakespeare_gpt"`` or
    ``"multi30k_translator"``), read with
    ``weights_only=True``, tensors on ``device`` (default: the CPU). Weights trained with another recipe
    than today's ``PRETRAINED[name]`` are refused: they would not be what the notebook describes."""
    path = checkpoint_path(name)
    rebuild = f"python tools/build_checkpoints.py {name}"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `{rebuild}` in the course's repository to train it")
    saved = torch.load(path, map_location=device or "cpu", weights_only=True)
    recipe = PRETRAINED[name]
    if saved["recipe"] != asdict(recipe):
        raise ValueError(
            f"{path} was trained with another recipe than course_utils.training.recipes holds: run `{rebuild}`"
        )
    history = saved["history"]
    history["evals"] = [(step, metrics) for step, metrics in history["evals"]]
    # Weights stored in half precision come back as float32; a tied weight, stored once, under all its names.
    state_dict = {k: v.float() if v.dtype == torch.float16 else v for k, v in saved["state_dict"].items()}
    state_dict |= {alias: state_dict[key] for alias, key in saved.get("aliases", {}).items()}
    return Pretrained(
        name=name,
        recipe=recipe,
        state_dict=state_dict,
        history=History(**history),
        metrics=saved["metrics"],
        samples=saved.get("samples", []),
        torch_version=saved.get("torch_version", ""),
        tokenizer=saved.get("tokenizer", {}),
    )
