"""Reproducibility and device selection shared by every notebook."""

from __future__ import annotations

import os
import random

import numpy as np
import torch

__all__ = ["count_parameters", "get_device", "set_seed"]


def set_seed(seed: int = 0) -> None:
    """Seed Python's, NumPy's and PyTorch's (CPU and every GPU) random generators."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def get_device() -> torch.device:
    """The best device available: CUDA, then Apple's MPS, then the CPU.

    Set the environment variable ``COURSE_DEVICE`` (e.g. ``COURSE_DEVICE=cpu``) to force one;
    the committed notebook outputs are produced with ``COURSE_DEVICE=cpu``.
    """
    forced = os.environ.get("COURSE_DEVICE")
    if forced:
        return torch.device(forced)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def count_parameters(model: torch.nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) parameters; tied weights are counted once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
