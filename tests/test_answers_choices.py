"""The multiple-choice exercises (every chapter's predictions, chapter 09's four mysteries) against students'
answers: the answer written the ways students write a letter passes; every other letter, something that is not a
choice, a sentence, a number, and a diagnosis function that breaks each fail with a message that says why."""

import pytest
from helpers import todo, verdict

from course_utils.checks import check_diagnosis, check_prediction
from course_utils.checks.bug_lab import MYSTERIES
from course_utils.checks.predictions import QUESTIONS


def right_forms(letter):
    """A letter as students write it: lower case, upper case, in parentheses, with spaces."""
    return [letter, letter.upper(), f"({letter})", f" {letter} "]


@pytest.mark.parametrize("question", sorted(QUESTIONS))
def test_a_prediction_is_right_however_the_letter_is_written(question, capsys):
    for answer in right_forms(QUESTIONS[question].answer):
        ok, out = verdict(lambda a, answer=answer: check_prediction(question, answer), None, capsys)
        assert ok and out.startswith("✅ right"), (answer, out)


def _wrong_answers(q):
    """Every other letter, with the explanation of its misconception; then answers that are no letter at all."""
    letters = [(c, f"({c}) {q.choices[c]}") for c in q.choices if c != q.answer]
    return [
        *letters,
        ("z", "is not one of the choices"),
        ("b and c", "is not one of the choices"),
        (2, "is not one of the choices"),
        ("", "is not one of the choices"),
    ]


@pytest.mark.parametrize("question", sorted(QUESTIONS))
def test_every_wrong_prediction_is_explained(question, capsys):
    q = QUESTIONS[question]
    wrong = _wrong_answers(q)
    assert len(wrong) >= 5
    for answer, words in wrong:
        ok, out = verdict(lambda a, answer=answer: check_prediction(question, answer), None, capsys)
        assert not ok and words in out, (answer, out)
        if len(str(answer)) == 1 and answer in q.choices:  # a letter: its own explanation, no other letter's
            assert q.why[answer] in out and "Run the next cell" in out
    ok, out = verdict(lambda a: check_prediction(question, None), None, capsys)
    assert not ok and "make your prediction first" in out


@pytest.mark.parametrize("name", sorted(MYSTERIES))
def test_a_diagnosis_is_right_as_a_letter_or_as_a_function_returning_it(name, capsys):
    answer = MYSTERIES[name].answer
    forms = [*right_forms(answer), lambda: answer, lambda: answer.upper()]
    for form in forms:
        assert check_diagnosis(form, name), capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(MYSTERIES))
def test_a_wrong_diagnosis_is_explained(name, capsys):
    m = MYSTERIES[name]

    def crashes():
        raise ValueError("the probe needs a model")

    wrong = [*_wrong_answers(m), (crashes, "raised ValueError: the probe needs a model"), (todo, "not written yet")]
    assert len(wrong) >= 5
    for answer, words in wrong:
        assert not check_diagnosis(answer, name)
        out = capsys.readouterr().out
        assert words in out, (answer, out)
