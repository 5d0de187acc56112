from datetime import date, timedelta

import pytest
import torch

from course_utils import CharTokenizer, DateTask, encode_pairs, random_batches, reversal_pairs
from course_utils.data.dates import DATE_FORMATS


def test_tokenizer_round_trip_with_specials():
    tok = CharTokenizer("hello world")
    ids = tok.encode("hello", bos=True, eos=True)
    assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    assert tok.decode(ids) == "hello"
    assert tok.decode([*ids, tok.pad_id, tok.pad_id]) == "hello"
    assert tok.encode("hez")[-1] == tok.unk_id
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)


def test_tokenizer_without_specials_refuses_unknown_characters():
    tok = CharTokenizer("ab", specials=False)
    assert tok.vocab_size == 2 and tok.encode("ba") == [1, 0]
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tok.encode("abc")
    with pytest.raises(ValueError, match="specials=True"):
        tok.encode("ab", bos=True)


def test_an_id_outside_the_vocabulary_is_named_not_read_from_the_end():
    tok = CharTokenizer("abc")  # ids 0..6
    for bad in ([4, 99], [-1], torch.tensor([4, 7])):
        with pytest.raises(ValueError, match=r"id (99|-1|7) is not in this tokenizer's vocabulary \(ids 0 to 6\)"):
            tok.decode(bad)
    with pytest.raises(ValueError, match="id -2 is not"):
        tok.tokens([4, -2])


def test_encode_batch_pads_on_the_right_and_tokens_label_spaces():
    tok = CharTokenizer("ab ")
    batch = tok.encode_batch(["ab", "a"], eos=True)
    assert batch.tolist() == [[5, 6, 2], [5, 2, 0]]
    assert tok.tokens(tok.encode("a b")) == ["a", "␣", "b"]


def test_date_task_is_reproducible_and_held_out_dates_never_train():
    a, b = DateTask(seed=3), DateTask(seed=3)
    assert a.pairs(50, "test", seed=1) == b.pairs(50, "test", seed=1)
    assert not set(a.train_dates) & set(a.test_dates)
    assert len(a.test_dates) == round(0.1 * (len(a.train_dates) + len(a.test_dates)))
    test_isos = {d.isoformat() for d in a.test_dates}
    assert all(iso in test_isos for _, iso in a.pairs(500, "test"))
    assert not any(iso in test_isos for _, iso in a.pairs(2000, "train"))


def test_pairs_can_name_their_format():
    task = DateTask()
    triples = task.pairs(20, "test", seed=4, with_formats=True)
    assert [t[:2] for t in triples] == task.pairs(20, "test", seed=4)
    assert all(DATE_FORMATS[fmt](date.fromisoformat(iso)) == text for text, iso, fmt in triples)


def test_every_format_is_unambiguous_and_readable_by_the_tokenizer():
    """Every format writes the year in full, so two dates can only read alike within one year: three years,
    a leap year among them, cover every day, month and weekday; the range's first and last days are added."""
    assert all(DATE_FORMATS[fmt](date(1987, 6, 5)).count("1987") == 1 for fmt in DATE_FORMATS)
    task = DateTask()
    seen: dict[str, date] = {}
    days = [date(1950, 1, 1), date(2049, 12, 31)]
    days += [date(1999, 1, 1) + timedelta(days=n) for n in range((date(2002, 1, 1) - date(1999, 1, 1)).days)]
    for d in days:
        for fmt in DATE_FORMATS:
            text, iso = task.render(d, fmt)
            assert iso == d.isoformat()
            assert seen.setdefault(text, d) == d, f"{text!r} is both {seen[text]} and {d}"
    assert task.src_tokenizer.unk_id not in task.src_tokenizer.encode(" ".join(seen))


def test_date_examples_from_the_course():
    task = DateTask()
    sunday = date(2026, 11, 22)
    assert task.render(sunday, "weekday_day_mon")[0] == "Sunday, 22 Nov 2026"
    assert task.render(sunday, "us")[0] == "11/22/2026"
    assert task.render(sunday, "the_day_of")[0] == "the 22 of November, 2026"
    assert task.render(date(2026, 3, 1), "the_ordinal_of")[0] == "the 1st of March, 2026"
    assert task.render(date(2026, 3, 13), "weekday_month_ordinal")[0] == "Friday, March 13th, 2026"


def test_date_task_rejects_bad_arguments():
    with pytest.raises(ValueError, match="unknown date formats"):
        DateTask(formats=["klingon"])
    with pytest.raises(ValueError, match="split"):
        DateTask().pairs(3, "validation")


def test_random_batches_cover_every_row_once_per_epoch():
    x = torch.arange(10)
    batches = random_batches(x, x * 2, batch_size=5, seed=0)
    first, second = next(batches), next(batches)
    assert sorted(torch.cat([first[0], second[0]]).tolist()) == list(range(10))
    assert torch.equal(first[1], first[0] * 2)
    with pytest.raises(ValueError, match="batch_size"):
        next(random_batches(x, batch_size=11))


def test_reversal_pairs_and_encoding():
    pairs = reversal_pairs(3, length=4, seed=0)
    assert all(t == s[::-1] and len(s) == 4 for s, t in pairs)
    for bad in (dict(alphabet=""), dict(length=0)):
        with pytest.raises(ValueError, match="non-empty alphabet and length >= 1"):
            reversal_pairs(2, **bad)
    tok = CharTokenizer("abcdefghij")
    src, tgt = encode_pairs(pairs, tok, tok)
    assert src.shape == (3, 4) and tgt.shape == (3, 6) and torch.all(tgt[:, 0] == tok.bos_id)


def test_both_tokenizers_follow_one_protocol_with_the_same_special_ids():
    from course_utils import BPETokenizer, CharTokenizer
    from course_utils.data import SPECIALS, Tokenizer

    char, bpe = CharTokenizer("abc "), BPETokenizer("abc\u2581", [("a", "b")])  # ▁ marks a space in BPE
    for tok in (char, bpe):
        assert isinstance(tok, Tokenizer)
        assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
        assert tok.itos[:4] == list(SPECIALS) and tok.vocab_size == len(tok)
        ids = [tok.bos_id, *tok.encode("ab c"), tok.unk_id, tok.eos_id, *tok.encode("a"), tok.pad_id]
        # decode: stops at <eos>, skips <pad> and <bos>, shows <unk>
        assert tok.decode(ids) == "ab c<unk>"
        assert tok.decode(torch.tensor(ids)) == "ab c<unk>"
    with pytest.raises(ValueError, match="no <pad>"):
        CharTokenizer("abc", specials=False).pad_id  # noqa: B018
