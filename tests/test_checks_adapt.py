"""The checkers of ``course_utils.checks.adapt``, adapting a pretrained model (chapter 12), against students' answers:
right answers written in the styles of public code (OpenAI's ``encoder.py``, minbpe, peft, LLMs-from-scratch) pass,
each classic mistake fails with a message that names it, and an unwritten stub is reported as not attempted."""

import codecs
import itertools
import math

import torch
import torch.nn.functional as F
from helpers import todo, verdict, verdict_rows, verdict_table_test

from course_utils.checks import (
    check_byte_table,
    check_lora_forward,
    check_merge_tree,
    check_multi_turn_mask,
    check_prompt_mask,
    check_stream_decode,
)
from course_utils.checks.adapt import lora_forward, merge_tree, multi_turn_mask, prompt_mask, stream_decode
from course_utils.data.byte_bpe import bytes_to_unicode
from course_utils.training.instruct import IGNORE

HARD_CODED = "is a value written into the code"


# --- the byte table -------------------------------------------------------------------------------------------------


def table_openai():  # the shape of OpenAI's gpt-2/src/encoder.py
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs], strict=True))


def table_identity():
    return {b: chr(b) for b in range(256)}


def table_offset_by_byte():
    return {b: c if c == chr(b) else chr(256 + b) for b, c in bytes_to_unicode().items()}


def table_ascii_only():  # forgets the two Latin-1 ranges
    printable, out, n = set(range(33, 127)), {}, 0
    for b in range(256):
        if b in printable:
            out[b] = chr(b)
        else:
            out[b], n = chr(256 + n), n + 1
    return out


def table_keyed_by_char():
    return {chr(b): c for b, c in bytes_to_unicode().items()}


def table_collides():
    return {b: "Ġ" if c == "Ċ" else c for b, c in bytes_to_unicode().items()}


# --- a token's merge tree -------------------------------------------------------------------------------------------


def tree_from_merges(token, ranks):  # minbpe's style: each merge's result mapped to its pair, read back down
    made_of = {a + b: (a, b) for a, b in ranks}

    def build(t):
        if t not in made_of:
            return t
        a, b = made_of[t]
        return build(a), build(b)

    return build(token)


def tree_as_lists(token, ranks):  # right, with lists for pairs
    if len(token) == 1:
        return token
    i = next(i for i in range(1, len(token)) if (token[:i], token[i:]) in ranks)
    return [tree_as_lists(token[:i], ranks), tree_as_lists(token[i:], ranks)]


def tree_with_a_stack(token, ranks):  # no recursion: parts pushed and filled in
    made_of = {a + b: (a, b) for a, b in ranks}
    root = [token]
    todo_list = [(root, 0)]
    while todo_list:
        holder, index = todo_list.pop()
        t = holder[index]
        if t in made_of:
            pair = list(made_of[t])
            holder[index] = pair
            todo_list += [(pair, 0), (pair, 1)]

    def freeze(node):
        return node if isinstance(node, str) else tuple(freeze(n) for n in node)

    return freeze(root[0])


def leaves(tree):
    return tree if isinstance(tree, str) else "".join(leaves(part) for part in tree)


def _tokens(ranks):
    return {a + b for a, b in ranks} | {c for pair in ranks for part in pair for c in part}


def tree_first_cut_into_tokens(token, ranks):
    if len(token) == 1:
        return token
    tokens = _tokens(ranks)
    i = next(i for i in range(1, len(token)) if token[:i] in tokens and token[i:] in tokens)
    return tree_first_cut_into_tokens(token[:i], ranks), tree_first_cut_into_tokens(token[i:], ranks)


def tree_longest_left_token(token, ranks):  # greedy: the longest prefix that is a token, like WordPiece
    if len(token) == 1:
        return token
    tokens = _tokens(ranks)
    i = next(i for i in range(len(token) - 1, 0, -1) if token[:i] in tokens and token[i:] in tokens)
    return tree_longest_left_token(token[:i], ranks), tree_longest_left_token(token[i:], ranks)


def tree_longest_left_half(token, ranks):  # the longest prefix that starts some merge, whether or not this one
    if len(token) == 1:
        return token
    i = max(i for i in range(1, len(token)) if any(a == token[:i] for a, _ in ranks))
    return tree_longest_left_half(token[:i], ranks), tree_longest_left_half(token[i:], ranks)


def tree_cut_in_the_middle(token, ranks):  # a cut by length, not by the merges
    if len(token) == 1:
        return token
    return tree_cut_in_the_middle(token[: len(token) // 2], ranks), tree_cut_in_the_middle(
        token[len(token) // 2 :], ranks
    )


def tree_last_merge_only(token, ranks):
    return next((a, b) for a, b in ranks if a + b == token) if len(token) > 1 else token


def tree_characters(token, ranks):
    return tuple(token)


def tree_leaf_in_a_tuple(token, ranks):
    if len(token) == 1:
        return (token,)
    i = next(i for i in range(1, len(token)) if (token[:i], token[i:]) in ranks)
    return tree_leaf_in_a_tuple(token[:i], ranks), tree_leaf_in_a_tuple(token[i:], ranks)


def tree_no_base_case(token, ranks):  # a one-character token falls through the loop: None
    for i in range(1, len(token)):
        if (token[:i], token[i:]) in ranks:
            return tree_no_base_case(token[:i], ranks), tree_no_base_case(token[i:], ranks)


def tree_with_ranks(token, ranks):  # each node as (rank, left, right)
    if len(token) == 1:
        return token
    i = next(i for i in range(1, len(token)) if (token[:i], token[i:]) in ranks)
    return ranks[token[:i], token[i:]], tree_with_ranks(token[:i], ranks), tree_with_ranks(token[i:], ranks)


def tree_stops_at_tokens(token, ranks, top=True):  # recurses, but takes any token below the root for a leaf
    tokens = {a + b for a, b in ranks}
    if len(token) == 1 or (not top and token in tokens):
        return token
    i = next(i for i in range(1, len(token)) if (token[:i], token[i:]) in ranks)
    return tree_stops_at_tokens(token[:i], ranks, False), tree_stops_at_tokens(token[i:], ranks, False)


def tree_by_encoding(token, ranks):  # right: encodes the token's string, recording each merge (in GPT-2, every token's
    # string encodes to the token itself, and its last merge is the one pair that makes it)
    symbols = list(token)
    trees = list(token)
    while len(symbols) > 1:
        ranked = [(ranks[p], i) for i, p in enumerate(itertools.pairwise(symbols)) if p in ranks]
        if not ranked:
            break
        _, i = min(ranked)
        symbols[i : i + 2] = [symbols[i] + symbols[i + 1]]
        trees[i : i + 2] = [(trees[i], trees[i + 1])]
    return trees[0] if len(trees) == 1 else tuple(trees)


# --- the LoRA forward -----------------------------------------------------------------------------------------------


def lora_peft(x, base, A, B, alpha):  # peft's Linear.forward, dropout 0: lora_B(lora_A(dropout(x))) * scaling
    scaling = alpha / A.shape[0]
    return base(x) + F.linear(F.linear(x, A), B) * scaling


def lora_raschka(x, base, A, B, alpha):  # LLMs-from-scratch's LoRALayer keeps A (in, r) and B (r, out)
    return base(x) + alpha / A.shape[0] * (x @ A.T @ B.T)


def lora_merged(x, base, A, B, alpha):  # the update merged into the weight first
    return F.linear(x, base.weight + alpha / A.size(0) * B @ A, base.bias)


def lora_for_matrices_only(x, base, A, B, alpha):  # right on (N, in), as torch.mm wants; a model passes (B, T, in)
    return base(x) + alpha / A.size(0) * torch.mm(torch.mm(x, A.T), B.T)


def lora_times_ba(x, base, A, B, alpha):  # B @ A is (out, in): x needs its transpose
    return base(x) + alpha / A.size(0) * (x @ (B @ A))


def lora_unscaled(x, base, A, B, alpha):
    return base(x) + x @ A.T @ B.T


def lora_inverse_scale(x, base, A, B, alpha):
    return base(x) + A.size(0) / alpha * x @ A.T @ B.T


def lora_alpha_only(x, base, A, B, alpha):
    return base(x) + alpha * x @ A.T @ B.T


def lora_no_bias(x, base, A, B, alpha):
    return x @ base.weight.T + alpha / A.size(0) * x @ A.T @ B.T


def lora_update_only(x, base, A, B, alpha):
    return alpha / A.size(0) * x @ A.T @ B.T


def lora_rank_hard_coded(x, base, A, B, alpha):
    return base(x) + alpha / 2 * x @ A.T @ B.T


def lora_detached(x, base, A, B, alpha):
    return base(x) + (alpha / A.size(0) * x @ A.T @ B.T).detach()


def lora_merged_in_place(x, base, A, B, alpha):  # the update merged into the frozen layer itself
    with torch.no_grad():
        base.weight += alpha / A.shape[0] * B @ A
    return base(x)


def lora_floor_division(x, base, A, B, alpha):
    return base(x) + alpha // A.shape[0] * x @ A.T @ B.T


def lora_rank_from_b(x, base, A, B, alpha):
    return base(x) + alpha / B.shape[0] * x @ A.T @ B.T


def lora_root_rank(x, base, A, B, alpha):  # rsLoRA's scale
    return base(x) + alpha / math.sqrt(A.shape[0]) * x @ A.T @ B.T


def lora_bias_twice(x, base, A, B, alpha):
    return base(x) + base.bias + alpha / A.shape[0] * x @ A.T @ B.T


def lora_eight_hard_coded(x, base, A, B, alpha):
    return base(x) + alpha / 8 * x @ A.T @ B.T


# --- the prompt mask ------------------------------------------------------------------------------------------------


def mask_tensors(prompt_ids, response_ids):  # LLMs-from-scratch's collate style: shift, then fill the prompt
    ids = torch.tensor(prompt_ids + response_ids)
    inputs, targets = ids[:-1], ids[1:].clone()
    targets[: len(prompt_ids) - 1] = -100
    return inputs, targets


def mask_labels_then_shift(prompt_ids, response_ids):  # Hugging Face's style: labels = ids, prompt -100, then shift
    ids = prompt_ids + response_ids
    labels = [-100] * len(prompt_ids) + response_ids
    return ids[:-1], labels[1:]


def mask_none(prompt_ids, response_ids):
    ids = prompt_ids + response_ids
    return ids[:-1], ids[1:]


def mask_zero(prompt_ids, response_ids):
    ids = prompt_ids + response_ids
    return ids[:-1], [0] * (len(prompt_ids) - 1) + response_ids


def mask_one_too_many(prompt_ids, response_ids):
    ids = prompt_ids + response_ids
    return ids[:-1], [-100] * len(prompt_ids) + response_ids[1:]


def mask_one_too_few(prompt_ids, response_ids):
    ids = prompt_ids + response_ids
    return ids[:-1], [-100] * (len(prompt_ids) - 2) + [prompt_ids[-1]] + response_ids


def mask_end_token(prompt_ids, response_ids):
    ids = prompt_ids + response_ids
    return ids[:-1], [-100] * (len(prompt_ids) - 1) + response_ids[:-1] + [-100]


def mask_not_shifted(prompt_ids, response_ids):
    ids = prompt_ids + response_ids
    return ids, [-100] * len(prompt_ids) + response_ids


def mask_prompt_length_hard_coded(prompt_ids, response_ids):
    ids = prompt_ids + response_ids
    return ids[:-1], [-100] * 4 + response_ids


# --- a conversation's mask ------------------------------------------------------------------------------------------


def conversation_hf(turns):  # Hugging Face's style: labels the ids with the prompts at -100, then shift once
    ids, labels = [], []
    for prompt_ids, response_ids in turns:
        ids += prompt_ids + response_ids
        labels += [-100] * len(prompt_ids) + response_ids
    return ids[:-1], labels[1:]


def conversation_tensors(turns):  # a mask of booleans over the whole conversation, as tensors
    ids = torch.tensor([i for p, r in turns for i in p + r])
    is_prompt = torch.tensor([flag for p, r in turns for flag in [True] * len(p) + [False] * len(r)])
    targets = ids[1:].masked_fill(is_prompt[1:], -100)
    return ids[:-1], targets


def conversation_per_turn(turns):  # each turn shifted alone, then joined: a token lost at every boundary
    xs, ys = [], []
    for p, r in turns:
        x, y = prompt_mask(p, r)
        xs, ys = xs + x, ys + y
    return xs, ys


def conversation_first_prompt_only(turns):
    ids = [i for p, r in turns for i in p + r]
    first = len(turns[0][0])
    return ids[:-1], ([-100] * first + ids[first:])[1:]


def conversation_last_response_only(turns):
    ids = [i for p, r in turns for i in p + r]
    last = len(turns[-1][1])
    return ids[:-1], ([-100] * (len(ids) - last) + ids[-last:])[1:]


def conversation_unmasked(turns):
    ids = [i for p, r in turns for i in p + r]
    return ids[:-1], ids[1:]


# --- bytes decoded as a stream --------------------------------------------------------------------------------------


def stream_codecs(chunks):  # the standard library's incremental decoder
    decoder = codecs.getincrementaldecoder("utf-8")()
    return [decoder.decode(chunk) for chunk in chunks]


def stream_by_lead_byte(chunks):  # a character's length read from its first byte, as a UTF-8 decoder does
    out, pending = [], b""
    for chunk in chunks:
        pending += chunk
        i, text = 0, ""
        while i < len(pending):
            lead = pending[i]
            size = 1 if lead < 0x80 else 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4
            if i + size > len(pending):
                break
            text += pending[i : i + size].decode("utf-8")
            i += size
        out.append(text)
        pending = pending[i:]
    return out


def mask_by_value(prompt_ids, response_ids):  # every id that occurs in the prompt masked, wherever it is
    ids, prompt = prompt_ids + response_ids, set(prompt_ids)
    return ids[:-1], [IGNORE if t in prompt else t for t in ids[1:]]


def conversation_by_value(turns):
    prompt = {t for p, _ in turns for t in p}
    ids = [t for p, r in turns for t in p + r]
    return ids[:-1], [IGNORE if t in prompt else t for t in ids[1:]]


def conversation_boundary_kept(turns):  # each turn's targets from its own ids, the next turn's first id kept
    ids, targets = [], []
    for k, (p, r) in enumerate(turns):
        if k:
            targets.append(p[0])  # what the previous response's end token predicts
        targets += [IGNORE] * (len(p) - 1) + r
        ids += p + r
    return ids[:-1], targets


def conversation_zero(turns):
    ids, labels = [], []
    for p, r in turns:
        ids += p + r
        labels += [0] * len(p) + r
    return ids[:-1], labels[1:]


def conversation_not_shifted(turns):  # labels as Hugging Face builds them, but the model's shift forgotten
    ids, labels = [], []
    for p, r in turns:
        ids += p + r
        labels += [IGNORE] * len(p) + r
    return ids[:-1], labels[:-1]


def conversation_end_masked(turns):  # each turn's end token treated as markup, masked like the prompt
    ids, labels = [], []
    for p, r in turns:
        ids += p + r
        labels += [IGNORE] * len(p) + r[:-1] + [IGNORE]
    return ids[:-1], labels[1:]


def conversation_end_in_last_turn_only(turns):  # a stop token kept for the conversation's end alone
    ids, labels = [], []
    for k, (p, r) in enumerate(turns):
        ids += p + r
        labels += [IGNORE] * len(p) + (r if k == len(turns) - 1 else [*r[:-1], IGNORE])
    return ids[:-1], labels[1:]


def conversation_first_response_token_masked(turns):  # the mask shifted by one: it covers one id too many
    ids, is_prompt = [], []
    for p, r in turns:
        ids += p + r
        is_prompt += [True] * (len(p) + 1) + [False] * (len(r) - 1)
    return ids[:-1], [IGNORE if masked else t for t, masked in zip(ids[1:], is_prompt[1:], strict=True)]


def conversation_assistant_token_kept(turns):  # the mask covers one id too few: the prompt's last id stays
    ids, labels = [], []
    for p, r in turns:
        ids += p + r
        labels += [IGNORE] * (len(p) - 1) + [p[-1]] + r
    return ids[:-1], labels[1:]


def stream_last_byte_held(chunks):  # only "all of it" or "all but the last byte" tried
    out, held = [], b""
    for chunk in chunks:
        data = held + chunk
        for cut in (len(data), len(data) - 1):
            try:
                out.append(data[:cut].decode("utf-8"))
                held = data[cut:]
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append("")
            held = data
    return out


def stream_all_or_nothing(chunks):
    out, held = [], b""
    for chunk in chunks:
        held += chunk
        try:
            out.append(held.decode("utf-8"))
            held = b""
        except UnicodeDecodeError:
            out.append("")
    return out


def stream_replace(chunks):
    return [chunk.decode("utf-8", errors="replace") for chunk in chunks]


def stream_ignore(chunks):
    return [chunk.decode("utf-8", errors="ignore") for chunk in chunks]


def stream_at_the_end(chunks):
    return [""] * (len(chunks) - 1) + [b"".join(chunks).decode("utf-8")]


def stream_text_so_far(chunks):  # each string the whole text decoded so far, not the new part
    decoded = stream_decode(chunks)
    return ["".join(decoded[: k + 1]) for k in range(len(chunks))]


def stream_strict(chunks):
    return [chunk.decode("utf-8") for chunk in chunks]


VERDICTS = [
    *verdict_rows(
        check_byte_table,
        right=[bytes_to_unicode, table_openai],
        wrong=[
            (table_identity, "every byte maps to itself"),
            (table_offset_by_byte, "chr(256 + n)"),
            (table_ascii_only, "it is printable, so it stays itself"),
            (table_keyed_by_char, "keyed by the byte as an int"),
            (table_collides, "two bytes map to the same character"),
            (todo, "not written yet"),
        ],
    ),
    *verdict_rows(
        check_merge_tree,
        right=[merge_tree, tree_from_merges, tree_as_lists, tree_with_a_stack, tree_by_encoding],
        wrong=[
            (tree_first_cut_into_tokens, "is cut as 'Ġ' + 'the': both are tokens, but ('Ġ', 'the') is not a merge"),
            (tree_longest_left_token, "is cut as 'Ġth' + 'e': both are tokens"),
            (tree_longest_left_half, "is cut as 'Ġth' + 'e': both are tokens, but ('Ġth', 'e') is not a merge"),
            (tree_cut_in_the_middle, "'Ġlower' is cut as 'Ġlo' + 'wer', but ('Ġlo', 'wer') is not a merge in ranks"),
            (tree_last_merge_only, "the last merge only"),
            (tree_characters, "its characters side by side"),
            (tree_leaf_in_a_tuple, "a leaf, returned as itself"),
            (tree_no_base_case, "some path of your function returns nothing"),
            (tree_with_ranks, "a tree holds only strings (its leaves) and pairs"),
            (tree_stops_at_tokens, "down to single characters"),
            (todo, "not written yet"),
        ],
    ),
    *verdict_rows(
        check_lora_forward,
        right=[lora_forward, lora_peft, lora_raschka, lora_merged],
        wrong=[
            (lora_unscaled, "the update is not scaled"),
            (lora_for_matrices_only, "x here is (2, 5, 6), (B, T, in), a batch of sequences"),
            (lora_times_ba, "The update is x @ A.T @ B.T"),
            (lora_inverse_scale, "the scale is r / alpha"),
            (lora_alpha_only, "the scale is alpha;"),
            (lora_no_bias, "bias is missing"),
            (lora_update_only, "only the update is returned"),
            (lora_rank_hard_coded, HARD_CODED),
            (lora_detached, "not the right gradient"),
            (lora_merged_in_place, "base.weight was changed in place"),
            (lora_floor_division, "alpha // r rounds down"),
            (lora_rank_from_b, "with B.shape[0], the layer's output size"),
            (lora_root_rank, "alpha / sqrt(r), rsLoRA's"),
            (lora_bias_twice, "the bias is added twice"),
            (lora_eight_hard_coded, "with peft's default rank written in"),
            (todo, "not written yet"),
        ],
    ),
    *verdict_rows(
        check_prompt_mask,
        right=[prompt_mask, mask_tensors, mask_labels_then_shift],
        wrong=[
            (mask_none, "the prompt is not masked"),
            (mask_zero, "masked with 0"),
            (mask_one_too_many, "the first response token is masked too"),
            (mask_one_too_few, "the last prompt token is a target"),
            (mask_end_token, "the end token is masked"),
            (mask_not_shifted, "the inputs are all the ids"),
            (mask_prompt_length_hard_coded, HARD_CODED),
            (mask_by_value, "masked by its token values"),
            (todo, "not written yet"),
        ],
    ),
    *verdict_rows(
        check_multi_turn_mask,
        right=[multi_turn_mask, conversation_hf, conversation_tensors],
        wrong=[
            (conversation_per_turn, "each turn was shifted on its own"),
            (conversation_first_prompt_only, "only the first prompt is masked"),
            (conversation_last_response_only, "only the last response is a target"),
            (conversation_unmasked, "the prompts are not masked"),
            (conversation_by_value, "masked by their values"),
            (conversation_boundary_kept, "that target is kept"),
            (conversation_zero, "masked with 0"),
            (conversation_not_shifted, "the targets are not shifted"),
            (conversation_end_masked, "each response's end token is masked"),
            (conversation_end_in_last_turn_only, "a target in the last turn only"),
            (conversation_first_response_token_masked, "each response's first token is masked too"),
            (conversation_assistant_token_kept, "the assistant token ending each prompt is a target"),
            (todo, "not written yet"),
        ],
    ),
    *verdict_rows(
        check_stream_decode,
        right=[stream_decode, stream_codecs, stream_by_lead_byte],
        wrong=[
            (stream_replace, "decoded alone"),
            (stream_ignore, "characters are lost"),
            (stream_at_the_end, "as soon as its last byte arrives"),
            (stream_strict, "keep its last bytes for the next chunk"),
            (stream_last_byte_held, "as soon as its last byte arrives"),
            (stream_all_or_nothing, "as soon as its last byte arrives"),
            (stream_text_so_far, "each string is the whole text so far"),
            (todo, "not written yet"),
        ],
    ),
]

test_each_answer_gets_its_verdict = verdict_table_test(VERDICTS)


def test_an_unwritten_stub_is_not_attempted(capsys):
    for check in (
        check_byte_table,
        check_merge_tree,
        check_lora_forward,
        check_prompt_mask,
        check_multi_turn_mask,
        check_stream_decode,
    ):
        ok = check(todo)
        assert not ok and ok.status == "not attempted", check.__name__
    capsys.readouterr()


def test_the_references_agree_with_the_package():
    """The checkers' references are what the package computes: GPT-2's bpe merges by rank, LoRALinear's forward,
    encode_example's targets, decode_stream's pieces (it skips the chunks that complete nothing)."""
    from course_utils.data.byte_bpe import load_gpt2_tokenizer
    from course_utils.model.lora import LoRALinear

    tok = load_gpt2_tokenizer()
    for token in tok.bpe(tok.to_chars(" transformers unbelievable")):  # each token's tree: its pairs are merges
        tree = merge_tree(token, tok.ranks)
        stack = [tree]
        while stack:
            node = stack.pop()
            if isinstance(node, tuple):
                left, right = node
                assert (leaves(left), leaves(right)) in tok.ranks
                stack += [left, right]
        assert leaves(tree) == token
    layer = LoRALinear(torch.nn.Linear(6, 4), r=2, alpha=3.0)
    torch.nn.init.normal_(layer.lora_B)
    x = torch.randn(3, 6)
    expected = lora_forward(x, layer.base, layer.lora_A, layer.lora_B, 3.0)
    torch.testing.assert_close(layer(x), expected)
    assert prompt_mask([1, 2, 3], [4, 5]) == ([1, 2, 3, 4], [-100, -100, 4, 5])
    assert multi_turn_mask([([1, 2, 3], [4, 5])]) == prompt_mask([1, 2, 3], [4, 5])
    ids = tok.encode(" a 🤖 robot")
    pieces = stream_decode([tok.decode_bytes([i]) for i in ids])
    assert [piece for piece in pieces if piece] == list(tok.decode_stream(ids)) and len(pieces) == len(ids)


def test_a_right_answer_reports_success(capsys):
    ok, out = verdict(check_merge_tree, merge_tree, capsys)
    assert ok and "each token cut where the cut is a merge" in out
