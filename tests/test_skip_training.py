"""With SKIP_TRAINING, chapters 06 and 07 load the shipped weights and run top to bottom without training."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["06_transformer", "07_gpt"])
def test_notebook_runs_on_shipped_weights(name, monkeypatch):
    monkeypatch.setenv("COURSE_SKIP_TRAINING", "1")
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT / "notebooks")}}
    ).execute()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "skipping training" in printed and "loaded " in printed
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
