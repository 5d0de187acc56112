"""The checkers of ``course_utils.checks.predictions``, the predictions (every chapter), against students' answers:
right answers written in other styles pass, each classic mistake fails with a message that names it, and an
unwritten stub is reported as not attempted.
"""

import pytest
from helpers import verdict, wrong_choices

from course_utils.checks import check_prediction
from course_utils.checks.predictions import QUESTIONS


def right_forms(letter):
    """A letter as students write it: lower case, upper case, in parentheses, with spaces."""
    return [letter, letter.upper(), f"({letter})", f" {letter} "]


@pytest.mark.parametrize("question", sorted(QUESTIONS))
def test_a_prediction_is_right_however_the_letter_is_written(question, capsys):
    for answer in right_forms(QUESTIONS[question].answer):
        ok, out = verdict(lambda a, answer=answer: check_prediction(question, answer), None, capsys)
        assert ok and out.startswith("✅ right"), (answer, out)


@pytest.mark.parametrize("question", sorted(QUESTIONS))
def test_every_wrong_prediction_is_explained(question, capsys):
    q = QUESTIONS[question]
    wrong = wrong_choices(q)
    assert len(wrong) >= 5
    for answer, words in wrong:
        ok, out = verdict(lambda a, answer=answer: check_prediction(question, answer), None, capsys)
        assert not ok and words in out, (answer, out)
        if len(str(answer)) == 1 and answer in q.choices:  # a letter: its own explanation, no other letter's
            assert q.why[answer] in out and f"Run {q.measured_by} " in out  # where to look next
    ok, out = verdict(lambda a: check_prediction(question, None), None, capsys)
    assert not ok and "make your prediction first" in out


def test_a_prediction_is_graded_as_participation(capsys):
    """A letter, right or wrong, is 'answered' (its explanations teach the answer: a retry would predict nothing);
    the verdict in the notebook still says which it was."""
    question = "unscaled-scores"
    q = QUESTIONS[question]
    wrong = next(letter for letter in q.choices if letter != q.answer)
    right_verdict, wrong_verdict = check_prediction(question, q.answer), check_prediction(question, wrong.upper())
    assert right_verdict.status == wrong_verdict.status == "answered"
    assert right_verdict and not wrong_verdict
    assert check_prediction(question, "z").status == "fail"
    assert check_prediction(question, None).status == "not attempted"
    capsys.readouterr()
