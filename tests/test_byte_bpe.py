"""GPT-2's byte-level BPE, rebuilt (``course_utils.data.byte_bpe``), against GPT-2's real tokenizer: ``tiktoken``'s
``gpt2`` encoding and Hugging Face's ``GPT2TokenizerFast``, both reading OpenAI's own files offline; the incremental
trainer against chapter 08's readable one and Hugging Face's byte-level trainer."""

import hashlib
import json
import random
import shutil
import tracemalloc

import pytest

from course_utils.data import learn_bpe, load_multi30k, load_tiny_shakespeare
from course_utils.data.byte_bpe import (
    GPT2_FILES,
    GPT2_PATTERN,
    ByteBPE,
    bytes_to_unicode,
    load_gpt2_tokenizer,
    merge_tree,
    read_gpt2_files,
    train_byte_bpe,
)
from course_utils.data.merges import learn_bpe_incremental, learn_merges
from course_utils.data.text import fetch

HARD = [
    "",
    " ",
    "   ",
    "\n",
    "  leading spaces",
    "trailing spaces   ",
    "Hello world",
    "I'll say it's what we're, they've, I'm, he'd: don't!",
    "SHOUTING'S FINE, 'quoted' words' ends",
    "emoji 🤗👍🏽 and flags 🇩🇪 and a family 👨‍👩‍👧",
    "!!!???... ---- ((()))",
    "a\n\n  b\t\tc   \n \n",
    "naïve café, Größe, ĳ, ﬁ ligature",
    "numbers 123 4567 3.14159 1,000,000 ٣٤ Ⅻ",
    "中文文本，日本語のテキスト、한국어",
    "mixed\u00a0non-breaking\u2003em space\u200bzero width",
    "x" * 300,
    " ".join(["supercalifragilisticexpialidocious"] * 5),
]


@pytest.fixture(scope="module")
def gpt2():
    return load_gpt2_tokenizer()


@pytest.fixture(scope="module")
def tiktoken_gpt2(tmp_path_factory):
    """``tiktoken.get_encoding("gpt2")`` itself, offline: its cache holds OpenAI's files under the names it looks
    for (the SHA-1 of their addresses), and it checks their SHA-256 when it reads them."""
    tiktoken = pytest.importorskip("tiktoken")
    cache = tmp_path_factory.mktemp("tiktoken")
    for file in GPT2_FILES.values():
        shutil.copy(fetch(file), cache / hashlib.sha1(file.url.encode()).hexdigest())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        return tiktoken.get_encoding("gpt2")


@pytest.fixture(scope="module")
def hf_gpt2():
    return hugging_face_gpt2()


def hugging_face_gpt2():
    """Hugging Face's GPT-2 tokenizer on the same files (``vocab=``/``merges=`` since transformers 5)."""
    transformers = pytest.importorskip("transformers")
    encoder, merges = fetch(GPT2_FILES["encoder"]), fetch(GPT2_FILES["merges"])
    if _transformers_major() < 5:
        return transformers.GPT2TokenizerFast(vocab_file=str(encoder), merges_file=str(merges))
    vocab = json.loads(encoder.read_text(encoding="utf-8"))
    lines = merges.read_text(encoding="utf-8").split("\n")[1:]  # line 0: "#version: 0.2"
    return transformers.GPT2TokenizerFast(vocab=vocab, merges=[tuple(line.split(" ")) for line in lines if line])


def _transformers_major():
    import transformers

    return int(transformers.__version__.split(".")[0])


def test_the_256_bytes_are_256_printable_characters_in_gpt2s_order(gpt2):
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256)) and len(set(table.values())) == 256
    assert all(c.isprintable() and not c.isspace() for c in table.values())
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("a")] == "a"
    assert [gpt2.encoder[c] for c in sorted(table.values())] == list(range(256))  # GPT-2's first 256 ids


def test_gpt2s_own_files_give_its_vocabulary(gpt2):
    assert gpt2.vocab_size == 50_257 and len(gpt2.ranks) == 50_000
    assert gpt2.special_tokens == {"<|endoftext|>": 50_256}
    assert gpt2.pieces("I'll go!!  now") == ["I", "'ll", " go", "!!", " ", " now"]
    assert gpt2.bpe(gpt2.to_chars(" tokenizer")) == ["Ġtoken", "izer"]


def test_every_token_has_one_merge_tree_each_node_a_token_of_tiktokens_made_after_its_parts(gpt2, tiktoken_gpt2):
    """All 50,000 merged tokens: the tree's leaves spell the token, every node is a token of tiktoken's GPT-2 whose id
    (its rank there) is above both its parts' ids: BPE learned each merge after the merges that made its parts."""
    to_byte = {c: b for b, c in bytes_to_unicode().items()}

    def checked(tree):  # the token a tree makes, its node checked against tiktoken
        if isinstance(tree, str):
            return tree
        left, right = checked(tree[0]), checked(tree[1])
        ids = [tiktoken_gpt2.encode_single_token(bytes(to_byte[c] for c in t)) for t in (left + right, left, right)]
        assert ids[0] > max(ids[1:]), (left, right)
        return left + right

    for a, b in gpt2.ranks:
        assert checked(merge_tree(a + b, gpt2.ranks)) == a + b
    assert merge_tree("Ġthe", gpt2.ranks) == (("Ġ", "t"), ("h", "e"))
    with pytest.raises(ValueError, match="is not a token"):
        merge_tree("Ġtransformers", gpt2.ranks)  # two tokens, 'Ġtransform' and 'ers': no merge makes it


@pytest.mark.parametrize("text", HARD, ids=lambda t: repr(t)[:30])
def test_hard_cases_get_gpt2s_ids_and_decode_back(text, gpt2, tiktoken_gpt2, hf_gpt2):
    ids = gpt2.encode(text)
    assert ids == tiktoken_gpt2.encode(text) == hf_gpt2(text)["input_ids"]
    assert gpt2.decode(ids) == text


@pytest.mark.slow
def test_every_line_of_the_courses_corpora_gets_gpt2s_ids(gpt2, tiktoken_gpt2, hf_gpt2):
    shakespeare = load_tiny_shakespeare()
    corpora = {"Tiny Shakespeare": shakespeare.splitlines(keepends=True)}
    for split in ("train", "val", "test"):
        pairs = load_multi30k(split)
        corpora[f"Multi30k {split} de"] = [de for de, _ in pairs]
        corpora[f"Multi30k {split} en"] = [en for _, en in pairs]
    for name, lines in corpora.items():
        ours = [gpt2.encode(line) for line in lines]
        assert ours == tiktoken_gpt2.encode_ordinary_batch(lines), name
        if "val" in name:  # Hugging Face's is the slowest of the three: one split of Multi30k
            assert ours == hf_gpt2(lines)["input_ids"], name
    assert gpt2.encode(shakespeare) == tiktoken_gpt2.encode_ordinary(shakespeare)  # whole, newlines and all


def test_special_tokens_are_ids_only_where_allowed(gpt2, tiktoken_gpt2):
    text = "the end<|endoftext|>A new start"
    with pytest.raises(ValueError, match=r"allowed_special=\{'<\|endoftext\|>'\}"):
        gpt2.encode(text)
    with pytest.raises(ValueError):  # tiktoken refuses it too
        tiktoken_gpt2.encode(text)
    allowed = gpt2.encode(text, allowed_special="all")
    assert allowed == tiktoken_gpt2.encode(text, allowed_special="all") and 50_256 in allowed
    as_text = gpt2.encode(text, disallowed_special=())
    assert as_text == tiktoken_gpt2.encode(text, disallowed_special=()) and 50_256 not in as_text
    assert gpt2.decode(allowed) == gpt2.decode(as_text) == text
    with pytest.raises(ValueError, match="not special tokens"):
        gpt2.encode(text, allowed_special={"<|im_start|>"})


def test_of_two_special_tokens_that_start_alike_the_longer_wins(gpt2):
    specials = {"<|endoftext|>": 50_256, "<|endoftext|>!": 50_257, "<|end": 50_258}
    tok = ByteBPE({**gpt2.encoder, **specials}, list(gpt2.ranks), specials)
    text = "a<|endoftext|>!b<|endoftext|>c<|end"
    a, b = gpt2.encode("a"), gpt2.encode("b")
    assert tok.encode(text, allowed_special="all") == [*a, 50_257, *b, 50_256, *gpt2.encode("c"), 50_258]
    from tokenizers import AddedToken

    hf = hugging_face_gpt2()  # Hugging Face's added tokens match the longest too (in transformers 5; 4.55, the
    if _transformers_major() < 5:  # Colab's, takes "<|end")
        return
    hf.add_special_tokens({"additional_special_tokens": [AddedToken(s, normalized=False) for s in specials]})
    assert hf(text)["input_ids"] == tok.encode(text, allowed_special="all")
    assert tok.decode(tok.encode(text, allowed_special="all")) == text


@pytest.mark.parametrize("seed", range(6))
def test_a_stream_cut_anywhere_encodes_as_the_whole_text(seed, gpt2):
    rng = random.Random(seed)
    text = "".join(rng.choice([*HARD, "<|endoftext|>", "<|endo", "ftext|>", "\n\n", "  ", "ok"]) for _ in range(60))
    cuts = sorted(rng.sample(range(len(text)), 25))
    chunks = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)])]
    assert list(gpt2.encode_iterable(chunks)) == gpt2.encode(text, disallowed_special=())
    specials = gpt2.encode(text, allowed_special="all")
    assert list(gpt2.encode_iterable(chunks, allowed_special="all")) == specials
    assert list(gpt2.encode_iterable(iter(text))) == gpt2.encode(text, disallowed_special=())  # one character each


@pytest.mark.slow
def test_a_stream_is_encoded_in_memory_that_does_not_grow_with_it(gpt2, tiktoken_gpt2):
    lines = load_tiny_shakespeare().splitlines(keepends=True)
    expected = len(tiktoken_gpt2.encode_ordinary("".join(lines)))
    assert sum(1 for _ in gpt2.encode_iterable(lines)) == expected  # the pieces' cache fills once
    tracemalloc.start()
    try:
        stream = (line for line in lines)  # 1.1 MB of text, never held whole
        count = sum(1 for _ in gpt2.encode_iterable(stream))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == expected
    assert peak < 100_000, f"{peak / 1e6:.1f} MB held while encoding 1.1 MB"


def test_any_slice_of_ids_decodes_to_its_bytes_and_a_stream_to_the_exact_text(gpt2, tiktoken_gpt2):
    text = "Ünïcödé 🤗 streams: 日本語 ok\n"
    ids = gpt2.encode(text)
    assert b"".join(gpt2.decode_bytes([i]) for i in ids) == text.encode()
    for i in range(len(ids)):
        for j in range(i, len(ids) + 1):
            assert gpt2.decode(ids[i:j]) == tiktoken_gpt2.decode(ids[i:j])  # a cut character shows as "�"
    assert any("\ufffd" in gpt2.decode([i]) for i in ids)  # some token holds part of a character
    pieces = list(gpt2.decode_stream(iter(ids)))
    assert "".join(pieces) == text and not any("\ufffd" in p for p in pieces)


def test_a_file_with_the_wrong_hash_is_refused_and_the_fix_is_named(tmp_path, monkeypatch):
    (tmp_path / "gpt2").mkdir()
    for file in GPT2_FILES.values():
        shutil.copy(fetch(file), tmp_path / file.name)
    with open(tmp_path / "gpt2" / "vocab.bpe", "a", encoding="utf-8") as f:
        f.write("zq qz\n")  # one merge more, of a token the vocabulary lacks
    monkeypatch.setenv("COURSE_DATA_MIRROR", str(tmp_path))
    with pytest.raises(ValueError, match="does not match the expected SHA-256"):
        load_gpt2_tokenizer()
    monkeypatch.delenv("COURSE_DATA_MIRROR")
    with pytest.raises(ValueError, match="delete it to download it again"):
        load_gpt2_tokenizer(data_dir=tmp_path)
    with pytest.raises(ValueError, match="makes 'zqqz', which is not in the vocabulary"):
        read_gpt2_files(tmp_path / "gpt2" / "encoder.json", tmp_path / "gpt2" / "vocab.bpe")


def test_a_vocabulary_without_every_byte_is_refused():
    with pytest.raises(ValueError, match="lacks 255 of the 256 byte characters"):
        ByteBPE({"a": 0}, [])


# --- training ---------------------------------------------------------------------------------------------------------


def test_a_tie_goes_to_the_pair_whose_symbols_entered_the_vocabulary_first():
    words = {"ab": 1, "cd": 1, "ba": 1}  # three pairs, each once
    assert learn_merges(words, "abcd", vocab_size=5, min_frequency=1) == [("a", "b")]
    assert learn_merges(words, "dcba", vocab_size=5, min_frequency=1) == [("c", "d")]  # d, c entered first
    assert learn_merges({"aaaa": 2, "ab": 1}, "ab", vocab_size=4, min_frequency=1) == [("a", "a"), ("aa", "aa")]


@pytest.mark.parametrize("vocab_size", [120, 300])
def test_incremental_counts_learn_the_readable_trainers_merges(vocab_size):
    lines = load_tiny_shakespeare()[:60_000].splitlines()
    assert learn_bpe_incremental(lines, vocab_size).merges == learn_bpe(lines, vocab_size).merges


def test_the_byte_level_trainer_learns_hugging_faces_byte_level_merges():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    lines = load_tiny_shakespeare()[:200_000].splitlines(keepends=True)
    ours = train_byte_bpe(lines, 600)
    hf = Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(lines, trainer)
    theirs = [
        tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in json.loads(hf.to_str())["model"]["merges"]
    ]
    assert list(ours.ranks) == theirs and ours.vocab_size == 600
    assert ours.encode("Thou art 🤗") == [ours.encoder[t] for t in hf.encode("Thou art 🤗").tokens]


def test_a_trained_tokenizer_reads_text_it_never_saw_without_an_unknown_token():
    tok = train_byte_bpe(["to be or not to be"] * 3, 270)
    text = "Das ist nicht 🤗 ‑ ω"
    assert tok.decode(tok.encode(text)) == text
    assert tok.vocab_size < 270 and tok.special_tokens == {"<|endoftext|>": tok.vocab_size - 1}  # pairs ran out
    with pytest.raises(ValueError, match="vocab_size=100 leaves no room"):
        train_byte_bpe(["x"], 100)


def test_the_pattern_is_gpt2s(tiktoken_gpt2):
    import regex

    assert regex.findall(GPT2_PATTERN, HARD[7]) == regex.findall(tiktoken_gpt2._pat_str, HARD[7])


def test_an_id_outside_the_vocabulary_is_named(gpt2):
    for bad in (50257, -1):
        for decode in (gpt2.decode, gpt2.decode_bytes, lambda ids: list(gpt2.decode_stream(ids))):
            with pytest.raises(
                ValueError, match=f"id {bad} is not in this tokenizer's vocabulary \\(ids 0 to 50256\\)"
            ):
                decode([464, bad])
