# %% [markdown]
# # 12 · Adapting a pretrained model: GPT-2's tokenizer, LoRA, instruction tuning
#
# {{COLAB_BADGE}}
#
# *Transformers from Scratch*, Part II, chapter 12 · previous: [11 · Beyond one GPU](11_distributed.ipynb)
#
# Chapter 10 loaded GPT-2 into the course's code and proved it the same model. What people do next with such a model
# is **adapt** it: teach it to follow instructions, or to classify, with far less data and compute than it was
# pretrained with. This chapter builds the three pieces that takes: GPT-2's own tokenizer and LoRA adapters, each
# proven equal to the library people use (`tiktoken` and Hugging Face's tokenizer; Hugging Face's `peft`), and
# supervised instruction tuning with the loss masked on the prompt. Then it measures what adapting buys and what it
# costs, on a small model pretrained for the course, offline, in a few minutes on a CPU.
#
# **You will learn**
# - byte-level BPE as GPT-2 does it: 256 bytes drawn as printable characters, the pre-tokenising regular expression,
#   merges applied by rank, special tokens, decoding any slice of ids, and a trainer with incremental pair counts;
# - LoRA: a frozen weight plus a trainable low-rank update $\frac{\alpha}{r} BA$, initialised so that training starts
#   from the pretrained model, merged into the weight for inference; what it saves and what it does not;
# - instruction tuning: a chat template with special tokens, the loss masked on the prompt (proven: the logits at
#   the prompt's positions get exactly zero gradient), padded batches, and exact match on new inputs and on a phrasing
#   never seen;
# - a pretrained model turned classifier, against the same model trained from scratch: the value of pretraining.
#
# **Prerequisites:** chapters 07 (the GPT, `train`), 08 (byte-pair encoding) and 10 (`from_hf`). **Time:** about 60
# minutes. This chapter also needs `tiktoken` and Hugging Face's `transformers` and `peft`: `pip install tiktoken
# transformers peft` (or `pip install ".[hf]"` in the course's folder).

# %% [markdown]
# ## Setup

# %% tags=["nbval-ignore-output"]
import subprocess
import sys

if "google.colab" in sys.modules:  # on Colab: install course_utils from the repository
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{PIP_SPEC}}"], check=True)

import copy
import itertools
import json
import math
import random
import re
import statistics
import time
import urllib.request
from dataclasses import asdict

import torch
import torch.nn.functional as F

try:
    import peft
    import tiktoken
    import transformers
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
except ImportError:
    raise ImportError("this chapter needs tiktoken, transformers and peft: pip install tiktoken transformers peft") from None  # fmt: skip

from course_utils import (
    GPT,
    GPT2_PATTERN,
    IGNORE,
    ByteBPE,
    ChatTemplate,
    SequenceClassifier,
    TrainConfig,
    add_lora,
    bytes_to_unicode,
    count_parameters,
    encode_example,
    estimate_loss,
    from_hf,
    get_device,
    gpt2_files,
    instruction_pairs,
    learn_bpe,
    learn_bpe_incremental,
    load_gpt2_tokenizer,
    load_multi30k,
    load_pretrained,
    load_tiny_shakespeare,
    lora_parameters,
    mask_prompt,
    merge_lora,
    merge_pair,
    merge_tree,
    pad_batch,
    pad_examples,
    pretraining_texts,
    set_seed,
    synchronize,
    train,
    train_byte_bpe,
)
from course_utils.checks import (
    check_byte_table,
    check_lora_forward,
    check_merge_tree,
    check_multi_turn_mask,
    check_prediction,
    check_prompt_mask,
    check_stream_decode,
)

transformers.logging.set_verbosity_error()
set_seed(0)
device = get_device()
print(f"PyTorch {torch.__version__}, tiktoken {tiktoken.__version__}, transformers {transformers.__version__}, "
      f"peft {peft.__version__}, running on {device}")  # fmt: skip

# %% [markdown]
# ## 1. GPT-2's tokenizer, rebuilt
#
# A pretrained model comes with its tokenizer: the weights were trained on its ids, and the same text cut another way
# is, to the model, another text. So the first thing to get exactly right when adapting GPT-2 is its tokenizer.
#
# Chapter 08's BPE merged *characters*. Characters are an open set: a tokenizer that met no Chinese, emoji or
# accented letter in training has no symbol for them. GPT-2 merges **bytes** instead: any text is a sequence of its
# UTF-8 bytes, 256 possible symbols, so no input is ever unknown. The price is that one character may take several
# bytes:

# %%
for text in ["cat", "café", "naïve", "東京", "🤖"]:
    data = text.encode("utf-8")
    print(f"{text!r:8} characters: {len(text)}, bytes: {len(data)}: {list(data)}")

# %% [markdown]
# ### Bytes drawn as characters
#
# GPT-2 stores its merges in a text file, one pair per line separated by a space, and its vocabulary as JSON. Raw
# bytes would not survive that: byte 32 is the space that separates a pair, byte 10 a newline, bytes 0–31 invisible
# control characters. So GPT-2 first draws each byte as a **printable** character: the 188 bytes that already are one
# (`!`…`~`, `¡`…`¬`, `®`…`ÿ`) stay themselves; each of the other 68, in order, becomes the next character from
# U+0100 on (U+0100 is the character numbered 256, `chr(256)`; `ord` goes back). The space, the 33rd of them,
# becomes `Ġ` (U+0120, `chr(288)`); the newline `Ċ`.
#
# **Your turn: the byte table.** Write `my_byte_table()`, returning a dict from each byte (an `int`, 0–255) to its
# character, as just described. Hint: build the list of printable bytes first, then walk over `range(256)` with a
# counter `n` for the bytes that are not in it.


# %% tags=["exercise"]
def my_byte_table():
    ### BEGIN SOLUTION
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table, n = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:  # the n-th byte that is not printable
            table[b] = chr(256 + n)
            n += 1
    return table
    ### END SOLUTION


check_byte_table(my_byte_table)

# %% [markdown]
# The package's `bytes_to_unicode` is the same table. A word's bytes, drawn this way, are what the merges work on:

# %%
table = bytes_to_unicode()
for text in [" the", "\n", " café", " 🤖"]:
    drawn = "".join(table[b] for b in text.encode("utf-8"))
    print(f"{text!r:10} -> {drawn!r}")

# %% [markdown]
# ### Pieces: where merges never cross
#
# Before any merge, GPT-2 cuts the text into **pieces** with a regular expression, and merges only inside a piece.
# A piece is a contraction (`'s`, `'ll`), or a run of letters, of digits or of other symbols, each run with at most
# one space before it, or a run of spaces (which leaves its last space to the word after it: two spaces before "Really"
# give `' '` and `' Really'` below). So `" dog"` is one piece and `"dog."` two: a word and the punctuation after it
# never become one token, and a word with a space before it gets the same tokens wherever it stands in a sentence
# (`"Yes"` at the start of a line is another piece than `" Yes"`). `\p{L}` means "any letter" in the `regex` module,
# which the package uses; Python's `re` does not know it.

# %%
gpt2_tokenizer = load_gpt2_tokenizer()  # OpenAI's encoder.json and vocab.bpe, checked against their SHA-256
print(GPT2_PATTERN)
print(gpt2_tokenizer.pieces("I'll pay 1234 dollars!!  Really?\nYes."))

# %% [markdown]
# ### Merges, by rank
#
# GPT-2's `vocab.bpe` lists its merges in the order they were learned: the line number is the merge's **rank**.
# To encode a piece, start from its characters and repeat one step: of the adjacent pairs that are merges, take the
# one of **lowest rank** (learned first), merge it wherever it occurs, left to right; stop when no adjacent pair is a
# merge. It is chapter 08's rule (`BPETokenizer.segment`, and that chapter's first exercise): what changes here is
# what it runs on, the byte symbols of one regex piece at a time, with GPT-2's 50,000 ranks.

# %%
ranks = gpt2_tokenizer.ranks  # {(a, b): rank}
print(f"{len(ranks):,} merges")
print("the first 6 merges GPT-2 learned:", [pair for pair, _ in sorted(ranks.items(), key=lambda kv: kv[1])[:6]])

# %% [markdown]
# The step, repeated until no adjacent pair is a merge, encodes a piece. Here is `" transformers"` from its 13
# characters to GPT-2's tokens, one line per step (the merging itself by chapter 08's `merge_pair`), and the
# package's answer below:

# %%
symbols = list(gpt2_tokenizer.to_chars(" transformers"))
while True:
    ranked = [(a, b) for a, b in itertools.pairwise(symbols) if (a, b) in ranks]  # adjacent pairs that are merges
    if not ranked:
        break
    best = min(ranked, key=lambda pair: ranks[pair])
    symbols = merge_pair(symbols, best)
    print(f"rank {ranks[best]:5}: {best} -> {symbols}")
print("the package:", gpt2_tokenizer.bpe(gpt2_tokenizer.to_chars(" transformers")))
print("ids:", gpt2_tokenizer.encode(" transformers"))

# %% [markdown]
# **Your turn: a token's merge tree.** Now the other way: from a token back to the merges that built it. Every
# token above the 256 bytes is the result of one merge of two tokens learned earlier, and those of merges before
# them, down to single characters. Write `my_merge_tree(token, ranks)`: a token, drawn as above (`"Ġthe"`), and the
# ranks in; out, the token itself if it is one character, else the pair `(left, right)` of the trees of the two
# tokens whose merge made it. With the ranks `{("l", "o"): 0, ("lo", "w"): 1}`, `"low"` gives `(("l", "o"), "w")`.
# Careful: a token can often be cut into two tokens in more than one place (`"Ġthe"` into `"Ġ"` + `"the"`, and into
# `"Ġt"` + `"he"`); only the cut whose pair is in `ranks` is the merge that made it. Every token you are given is
# one that merges made. *Hint:* the two parts are trees too, built the same way: let the function call itself on
# each part (recursion), and let a one-character token be the case that stops it.


# %% tags=["exercise"]
def my_merge_tree(token, ranks):
    ### BEGIN SOLUTION
    if len(token) == 1:
        return token  # a byte: a leaf
    for i in range(1, len(token)):
        left, right = token[:i], token[i:]
        if (left, right) in ranks:  # the one cut that is a merge
            return my_merge_tree(left, ranks), my_merge_tree(right, ranks)
    raise ValueError(f"no merge makes {token!r}")
    ### END SOLUTION


check_merge_tree(my_merge_tree)

# %% [markdown]
# The package's `merge_tree` is the same. Here is the tree of `"Ġtransform"`, the first of the two tokens above, one
# line per token with the rank of the merge that made it, its two parts indented below it:


# %%
def spelled(tree):  # the token a tree makes: its leaves, joined
    return tree if isinstance(tree, str) else spelled(tree[0]) + spelled(tree[1])


def show_tree(tree, depth=0):
    if isinstance(tree, str):
        print("    " * depth + repr(tree))
        return
    left, right = tree
    print("    " * depth + f"{spelled(tree)!r}  rank {ranks[spelled(left), spelled(right)]}")
    show_tree(left, depth + 1)
    show_tree(right, depth + 1)


show_tree(merge_tree("Ġtransform", ranks))

# %% [markdown]
# Follow any branch from a leaf up to the root and the ranks only grow: `"Ġt"` (rank 0, the very first merge GPT-2
# learned), `"Ġtr"` (235), `"Ġtrans"` (751), `"Ġtransform"` (5,865). The tree holds 9 of the 11 merges of the steps
# above, the ones that built `"Ġtransform"` (ranks 7 and 108 built `"ers"`). Every merge comes after the merges of
# its two parts, for all of GPT-2's merges, as it must: a pair can only be counted once both of its tokens
# exist. It is also the answer to chapter 08's question of why encoding by rank gives what replaying the whole list
# gives. The next cell checks all 50,000 merges:

# %%
made_by = {a + b: rank for (a, b), rank in ranks.items()}  # each merge's token -> the merge's rank
print(f"{len(ranks):,} merges make {len(made_by):,} different tokens: one merge per token")
after_parts = sum(all(made_by.get(part, -1) < rank for part in pair) for pair, rank in ranks.items())
print(f"merges learned after the merges that made both their parts: {after_parts:,} of {len(ranks):,}")
assert len(made_by) == len(ranks) == after_parts

# %% [markdown]
# ### The proof: the same ids as GPT-2's own tokenizers
#
# Two implementations are in wide use: OpenAI's `tiktoken` and Hugging Face's `GPT2TokenizerFast` (Rust, from the
# `tokenizers` library). Both read the same two files. The next cell builds them from those files offline: `tiktoken`
# through the very function its `get_encoding("gpt2")` calls after downloading them, Hugging Face's from the vocabulary
# and merges. Then all three encode the whole of Tiny Shakespeare, every Multi30k validation sentence in both
# languages, and texts chosen to be hard.

# %%
encoder_path, merges_path = gpt2_files()["encoder"], gpt2_files()["merges"]  # the files load_gpt2_tokenizer read
tiktoken_gpt2 = tiktoken.Encoding(
    name="gpt2",
    pat_str=GPT2_PATTERN,
    mergeable_ranks=data_gym_to_mergeable_bpe_ranks(str(merges_path), str(encoder_path)),
    special_tokens={"<|endoftext|>": 50256},
)
if int(transformers.__version__.split(".")[0]) >= 5:  # transformers 5 takes the vocabulary and merges themselves
    merge_lines = merges_path.read_text(encoding="utf-8").split("\n")[1:]  # line 0 is "#version: 0.2"
    hf_gpt2 = transformers.GPT2TokenizerFast(
        vocab=json.loads(encoder_path.read_text(encoding="utf-8")),
        merges=[tuple(line.split(" ")) for line in merge_lines if line],
    )
else:  # transformers 4 takes the files' paths
    hf_gpt2 = transformers.GPT2TokenizerFast(vocab_file=str(encoder_path), merges_file=str(merges_path))

shakespeare = load_tiny_shakespeare()
hard = ["", " ", "   leading spaces", "trailing   ", "tabs\tand\nnewlines\r\n", "I'll, you've; he's!!", "....???!!!",
        "naïve café", "東京タワー", "🤖👩‍👩‍👧 emoji with joiners", "1234567890", "ÿ\x00\x7f control bytes",
        "non\u00a0breaking"]  # fmt: skip
corpora = {
    "Tiny Shakespeare, whole": [shakespeare],
    "Multi30k val, German": [de for de, _ in load_multi30k("val")],
    "Multi30k val, English": [en for _, en in load_multi30k("val")],
    "hard cases": hard,
}
for name, texts in corpora.items():
    ours = [gpt2_tokenizer.encode(t) for t in texts]
    same_tiktoken = ours == [tiktoken_gpt2.encode(t) for t in texts]
    same_hf = ours == [hf_gpt2.encode(t) for t in texts]
    n = sum(map(len, ours))
    print(f"{name:24} {len(texts):5} texts, {n:7,} tokens: same ids as tiktoken {same_tiktoken}, as Hugging Face "
          f"{same_hf}")  # fmt: skip
    assert same_tiktoken and same_hf
print(f"Tiny Shakespeare: {len(shakespeare) / len(gpt2_tokenizer.encode(shakespeare)):.2f} characters per token")

# %% [markdown]
# ### Special tokens, and decoding any slice
#
# `<|endoftext|>` (id 50256) separates documents in GPT-2's training data. A **special token** is never produced by
# merges: it is cut out of the text first and given its id directly. That makes it dangerous in text typed by a user,
# who could forge the end of a document; so, like `tiktoken`, `encode` refuses a special token it was not told to
# allow, and says how to proceed:

# %%
try:
    gpt2_tokenizer.encode("the end<|endoftext|>")
except ValueError as error:
    print("ValueError:", error)
print(gpt2_tokenizer.encode("the end<|endoftext|>", allowed_special={"<|endoftext|>"}))
print(gpt2_tokenizer.encode("the end<|endoftext|>", disallowed_special=()))  # read as ordinary text

# %% [markdown]
# Decoding is the table read backwards: each id's bytes, joined, then read as UTF-8. Because a token is bytes, a slice
# of ids can end in the middle of a character. One token at a time, as a model generates, the robot below comes in
# pieces that are not characters; `decode` shows them as `�`, `decode_stream` waits for the rest:

# %%
ids = gpt2_tokenizer.encode(" a 🤖 robot")
print("ids:", ids)
print("each id alone:", [gpt2_tokenizer.decode([i]) for i in ids])
print("streamed:     ", list(gpt2_tokenizer.decode_stream(ids)))
assert "".join(gpt2_tokenizer.decode_stream(ids)) == " a 🤖 robot" == tiktoken_gpt2.decode(ids)

# %% [markdown]
# ### Learning merges faster
#
# Chapter 08's `learn_bpe` recounts every pair of the corpus after each merge: clear, and slow. A merge of `(a, b)`
# changes only the counts of the pairs next to it, so `learn_bpe_incremental` keeps the counts and an index of where
# each pair occurs, and updates just those (its engine, `learn_merges`, is what `train_byte_bpe` runs on bytes). Both
# take the most frequent pair and, on a tie, the pair whose symbols entered the vocabulary first (Hugging Face's rule,
# and chapter 08's): a rule that depends on the corpus only, so both learn the **same** merges.

# %% tags=["nbval-ignore-output"]
lines = shakespeare.splitlines()[:4000]
start = time.perf_counter()
readable = learn_bpe(lines, 500)  # 500: the vocabulary's size (specials, characters, merges), not the merges
readable_seconds = time.perf_counter() - start
start = time.perf_counter()
incremental = learn_bpe_incremental(lines, 500)
incremental_seconds = time.perf_counter() - start
print(f"{len(readable.merges)} merges: learn_bpe {readable_seconds:.2f} s, learn_bpe_incremental "
      f"{incremental_seconds:.2f} s ({readable_seconds / incremental_seconds:.0f}x faster)")  # fmt: skip
print("the same merges, in the same order:", readable.merges == incremental.merges)
assert readable.merges == incremental.merges and readable_seconds > 5 * incremental_seconds

# %% [markdown]
# ## 2. The model we adapt
#
# GPT-2 itself is too big to tune on a laptop CPU in minutes. So the course ships a small GPT pretrained the GPT-2
# way: a byte-level BPE vocabulary of 1,024 tokens (`train_byte_bpe`, the trainer above on bytes) and chapter 07's
# model, trained on Tiny Shakespeare and Multi30k's English captions. Its vocabulary already holds the chat template's
# special tokens, `<|user|>`, `<|assistant|>` and `<|end|>`, which never occur in pretraining: their rows of the
# embedding (tied to the output layer) were only ever pushed down, as tokens that never come next, and tuning is what
# gives them a meaning. `tools/build_checkpoints.py byte_gpt` rebuilds the weights
# from its recipe (`BYTE_GPT` in `course_utils`); the next cell prints the model's sizes and what was measured when it
# was built.

# %% tags=["nbval-ignore-output"]
pretrained = load_pretrained("byte_gpt")
print(pretrained.describe())
print(pretrained.recipe.model)
tokenizer = ByteBPE.from_dict(pretrained.tokenizer)
texts = pretraining_texts()
relearned = train_byte_bpe(texts["train"].splitlines(keepends=True), 1024, pretrained.recipe.special_tokens)
print(tokenizer)
print("train_byte_bpe learns the shipped vocabulary again:", relearned.ranks == tokenizer.ranks)
assert relearned.ranks == tokenizer.ranks and relearned.special_tokens == tokenizer.special_tokens


def pretrained_model():
    """A fresh copy of the shipped GPT, on the device."""
    model = GPT(tokenizer.vocab_size, **asdict(pretrained.recipe.model))
    model.load_state_dict(pretrained.state_dict)
    return model.to(device)


base = pretrained_model().eval()
val_ids = torch.tensor(tokenizer.encode(texts["val"]), device=device)  # Tiny Shakespeare's last 10%
base_val_loss = estimate_loss(base, {"val": val_ids}, batch_size=16, iters=20)["val"]
print(f"{count_parameters(base):,} parameters; Tiny Shakespeare validation loss {base_val_loss:.3f} nats per token")
prompt = torch.tensor([tokenizer.encode("ROMEO:\n")], device=device)
sample = base.generate(prompt, 60, temperature=0.8, generator=torch.Generator(device).manual_seed(0))
print(tokenizer.decode(sample[0]))

# %% [markdown]
# ## 3. LoRA from scratch
#
# Fine-tuning every weight of a model works, and section 4 does it. But it stores a gradient and two AdamW averages for
# every weight (three more copies of the model), and a tuned copy of all of it per task. **LoRA** (Hu et al. 2021)
# freezes the pretrained weight $W$ (`out × in`) and learns a low-rank change beside it:
#
# $$h = W x + \frac{\alpha}{r}\, B A\, x, \qquad A \in \mathbb{R}^{r \times \text{in}},\; B \in \mathbb{R}^{\text{out}
# \times r},\; r \ll \text{in}, \text{out}$$
#
# - $A$ starts random (as `nn.Linear`'s weights do) and $B$ at **zero**: at step 0 the update is zero and the model is
#   exactly the pretrained one;
# - $\frac{\alpha}{r}$ scales the update, so that trying another rank $r$ (with $\alpha$ kept) needs roughly no new
#   learning rate (Hu et al.);
# - only $A$ and $B$ train: $r(\text{in} + \text{out})$ numbers per layer instead of $\text{in} \times \text{out}$;
# - after tuning, $W + \frac{\alpha}{r} BA$ is one matrix again (**merging**): inference costs nothing extra.
#
# **Your turn: the LoRA forward.** Write `my_lora_forward(x, base, A, B, alpha)`, with `x` of shape `(..., in)`, `base`
# the frozen `nn.Linear`, `A` of shape `(r, in)` and `B` of shape `(out, r)`. Return the formula above (the bias of
# `base` included), for any number of leading dimensions of `x`. The formula is written for a column vector $x$; rows
# of `x`, as PyTorch holds them, take the transposes: $x W^\top$, and so on.


# %% tags=["exercise"]
def my_lora_forward(x, base, A, B, alpha):
    ### BEGIN SOLUTION
    r = A.size(0)
    return base(x) + (alpha / r) * (x @ A.T @ B.T)  # (..., in) -> (..., r) -> (..., out)
    ### END SOLUTION


check_lora_forward(my_lora_forward)

# %% [markdown]
# The package's `LoRALinear` is that forward in a module, and `add_lora(model, targets, r, lora_alpha)` wraps every
# `nn.Linear` whose name ends with one of `targets` and freezes everything else. On the pretrained model, with adapters on the query and value projections of every block (the
# original paper's choice); targets that name no layer are refused, with the names there are:

# %%
adapted = pretrained_model().eval()
wrapped = add_lora(adapted, ["w_q", "w_v"], r=8, lora_alpha=16)
print(wrapped)
print(adapted.blocks[0].self_attn.w_q)
trainable, total = count_parameters(adapted), count_parameters(adapted, trainable_only=False)
print(f"trainable: {trainable:,} of {total:,} parameters ({trainable / total:.1%})")
x = torch.randint(0, tokenizer.vocab_size, (2, 32), device=device)
with torch.no_grad():
    same = torch.equal(adapted(x)[0], base(x)[0])
    print("B = 0: the adapted model computes the pretrained model's logits exactly:", same)
    assert same
try:
    add_lora(pretrained_model(), ["q_proj", "v_proj"])  # Hugging Face Llama's names, not the course's
except ValueError as error:
    print("ValueError:", error)

# %% [markdown]
# ### The proof: the same as `peft`
#
# Hugging Face's `peft` is the library people fine-tune with. Given the same model, rank, $\alpha$ and targets, it
# builds its own adapters. We give both the same adapter weights (drawn at random, $B$ included: with $B = 0$ a wrong
# product would still give the pretrained output), then compare the loss, the gradient of every adapter weight, and
# the merged weights.

# %% tags=["nbval-ignore-output"]
ours = pretrained_model().eval()  # eval: no dropout, so that both see the same computation
add_lora(ours, ["w_q", "w_v"], r=8, lora_alpha=16)
theirs = peft.get_peft_model(pretrained_model().eval(), peft.LoraConfig(r=8, lora_alpha=16, target_modules=["w_q", "w_v"],
                                                                  lora_dropout=0.0))  # fmt: skip
generator = torch.Generator().manual_seed(1)
with torch.no_grad():
    # lora_parameters(model): every adapter's A and B, by name (blocks.0.self_attn.w_q.lora_A, ...); peft names
    # the same weight ...w_q.lora_A.default.weight
    for name, p in lora_parameters(ours).items():
        p.copy_(torch.randn(p.shape, generator=generator) * 0.1)
        module, kind = name.rsplit(".", 1)
        theirs.get_parameter(f"base_model.model.{module}.{kind}.default.weight").copy_(p)
inputs, targets = x[:, :-1], x[:, 1:]  # (2, 31) each: the random ids of above, each predicting the next
our_loss, their_loss = ours(inputs, targets)[1], theirs(inputs, targets)[1]
our_loss.backward()
their_loss.backward()
gradient_gap = max(
    (p.grad - theirs.get_parameter(f"base_model.model.{name.rsplit('.', 1)[0]}.{name.rsplit('.', 1)[1]}.default.weight")
     .grad).abs().max().item()
    for name, p in lora_parameters(ours).items()
)  # fmt: skip
print(f"loss: ours {our_loss.item():.6f}, peft {their_loss.item():.6f}; largest adapter-gradient difference "
      f"{gradient_gap:.1e}; trainable parameters: ours {sum(p.numel() for p in lora_parameters(ours).values()):,}, "
      f"peft {sum(p.numel() for p in theirs.parameters() if p.requires_grad):,}")  # fmt: skip
merged_ours, merged_theirs = merge_lora(copy.deepcopy(ours)), theirs.merge_and_unload()
merge_gap = max((a - b).abs().max().item()
                for a, b in zip(merged_ours.state_dict().values(), merged_theirs.state_dict().values(), strict=True))  # fmt: skip
print(f"merged weights: the same names, largest difference {merge_gap:.1e}")
assert abs(our_loss.item() - their_loss.item()) < 1e-5 and gradient_gap < 1e-5 and merge_gap < 1e-6
assert list(merged_ours.state_dict()) == list(merged_theirs.state_dict()) == list(base.state_dict())

# %% [markdown]
# Merging adds $\frac{\alpha}{r}BA$ to $W$, and unmerging subtracts it: the pretrained weight comes back within
# float rounding, so one base model can serve several adapters.

# %% tags=["nbval-ignore-output"]
layer = ours.blocks[0].self_attn.w_q
pretrained_weight = layer.base.weight.detach().clone()
with torch.no_grad():
    probe = torch.ones(3, layer.base.in_features, device=layer.base.weight.device)  # any input will do: (3, in)
    before = layer(probe)
    layer.merge()
    after = layer(probe)
    layer.unmerge()
print(f"merged layer's output vs adapter's: {(after - before).abs().max().item():.1e}; weight after unmerging vs the "
      f"pretrained one: {(layer.base.weight - pretrained_weight).abs().max().item():.1e}")  # fmt: skip
assert torch.allclose(after, before, atol=1e-5) and torch.allclose(layer.base.weight, pretrained_weight, atol=1e-6)

# %% [markdown]
# ### What LoRA saves, measured
#
# The next cell trains the same batch for a few steps both ways, with AdamW, and measures the trainable parameters, the
# optimizer's state (AdamW keeps two numbers per trainable parameter) and the time of the fastest step. Then it counts
# the first adapters of this section (rank 8 on the query and value projections only) on a model of GPT-2's size
# (built on PyTorch's `meta` device, which holds shapes and no numbers).

# %% tags=["nbval-ignore-output"]
TARGETS = ["w_q", "w_k", "w_v", "w_o", "w_1", "w_2"]  # every linear layer of every block


def step_costs(model, steps=15):
    """Trainable parameters, bytes of AdamW's state, and the seconds of the fastest training step on one batch (the
    fastest: what the step costs, without what other programs took of the machine meanwhile)."""
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    batch = torch.randint(0, tokenizer.vocab_size, (16, 49), generator=torch.Generator().manual_seed(0)).to(device)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        loss = model(batch[:, :-1], batch[:, 1:])[1]
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        synchronize(device)  # on a GPU, wait until the step has run (its work is queued); on the CPU, nothing
        times.append(time.perf_counter() - start)
    state = sum(t.numel() * t.element_size() for s in optimizer.state.values() for t in s.values() if t.dim() > 0)
    return sum(p.numel() for p in params), state, min(times[3:])


full_costs = step_costs(pretrained_model().train())
lora_model = pretrained_model().train()
add_lora(lora_model, TARGETS, r=16, lora_alpha=32)
lora_costs = step_costs(lora_model)
for name, (n, state, seconds) in [("full fine-tuning", full_costs), ("LoRA r=16, block linears", lora_costs)]:
    print(f"{name:24} {n:>9,} trainable, AdamW state {state / 1e6:5.2f} MB, {seconds * 1e3:5.1f} ms a step (fastest)")
with torch.device("meta"):
    gpt2_sized = GPT(50257, block_size=1024, d_model=768, n_heads=12, n_layers=12)
    add_lora(gpt2_sized, ["w_q", "w_v"], r=8, lora_alpha=16)
gpt2_trainable, gpt2_total = count_parameters(gpt2_sized), count_parameters(gpt2_sized, trainable_only=False)
print(f"GPT-2 (124 M) with r=8 on w_q, w_v: {gpt2_trainable:,} trainable of {gpt2_total:,} "
      f"({gpt2_trainable / gpt2_total:.2%}); AdamW's state {8 * gpt2_trainable / 1e6:.1f} MB instead of "
      f"{8 * (gpt2_total - gpt2_trainable) / 1e6:,.0f} MB")  # fmt: skip
print(f"AdamW's state: {full_costs[1] / lora_costs[1]:.1f} times smaller with LoRA; a step {lora_costs[2] / full_costs[2]:.2f} "
      "times as long")  # fmt: skip
assert lora_costs[1] < full_costs[1] / 5 and lora_costs[2] > full_costs[2] / 2  # step time: not even twice as fast

# %% [markdown]
# LoRA divides what the optimizer stores by the ratio printed. It does not make a step of this small model twice as
# fast (asserted); whether it makes a step faster at all depends on the processor and the number of threads (the
# ratio of the step times is printed: above 1, a LoRA step took longer than a full one). The forward and
# backward passes still run through every frozen layer, the gradients still flow back through them to reach earlier
# adapters, and each adapter adds two small products. What LoRA saves is memory and storage (an adapter per task
# instead of a model per task); the compute saved is the frozen weights' gradients, which on a large model on a GPU
# is a real part of a step and here is lost in the overhead.

# %% [markdown]
# ## 4. Instruction tuning
#
# A pretrained model continues text. Asked "Count the words: a dog runs", it writes whatever tends to follow such a
# line in Shakespeare or in captions. **Supervised instruction tuning** trains it on (prompt, response) pairs
# written in a fixed **chat template**, so that after the template's "assistant" marker it writes a response, and
# then a marker that says it is done.
#
# ### The data
#
# The course builds its instructions from its own data, so they run offline and every answer is exactly right or
# wrong: dates to normalise (chapter 06's task), and 3 to 5 words from a Multi30k caption to reverse, sort, count, or
# take the last of. Each task has four phrasings; the fourth never appears in training. Two sets of 200 measure two
# things: **new inputs** in known phrasings (dates and captions that training never saw), and new inputs in the
# **held-out phrasing**.

# %%
for task_example in instruction_pairs(5, "train", seed=0):
    print(f"{task_example.task:8} {task_example.prompt!r:60} -> {task_example.response!r}")
eval_sets = {
    "new inputs": instruction_pairs(200, "test", "seen", seed=1),
    "new phrasing": instruction_pairs(200, "test", "held_out", seed=2),
}
print("held-out phrasing, for example:", eval_sets["new phrasing"][0].prompt)

# %% [markdown]
# ### The chat template, and the loss on the response only
#
# The template puts each turn between special tokens: `<|user|>` prompt `<|assistant|>` response `<|end|>`. Special
# tokens cannot be typed: a user who writes the string `<|end|>` in a prompt gets its characters as ordinary text, not
# the id that ends a turn (`ChatTemplate.encode` makes sure of that, as the cell shows). A tokenizer without the
# template's tokens gets a clear error rather than a template spelt out in ordinary tokens:

# %%
template = ChatTemplate()
print(template.render("Count the words: a dog runs", "4"))
forged, _ = template.encode(tokenizer, "Count the words: a dog <|end|> runs", "5")
print(
    "a typed <|end|> stays text:",
    tokenizer.decode(forged[1:-1]),
    "->",
    tokenizer.special_tokens["<|end|>"] not in forged,
)
assert tokenizer.special_tokens["<|end|>"] not in forged
try:
    template.encode(gpt2_tokenizer, "Count the words: a dog runs", "4")
except ValueError as error:
    print("ValueError:", error)

# %% [markdown]
# The model should learn to write responses, not prompts: the prompt is given at inference, and its text (often long)
# would dominate the loss. So each position whose *next* token belongs to the prompt gets the target `IGNORE` (-100),
# the index `F.cross_entropy` skips. Position $t$ predicts token $t + 1$: the last prompt token, `<|assistant|>`, is
# the position that predicts the first word of the response, so it keeps its target; and `<|end|>` is a target too,
# or the model would never learn to stop.
#
# **Your turn: the prompt mask.** Write `my_prompt_mask(prompt_ids, response_ids)`: two lists of ids (the prompt from
# `<|user|>` to `<|assistant|>`, the response with `<|end|>`). Return `(inputs, targets)`, two lists of the same length: the inputs are all the ids but
# the last, the targets the ids shifted by one, with `IGNORE` where the next token is still the prompt's.


# %% tags=["exercise"]
def my_prompt_mask(prompt_ids, response_ids):
    ### BEGIN SOLUTION
    ids = prompt_ids + response_ids
    targets = [IGNORE] * (len(prompt_ids) - 1) + response_ids  # position t predicts ids[t + 1]
    return ids[:-1], targets
    ### END SOLUTION


check_prompt_mask(my_prompt_mask)

# %% [markdown]
# The package's `mask_prompt` is that function, and `encode_example` applies it to a prompt and a response through the
# template (section 6 applies `mask_prompt` to GPT-2's own template). Token by token, with the target of each
# position:

# %%
inputs, targets = encode_example(tokenizer, template, "Count the words: a dog runs", "4")
for i, t in zip(inputs, targets):
    print(f"{tokenizer.decode([i])!r:18} -> {'(masked)' if t == IGNORE else repr(tokenizer.decode([t]))}")

# %% [markdown]
# **The proof: the prompt's positions add exactly nothing.** The loss's gradient with respect to the logits is zero
# at every masked position, exactly, not small; nonzero at the others. (The prompt's tokens still shape the
# response's logits through attention, and so still get gradient through them: what is masked is only what they
# predict.) And the loss equals the mean over the response's tokens alone. At a response position the absolute
# gradients sum to $2(1 - p)/N$, with $p$ the probability of the right token and $N$ the number of targets (here 2):
# near 1, since the untuned model gives the right tokens almost no probability.

# %%
model = pretrained_model()
x, y = (torch.tensor([v], device=device) for v in (inputs, targets))  # (1, T) each
logits = model(x)[0]
logits.retain_grad()
loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))  # ignore_index=-100 by default
loss.backward()
grad = logits.grad[0].abs().sum(dim=-1)  # (T,): how much each position's logits are pushed
masked = y[0] == IGNORE
print("gradient at the prompt's positions:", grad[masked].tolist())
print("gradient at the response's positions:", [f"{g:.3f}" for g in grad[~masked].tolist()])
response_only = F.cross_entropy(logits[0, ~masked], y[0, ~masked])
assert bool((grad[masked] == 0).all()) and bool((grad[~masked] > 0).all()) and torch.allclose(loss, response_only)

# %% [markdown]
# **Batches of different lengths.** `pad_examples` pads each example on the right, inputs with any id and targets
# with `IGNORE`. A causal model never looks right, so the padding changes no real position's logits, and the masked
# targets keep it out of the loss: each example gets, within float rounding, the logits it gets alone.

# %% tags=["nbval-ignore-output"]
pairs = instruction_pairs(4, "train", seed=3)
examples = [encode_example(tokenizer, template, p.prompt, p.response) for p in pairs]
END = tokenizer.special_tokens[template.end]
x, y = pad_examples(examples, pad_id=END)  # (B, T) each
print("lengths:", [len(i) for i, _ in examples], "-> padded batch", tuple(x.shape))
model.eval()
with torch.no_grad():
    batched = model(x.to(device))[0]
    gaps = [(batched[row, : len(i)] - model(torch.tensor([i], device=device))[0][0]).abs().max().item()
            for row, (i, _) in enumerate(examples)]  # fmt: skip
print(f"largest difference from each example alone: {max(gaps):.1e}")
assert max(gaps) < 1e-4

# %% [markdown]
# ### Scoring: exact match in one forward pass
#
# An answer is right when greedy decoding writes exactly the response and then `<|end|>`. Greedy decoding picks the
# most likely token at each step; so it writes the right answer exactly when, fed the right answer (teacher forcing),
# the model's most likely token is the right one at **every** response position, `<|end|>` included. That needs one
# forward pass over a padded batch instead of one generation per example. The same pass gives the loss per response
# token, which moves before exact match does. (A cell below checks the shortcut against real generation.)


# %% tags=["nbval-ignore-output"]
def instruction_batch(pairs):
    """Instruction pairs as one padded batch: inputs and targets, (B, T) each."""
    return pad_examples([encode_example(tokenizer, template, p.prompt, p.response) for p in pairs], pad_id=END)


@torch.no_grad()
def score(model, pairs):
    """Exact match (every response token, <|end|> included, is the argmax) and the loss per response token."""
    model.eval()
    x, y = (t.to(device) for t in instruction_batch(pairs))  # (B, T) each
    logits = model(x)[0]  # (B, T, V)
    answer = y != IGNORE
    right = ((logits.argmax(dim=-1) == y) | ~answer).all(dim=1)  # (B,)
    loss = F.cross_entropy(logits[answer], y[answer])
    by_task = {}
    for p, ok in zip(pairs, right.tolist()):
        by_task.setdefault(p.task, []).append(ok)
    return {"exact": right.float().mean().item(), "loss": loss.item(),
            "by task": {t: sum(v) / len(v) for t, v in by_task.items()}}  # fmt: skip


before = {name: score(base, pairs) for name, pairs in eval_sets.items()}
for name, s in before.items():
    print(f"pretrained, {name}: exact match {s['exact']:.1%}, loss {s['loss']:.2f} nats per response token")
x, y = (t.to(device) for t in instruction_batch(eval_sets["new inputs"]))  # (B, T) each
with torch.no_grad():
    token_loss = F.cross_entropy(base(x)[0].transpose(1, 2), y, ignore_index=IGNORE, reduction="none")  # (B, T)
at_end, in_answer = y == END, (y != IGNORE) & (y != END)
print(f"new inputs, by target: <|end|> {token_loss[at_end].mean():.2f} nats, the answer's own tokens "
      f"{token_loss[in_answer].mean():.2f}; a uniform guess over {tokenizer.vocab_size:,} tokens: "
      f"ln {tokenizer.vocab_size:,} = {math.log(tokenizer.vocab_size):.2f}")  # fmt: skip
uniform = math.log(tokenizer.vocab_size)
assert before["new inputs"]["loss"] > uniform and token_loss[at_end].mean() > 2 * uniform
assert abs(token_loss[in_answer].mean() - uniform) < 1.0

# %% [markdown]
# The pretrained model pays more per response token than a uniform guess over the 1,024 tokens would (printed).
# Split by target: on the answers' own tokens it pays about what a uniform guess does, within a nat of it (asserted);
# on `<|end|>` it pays over twice as much (asserted), since pretraining only ever pushed that token's row down
# (section 2). Tuning has both to teach: the answers, and where to stop.

# %% [markdown]
# ### Tuning: all the weights, or LoRA adapters
#
# Each run below starts from the pretrained weights and trains on fresh instruction pairs (300 steps of 16), at one
# peak learning rate per method (`METHODS`: LoRA's adapters, starting at zero, take a larger one, as is usual; both
# picked after a few trial runs, not searched). Three seeds each: the seed draws the order of the pairs and LoRA's $A$.
# Six runs: the cell takes one to three minutes on two CPU cores, depending on the processor (each run's time is
# printed, and docs/lessons/12_fine_tuning.md times each section), longer with one thread.
#
# Before you run it, predict what tuning on instructions does to the model's loss on Tiny Shakespeare, which it was
# pretrained on:
#
# - **(a)** it stays within 0.1 nat per token after both methods: tuning only taught a new format;
# - **(b)** it falls by more than 0.1 nat after both: more training, a better model;
# - **(c)** it rises by more than half a nat after both;
# - **(d)** it rises by more than half a nat after full fine-tuning and stays within 0.1 nat after LoRA, whose
#   pretrained weights are frozen.

# %% tags=["exercise"]
### BEGIN SOLUTION
my_prediction = "c"
### END SOLUTION
check_prediction("tuning-forgets", my_prediction)  # your answer: "a", "b", "c" or "d"

# %% tags=["nbval-ignore-output"]
train_pairs = instruction_pairs(300 * 16, "train", "seen", seed=0)
print(f"{len(train_pairs):,} training pairs, each seen once")
METHODS = {"full": 1e-3, "LoRA": 3e-3}  # peak learning rates


def instruction_batches(pairs, batch_size, seed):
    """The pairs in a seeded order, as padded batches of (inputs, targets)."""
    order = random.Random(seed).sample(pairs, len(pairs))
    for start in range(0, len(order) - batch_size + 1, batch_size):
        yield instruction_batch(order[start : start + batch_size])


def tune(method, seed, steps=300, batch_size=16):
    set_seed(seed)
    model = pretrained_model()
    if method == "LoRA":
        add_lora(model, TARGETS, r=16, lora_alpha=32)
    config = TrainConfig(steps=steps, batch_size=batch_size, lr=METHODS[method], warmup_steps=20, schedule="cosine",
                         label_smoothing=0.0)  # fmt: skip
    history = train(model, instruction_batches(train_pairs, batch_size, seed), lambda m, x, y: m(x, y)[1], config,
                    device=device, desc=f"{method}, seed {seed}")  # fmt: skip
    return model, history.seconds


runs = []
for method in METHODS:
    for seed in (0, 1, 2):
        tuned, seconds = tune(method, seed)
        scores = {name: score(tuned, pairs) for name, pairs in eval_sets.items()}
        val = estimate_loss(tuned, {"val": val_ids}, batch_size=16, iters=20)["val"]
        runs.append({"method": method, "seed": seed, "seconds": seconds, "val": val, "scores": scores, "model": tuned})

# %% [markdown]
# One row per run. "Shakespeare" is the validation loss the pretrained model had at the top of section 2.

# %% tags=["nbval-ignore-output"]
print(f"{'':16} {'new inputs':>11} {'new phrasing':>13} {'response loss':>14} {'Shakespeare':>12} {'time':>6}")
print(f"{'pretrained':16} {before['new inputs']['exact']:>11.1%} {before['new phrasing']['exact']:>13.1%} "
      f"{before['new inputs']['loss']:>14.2f} {base_val_loss:>12.2f}")  # fmt: skip
for run in runs:
    s = run["scores"]
    print(f"{run['method'] + ', seed ' + str(run['seed']):16} {s['new inputs']['exact']:>11.1%} "
          f"{s['new phrasing']['exact']:>13.1%} {s['new inputs']['loss']:>14.2f} {run['val']:>12.2f} "
          f"{run['seconds']:>5.0f}s")  # fmt: skip
for method in METHODS:
    mine = [r for r in runs if r["method"] == method]
    exact = [r["scores"]["new inputs"]["exact"] for r in mine]
    print(f"{method}: new inputs {statistics.mean(exact):.1%} ± {statistics.stdev(exact):.1%} over 3 seeds (mean ± sd); "
          f"Shakespeare loss {statistics.mean(r['val'] for r in mine):.2f}")  # fmt: skip

# %% [markdown]
# Per task, for the first seed of each method, against the most frequent response of each task given every time (a
# model that learned only the format and the likeliest answer):

# %% tags=["nbval-ignore-output"]
frequent = {}
for p in eval_sets["new inputs"]:
    frequent.setdefault(p.task, []).append(p.response)
baseline = {t: max(r.count(a) for a in set(r)) / len(r) for t, r in frequent.items()}
print(f"{'':22}" + "".join(f"{t:>9}" for t in baseline))
print(f"{'most frequent answer':22}" + "".join(f"{baseline[t]:>9.0%}" for t in baseline))
for run in (r for r in runs if r["seed"] == 0):
    by_task = run["scores"]["new inputs"]["by task"]
    print(f"{run['method'] + ', seed 0':22}" + "".join(f"{by_task[t]:>9.0%}" for t in baseline))

# %% [markdown]
# **The shortcut, checked, and what the answers look like.** Greedy generation, token by token, on 50 new inputs:
# for the first tuned model it must give the same verdicts as the one-pass exact match. It also shows what the
# pretrained model does with the same prompts, and how often each model ends its answer with `<|end|>`.


# %% tags=["nbval-ignore-output"]
def generate_answers(model, pairs, max_new_tokens=12):
    """Greedy answers to the prompts, each (the ids before <|end|>, whether <|end|> came, whether that is the right
    answer and then <|end|>)."""
    model.eval()
    out = []
    with torch.no_grad():
        for p in pairs:
            prompt_ids, response_ids = template.encode(
                tokenizer, p.prompt, p.response
            )  # the response ends with <|end|>
            ids = model.generate(torch.tensor([prompt_ids], device=device), max_new_tokens, temperature=0)
            ids = ids[0, len(prompt_ids) :].tolist()
            answer, stopped = (ids[: ids.index(END)], True) if END in ids else (ids, False)
            out.append((answer, stopped, stopped and [*answer, END] == response_ids))
    return out


checked = eval_sets["new inputs"][:50]
tuned = runs[0]["model"]
answers = {"pretrained": generate_answers(base, checked), "full, seed 0": generate_answers(tuned, checked)}
for name, got in answers.items():
    print(
        f"{name:13} ends with <|end|>: {sum(s for _, s, _ in got):2} of 50; right: {sum(r for _, _, r in got):2} of 50"
    )
generated_right = [right for _, _, right in answers["full, seed 0"]]
teacher_forced = [score(tuned, [p])["exact"] == 1.0 for p in checked]
print("one-pass exact match gives the same verdict on every example:", generated_right == teacher_forced)
assert generated_right == teacher_forced
for p, (before_ids, _, _), (after_ids, _, _) in list(zip(checked, answers["pretrained"], answers["full, seed 0"]))[:5]:
    print(f"{p.prompt!r:48} pretrained {tokenizer.decode(before_ids)!r:28} tuned {tokenizer.decode(after_ids)!r:16} "
          f"(right: {p.response!r})")  # fmt: skip

# %% [markdown]
# What these cells say, in this run (the next cell asserts each point, but what is said to be this run's alone):
#
# - **300 steps teach the format.** The pretrained model gets nothing right and never writes `<|end|>`; it goes on
#   writing captions or Shakespeare. Every tuned run cut the loss on the responses to less than half, and the tuned
#   model answers short and stops.
# - **They teach the tasks hardly at all.** Task by task, exact match stayed at or near what always giving each
#   task's most frequent answer would score (within 2 answers of 40, asserted; in this run at or below it), in the
#   per-task table, the first seed of each method: the tuned model learned the
#   *kind* of answer each task wants (a number for a count, a word or two for the word tasks, though not always words
#   of the prompt), not yet to count, sort or reverse, nor even to give the likeliest answer every time. Whether more
#   steps would teach them is the first question of "Going further"; section 6 tunes GPT-2 itself, on Colab.
# - **LoRA learned less than full fine-tuning** at these settings, by the loss on the responses, higher at every seed
#   (on new inputs their exact matches are too close to tell apart: the three LoRA runs scored the same 19 of 200 in
#   this run, and the per-task table shows that the first seed's 19 all come from the count and last-word tasks; on the held-out phrasing full fine-tuning scored
#   higher at every seed, in this run by 3 to 10 answers of 200), while it trained a small part of the weights
#   (section 3).
# - **Tuning costs the model elsewhere.** Its loss on Tiny Shakespeare rose by more than half a nat per token after
#   both methods, and in this run by more after LoRA than after full fine-tuning (the means printed). LoRA's frozen
#   weights do not keep the *function* frozen, since the adapters change every adapted layer's output on every text.
#   Which method forgets more is not settled here: LoRA ran at three times the learning rate, and Biderman et al.
#   (2024, "LoRA Learns Less and Forgets Less") found the opposite at scale. This is **catastrophic forgetting**; mixing some pretraining text into the tuning batches, or tuning less,
#   limits it.

# %%
response_loss = {m: [r["scores"]["new inputs"]["loss"] for r in runs if r["method"] == m] for m in METHODS}
assert before["new inputs"]["exact"] == 0 and before["new phrasing"]["exact"] == 0
assert sum(s for _, s, _ in answers["pretrained"]) == 0 and sum(s for _, s, _ in answers["full, seed 0"]) >= 45
assert all(r["scores"]["new inputs"]["loss"] < before["new inputs"]["loss"] / 2 for r in runs)
assert max(response_loss["full"]) < min(response_loss["LoRA"])
for run in (r for r in runs if r["seed"] == 0):  # per task, near the most frequent answer: within 2 answers of 40
    assert all(run["scores"]["new inputs"]["by task"][t] <= baseline[t] + 0.05 for t in baseline)
assert all(r["val"] > base_val_loss + 0.5 for r in runs)
forgotten = {m: statistics.mean(r["val"] for r in runs if r["method"] == m) for m in METHODS}
assert forgotten["LoRA"] > forgotten["full"]

# %% [markdown]
# ## 5. Classification: what pretraining is worth
#
# A language model's last hidden state at the last token has read the whole text (causal attention: only the last
# position has). A new linear layer on it, trained with everything else, makes a classifier: Radford et al. (2018)
# did this with the first GPT, and Hugging Face's `GPT2ForSequenceClassification` is that layer; the package's
# `SequenceClassifier` does the same (the course's tests compare the two). Its output: one logit per class, `(B, 2)`
# here. It also takes each text's length, `lengths` `(B,)`: the batch is padded on the right, so a short text's last
# token is not at the last position but at `lengths - 1`, where the classifier reads the hidden state.
#
# The task: is a caption as written, or are its words shuffled? A model that knows English word order should tell at
# once; one that starts from random weights has only the few examples it is tuned on. Both models below have the same
# architecture, steps and learning rate; only the starting weights differ. They train on captions from Multi30k's
# training part and are scored on its test part, which no model saw.


# %% tags=["nbval-ignore-output"]
def shuffled_or_not(split, n, seed):
    """n captions of `split` in lower case without punctuation (a capital or a full stop in the middle would give a
    shuffle away), half with their words shuffled (label 0), half as written (label 1)."""
    rng = random.Random(seed)
    captions = [re.findall(r"[a-z]+", en.lower()) for _, en in load_multi30k(split)]
    out = []
    for words in rng.sample([c for c in captions if 6 <= len(c) <= 14], n):
        caption = " ".join(words)
        if rng.random() < 0.5:
            while (mixed := rng.sample(words, len(words))) == words:
                pass
            out.append((" ".join(mixed), 0))
        else:
            out.append((caption, 1))
    return out


def classification_batch(examples):
    """The ids (B, T), padded on the right; each row's length (B,); the labels (B,)."""
    ids = [tokenizer.encode(text)[:64] for text, _ in examples]
    x = pad_batch(ids, END)  # (B, T), padded on the right
    return x, torch.tensor([len(i) for i in ids]), torch.tensor([label for _, label in examples])


train_examples, test_examples = shuffled_or_not("train", 3200, seed=0), shuffled_or_not("test", 750, seed=1)
print(train_examples[:2])


def fine_tune_classifier(backbone, steps=100, batch_size=32, seed=0):
    set_seed(seed)
    classifier = SequenceClassifier(backbone, 2).to(device)
    batches = (classification_batch(train_examples[i * batch_size : (i + 1) * batch_size]) for i in range(steps))
    config = TrainConfig(steps=steps, batch_size=batch_size, lr=1e-3, warmup_steps=10, schedule="cosine",
                         label_smoothing=0.0)  # fmt: skip
    train(classifier, batches, lambda m, x, lengths, labels: F.cross_entropy(m(x, lengths), labels), config,
          device=device, desc="classifier")  # fmt: skip
    classifier.eval()
    with torch.no_grad():
        x, lengths, labels = classification_batch(test_examples)
        right = classifier(x.to(device), lengths.to(device)).argmax(dim=-1).cpu() == labels
    return right


set_seed(0)
from_scratch = GPT(tokenizer.vocab_size, **asdict(pretrained.recipe.model))
results = {"pretrained": fine_tune_classifier(pretrained_model()), "from scratch": fine_tune_classifier(from_scratch)}
gap = results["pretrained"].float() - results["from scratch"].float()  # (750,): per test caption
boot = torch.Generator().manual_seed(0)
resampled = torch.stack([gap[torch.randint(0, len(gap), (len(gap),), generator=boot)].mean() for _ in range(1000)])
low, high = resampled.quantile(0.025).item(), resampled.quantile(0.975).item()
for name, right in results.items():
    print(f"{name:13} {right.float().mean():.1%} of {len(right)} test captions right")
print(f"pretraining is worth {100 * gap.mean():+.1f} percentage points (95% bootstrap interval over the test captions, "
      f"for this one training seed: {100 * low:+.1f} to {100 * high:+.1f})")  # fmt: skip
assert low > 0.02

# %% [markdown]
# Same model, same 100 steps on the same 3,200 captions: the pretrained one starts knowing which word orders are
# English, and ends ahead by the difference printed, whose interval excludes zero. From scratch, the model learns much
# of it from those captions too (a shuffled caption often has "a a" or a word after "the" that no caption has), but it
# must learn it from 3,200 labelled examples, where the pretrained model had read all of Multi30k's training captions
# and Tiny Shakespeare before.

# %% [markdown]
# ## 6. Real GPT-2 and a public instruction set, where they can be downloaded
#
# On Colab with a GPU, the next cell does section 4 at full size: it loads the released GPT-2 (124 M parameters) into
# the course's `GPT` with `from_hf`, adds LoRA adapters (r = 8 on the attention's four projections), and tunes them on
# Stanford's Alpaca instructions (downloaded from GitHub) in a plain-text template that GPT-2's own
# tokenizer can write, with `<|endoftext|>` as the end. It prints one held-out instruction's answer before and after.
# Where there is no GPU, or nothing can be downloaded, it says so and skips; nothing above depends on it.

# %% tags=["nbval-ignore-output"]
ALPACA = "https://raw.githubusercontent.com/tatsu-lab/stanford_alpaca/main/alpaca_data.json"


def download_gpt2_and_alpaca():
    """The released GPT-2 from the Hugging Face hub and the Alpaca pairs, or None where they cannot be downloaded."""
    try:
        with urllib.request.urlopen(ALPACA, timeout=30) as response:
            pairs = json.loads(response.read())
        return transformers.GPT2LMHeadModel.from_pretrained("gpt2"), pairs
    except OSError:  # no network (urllib's URLError), or the hub unreachable or switched off (HF_HUB_OFFLINE=1)
        return None


def alpaca_example(pair, eot, max_len=256):
    """(inputs, targets) of one Alpaca pair in its plain-text template, the loss masked on the prompt."""
    prompt = f"### Instruction:\n{pair['instruction']}\n\n"
    prompt += f"### Input:\n{pair['input']}\n\n" if pair["input"] else ""
    inputs, targets = mask_prompt(gpt2_tokenizer.encode(prompt + "### Response:\n"),
                                  [*gpt2_tokenizer.encode(pair["output"]), eot])  # fmt: skip
    return inputs[:max_len], targets[:max_len]


def tune_on_alpaca(released, alpaca, steps=300, batch_size=8):
    """Section 4 at GPT-2's size: the released model in the course's GPT, LoRA on its attention, tuned on Alpaca."""
    gpt2 = from_hf(released).to(device)
    held_out, tuning_pairs = alpaca[0], alpaca[1:]
    eot = gpt2_tokenizer.special_tokens["<|endoftext|>"]
    question = gpt2_tokenizer.encode(f"### Instruction:\n{held_out['instruction']}\n\n### Response:\n")

    def answer():
        gpt2.eval()
        out = gpt2.generate(torch.tensor([question], device=device), 60, temperature=0)[0, len(question) :].tolist()
        return gpt2_tokenizer.decode(out[: out.index(eot)] if eot in out else out)

    print("instruction:", held_out["instruction"])
    print("GPT-2 before:", repr(answer()))
    add_lora(gpt2, ["w_q", "w_k", "w_v", "w_o"], r=8, lora_alpha=16)
    order = random.Random(0).sample(tuning_pairs, steps * batch_size)
    batches = (pad_examples([alpaca_example(p, eot) for p in order[i : i + batch_size]], pad_id=eot)
               for i in range(0, len(order), batch_size))  # fmt: skip
    config = TrainConfig(steps=steps, batch_size=batch_size, lr=3e-4, warmup_steps=min(20, steps), schedule="cosine",
                         label_smoothing=0.0)  # fmt: skip
    history = train(gpt2, batches, lambda m, x, y: m(x, y)[1], config, device=device, desc="GPT-2 + LoRA on Alpaca")
    first, last = statistics.mean(history.loss[:20]), statistics.mean(history.loss[-20:])
    print(f"tuned {count_parameters(gpt2):,} adapter parameters in {history.seconds:.0f} s; loss {first:.2f} (first 20 "
          f"steps) -> {last:.2f} (last 20)")  # fmt: skip
    print("GPT-2 after: ", repr(answer()))


downloaded = download_gpt2_and_alpaca() if device.type == "cuda" else None
if downloaded is not None:
    tune_on_alpaca(*downloaded)
else:
    print("skipped: this needs a GPU and the internet (run this chapter on Colab with a GPU to tune real GPT-2)")

# %% [markdown]
# ## Pitfalls
#
# | Mistake | What happens | Fix |
# | --- | --- | --- |
# | a tokenizer other than the model's own (or GPT-2's merges applied in another order than by rank) | the model reads ids it was never trained on; no error | load the model's tokenizer files; merge the lowest-ranked pair first |
# | raw bytes written into the vocabulary file | spaces and newlines break the file's format | draw every byte as a printable character (`bytes_to_unicode`) |
# | a user's text encoded with special tokens allowed | a user forges `<\|end\|>` or `<\|endoftext\|>` | encode user text with special tokens disallowed (or as text) |
# | decoding each token alone while streaming | `�` in the middle of a character | keep the bytes until the character is complete (`decode_stream`) |
# | LoRA's $B$ initialised randomly | tuning starts from a damaged model | $B = 0$, $A$ random |
# | the update's scale forgotten, or $r/\alpha$ | a new rank needs a new learning rate | scale by $\alpha / r$ |
# | the loss on the prompt too | the model learns to write prompts; long prompts swamp the loss | targets `IGNORE` wherever the next token is the prompt's |
# | the prompt masked with 0 | the model learns to predict token 0 | `IGNORE` = -100, `F.cross_entropy`'s `ignore_index` |
# | `<\|end\|>` masked | the tuned model never stops | keep the end token as a target |
# | judging LoRA by the pretrained weights alone | "frozen weights, so nothing forgotten": wrong | measure the loss on pretraining text before and after |
#
# ## Summary
#
# - GPT-2's tokenizer is byte-level BPE: bytes drawn as printable characters, pieces cut by a regular expression,
#   merges applied lowest rank first, special tokens cut out before. Rebuilt here, it gives the ids of `tiktoken` and
#   Hugging Face's tokenizer on every corpus tried; incremental pair counts learn the same merges many times faster.
# - LoRA trains $\frac{\alpha}{r}BA$ beside a frozen $W$, from $B = 0$. Proven equal to `peft` in loss, gradients and
#   merged weights; it divides the optimizer's memory, not (on a small model on a CPU) the time of a step.
# - Instruction tuning is next-token training on templated pairs with the prompt's targets masked (proven: zero
#   gradient there). Measured over three seeds each, 300 steps of full fine-tuning or LoRA taught the small model the
#   format (answer, then stop) and little of the tasks, and both raised its loss on the text it was pretrained on.
# - A pretrained model with a new head classified better than the same model from scratch after the same steps, by
#   the margin printed, its bootstrap interval excluding zero.
#
# ## Exercises
#
# {{EXERCISES}}
#
# **Exercise 1 · A conversation of several turns.** Section 4 masked one prompt and one response. A chat is several
# turns, `<|user|>` prompt `<|assistant|>` response `<|end|>`, then the next turn, all in one sequence. Write
# `my_multi_turn_mask(turns)`: `turns` is a list of `(prompt_ids, response_ids)` pairs of lists, each as
# `ChatTemplate.encode` returns them. Return `(inputs, targets)` for the whole conversation as one sequence: every
# response (with its `<|end|>`) a target, every prompt masked with `IGNORE`. With one turn, it is `encode_example`'s
# mask. Careful at the boundaries: what does the last token of one turn predict?


# %% tags=["exercise"]
def my_multi_turn_mask(turns):
    ### BEGIN SOLUTION
    ids, labels = [], []  # labels: what each id is as a target, IGNORE for a prompt's
    for prompt_ids, response_ids in turns:
        ids += prompt_ids + response_ids
        labels += [IGNORE] * len(prompt_ids) + response_ids
    return ids[:-1], labels[1:]  # position t predicts ids[t + 1]: shift once, for the whole conversation
    ### END SOLUTION


check_multi_turn_mask(my_multi_turn_mask)

# %% [markdown]
# **Exercise 2 · Decoding a stream of bytes.** Section 1 showed `decode_stream` wait for the rest of the robot emoji
# before showing it. Write that rule yourself: `my_stream_decode(chunks)` takes a list of `bytes` (what each generated
# token decodes to, say) and returns one `str` per chunk, the text that chunk completes (`""` when it completes no
# character: unlike `decode_stream`, which skips those, the list has as many strings as `chunks`). Joined, the strings
# are the whole text, with no `�`, and each character appears as soon as its last byte
# has arrived. Hint: `bytes.decode("utf-8")` raises `UnicodeDecodeError` on bytes that end inside a character; a
# character is 1 to 4 bytes, so try decoding all you hold, then all but the last byte, and so on, and keep what did
# not decode for the next chunk.


# %% tags=["exercise"]
def my_stream_decode(chunks):
    ### BEGIN SOLUTION
    out, pending = [], b""
    for chunk in chunks:
        pending += chunk
        for cut in range(len(pending), max(len(pending) - 4, -1), -1):  # keep at most 3 bytes of a cut character
            try:
                text = pending[:cut].decode("utf-8")
            except UnicodeDecodeError:
                continue
            out.append(text)
            pending = pending[cut:]
            break
    return out
    ### END SOLUTION


check_stream_decode(my_stream_decode)

# %% [markdown]
# **Going further.** Tune three times as long (make `train_pairs` three times as many, then `tune("full", 0,
# steps=900)`): which tasks rise above the most-frequent-answer line, and what happens to the Shakespeare loss? Tune
# with some Tiny Shakespeare windows mixed into every batch: does the Shakespeare loss still rise, and what does it cost
# in exact match? Try LoRA with `r=2` and `r=64`, `lora_alpha` kept at 32 (so $\alpha / r$ changes with $r$, as section
# 3 says): how much does the rank matter here? Add a task to the instructions (the first word, say) and hold it out
# entirely: does the tuned model do it from the instruction alone? On Colab, change `tune_on_alpaca`'s `add_lora` to
# `["w_q", "w_v"]` and compare the adapter's size with section 3's count.
