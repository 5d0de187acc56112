"""Every file the course downloads on first use, fetched at once while there is internet, so that every chapter then
runs offline: ``python -m course_utils.data`` (or ``course_utils.download_all()`` in a notebook). Not among them: what
chapter 10's real GPT-2 and chapter 12's section 6 fetch from the Hugging Face hub when they run, and skip offline."""

from __future__ import annotations

import sys
from pathlib import Path

from ..settings import DATA_MIRROR
from .byte_bpe import GPT2_FILES
from .multi30k import MULTI30K
from .text import TINY_SHAKESPEARE, DataFile, default_data_dir, fetch

__all__ = ["DATA_FILES", "download_all", "main"]

# chapter 07 on (Tiny Shakespeare), 08 (Multi30k, every split), 12 (GPT-2's tokenizer files)
DATA_FILES: list[DataFile] = [TINY_SHAKESPEARE, *MULTI30K.values(), *GPT2_FILES.values()]


def download_all(data_dir: str | Path | None = None) -> list[Path]:
    """Fetch every file in ``DATA_FILES`` that is not there yet (each checked against its SHA-256), and return where
    each one is: in ``data_dir`` (default: the course's data folder), or in ``$COURSE_DATA_MIRROR`` if it holds it."""
    return [fetch(file, data_dir) for file in DATA_FILES]


def main(argv: list[str] | None = None) -> int:
    """``python -m course_utils.data [FOLDER]``: download every data file, one line each; 1 if one could not be."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or any(a.startswith("-") for a in args):
        print("usage: python -m course_utils.data [FOLDER]  (default: the course's data folder)", file=sys.stderr)
        return 2
    folder = args[0] if args else None
    mirror = DATA_MIRROR.value()
    print(f"the course's data, into {Path(folder) if folder else default_data_dir()}"
          + (f" (what the mirror {mirror} holds is read from there)" if mirror else "") + ":")  # fmt: skip
    failed = 0
    for file in DATA_FILES:
        try:
            path = fetch(file, folder)
        except (RuntimeError, ValueError) as error:  # offline, or a file cut short: say so and go on
            print(f"  {file.name}: {error}")
            failed += 1
            continue
        print(f"  {file.name}: {path.stat().st_size:,} bytes, checked, at {path}")
    print("every file is here: the chapters run offline" if not failed else f"{failed} of {len(DATA_FILES)} missing")
    return 1 if failed else 0
