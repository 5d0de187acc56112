"""Reproducibility, devices and evaluation mode, shared by every notebook."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Generator
from typing import TypeVar

import numpy as np
import torch
from torch import nn

from .settings import DEVICE, GPU_DRY_RUN

__all__ = ["count_parameters", "eval_mode", "get_device", "gpu_branch", "in_mode", "set_seed", "synchronize"]

M = TypeVar("M", bound=nn.Module)


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
    forced = DEVICE.value()
    if forced:
        return torch.device(forced)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def gpu_branch(device: torch.device | str) -> bool:
    """Whether a notebook takes its GPU branch (the larger recipe): on a CUDA device; or on any device when
    ``COURSE_GPU_DRY_RUN=1``, where ``train`` then stops after a few steps (``make gpu-dry-run`` runs every
    notebook so, to catch a GPU branch's bugs on a machine without a GPU)."""
    return torch.device(device).type == "cuda" or GPU_DRY_RUN.is_on()


def count_parameters(model: nn.Module, trainable_only: bool = True) -> int:
    """Number of (trainable) parameters; tied weights are counted once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


@contextlib.contextmanager
def in_mode(model: M, training: bool) -> Generator[M, None, None]:
    """Within the block ``model`` is in training mode (``training=True``: dropout on) or evaluation mode;
    afterwards it is back in the mode it was in, even if the block raised."""
    was_training = model.training
    model.train(training)
    try:
        yield model
    finally:
        model.train(was_training)


def eval_mode(model: M) -> contextlib.AbstractContextManager[M]:
    """``in_mode(model, training=False)``: evaluation (dropout off) within the block, the previous mode after."""
    return in_mode(model, training=False)


def synchronize(device: torch.device | str) -> None:
    """Wait for the GPU's queued work to finish, so that a clock read afterwards measures it (no-op on the CPU)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
