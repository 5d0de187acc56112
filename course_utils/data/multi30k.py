"""Multi30k (Elliott et al., 2016): German and English descriptions of Flickr30k images, the classic small
corpus for translation (WMT16 multimodal task 1): 29,000 training, 1,014 validation and 1,000 test pairs.

The raw files come from the dataset's own repository on first use, each checked against its SHA-256
(``course_utils.data.text.fetch``; ``$COURSE_DATA_MIRROR`` points at an offline copy).
"""

from __future__ import annotations

import gzip
from pathlib import Path

from .text import DataFile, fetch

__all__ = ["MULTI30K", "SPLITS", "load_multi30k"]

_RAW = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
SPLITS = {"train": "train", "val": "val", "test": "test_2016_flickr", "test_2017": "test_2017_flickr"}
MULTI30K = {
    (split, language): DataFile(f"multi30k/{stem}.{language}.gz", f"{_RAW}{stem}.{language}.gz", sha256, size)
    for split, language, stem, sha256, size in [
        ("train", "de", "train", "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6", 637_044),
        ("train", "en", "train", "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f", 568_929),
        ("val", "de", "val", "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a", 24_681),
        ("val", "en", "val", "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28", 21_650),
        ("test", "de", "test_2016_flickr", "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8", 22_890),
        ("test", "en", "test_2016_flickr", "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9", 21_077),
        ("test_2017", "de", "test_2017_flickr", "a2c89666db00c495cd8513b9d708d5a3acc205d7de312ef2bf5fb7ebc1540aee", 21_471),
        ("test_2017", "en", "test_2017_flickr", "76a444ee25172e72695cddb13ae4a3bda59430617be88e0bb46b60504f054074", 19_138),
    ]
}  # fmt: skip


def _lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().rstrip("\n").split("\n")


def load_multi30k(split: str = "train", data_dir: str | Path | None = None) -> list[tuple[str, str]]:
    """The (German, English) sentence pairs of one split: ``"train"`` (29,000), ``"val"`` (1,014), ``"test"``
    (the 2016 Flickr test set, 1,000) or ``"test_2017"`` (1,000). Sentences are raw text, as published."""
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is not a Multi30k split; choose one of {', '.join(SPLITS)}")
    german = _lines(fetch(MULTI30K[split, "de"], data_dir))
    english = _lines(fetch(MULTI30K[split, "en"], data_dir))
    if len(german) != len(english):
        raise ValueError(f"Multi30k {split}: {len(german)} German lines but {len(english)} English ones")
    return list(zip(german, english))
