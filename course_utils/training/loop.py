"""Training: the learning-rate schedules, an optimizer, one step, and a plain training loop.

Nothing here knows the task: a ``loss_fn(model, *batch)`` says what is minimised.
"""

from __future__ import annotations

import functools
import math
import sys
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from tqdm import tqdm as text_tqdm
from tqdm.auto import tqdm

from ..dry_run import DRY_RUN_ROWS, DRY_RUN_STEPS, cut_short
from ..settings import AMP_DTYPE, GPU_DRY_RUN, PROGRESS
from ..utils import eval_mode, in_mode, synchronize
from .checkpoint import (
    architecture,
    load_checkpoint,
    random_state,
    refuse_another_run,
    save_checkpoint,
    set_random_state,
)

__all__ = ["History", "TrainConfig", "lr_factor", "make_optimizer", "noam_lr", "train", "train_step"]


SCHEDULES = ("inverse_sqrt", "cosine", "constant")


@dataclass(frozen=True)
class TrainConfig:
    """A training recipe. ``lr`` is the peak learning rate, reached after ``warmup_steps``."""

    #: optimizer updates to make (batches to draw)
    steps: int = 1000
    #: rows per batch; ``train`` does not read it (the batches come made), a recipe records it with the rest
    batch_size: int = 64
    #: the peak learning rate, reached at the end of the warm-up
    lr: float = 1e-3
    #: steps of linear warm-up from lr / warmup_steps to lr
    warmup_steps: int = 100
    #: the decay after the warm-up, ``lr_factor``'s: "inverse_sqrt" (the paper's), "cosine" (to lr / 10 at the last
    #: step) or "constant"
    schedule: str = "inverse_sqrt"
    #: the share of each target's probability spread over the other tokens, for a loss function that reads it
    label_smoothing: float = 0.1
    #: AdamW's decoupled weight decay (0: plain Adam)
    weight_decay: float = 0.0
    #: the largest gradient norm, larger gradients scaled down to it (None: no clipping)
    grad_clip: float | None = 1.0
    #: Adam's (beta1, beta2); the paper's settings
    betas: tuple[float, float] = (0.9, 0.98)
    #: on a GPU, the forward pass in bfloat16 (float16 with a gradient scaler where it lacks bfloat16)
    amp: bool = True

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}; got {self.schedule!r}")
        if self.steps < 1 or self.batch_size < 1 or self.lr <= 0 or self.warmup_steps < 0:
            raise ValueError("need steps >= 1, batch_size >= 1, lr > 0 and warmup_steps >= 0")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1); got {self.label_smoothing}")
        if self.grad_clip is not None and not self.grad_clip > 0:  # a norm of 0 would scale every gradient to 0
            raise ValueError(f"grad_clip is the largest gradient norm, > 0 (None: no clipping); got {self.grad_clip}")


def noam_lr(step: int, d_model: int, warmup_steps: int) -> float:
    r"""The paper's schedule (section 5.3): d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""
    step = max(step, 1)
    return d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def lr_factor(step: int, config: TrainConfig) -> float:
    """Multiplier of ``config.lr`` at ``step`` (0-based): linear warm-up to 1 over ``warmup_steps``, then the
    chosen decay, with s = step + 1 and w the warm-up steps:

    - ``"inverse_sqrt"``, the paper's shape: min(s / w, sqrt(w / s)), rescaled so that the peak is 1;
    - ``"cosine"``: half a cosine from 1 after the warm-up down to 0.1 at the last step (lr / 10);
    - ``"constant"``: 1 after the warm-up.
    """
    s, w = step + 1, max(config.warmup_steps, 1)
    if s < w:
        return s / w
    if config.schedule == "inverse_sqrt":
        return math.sqrt(w / s)
    if config.schedule == "cosine":
        progress = min((s - w) / max(config.steps - w, 1), 1.0)
        return 0.1 + 0.45 * (1 + math.cos(math.pi * progress))
    return 1.0  # constant


@dataclass
class History:
    """What ``train`` measured: per-step loss and learning rate, evaluations, and wall time.

    ``seconds`` is the time spent training, evaluations excluded; ``evals`` holds
    ``(step, metrics)`` pairs and ``eval_seconds`` the training time elapsed at each of them.
    """

    #: the step number (1, 2, ...) of each entry of ``loss`` and ``lr``
    steps: list[int] = field(default_factory=list)
    #: the training loss of each step, on that step's batch
    loss: list[float] = field(default_factory=list)
    #: the learning rate each step used
    lr: list[float] = field(default_factory=list)
    #: ``(step, metrics)``: what ``eval_fn`` returned, every ``eval_every`` steps and after the last
    evals: list[tuple[int, dict[str, float]]] = field(default_factory=list)
    #: the training time elapsed at each evaluation, in seconds
    eval_seconds: list[float] = field(default_factory=list)
    #: the time spent training, in seconds, evaluations excluded
    seconds: float = 0.0


def make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """AdamW with the paper's eps; the fused kernel where PyTorch has one.

    Weight decay applies to matrices (weights, embeddings) only, never to biases or LayerNorm scales,
    as is usual for Transformers.
    """
    device = next(model.parameters()).device
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        [g for g in groups if g["params"]],
        lr=config.lr,
        betas=config.betas,
        eps=1e-9,
        fused=device.type in ("cpu", "cuda"),  # one kernel for all parameters: faster where available
    )


_AMP_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def _autocast_dtype(device: torch.device, amp: bool) -> torch.dtype | None:
    """The dtype the forward pass computes in under ``torch.autocast``, or None: full precision (float32).

    On a GPU: bfloat16 where it computes it natively (Ampere and later); float16 on older GPUs with tensor cores
    (Colab's T4, a V100), whose narrow range needs a gradient scaler (``train_step`` brings one); float32 below
    that. ``COURSE_AMP_DTYPE`` chooses float16 or bfloat16 instead. A GPU dry run (``COURSE_GPU_DRY_RUN=1``) takes
    the GPU's path on the CPU, in ``COURSE_AMP_DTYPE`` or else bfloat16. The CPU itself trains in float32.
    Where a GPU runs other than in bfloat16, one line says so (once)."""
    if not amp:
        return None
    if device.type == "cpu":
        if not GPU_DRY_RUN.is_on():
            return None
        if _chosen() == "float16":
            _say_once(f"training in float16 autocast with a gradient scaler: {AMP_DTYPE.name}=float16")
        return _AMP_DTYPES[_chosen() or "bfloat16"]
    if device.type == "cuda":
        return _cuda_autocast_dtype(device, _chosen())
    return None


def _chosen() -> str | None:
    chosen = AMP_DTYPE.value()
    if chosen is not None and chosen not in _AMP_DTYPES:
        raise ValueError(f"{AMP_DTYPE.name} must be one of {', '.join(_AMP_DTYPES)} or unset; got {chosen!r}")
    return chosen


@functools.cache
def _cuda_autocast_dtype(device: torch.device, chosen: str | None) -> torch.dtype | None:
    # is_bf16_supported asks the current CUDA device: with several GPUs of different kinds, train on the current one
    name, (major, minor) = torch.cuda.get_device_name(device), torch.cuda.get_device_capability(device)
    native_bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
    if chosen == "bfloat16" and not native_bf16:
        _say_once(
            f"training in bfloat16 autocast, as {AMP_DTYPE.name} asks: the {name} emulates it, slower than float16"
        )
        return torch.bfloat16
    if chosen == "float16" or (not native_bf16 and major >= 7):
        why = f"{AMP_DTYPE.name}=float16" if chosen == "float16" else f"the {name} has no native bfloat16"
        _say_once(f"training in float16 autocast with a gradient scaler: {why}")
        return torch.float16
    if native_bf16:
        return torch.bfloat16
    _say_once(
        f"training in float32: the {name} (compute capability {major}.{minor}) has neither bfloat16 nor fast float16"
    )
    return None


@functools.cache
def _say_once(line: str) -> None:
    print(line)


# One gradient scaler per optimizer, kept as long as the optimizer lives: float16's largest value is 65,504 and its
# smallest normal 6e-5, so small gradients would round to zero. The scaler multiplies the loss before backward (and
# so every gradient), divides the gradients back before clipping and the update, and skips a step whose gradients
# overflowed, lowering its factor (Micikevicius et al. 2018, "Mixed precision training"; torch.amp.GradScaler).
_SCALERS: weakref.WeakKeyDictionary[torch.optim.Optimizer, torch.amp.GradScaler] = weakref.WeakKeyDictionary()


_NO_SCALING = torch.amp.GradScaler("cpu", enabled=False)  # disabled: each of its steps passes through unchanged


def _scaler(optimizer: torch.optim.Optimizer, device: torch.device, dtype: torch.dtype | None) -> torch.amp.GradScaler:
    if dtype != torch.float16:
        return _NO_SCALING
    if optimizer not in _SCALERS:
        _SCALERS[optimizer] = torch.amp.GradScaler(device.type)
    return _SCALERS[optimizer]


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[..., Tensor],
    batch: tuple[Tensor, ...],
    config: TrainConfig,
) -> Tensor:
    """One step: forward, loss, backward, gradient clipping, optimizer update. Returns the loss (detached).

    The model must already be in training mode (``model.train()``), as ``train`` puts it; the step does not
    walk the model's modules. In float16 autocast (a GPU without bfloat16) the backward pass and the update go
    through the optimizer's gradient scaler, which skips a step whose gradients overflowed.
    """
    device = batch[0].device
    dtype = _autocast_dtype(device, config.amp)
    with torch.autocast(device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        loss = loss_fn(model, *batch)
    if not isinstance(loss, Tensor) or loss.numel() != 1:
        got = f"a tensor of shape {tuple(loss.shape)}" if isinstance(loss, Tensor) else type(loss).__name__
        hint = ": a model's (logits, loss)? return its [1]" if isinstance(loss, tuple) else ""
        raise TypeError(f"loss_fn must return the loss, one number (a tensor of one element); got {got}{hint}")
    loss = loss.reshape(())  # a loss of shape (1,) too
    optimizer.zero_grad(set_to_none=True)
    scaler = _scaler(optimizer, device, dtype)  # outside float16, a disabled scaler: plain backward and step
    scaler.scale(loss).backward()  # the gradients of loss * scale: small ones stay above float16's smallest
    scaler.unscale_(optimizer)  # divided back, so that clipping sees the true norm
    if config.grad_clip is not None:
        nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
    scaler.step(optimizer)  # skipped if a gradient is inf or NaN
    scaler.update()  # a smaller scale after an overflow, a larger one after a run without
    return loss.detach()


def _to_device(t: Tensor, device: torch.device) -> Tensor:
    """``t`` on ``device``. To a GPU from pinned (page-locked) memory, as nanoGPT's ``get_batch`` does: a copy from
    ordinary memory first waits for every kernel already queued to finish, so the CPU could not queue the next
    step's kernels while the GPU runs this one's; from pinned memory the copy joins the queue and nothing waits."""
    if device.type == "cuda" and t.device.type == "cpu":
        t = t.pin_memory()
    return t.to(device, non_blocking=True)


def train(
    model: nn.Module,
    batches: Iterator[tuple[Tensor, ...]],
    loss_fn: Callable[..., Tensor],
    config: TrainConfig,
    *,
    device: torch.device | str | None = None,
    eval_fn: Callable[[nn.Module], dict[str, float]] | None = None,
    eval_every: int = 0,
    progress: bool = True,
    desc: str = "training",
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 0,
    keep: dict[str, Any] | None = None,
) -> History:
    """Train ``model`` for ``config.steps`` steps with AdamW and the configured warm-up schedule.

    Each step takes the next tuple of tensors from ``batches``, moves it to ``device`` and calls
    ``loss_fn(model, *batch)``. ``eval_fn(model)``, if given, runs every ``eval_every`` steps and
    at the end, in eval mode and without gradients; its results are kept in ``History.evals`` and shown on
    the progress bar. The model trains in training mode and is left in the mode it was in before.

    ``checkpoint``, a file's path, makes the run survive a disconnect: every ``checkpoint_every`` steps (and at the
    end) the model, the optimizer, the step, the history and every random generator's state are saved there
    (``course_utils.training.checkpoint``, atomically); a run started with the file there goes on from it, after
    taking from ``batches`` the batches the saved steps used (so ``batches`` must give the same batches in the same
    order each time, as ``random_windows`` with its seed does). On the CPU the weights then end exactly as a run never
    stopped would leave them. A checkpoint of another recipe or model is refused, with the fix in the message. In a
    process group (``torch.distributed``, a DDP model), only rank 0 writes the checkpoint; every rank resumes from it.
    ``checkpoint=None`` keeps none, whatever ``checkpoint_every`` says (``checkpoint_path`` gives None where no
    checkpoint is wanted). ``keep``, a dict of the caller's own records (samples written at each evaluation: lists of
    strings, numbers, tensors), is saved with each checkpoint and put back on resume, each list refilled in place.
    """
    if checkpoint_every < 0:
        raise ValueError(f"checkpoint_every={checkpoint_every}: a number of steps >= 0 (0: only at the end)")
    device = torch.device(device) if device is not None else next(model.parameters()).device
    model.to(device)
    optimizer = make_optimizer(model, config)
    dtype = _autocast_dtype(device, config.amp)  # where a GPU trains in float16 or float32, its line before the bar
    steps = config.steps
    if GPU_DRY_RUN.is_on():
        steps = min(steps, DRY_RUN_STEPS)
        cut_short("train")  # its batches too, to DRY_RUN_ROWS rows
    history, shown, evaluating = History(), {}, 0.0
    first, earlier = 0, 0.0  # the step a resumed run starts at, and the training seconds before it
    path = Path(checkpoint) if checkpoint is not None else None
    if path is not None and path.exists():
        state = load_checkpoint(path)
        refuse_another_run(state, config, model, path)
        for name, saved in state.get("kept", {}).items():
            if keep is not None and isinstance(keep.get(name), list) and isinstance(saved, list):
                keep[name][:] = saved  # in place: the caller's own list, which its evaluation appends to
            elif keep is not None:
                keep[name] = saved
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        if state.get("scaler"):
            _scaler(optimizer, device, dtype).load_state_dict(state["scaler"])
        history = History(**state["history"])
        first, earlier = min(int(state["step"]), steps), history.seconds
        for skipped in range(first):  # the data stream where the saved run left it
            if next(batches, None) is None:
                raise ValueError(
                    f"the batches ran out after {skipped} steps, while skipping the {first} the checkpoint had "
                    "already trained on: pass the same endless stream as that run"
                )
        set_random_state(state["random"])  # after the batches skipped: the next draws are the ones it would make
        shown = history.evals[-1][1] if history.evals else {}
        if progress:
            print(f"resumed from {path} at step {first} of {steps}", file=sys.stdout, flush=True)
    # A widget in notebooks; COURSE_PROGRESS=text gives a plain-text bar, whose last line stays readable
    # in saved notebooks (the committed outputs are made that way).
    bar_type = text_tqdm if PROGRESS.value() == "text" else tqdm
    bar = bar_type(range(first, steps), desc=desc, disable=not progress, mininterval=0.5, file=sys.stdout,
                   initial=first, total=steps)  # fmt: skip
    # Each step's loss, written into one tensor on the device: reading it would wait for the device, and a small
    # tensor kept per step would pin the memory the step freed (the allocator could not give it back: hundreds of MB
    # over a long run on the CPU).
    losses = torch.zeros(max(steps - first, 0), device=device)
    start = time.perf_counter()

    def save(step: int) -> None:
        assert path is not None
        synchronize(device)
        loss = [*history.loss, *losses[: step - first].cpu().tolist()]
        so_far = replace(history, loss=loss, seconds=earlier + time.perf_counter() - start - evaluating)
        scaler = _SCALERS.get(optimizer)
        save_checkpoint(path, {
            "step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict() if scaler is not None else {}, "history": asdict(so_far),
            "random": random_state(), "config": asdict(config), "kept": dict(keep or {}),
            "architecture": architecture(model),
        })  # fmt: skip

    with in_mode(model, training=True):
        for step in bar:
            lr = config.lr * lr_factor(step, config)
            for group in optimizer.param_groups:
                group["lr"] = lr
            try:
                batch = tuple(_to_device(t, device) for t in next(batches))
            except StopIteration:
                raise ValueError(
                    f"the batches ran out after {step} of {steps} steps: pass an endless stream (random_windows, "
                    "random_batches) or fewer steps"
                ) from None
            if GPU_DRY_RUN.is_on():
                batch = tuple(t[:DRY_RUN_ROWS] for t in batch)
            loss = train_step(model, optimizer, loss_fn, batch, config)
            history.steps.append(step + 1)
            history.lr.append(lr)
            losses[step - first] = loss
            last = step + 1 == steps
            if eval_fn is not None and ((eval_every and (step + 1) % eval_every == 0) or last):
                synchronize(device)
                paused = time.perf_counter()
                history.eval_seconds.append(earlier + paused - start - evaluating)
                with eval_mode(model), torch.no_grad():
                    shown = eval_fn(model)
                history.evals.append((step + 1, shown))
                evaluating += time.perf_counter() - paused
            if step % 50 == 0 or last:  # reading the loss waits for the device: not every step
                bar.set_postfix({"loss": f"{float(loss):.3f}", **{k: f"{v:.3g}" for k, v in shown.items()}})
            due = (checkpoint_every and (step + 1) % checkpoint_every == 0) or last
            if path is not None and due and (not dist.is_initialized() or dist.get_rank() == 0):
                paused = time.perf_counter()
                save(step + 1)
                evaluating += time.perf_counter() - paused  # writing a checkpoint is not training time either
        synchronize(device)
        history.seconds = earlier + time.perf_counter() - start - evaluating
    history.loss = [*history.loss, *losses.cpu().tolist()]
    return history
