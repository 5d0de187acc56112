"""Multi30k: the raw files, fetched and checked like every download, read as aligned sentence pairs."""

import gzip
import hashlib
import io
import os

import pytest

from course_utils.data import text as text_module
from course_utils.data.multi30k import MULTI30K, SPLITS, load_multi30k
from course_utils.data.text import DataFile, fetch

needs_mirror = pytest.mark.skipif(
    not os.environ.get("COURSE_DATA_MIRROR"), reason="needs the Multi30k mirror (CI sets COURSE_DATA_MIRROR)"
)


@needs_mirror
def test_the_splits_have_their_published_sizes_and_stay_aligned():
    sizes = {split: len(load_multi30k(split)) for split in SPLITS}
    assert sizes == {"train": 29_000, "val": 1_014, "test": 1_000, "test_2017": 1_000}
    german, english = load_multi30k("test")[0]
    assert german.startswith("Ein Mann mit einem orangefarbenen Hut") and english.startswith("A man in an orange hat")


def test_each_file_is_fetched_from_the_datasets_own_repository_into_its_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_DATA_MIRROR", raising=False)
    assert all(file.url.startswith("https://raw.githubusercontent.com/multi30k/dataset/") for file in MULTI30K.values())
    payload = gzip.compress(b"Ein Hund.\nZwei Katzen.\n")
    file = DataFile("multi30k/tiny.de.gz", "https://example.invalid/tiny.de.gz", hashlib.sha256(payload).hexdigest(),
                    len(payload))  # fmt: skip
    monkeypatch.setattr(text_module.urllib.request, "urlopen", lambda url, timeout: io.BytesIO(payload))
    path = fetch(file, tmp_path)
    assert path == tmp_path / "multi30k" / "tiny.de.gz" and os.listdir(path.parent) == ["tiny.de.gz"]


def test_an_unknown_split_names_the_known_ones():
    with pytest.raises(ValueError, match="train, val, test, test_2017"):
        load_multi30k("dev")
