"""Training that survives a disconnect: a checkpoint of everything a run needs to go on exactly where it stopped.

A checkpoint holds the model's and the optimizer's state, the gradient scaler's, the step reached, what ``History``
measured so far, every random generator's state (PyTorch's on the CPU and on each GPU, Python's, NumPy's) and the
recipe it was written under. ``train(..., checkpoint=path, checkpoint_every=n)`` writes one every ``n`` steps and
resumes from it when the file is there: on the CPU the resumed run ends with exactly the weights of a run never
stopped (tests/test_checkpoint.py kills one with SIGKILL to show it).

A checkpoint is written atomically: to a temporary file beside it, flushed to the disk, then renamed over the old
one (``os.replace``), so a run killed while writing leaves the previous checkpoint whole.
"""

from __future__ import annotations

import dataclasses
import os
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..settings import CHECKPOINTS, GPU_DRY_RUN

__all__ = [
    "CheckpointMismatch",
    "checkpoint_path",
    "load_checkpoint",
    "random_state",
    "save_checkpoint",
    "set_random_state",
]

FORMAT = 1  # bumped when what a checkpoint holds changes


class CheckpointMismatch(ValueError):
    """A checkpoint that belongs to another run: another recipe or another model. The message says which, and what to
    do (another path, or delete the file to start afresh): a run never silently starts from scratch."""


COLAB_DRIVE = Path("/content/drive/MyDrive")  # where Google Drive appears once mounted in Colab


def checkpoint_path(name: str) -> Path | None:
    """Where a notebook's training run keeps its checkpoint ``name.ckpt``, to pass to ``train(checkpoint=...)``:
    ``$COURSE_CHECKPOINTS`` if set (``off``: None, no checkpoint); on Colab, the course's folder in Google Drive if
    Drive is mounted (``from google.colab import drive; drive.mount("/content/drive")``), which outlives the runtime;
    otherwise ``checkpoints/`` in the current folder, which outlives the kernel. None in a GPU dry run
    (``COURSE_GPU_DRY_RUN``): its few steps on trimmed batches must not become a real run's starting point."""
    if GPU_DRY_RUN.is_on():
        return None
    folder = CHECKPOINTS.value()
    if folder is not None and folder.lower() == "off":
        return None
    if folder is None:
        folder = COLAB_DRIVE / "transformers-from-scratch" if COLAB_DRIVE.is_dir() else Path("checkpoints")
    return Path(folder) / f"{name}.ckpt"


def random_state() -> dict[str, Any]:
    """The state of every random generator a training step draws from."""
    name, keys, position, has_gauss, gauss = np.random.get_state()  # type: ignore[misc]
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(np.asarray(keys, dtype=np.int64)), position, has_gauss, gauss),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_random_state(state: dict[str, Any]) -> None:
    """Put back what ``random_state`` took."""
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    name, keys, position, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), position, has_gauss, gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` to ``path`` atomically: a temporary file in the same folder, synced, then renamed over ``path``.
    A crash at any moment leaves either the old checkpoint or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save({"format": FORMAT, **state}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """What ``save_checkpoint`` wrote. Only tensors, numbers, strings and the containers of these are read back
    (``weights_only``): a checkpoint from elsewhere cannot run code when it is loaded."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated file, another format, an object weights_only refuses...
        raise CheckpointMismatch(
            f"{path} cannot be read as a training checkpoint ({type(e).__name__}: {str(e).splitlines()[0][:120]}): "
            "pass another checkpoint path, or delete it to start afresh"
        ) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointMismatch(f"{path} is not a training checkpoint of this course (format {FORMAT})")
    return state


def architecture(model: nn.Module) -> str:
    """How ``model`` is built, as PyTorch prints it (every submodule with its settings: a ``Dropout(p=0.2)``, a
    ``LayerNorm``'s eps), of the model itself where ``torch.compile`` wrapped it: two runs whose weights have the same
    shapes can still be two models."""
    return repr(getattr(model, "_orig_mod", model))


def refuse_another_run(state: dict[str, Any], config: Any, model: nn.Module, path: Path) -> None:
    """Refuse a checkpoint of another run: another recipe, a model built otherwise (its ``architecture``, where the
    checkpoint records it) or a model with other parameters."""
    theirs, ours = state.get("config", {}), dataclasses.asdict(config)
    different = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
    if different:
        said = ", ".join(f"{k}={theirs.get(k)!r} there, {ours.get(k)!r} here" for k in different)
        raise CheckpointMismatch(
            f"{path} was written by a run with another recipe ({said}): pass another checkpoint path, or delete it "
            "to start afresh"
        )
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    saved = {k: tuple(v.shape) for k, v in state["model"].items()}
    if shapes != saved:
        missing, extra = sorted(set(shapes) - set(saved)), sorted(set(saved) - set(shapes))
        resized = sorted(k for k in set(shapes) & set(saved) if shapes[k] != saved[k])
        raise CheckpointMismatch(
            f"{path} holds another model's weights (missing here: {missing[:3]}, not in this model: {extra[:3]}, "
            f"other shapes: {[(k, saved[k], shapes[k]) for k in resized[:3]]}): pass another checkpoint path, or "
            "delete it to start afresh"
        )
    built, theirs_built = architecture(model), state.get("architecture")
    if theirs_built is not None and theirs_built != built:  # same shapes, another model: a dropout, an eps, ...
        there, here = next(
            (a, b) for a, b in zip([*theirs_built.splitlines(), ""], [*built.splitlines(), ""], strict=False) if a != b
        )
        raise CheckpointMismatch(
            f"{path} was written by a model built differently (there: {there.strip()!r}; here: {here.strip()!r}): "
            "pass another checkpoint path, or delete it to start afresh"
        )
