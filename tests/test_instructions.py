"""The instruction data (``course_utils.data.instructions``): right answers, held-out inputs and phrasings kept
apart, the same examples for the same seed."""

from __future__ import annotations

import re
from datetime import date

import pytest

from course_utils.data import DateTask
from course_utils.data.instructions import PHRASINGS, instruction_pairs


def _input(item) -> str:
    """The input the phrasing wrapped: the prompt minus the phrasing's own words."""
    before, after = PHRASINGS[item.task][item.phrasing].split("{x}")
    return item.prompt.removeprefix(before).removesuffix(after)


def test_every_response_is_the_right_answer():
    for item in instruction_pairs(200, seed=3):
        words = _input(item).split()
        expected = {
            "reverse": " ".join(reversed(words)),
            "sort": " ".join(sorted(words)),
            "count": str(len(words)),
            "last": words[-1],
        }
        if item.task == "date":
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", item.response) and date.fromisoformat(item.response)
        else:
            assert item.response == expected[item.task] and 3 <= len(words) <= 5, item


def test_held_out_phrasings_and_dates_never_occur_in_training():
    train = instruction_pairs(500, seed=0)
    held = instruction_pairs(200, split="test", phrasings="held_out", seed=1)
    assert {(i.task, i.phrasing) for i in train}.isdisjoint({(i.task, i.phrasing) for i in held})
    assert all(i.phrasing == len(PHRASINGS[i.task]) - 1 for i in held)
    test_dates = set(map(str, DateTask(seed=0).test_dates))
    assert not any(i.response in test_dates for i in train if i.task == "date")
    assert all(i.response in test_dates for i in held if i.task == "date")
    assert [i.task for i in train[:5]] == list(PHRASINGS)  # tasks in turn


def test_the_same_seed_gives_the_same_examples_and_bad_arguments_are_named():
    assert instruction_pairs(20, seed=5) == instruction_pairs(20, seed=5) != instruction_pairs(20, seed=6)
    assert {i.task for i in instruction_pairs(10, tasks=["sort"])} == {"sort"}
    with pytest.raises(ValueError, match=r"unknown tasks \['translate'\]"):
        instruction_pairs(3, tasks=["translate"])
    with pytest.raises(ValueError, match="split must be 'train' or 'test'"):
        instruction_pairs(3, split="val")
