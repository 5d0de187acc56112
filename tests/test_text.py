"""The data loader never needs the internet in tests: downloads are simulated."""

import hashlib
import io
import os
import re
import urllib.error
from pathlib import Path

import pytest
import torch

from course_utils import CharTokenizer, load_tiny_shakespeare, random_windows, split_ids
from course_utils.data import text as text_module
from course_utils.data.text import TINY_SHAKESPEARE, DataFile, fetch

CONTENT = b"To be, or not to be, that is the question.\n"
FAKE = DataFile("fake.txt", "https://example.invalid/fake.txt", hashlib.sha256(CONTENT).hexdigest(), len(CONTENT))


@pytest.fixture
def no_mirror(monkeypatch):
    monkeypatch.delenv("COURSE_DATA_MIRROR", raising=False)


def serve(monkeypatch, payload=None, error=None):
    calls = []

    def urlopen(url, timeout):
        calls.append(url)
        if error:
            raise error
        return io.BytesIO(payload)

    monkeypatch.setattr(text_module.urllib.request, "urlopen", urlopen)
    return calls


def test_a_download_is_verified_then_moved_into_place(tmp_path, monkeypatch, no_mirror):
    calls = serve(monkeypatch, CONTENT)
    path = fetch(FAKE, tmp_path)
    assert path.read_bytes() == CONTENT and calls == [FAKE.url]
    assert os.listdir(tmp_path) == ["fake.txt"]  # no temporary file left behind
    assert fetch(FAKE, tmp_path) == path and len(calls) == 1  # the second call reads the local copy


def test_a_corrupted_download_is_refused_and_leaves_nothing(tmp_path, monkeypatch, no_mirror):
    serve(monkeypatch, b"<html>rate limited</html>")
    with pytest.raises(ValueError, match="does not match the expected SHA-256"):
        fetch(FAKE, tmp_path)
    assert os.listdir(tmp_path) == []


def test_offline_the_error_says_where_to_put_the_file(tmp_path, monkeypatch, no_mirror):
    serve(monkeypatch, error=urllib.error.URLError("no route to host"))
    with pytest.raises(RuntimeError, match=r"save it as .*fake\.txt.*COURSE_DATA_MIRROR"):
        fetch(FAKE, tmp_path)


def test_a_mirror_folder_is_used_without_downloading(tmp_path, monkeypatch):
    (tmp_path / "fake.txt").write_bytes(CONTENT)
    monkeypatch.setenv("COURSE_DATA_MIRROR", str(tmp_path))
    calls = serve(monkeypatch, b"")
    assert fetch(FAKE, tmp_path / "elsewhere") == tmp_path / "fake.txt" and calls == []
    (tmp_path / "fake.txt").write_bytes(CONTENT + b"tampered")
    with pytest.raises(ValueError, match="COURSE_DATA_MIRROR"):
        fetch(FAKE)


@pytest.mark.skipif(not os.environ.get("COURSE_DATA_MIRROR"), reason="needs the Tiny Shakespeare mirror (CI sets it)")
def test_tiny_shakespeare_has_its_65_characters_and_splits_90_10():
    text = load_tiny_shakespeare()
    assert len(text) == TINY_SHAKESPEARE.size and text.startswith("First Citizen:")
    tok = CharTokenizer(text, specials=False)
    assert tok.vocab_size == 65
    train, val = split_ids(text, tok)
    assert len(train) == int(0.9 * len(text)) and len(train) + len(val) == len(text)


def test_random_windows_are_shifted_by_one():
    data = torch.arange(100)
    x, y = next(random_windows(data, block_size=8, batch_size=4, seed=0))
    assert x.shape == y.shape == (4, 8)
    assert torch.equal(y, x + 1)
    with pytest.raises(ValueError, match="longer than block_size"):
        next(random_windows(data[:8], block_size=8, batch_size=1))
    with pytest.raises(ValueError, match="batch_size >= 1"):  # no empty batch
        next(random_windows(data, block_size=8, batch_size=0))
    with pytest.raises(ValueError, match=r"one sequence of token ids \(N,\); got shape \(10, 10\)"):
        next(random_windows(data.view(10, 10), block_size=4, batch_size=2))  # rows would be windows of rows


def test_split_ids_refuses_a_fraction_that_leaves_no_split():
    tok = CharTokenizer("ab", specials=False)
    for bad in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="val_fraction is the share of the text"):
            split_ids("abab" * 5, tok, bad)
    train, val = split_ids("abab" * 5, tok, 0.25)
    assert (len(train), len(val)) == (15, 5)


def test_the_default_data_folder_is_the_repositorys(monkeypatch):
    monkeypatch.delenv("COURSE_DATA_DIR", raising=False)
    assert text_module.default_data_dir() == Path(__file__).resolve().parents[1] / "data"


def test_the_readmes_troubleshooting_quotes_the_messages_students_see(tmp_path, monkeypatch, no_mirror):
    """The README's "When something goes wrong" table names errors by their text: each of the course's own must be
    what the code says, so that a student searching the page for their error finds it."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("### When something goes wrong", 1)[1].split("\n## ", 1)[0]
    said = re.findall(r"^\| `([^`]+)`", section, re.MULTILINE)
    serve(monkeypatch, error=urllib.error.URLError("no route to host"))
    with pytest.raises(RuntimeError) as offline:
        fetch(FAKE, tmp_path)
    (tmp_path / "fake.txt").write_bytes(b"cut short")
    with pytest.raises(ValueError) as altered:
        fetch(FAKE, tmp_path)
    loop = (Path(__file__).resolve().parents[1] / "course_utils" / "training" / "loop.py").read_text()
    seen = {
        "ModuleNotFoundError": "ModuleNotFoundError: No module named 'course_utils'",  # Python's own words
        "NameError": "NameError: name 'torch' is not defined",
        "RuntimeError": f"RuntimeError: {offline.value}",
        "ValueError": f"ValueError: {altered.value}",
        "training": loop,  # the line train prints once where the GPU has no native bfloat16
    }
    assert [quote.split(":")[0].split()[0] for quote in said] == list(seen)
    for quote, text in zip(said, seen.values(), strict=True):
        for fragment in quote.split("..."):
            assert fragment.strip() in text, (quote, fragment)


def test_one_command_downloads_every_file_the_course_reads(tmp_path, monkeypatch, no_mirror, capsys):
    """`python -m course_utils.data` before going offline: every data file any module defines, each checked, and
    offline a line per file that says what to do, without stopping at the first."""
    import importlib
    import pkgutil

    import course_utils.data as data
    from course_utils.data.download import DATA_FILES, main

    defined = set()
    for info in pkgutil.iter_modules(data.__path__):
        if info.name == "__main__":  # the command itself
            continue
        for value in vars(importlib.import_module(f"course_utils.data.{info.name}")).values():
            found = value.values() if isinstance(value, dict) else value if isinstance(value, list) else [value]
            defined |= {v for v in found if isinstance(v, DataFile)}
    assert defined == set(DATA_FILES) and len(DATA_FILES) == 11  # Tiny Shakespeare, Multi30k's 8, GPT-2's 2
    monkeypatch.setattr("course_utils.data.download.DATA_FILES", [FAKE, FAKE])
    serve(monkeypatch, error=urllib.error.URLError("no route to host"))
    assert main([str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert out.count("Without internet") == 2 and "2 of 2 missing" in out
    calls = serve(monkeypatch, CONTENT)
    assert main([str(tmp_path)]) == 0 and calls == [FAKE.url]  # the second is there already
    assert "the chapters run offline" in capsys.readouterr().out
    assert main(["--help"]) == 2 and "usage" in capsys.readouterr().err
