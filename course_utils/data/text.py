"""Real text for language models: Tiny Shakespeare, downloaded once and checked, and random windows.

Shape letters: B batch, T block size (context length), N characters in a split.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ..settings import DATA_DIR, DATA_MIRROR
from .tokenizers import CharTokenizer

__all__ = ["TINY_SHAKESPEARE", "DataFile", "fetch", "load_tiny_shakespeare", "random_windows", "split_ids"]


@dataclass(frozen=True)
class DataFile:
    """A file the course downloads on first use: where from, and what it must be."""

    name: str
    url: str
    sha256: str
    size: int


TINY_SHAKESPEARE = DataFile(
    name="tinyshakespeare.txt",
    url="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
    sha256="86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    size=1_115_394,
)


def default_data_dir() -> Path:
    """``$COURSE_DATA_DIR``, else the repository's ``data/`` folder, else ``~/.cache/transformers-from-scratch``."""
    folder = DATA_DIR.value()
    if folder:
        return Path(folder)
    repository_data = Path(__file__).resolve().parents[2] / "data"
    if (repository_data / "README.md").exists():  # a checkout of the course
        return repository_data
    return Path.home() / ".cache" / "transformers-from-scratch"


def _verified(path: Path, expected: DataFile) -> bool:
    return path.stat().st_size == expected.size and hashlib.sha256(path.read_bytes()).hexdigest() == expected.sha256


def fetch(file: DataFile, data_dir: str | Path | None = None) -> Path:
    """The local path of ``file``: from the mirror folder ``$COURSE_DATA_MIRROR`` if it holds it, else from
    ``data_dir``, downloading it there first if needed. Every copy is checked against its SHA-256; a
    download is written to a temporary file and moved into place only once verified.
    """
    mirror = DATA_MIRROR.value()
    if mirror and (Path(mirror) / file.name).exists():
        path = Path(mirror) / file.name
        if not _verified(path, file):
            raise ValueError(f"{path} (from COURSE_DATA_MIRROR) does not match the expected SHA-256 {file.sha256}")
        return path
    target = Path(data_dir) if data_dir is not None else default_data_dir()
    path = target / file.name
    if path.exists():
        if _verified(path, file):
            return path
        raise ValueError(f"{path} is not the expected file (size or SHA-256 differ): delete it to download it again")
    path.parent.mkdir(parents=True, exist_ok=True)  # a name may hold a folder: "multi30k/train.de.gz"
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out, urllib.request.urlopen(file.url, timeout=60) as response:
            out.write(response.read())
        if not _verified(Path(temporary), file):
            raise ValueError(f"the download from {file.url} does not match the expected SHA-256 {file.sha256}")
        os.replace(temporary, path)  # atomic: the file is either absent or complete
    except (urllib.error.URLError, OSError) as error:
        raise RuntimeError(
            f"could not download {file.name} from {file.url} ({error}). Without internet, download it "
            f"elsewhere and save it as {path}, or set COURSE_DATA_MIRROR to a folder that contains it."
        ) from None
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return path


def load_tiny_shakespeare(data_dir: str | Path | None = None) -> str:
    """The Tiny Shakespeare corpus (1,115,394 characters of Shakespeare's plays, public domain)."""
    return fetch(TINY_SHAKESPEARE, data_dir).read_text(encoding="utf-8")


def split_ids(text: str, tokenizer: CharTokenizer, val_fraction: float = 0.1) -> tuple[Tensor, Tensor]:
    """Encode ``text`` and split it once: the first 90% for training, the last 10% for validation."""
    if not 0 < val_fraction < 1:
        raise ValueError(
            f"val_fraction is the share of the text kept for validation, between 0 and 1; got {val_fraction}"
        )
    ids = torch.tensor(tokenizer.encode(text), dtype=torch.long)  # (N,)
    n_train = int(len(ids) * (1 - val_fraction))
    return ids[:n_train], ids[n_train:]


def random_windows(data: Tensor, block_size: int, batch_size: int, seed: int = 0) -> Iterator[tuple[Tensor, Tensor]]:
    """Endless batches of random windows: inputs ``x`` ``(B, T)`` and targets ``y = x`` shifted by one."""
    if data.dim() != 1:
        raise ValueError(f"data must be one sequence of token ids (N,); got shape {tuple(data.shape)}: flatten it")
    if block_size < 1 or batch_size < 1:
        raise ValueError(f"need block_size >= 1 and batch_size >= 1; got {block_size}, {batch_size}")
    if len(data) <= block_size:
        raise ValueError(f"the data ({len(data)} tokens) must be longer than block_size={block_size}")
    generator = torch.Generator().manual_seed(seed)
    offsets = torch.arange(block_size + 1, device=data.device)
    while True:  # a CPU generator draws the starts; the windows are cut where the data lives
        starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator, device="cpu").to(data.device)
        windows = data[starts[:, None] + offsets]  # (B, T + 1)
        yield windows[:, :-1], windows[:, 1:]
