import itertools

import pytest

from course_utils.data.bpe import SPACE, SPECIALS, BPETokenizer, learn_bpe, learn_bpe_fast, merge_pair, pretokenize

CORPUS = [
    "A man in an orange hat starring at something.",
    "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
    "Two young, White males are outside near many bushes.",
    "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    "A little girl climbing into a wooden playhouse.",
    "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.",
    "aaaa aaa aa a banana bandana  two  spaces, a tab\there and (brackets)!",
    "Several men in hard hats are operating a giant pulley system.",
    "Mehrere Männer mit Schutzhelmen bedienen ein Antriebsradsystem.",
]


def test_pieces_keep_their_spaces_and_join_back_to_the_text() -> None:
    assert pretokenize("A dog, run.") == ["▁A", "▁dog", ",", "▁run", "."]
    for text in [*CORPUS, " leading", "trailing ", "", "  "]:
        assert "".join(pretokenize(text)).replace("▁", " ") == " " + text


def test_pretokenize_refuses_the_space_marker() -> None:
    with pytest.raises(ValueError, match="U\\+2581"):
        pretokenize("a ▁ b")


def test_merge_pair_merges_left_to_right_without_overlap() -> None:
    assert merge_pair(list("aaa"), ("a", "a")) == ["aa", "a"]
    assert merge_pair(list("abab"), ("a", "b")) == ["ab", "ab"]
    assert merge_pair(["x", "y"], ("y", "x")) == ["x", "y"]


@pytest.mark.parametrize("vocab_size", [60, 100, 200, 400])
@pytest.mark.parametrize("min_frequency", [1, 2, 3])
def test_learns_the_same_merges_as_hugging_face_tokenizers(vocab_size: int, min_frequency: int) -> None:
    ours = learn_bpe(CORPUS * 3 + CORPUS[:4], vocab_size, min_frequency)
    theirs = learn_bpe_fast(CORPUS * 3 + CORPUS[:4], vocab_size, min_frequency)
    assert ours.merges == theirs.merges and ours.itos == theirs.itos
    assert len(ours.merges) > 0


def test_encodes_as_hugging_face_tokenizers_does() -> None:
    from tokenizers import Tokenizer

    tok = learn_bpe_fast(CORPUS, 200, 1)
    hf = Tokenizer.from_str(_hugging_face_json(tok))
    for text in [*CORPUS, "Ein Mann in einem Spielhaus.", "unseen words: Zebrastreifen"]:
        assert tok.encode(text) == hf.encode(text).ids


def _hugging_face_json(tok: BPETokenizer) -> str:
    """The Hugging Face tokenizer with our pieces and our vocabulary and merges."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

    from course_utils.data.bpe import PIECE, SPACE

    hf = Tokenizer(models.BPE(vocab=dict(tok.stoi), merges=list(tok.merges), unk_token="<unk>"))
    hf.normalizer = normalizers.Sequence([normalizers.Replace(" ", SPACE), normalizers.Prepend(SPACE)])
    hf.pre_tokenizer = pre_tokenizers.Split(Regex(PIECE.pattern), behavior="isolated")
    return hf.to_str()


def test_round_trip_is_exact_and_unknown_characters_become_unk() -> None:
    tok = learn_bpe(CORPUS, 120)
    for text in CORPUS:
        assert tok.decode([*tok.encode(text, bos=True, eos=True), tok.pad_id]) == text
    ids = tok.encode("Ein Zebra ✓")
    assert tok.unk_id in ids and "<unk>" in tok.decode(ids)


@pytest.mark.parametrize("text", [*CORPUS, "a dog, a cat.", " a space first", "(brackets)!"])
def test_every_prefix_and_every_token_decodes_to_its_own_piece_of_the_text(text: str) -> None:
    """Text streamed as it is generated: each prefix of the ids decodes to the start of the text, each longer one
    extends it, and one token alone decodes to its own characters (the space before a word apart)."""
    tok = learn_bpe(CORPUS, 120)
    ids = tok.encode(text)
    prefixes = [tok.decode(ids[:k]) for k in range(len(ids) + 1)]
    assert prefixes[0] == "" and prefixes[-1] == text
    for shorter, longer in itertools.pairwise(prefixes):
        assert text.startswith(longer) and longer.startswith(shorter)
    for i in ids:
        assert tok.decode([i]) == tok.itos[i].replace(SPACE, " ").removeprefix(" ")


def test_a_slice_from_the_middle_keeps_its_first_character() -> None:
    tok = learn_bpe([*CORPUS, *["a dog, a cat."] * 3], 160)
    ids = tok.encode("a dog, a cat.")
    assert [tok.itos[i] for i in ids[:3]] == [f"{SPACE}a", f"{SPACE}dog", ","]
    assert tok.decode(ids[2:]) == ", a cat." and tok.decode(ids[1:]) == "dog, a cat."
    assert [tok.decode([i]) for i in ids] == ["a", "dog", ",", "a", "cat", "."]


def test_ids_follow_specials_then_characters_then_merges() -> None:
    tok = learn_bpe(CORPUS, 100)
    assert tok.itos[: len(SPECIALS)] == list(SPECIALS)
    chars = tok.itos[len(SPECIALS) : len(SPECIALS) + len(tok.alphabet)]
    assert chars == sorted(chars) and all(len(c) == 1 for c in chars)
    first, second = tok.merges[:2]
    assert tok.stoi[first[0] + first[1]] < tok.stoi[second[0] + second[1]]


def test_segment_applies_merges_in_learned_order() -> None:
    tok = BPETokenizer("abc", [("b", "c"), ("a", "b"), ("a", "bc")])
    assert tok.segment("abc") == ["abc"]  # b+c first (rank 0), then a+bc; a+b (rank 1) never gets its chance
    tok = BPETokenizer("abc", [("a", "b"), ("b", "c"), ("a", "bc")])
    assert tok.segment("abc") == ["ab", "c"]


def test_an_id_outside_the_vocabulary_is_named() -> None:
    tok = BPETokenizer("abc", [("a", "b")])  # the specials, a, b, c and ab
    with pytest.raises(ValueError, match=f"id {len(tok.itos)} is not in this tokenizer's vocabulary"):
        tok.decode([len(SPECIALS), len(tok.itos)])
    with pytest.raises(ValueError, match="id -1 is not"):
        tok.decode([-1])


def test_saved_tokenizer_rebuilds_the_same() -> None:
    tok = learn_bpe(CORPUS, 150)
    again = BPETokenizer.from_dict(tok.to_dict())
    assert again.itos == tok.itos and all(again.encode(t) == tok.encode(t) for t in CORPUS)


def test_merges_must_build_on_known_symbols() -> None:
    with pytest.raises(ValueError, match="neither the alphabet nor an earlier merge"):
        BPETokenizer("ab", [("ab", "a")])
