"""Trained weights that ship with the course, for a class with no time or no GPU to train.

Chapter 06's date Transformer and chapter 07's CPU-sized GPT are trained by ``build_checkpoints`` with exactly the
recipes the notebooks print (a test holds the two together), on the CPU, and saved with what training
measured: the loss history, evaluations and, for the GPT, its samples. The files hold plain tensors, numbers
and strings only, so ``torch.load(..., weights_only=True)`` reads them. Rebuild them with

    python -m course_utils.build_checkpoints     # about two minutes on a laptop CPU

and the notebooks load them with ``load_pretrained(name)`` when ``SKIP_TRAINING`` is set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from .train import History, TrainConfig

__all__ = ["PRETRAINED_RECIPES", "Pretrained", "load_pretrained"]

CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"

# name -> (the model's recipe as the notebook's dataclass prints it, its training configuration)
PRETRAINED_RECIPES: dict[str, tuple[str, dict, TrainConfig]] = {
    "date_transformer": (
        "DateModelConfig",
        {"d_model": 64, "n_heads": 4, "n_layers": 2, "d_ff": 128, "dropout": 0.0, "max_len": 64},
        TrainConfig(steps=1000, batch_size=64, lr=3e-3, warmup_steps=100, schedule="cosine", label_smoothing=0.1),
    ),
    "shakespeare_gpt": (
        "GPTRecipe",
        {"block_size": 64, "d_model": 128, "n_heads": 4, "n_layers": 4, "dropout": 0.0, "batch_size": 12, "steps": 1500, "eval_every": 250},
        TrainConfig(
            steps=1500, batch_size=12, lr=1e-3, warmup_steps=100, schedule="cosine",
            label_smoothing=0.0, weight_decay=0.1, betas=(0.9, 0.99), grad_clip=1.0,
        ),
    ),
}  # fmt: skip


@dataclass
class Pretrained:
    """A shipped checkpoint: ``state_dict`` for the model the recipe builds, and what training measured."""

    name: str
    recipe: dict
    train_config: dict
    state_dict: dict[str, Tensor]
    history: History
    metrics: dict[str, float]
    samples: list[str] = field(default_factory=list)
    torch_version: str = ""

    def describe(self) -> str:
        metrics = ", ".join(f"{k} {v:.4g}" for k, v in self.metrics.items())
        return (
            f"{self.name}: {sum(t.numel() for t in self.state_dict.values()):,} numbers, trained "
            f"{self.train_config['steps']} steps on a CPU in {self.history.seconds:.0f} s (PyTorch {self.torch_version}); {metrics}"
        )


def _path(name: str) -> Path:
    if name not in PRETRAINED_RECIPES:
        raise ValueError(f"no pretrained weights called {name!r}; there are: {', '.join(PRETRAINED_RECIPES)}")
    return CHECKPOINTS / f"{name}.pt"


def load_pretrained(name: str, device: torch.device | str | None = None) -> Pretrained:
    """The shipped weights called ``name`` (``"date_transformer"`` or ``"shakespeare_gpt"``), read with
    ``weights_only=True``, tensors on ``device`` (default: the CPU)."""
    path = _path(name)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `python -m course_utils.build_checkpoints {name}` to train it")
    saved = torch.load(path, map_location=device or "cpu", weights_only=True)
    history = saved["history"]
    history["evals"] = [(step, metrics) for step, metrics in history["evals"]]
    return Pretrained(
        name=name,
        recipe=saved["recipe"],
        train_config=saved["train_config"],
        state_dict=saved["state_dict"],
        history=History(**history),
        metrics=saved["metrics"],
        samples=saved.get("samples", []),
        torch_version=saved.get("torch_version", ""),
    )
