"""The shipped weights: present, small, safe to load, trained by the notebooks' own recipes, and good."""

import fnmatch
import json
import re
import tomllib
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from course_utils import GPT, PRETRAINED_RECIPES, DateTask, Transformer, estimate_loss, exact_match, load_pretrained
from course_utils.pretrained import CHECKPOINTS

ROOT = Path(__file__).resolve().parents[1]


def test_checkpoints_are_small_and_ship_in_the_wheel():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "course_utils"
    ]
    sizes = {}
    for name in PRETRAINED_RECIPES:
        path = CHECKPOINTS / f"{name}.pt"
        assert path.exists(), f"run `python -m course_utils.build_checkpoints {name}`"
        assert any(fnmatch.fnmatch(f"checkpoints/{path.name}", p) for p in patterns)
        sizes[name] = path.stat().st_size
    assert sum(sizes.values()) < 6_000_000, sizes


@pytest.mark.parametrize("name", PRETRAINED_RECIPES)
def test_checkpoints_hold_only_plain_data(name):
    torch.load(CHECKPOINTS / f"{name}.pt", weights_only=True)  # raises on anything that could run code
    pretrained = load_pretrained(name)
    _, recipe, config = PRETRAINED_RECIPES[name]
    assert pretrained.recipe == recipe and pretrained.train_config == asdict(config)
    assert len(pretrained.history.loss) == config.steps and pretrained.history.seconds > 0
    assert name in pretrained.describe()


def printed_outputs(notebook: str) -> str:
    nb = json.loads((ROOT / "notebooks" / notebook).read_text())
    return "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"])


@pytest.mark.parametrize(
    ("name", "notebook"), [("date_transformer", "06_transformer.ipynb"), ("shakespeare_gpt", "07_gpt.ipynb")]
)
def test_recipes_are_the_ones_the_notebooks_print(name, notebook):
    """The notebook prints its recipe in a strictly compared cell; the shipped weights must come from it."""
    printed = printed_outputs(notebook)
    kind, recipe, config = PRETRAINED_RECIPES[name]
    assert f"{kind}({', '.join(f'{k}={v!r}' for k, v in recipe.items())})" in printed
    assert repr(config) in printed


def test_the_date_transformer_normalises_unseen_dates():
    pretrained = load_pretrained("date_transformer")
    task = DateTask(seed=0)
    model = Transformer(task.src_tokenizer.vocab_size, task.tgt_tokenizer.vocab_size, **pretrained.recipe)
    model.load_state_dict(pretrained.state_dict)
    accuracy, _ = exact_match(model, task.pairs(300, "test", seed=5), task.src_tokenizer, task.tgt_tokenizer)
    assert accuracy >= 0.98
    assert pretrained.metrics["held_out_exact_match"] >= 0.99


def test_the_gpt_writes_shakespeare_like_text():
    from course_utils import CharTokenizer, load_tiny_shakespeare, split_ids

    try:
        text = load_tiny_shakespeare()
    except (OSError, RuntimeError) as error:  # no network and no mirror: nothing to measure against
        pytest.skip(f"Tiny Shakespeare unavailable: {error}")
    pretrained = load_pretrained("shakespeare_gpt")
    tokenizer = CharTokenizer(text, specials=False)
    r = pretrained.recipe
    model = GPT(tokenizer.vocab_size, r["block_size"], r["d_model"], r["n_heads"], r["n_layers"], bias=False)
    model.load_state_dict(pretrained.state_dict)
    _, val_ids = split_ids(text, tokenizer)
    assert estimate_loss(model, {"val": val_ids}, r["batch_size"], iters=10)["val"] < 2.2
    assert len(pretrained.samples) == len(pretrained.history.evals) >= 2
    assert re.search(r"\n[A-Z][A-Za-z ]+:\n", pretrained.samples[-1]), "a speaker's name, as in a play"


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="date_transformer"):
        load_pretrained("bert")
