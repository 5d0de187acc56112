"""Every environment variable the course reads, in one table (the README prints the same table).

The package reads them through these objects only (``DEVICE.value()``); the notebooks read
``COURSE_SKIP_TRAINING`` themselves, in plain sight. Imports nothing of the package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["SETTINGS", "Setting"]


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, the values it takes, and what it changes."""

    name: str
    values: str
    meaning: str

    def value(self) -> str | None:
        """The variable's value, or None when it is unset or empty."""
        return os.environ.get(self.name) or None

    def is_on(self) -> bool:
        """True when the variable is 1, true or yes (any case)."""
        return (self.value() or "").lower() in {"1", "true", "yes"}


DEVICE = Setting(
    "COURSE_DEVICE", "cpu, cuda, mps", "the device get_device() returns; unset: a GPU if there is one, else the CPU"
)
SKIP_TRAINING = Setting(
    "COURSE_SKIP_TRAINING",
    "1",
    "notebooks 06-08 skip their training (SKIP_TRAINING = True): 06 and 07 load the shipped weights, 08 evaluates its "
    "shipped translator only",
)
PROGRESS = Setting("COURSE_PROGRESS", "text", "training shows plain-text progress bars instead of notebook widgets")
OFFLINE_CHARTS = Setting(
    "COURSE_OFFLINE_CHARTS", "1", "Altair charts are drawn without internet, as use_offline_charts() does"
)
DATA_DIR = Setting(
    "COURSE_DATA_DIR",
    "a folder",
    "where downloaded data is kept; unset: data/ in a checkout, else ~/.cache/transformers-from-scratch",
)
DATA_MIRROR = Setting(
    "COURSE_DATA_MIRROR", "a folder", "offline copies of the data files, used (after their checksum) before downloading"
)
GPU_DRY_RUN = Setting(
    "COURSE_GPU_DRY_RUN",
    "1",
    "the CPU takes the notebooks' GPU code paths (the GPU recipes, autocast in COURSE_AMP_DTYPE, else bfloat16), 3 "
    "training steps each, on 2 rows of each batch, and 8 new tokens per generation (course_utils.dry_run)",
)
AMP_DTYPE = Setting(
    "COURSE_AMP_DTYPE",
    "bfloat16, float16",
    "the dtype train computes in on a GPU (and in a GPU dry run); float16 (with a gradient scaler) is what a GPU without "
    "bfloat16, such as Colab's T4, gets; unset: bfloat16 where the GPU has it, else float16 (float32 before compute "
    "capability 7)",
)
CHECKPOINTS = Setting(
    "COURSE_CHECKPOINTS",
    "a folder, or off",
    "where notebooks 07 and 08 keep their training checkpoints (checkpoint_path); unset: Google Drive on Colab where it "
    "is mounted, else checkpoints/ beside the notebook; off: none",
)
SETTINGS = (
    DEVICE, SKIP_TRAINING, PROGRESS, OFFLINE_CHARTS, DATA_DIR, DATA_MIRROR, GPU_DRY_RUN, AMP_DTYPE, CHECKPOINTS,
)  # fmt: skip
