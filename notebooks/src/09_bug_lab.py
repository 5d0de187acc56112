# %% [markdown]
# # 09 · The bug lab: classic Transformer bugs, trained, diagnosed and fixed
#
# {{COLAB_BADGE}}
#
# *Transformers from Scratch*, Part I, chapter 9 of 10 · previous: [08 · Translating real sentences](08_translation.ipynb) ·
# next: [10 · GPT-2 and Llama](10_gpt2_and_llama.ipynb)
#
# Most Transformer bugs raise no error. The code runs, the loss falls, and the model is quietly wrong. Each
# chapter so far named a few such mistakes in its pitfall table; this chapter makes them the lesson. For each of
# twelve classic bugs you will see the buggy code, written as it is found in public code; for most, what it does to
# a model trained for a few seconds on a task of this course, measured, and the **probe** that catches it without
# reading the code; and the fix. Then four mystery modules are yours to diagnose: what, if anything, is wrong with
# each, with no section of its own to read the answer from.
#
# **You will learn**
# - what each classic bug does to training, to the loss and to the model's outputs, measured rather than assumed;
# - six probes from `course_utils` (causality, equality with PyTorch, padding, position, batch, output) that find
#   these bugs in any model, your own included, and name the likely cause;
# - to diagnose a model you did not write.
#
# **Prerequisites:** chapters 01–08. **Time:** about 60 minutes. Every training run here takes a few seconds on a
# CPU: small models on the toy tasks of chapters 05 and 07.

# %% [markdown]
# ## Setup

# %% tags=["nbval-ignore-output"]
import subprocess
import sys

if "google.colab" in sys.modules:  # on Colab: install course_utils from the repository
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{PIP_SPEC}}"], check=True)

import copy
import math
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from course_utils import (
    GPT,
    CharTokenizer,
    DecoderLayer,
    GPTBlock,
    LayerNorm,
    MultiHeadAttention,
    TrainConfig,
    Transformer,
    batch_probe,
    causal_mask,
    causality_probe,
    dependency_heatmap,
    encode_pairs,
    equality_probe,
    estimate_loss,
    get_device,
    greedy_decode,
    load_tiny_shakespeare,
    output_probe,
    padding_mask,
    padding_probe,
    position_probe,
    random_batches,
    random_windows,
    record_attention,
    reversal_pairs,
    seq2seq_loss,
    set_seed,
    sinusoidal_encoding,
    split_ids,
    target_mask,
    train,
)
from course_utils.checks import check_diagnosis, check_future_leak, check_prediction
from course_utils.checks.bug_lab import MYSTERIES, mystery_model

set_seed(0)
device = get_device()
print(f"PyTorch {torch.__version__}, running on {device}")

# %% [markdown]
# ## The test bench
#
# Most experiments train chapter 05's **reverser**: a one-layer encoder-decoder (`d_model` 32, 2 heads) that
# learns to reverse strings of 8 letters `a`–`j` in 250 steps. Every output letter comes from one source position,
# so the task needs positions, attention and masks to work. `reverser()` builds it (seeded, so every variant starts
# from the same weights), `fit()` trains it on 20,000 pairs (the same batches each time), and `accuracy()` greedy-
# decodes 200 held-out strings and returns the share reversed exactly. `swap_modules(model, kind, make)` puts a
# buggy module in place of each submodule of one type, with the same weights, so that only the code differs.

# %% tags=["nbval-ignore-output"]
tok = CharTokenizer.from_texts(["abcdefghij"])  # 10 letters and <pad>, <bos>, <eos>, <unk>
train_pairs, test_pairs = reversal_pairs(20000, length=8, seed=0), reversal_pairs(200, length=8, seed=1)


SEEDS = (0, 1, 2)  # bugs 1, 7 and 11 compare by training over seeds of model and batches: one run is an anecdote


def reverser(d_model=32, n_heads=2, dropout=0.0, cls=Transformer, seed=0):
    set_seed(seed)
    return cls(tok.vocab_size, tok.vocab_size, d_model=d_model, n_heads=n_heads, n_layers=1, d_ff=2 * d_model,
               dropout=dropout, max_len=64)  # fmt: skip


def fit(model, pairs=train_pairs, steps=250, desc="training", data=None, loss_fn=None, seed=0):
    """Train on pairs (or on data, (sources, targets) as id tensors) with seq2seq_loss (or loss_fn); seed orders the
    batches."""
    src, tgt = data if data is not None else encode_pairs(pairs, tok, tok)  # (N, S), (N, T + 2): <bos> ... <eos>
    config = TrainConfig(steps=steps, batch_size=64, lr=5e-3, warmup_steps=40, schedule="cosine", label_smoothing=0.0)
    loss_fn = loss_fn or (lambda m, s, t: seq2seq_loss(m, s, t, tok.pad_id))
    return train(model, random_batches(src, tgt, batch_size=64, seed=seed), loss_fn, config, device=device, desc=desc)


def swap_modules(model, kind, make):
    """Replace every submodule of type kind with make(old), carrying old's weights over: the bug is in the code."""
    for module in list(model.modules()):
        for name, child in module.named_children():
            if type(child) is kind:
                new = make(child).to(next(child.parameters()).device)  # where the old one was: a trained model's GPU
                new.load_state_dict(child.state_dict())
                setattr(module, name, new)
    return model


def accuracy(model, pairs=test_pairs, extra_padding=0):
    """Share of sources greedy-decoded into exactly their target; the sources padded with extra_padding more <pad>."""
    src, tgt = encode_pairs(pairs, tok, tok)
    src = F.pad(src, (0, extra_padding), value=tok.pad_id).to(device)  # (N, S + extra_padding)
    out = greedy_decode(model, src, padding_mask(src, tok.pad_id), max_len=tgt.size(1) + 2, bos_id=tok.bos_id,
                        eos_id=tok.eos_id)  # fmt: skip
    return sum(tok.decode(o) == t for o, t in zip(out, (t for _, t in pairs))) / len(pairs)


baseline = reverser()
history = fit(baseline, desc="correct reverser")
base_loss, base_acc = history.loss[-1], accuracy(baseline)
print(f"correct reverser: last training loss {base_loss:.4f}, exact match {base_acc:.1%} on held-out strings")
assert base_acc > 0.95

# %% [markdown]
# The probes live in `course_utils` and take any callable: a model, or a `lambda` that feeds it. Each returns a
# `ProbeReport` that prints what it measured, ✅ or ⚠️, and, when something is wrong, the likely bug. They run
# without gradients; put a model in eval mode (`model.eval()`) before probing it (bug 12 shows why). On the
# correct reverser all four that read token sequences stay quiet. `encoder_of(model)` maps source ids to the
# encoder's output, `decoder_of(model)` target ids to the decoder's logits (for a fixed source). The causality probe
# writes random tokens; `exclude=specials` keeps them to letters, since a `<pad>` written into the target would
# change the mask as well:

# %% tags=["nbval-ignore-output"]
baseline.eval()
ids = torch.tensor([tok.encode(s) for s, _ in test_pairs[:4]], device=device)  # (4, 8) source ids
tgt_ids = torch.tensor([tok.encode(t, bos=True) for _, t in test_pairs[:4]], device=device)  # (4, 9)
padded = ids.clone()
padded[0, 5:], padded[2, 3:] = tok.pad_id, tok.pad_id  # two shorter sequences


def encoder_of(model):
    return lambda s: model.encode(s, padding_mask(s, tok.pad_id))  # (B, S) -> (B, S, d_model)


def decoder_of(model, src=ids):
    return lambda t: model(src, t, padding_mask(src, tok.pad_id), target_mask(t, tok.pad_id))  # -> (B, T, V)


letters = [tok.stoi[c] for c in "abcdefghij"]
specials = tuple(i for i in range(tok.vocab_size) if i not in letters)
quiet = [
    causality_probe(decoder_of(baseline), tgt_ids, tok.vocab_size, exclude=specials),
    padding_probe(encoder_of(baseline), padded, tok.pad_id),
    position_probe(encoder_of(baseline), ids),  # how much it reads positions: this run's trained weights decide
    batch_probe(encoder_of(baseline), ids),
]
print(*quiet, sep="\n")
assert not any(report.flagged for report in quiet), "a correct model must leave every probe quiet"

# %% [markdown]
# <a id="bug-1"></a>
#
# ## Bug 1 · The positional encoding with 2i applied twice
#
# The paper's frequencies are $\omega_i = 10000^{-2i/d}$ for the pair of columns $(2i, 2i+1)$. A loop that already
# steps through the even columns, `for i in range(0, d, 2)`, holds $2i$ in `i`; writing the formula again doubles it:


# %%
def buggy_sinusoidal(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(max_len).unsqueeze(1).float()
    for i in range(0, d_model, 2):
        pe[:, i] = torch.sin(position[:, 0] / 10000 ** (2 * i / d_model))  # BUG: i is already 2i
        pe[:, i + 1] = torch.cos(position[:, 0] / 10000 ** (2 * i / d_model))
    return pe


print(equality_probe(buggy_sinusoidal(16, 16), sinusoidal_encoding(16, 16)))

# %% [markdown]
# **The probe**: `equality_probe(ours, reference)` compares with the course's table (proved equal to the formula
# in chapter 03) and recognises the pattern: each buggy sine column $c$ (an even $c$, with $2c$ still a column)
# equals the reference's column $2c$, so every
# frequency is lowered (every wavelength stretched), and more columns barely change over a sequence. How much does it
# cost? With `d_model = 16`, strings of 16 letters and 250 steps (a small model, where every column counts), the
# cell trains the reverser with each table, three times (`SEEDS`: the model's start and the batches' order):

# %% tags=["nbval-ignore-output"]
long_train, long_test = reversal_pairs(20000, length=16, seed=0), reversal_pairs(200, length=16, seed=1)
table_runs = {}
for table in ("correct", "2i twice"):
    for seed in SEEDS:
        model = reverser(d_model=16, seed=seed)
        if table == "2i twice":
            model.positional.pe.copy_(buggy_sinusoidal(model.positional.max_len, 16))
        h = fit(model, long_train, desc=f"{table}, seed {seed}", seed=seed)
        table_runs[table, seed] = (h.loss[-1], accuracy(model, long_test))
    first16 = model.positional.pe[:16]  # (16, d_model): the first 16 positions
    angle = first16.amax(0) - first16.amin(0)  # how far each column moves over those positions
    loss, acc = zip(*(table_runs[table, seed] for seed in SEEDS))
    print(f"{table:>9}: columns that move less than 0.1 over 16 positions: {int((angle < 0.1).sum())} of 16; seeds "
          f"{SEEDS}: last training loss {', '.join(f'{x:.3f}' for x in loss)}; exact match "
          f"{', '.join(f'{x:.0%}' for x in acc)}")  # fmt: skip
higher = sum(table_runs["2i twice", seed][0] > table_runs["correct", seed][0] for seed in SEEDS)
print(f"the stretched table ends with the higher loss in {higher} of {len(SEEDS)} seeds")
assert higher == len(SEEDS)
assert max(table_runs["2i twice", s][1] for s in SEEDS) <= min(table_runs["correct", s][1] for s in SEEDS)

# %% [markdown]
# Even the correct table leaves some columns nearly constant over 16 positions (the slow end of the spectrum);
# the buggy one leaves more, and fewer columns tell positions apart. In each of three seeds the stretched table
# ends 250 steps with the higher loss (asserted), and its runs get no string right. The correct table's runs are
# uneven at this length (exact match printed above: one seed has not learned to reverse yet at step 250): all three
# seeds agree on the direction, and one run alone would have misstated the size of the cost. **Fix**: `two_i = torch.arange(0, d, 2)` and `10000 ** (two_i / d)`, as `sinusoidal_encoding` does. Here
# `d_model` is small on purpose, so that every column counts; with a large one more useful columns remain, but the
# table still differs from the paper's, and weights trained with one break with the other.
#
# <a id="bug-2"></a>
#
# ## Bug 2 · No causal mask in a decoder-only language model
#
# A GPT block whose attention forgets the causal mask. A one-layer GPT (`d_model` 48, context 16) on Tiny Shakespeare, 300 steps each way:


# %%
class LeakyBlock(GPTBlock):
    def forward(self, x, cache=None):
        h = self.norm1(x)
        attended, _ = self.self_attn(h, h, h)  # BUG: no is_causal=True
        x = x + attended
        return x + self.feed_forward(self.norm2(x))


text = load_tiny_shakespeare()
chars = CharTokenizer(text, specials=False)
train_ids, val_ids = split_ids(text, chars)


def tiny_gpt(leaky):
    set_seed(0)
    model = GPT(chars.vocab_size, block_size=16, d_model=48, n_heads=4, n_layers=1)
    if leaky:  # the same weights in a block without the mask
        swap_modules(model, GPTBlock, lambda block: LeakyBlock(48, 4, 192))
    return model


# %% [markdown]
# **Predict, then run.** Both models train 300 steps on the same batches, from the same weights. Which reaches the
# lower loss on the *validation* text, which neither trains on? (a) the model without a mask, far lower; (b) about
# the same; (c) the causal model: the one without a mask learns nothing useful.

# %% tags=["exercise"]
### BEGIN SOLUTION
my_prediction = "a"
### END SOLUTION
check_prediction("leaky-loss", my_prediction)  # your answer: "a", "b" or "c"

# %% tags=["nbval-ignore-output"]
gpts, gpt_loss = {}, {}
for name in ("causal", "no mask"):
    gpts[name] = model = tiny_gpt(leaky=name == "no mask")
    config = TrainConfig(steps=300, batch_size=32, lr=1e-2, warmup_steps=20, schedule="cosine", label_smoothing=0.0)
    h = train(model, random_windows(train_ids, 16, 32), lambda m, x, y: m(x, y)[1], config, device=device, desc=name)
    gpt_loss[name] = estimate_loss(model, {"train": train_ids, "val": val_ids}, batch_size=32, iters=10)
    prompt = torch.tensor([chars.encode("ROMEO:\n")], device=device)
    sample = model.generate(
        prompt, 60, temperature=0.8, use_cache=False, generator=torch.Generator(device).manual_seed(0)
    )
    print(f"{name:>8}: train loss {gpt_loss[name]['train']:.2f}, validation loss {gpt_loss[name]['val']:.2f}; "
          f"sample:\n{chars.decode(sample[0])!r}")  # fmt: skip
assert gpt_loss["no mask"]["val"] < gpt_loss["causal"]["val"] - 0.5

# %% [markdown]
# In this run the model without a mask reaches a far lower loss, on the validation text too (asserted), yet its lower
# loss buys nothing in generation (the samples above; after so short a training neither model writes English): each
# position read the whole window, the character it must predict included, so in training it learned to copy the next
# character from the position that holds it, and in generation that position does not exist yet. A low loss proves nothing until the model is shown to be causal. **The probe**: `causality_probe`
# changes each later token in turn and measures how far every earlier output moves; `detail` is the matrix of
# those changes, zero above the diagonal in a causal model.

# %%
windows = next(random_windows(val_ids, 16, 4, seed=5))[0].to(device)  # (4, 16)
leaks = {}
for name, model in gpts.items():
    model.eval()
    leaks[name] = causality_probe(lambda x, m=model: m(x)[0], windows, chars.vocab_size)
    print(name, "->", leaks[name])
assert leaks["no mask"].flagged and not leaks["causal"].flagged
future = torch.ones(16, 16, dtype=torch.bool).triu(1)  # (T, T): j > i
assert leaks["causal"].detail[future].max() == 0 and (leaks["no mask"].detail[future] > 0).float().mean() > 0.9
next_token = torch.ones(16, 16, dtype=torch.bool).triu(1) & ~torch.ones(16, 16, dtype=torch.bool).triu(2)  # j = i + 1
assert leaks["no mask"].detail[next_token].mean() > 2 * leaks["no mask"].detail[future & ~next_token].mean()
shown = chars.decode(windows[0].tolist()).replace(" ", "␣").replace("\n", "↵")  # visible spaces and newlines
dependency_heatmap(torch.stack([r.detail for r in leaks.values()]), list(shown),
                   titles=list(leaks),
                   suptitle="What the causality probe measures: how far output i moves when token j changes")  # fmt: skip

# %% [markdown]
# Each panel is the probe's `detail`, drawn: row $i$ is an output, column $j$ the token changed (the labels are the
# first window's characters; the probe changes every window's token $j$ at once). Below the diagonal, outputs read
# earlier tokens, as they must; white is a change of exactly 0 (the blue line is the diagonal). The causal model's
# upper triangle is white. The model without a mask fills it (over 90% of its cells, asserted): outputs read later
# tokens, and the darkest cells lie just above the diagonal (asserted), where output $i$ reads token $i + 1$
# hardest: the copy of the next character that gave it its low loss.
#
# **Exercise: the heart of the causality probe.** Write `my_future_leak(fn, tokens, j, new_id)`: set token `j` of
# every sequence to `new_id` (in a copy: never change the caller's tensor) and return, as a float, the largest
# absolute change of `fn`'s outputs at the positions *before* `j` (for `j` from 1 to $T - 1$: position 0 has none
# before it). In a causal model it is 0 for every `j`. The
# checker runs it on a causal model and on one without a mask, and recognises the classic slip of including
# position `j` itself (output `j` reads token `j` by design).


# %% tags=["exercise"]
def my_future_leak(fn, tokens, j, new_id):
    """fn: ids (B, T) -> outputs (B, T, ...); returns max |change| of outputs[:, :j] when token j becomes new_id."""
    ### BEGIN SOLUTION
    changed = tokens.clone()
    changed[:, j] = new_id
    with torch.no_grad():
        return float((fn(changed)[:, :j] - fn(tokens)[:, :j]).abs().max())
    ### END SOLUTION


check_future_leak(my_future_leak)

# %% [markdown]
# **Fix**: `is_causal=True` (or `mask=causal_mask(T)`) in every self-attention of a decoder, as `GPTBlock` does.
#
# <a id="bug-3"></a>
#
# ## Bug 3 · Cross-attention taking its queries from the encoder
#
# In cross-attention the decoder asks and the memory answers: queries from the decoder, keys and values from the
# encoder. Swapped, the output has the *source's* length. On the reverser, sources of 8 and decoder inputs of 9,
# the residual addition fails at once:


# %%
class QueriesFromEncoder(DecoderLayer):
    def cross_attention_block(self, x, memory, src_mask, cache=None):  # as chapter 05's SwappedDecoderLayer
        out, _ = self.cross_attn(query=memory, key=x, value=x)  # BUG: the memory asks, the decoder answers
        return self.dropout2(out)


def with_swapped_cross_attention(model):
    return swap_modules(model, DecoderLayer, lambda layer: QueriesFromEncoder(32, 2, 64, dropout=0.0)).to(device)


try:
    with_swapped_cross_attention(reverser())(ids, tgt_ids)  # S = 8, T = 9
except RuntimeError as e:
    print("RuntimeError:", e)

# %% [markdown]
# When the lengths are equal nothing fails. Write each source with a leading `<bos>`, 9 positions like the decoder's
# input, and train: each source position now attends over *all* the target positions, future ones included, and
# hands what it finds to the decoder position of the same index. Greedy decoding needs $T = S$ at every step too,
# so `decode_fixed` keeps a target buffer of 9 positions, padded after the prefix written so far.


# %% tags=["nbval-ignore-output"]
def with_bos(pairs):
    src = torch.tensor([tok.encode(s, bos=True) for s, _ in pairs])  # (N, 9)
    tgt = torch.tensor([tok.encode(t, bos=True, eos=True) for _, t in pairs])  # (N, 10): the decoder reads 9
    return src, tgt


@torch.no_grad()
def decode_fixed(model, src):
    ys = torch.full_like(src, tok.pad_id)  # (B, 9)
    ys[:, 0] = tok.bos_id
    for t in range(src.size(1) - 1):
        logits = model(src, ys, padding_mask(src, tok.pad_id), target_mask(ys, tok.pad_id))  # (B, 9, V)
        ys[:, t + 1] = logits[:, t].argmax(-1)
    return ys


src, tgt = with_bos(train_pairs)
test_src, test_tgt = (t.to(device) for t in with_bos(test_pairs))
final_loss = {}
for name in ("correct", "queries from the encoder"):
    model = reverser() if name == "correct" else with_swapped_cross_attention(reverser())
    h = fit(model, data=(src, tgt), desc=name)
    final_loss[name] = h.loss[-1]
    model.eval()
    exact = (decode_fixed(model, test_src)[:, 1:] == test_tgt[:, 1:9]).all(-1).float().mean().item()
    print(f"{name:>24}: last training loss {h.loss[-1]:.4f}, exact match {exact:.1%}")
    print(
        " " * 26, causality_probe(decoder_of(model, test_src[:4]), test_tgt[:4, :9], tok.vocab_size, exclude=specials)
    )
    if name == "correct":
        good_exact = exact
assert exact < good_exact - 0.5 and max(final_loss.values()) < 0.05

# %% [markdown]
# In this run both training losses fall near zero (below 0.05, asserted); only the correct model reverses new
# strings. The swapped one learned to
# read the answer through its keys and values, and at generation the answer is not there. **The probe**: the causality probe
# on the decoder flags it (it names this bug among the likely causes). **Fix**: `cross_attn(query=x, key=memory,
# value=memory, mask=src_mask)`, as `DecoderLayer` does.
#
# <a id="bug-4"></a>
#
# ## Bug 4 · A "LayerNorm" with the unbiased std and ε outside the root
#
# A from-scratch LayerNorm often reads like this. `x.std()` divides by $n - 1$ (the unbiased estimate), and the
# $\epsilon$ is added to the std instead of to the variance under the root:


# %%
class HandmadeLayerNorm(nn.Module):
    def __init__(self, features, eps=1e-5):
        super().__init__()
        self.weight, self.bias, self.eps = nn.Parameter(torch.ones(features)), nn.Parameter(torch.zeros(features)), eps

    def forward(self, x):
        return self.weight * (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + self.eps) + self.bias  # BUG


x = torch.randn(8, 10, 32, generator=torch.Generator().manual_seed(0))
print(equality_probe(HandmadeLayerNorm(32), nn.LayerNorm(32), x))

# %% [markdown]
# **The probe** finds both halves of the bug: on ordinary inputs the output is the reference's times a constant,
# $\sqrt{(n-1)/n}$ for $n = 32$ features; on inputs a thousand times smaller (variance near $\epsilon$) the
# difference grows, because there $\epsilon$ outside the root is no longer negligible. Does it matter in training?
# Measured, with every LayerNorm of the reverser replaced:


# %% tags=["nbval-ignore-output"]
model = swap_modules(reverser(), LayerNorm, lambda norm: HandmadeLayerNorm(norm.weight.numel()))
h = fit(model, desc="handmade LayerNorm")
ln_acc = accuracy(model)
print(f"handmade LayerNorm: last training loss {h.loss[-1]:.4f}, exact match {ln_acc:.1%} "
      f"(correct: {base_loss:.4f}, {base_acc:.1%})")  # fmt: skip
loaded = swap_modules(copy.deepcopy(baseline), LayerNorm, lambda norm: HandmadeLayerNorm(norm.weight.numel()))
loaded_acc = accuracy(loaded)
print(f"the correct reverser's trained weights, run through handmade LayerNorms: exact match {loaded_acc:.1%}")
assert abs(ln_acc - base_acc) < 0.02 and abs(loaded_acc - base_acc) < 0.02

# %% [markdown]
# Here, no: the exact match is the correct run's, within two points (asserted), and so is the loss (printed). Trained
# from scratch, the model absorbs the constant factor into its weights. Nor does running the correct reverser's trained
# weights through this layer lower its exact match (asserted within two points; printed): every normalised vector is
# off by a factor $\sqrt{31/32} \approx 0.98$, too little to change its answers here. On this model neither half of
# the bug changes the result; the second half shows on inputs of small variance, where $\epsilon$ is not negligible
# against the std (the probe's second run). **Fix**: `(x - mean) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)`, or `nn.LayerNorm`.
#
# <a id="bug-5"></a>
#
# ## Bug 5 · A broken output head ("Generator")
#
# Many from-scratch Transformers end with a `Generator`: a projection to the vocabulary followed by a
# `log_softmax`. Three versions, each fed to `F.cross_entropy` (which applies `log_softmax` itself):


# %%
class Generator(nn.Module):
    def __init__(self, proj):
        super().__init__()
        self.proj = proj

    def forward(self, x):
        return F.log_softmax(self.proj(x))  # BUG: no dim; PyTorch picks dim 0 for a 3-d input


class LogProbGenerator(Generator):
    def forward(self, x):
        return F.log_softmax(self.proj(x), dim=-1)  # log-probabilities, then F.cross_entropy


class ProbGenerator(Generator):
    def forward(self, x):
        return F.softmax(self.proj(x), dim=-1)  # BUG: probabilities, then F.cross_entropy


# %% tags=["nbval-ignore-output"]
heads, results, head_runs = {"log_softmax without dim": Generator, "log-probabilities": LogProbGenerator,
                             "probabilities": ProbGenerator}, {}, {}  # fmt: skip
for name, cls in heads.items():
    model = reverser()
    model.generator = cls(model.generator)
    with warnings.catch_warnings(record=True) as caught:  # what PyTorch says about the head, printed once below
        warnings.simplefilter("always")
        h = fit(model, desc=name)
        alone = sum(accuracy(model, [pair]) for pair in test_pairs[:50]) / 50  # each string decoded alone
        head_runs[name] = (h.loss[-1], accuracy(model), alone)
    for message in sorted({str(w.message) for w in caught if "dimension" in str(w.message)}):
        print("PyTorch warned:", message)
    results[name] = model
    print(f"{name:>24}: last training loss {h.loss[-1]:.4f}, exact match {head_runs[name][1]:.1%} in one batch "
          f"of 200, {alone:.1%} one string at a time")  # fmt: skip
print(f"{'correct (logits)':>24}: last training loss {base_loss:.4f}, exact match {base_acc:.1%}")
floor = math.log(1 + (tok.vocab_size - 1) / math.e)  # the lowest loss probabilities can reach (below)
assert head_runs["log_softmax without dim"][2] == 0 and abs(head_runs["log-probabilities"][0] - base_loss) < 1e-3
assert abs(head_runs["probabilities"][0] - floor) < 0.05 and head_runs["probabilities"][1] > 0.9

# %% [markdown]
# - **`log_softmax` without `dim`** normalises over the batch (PyTorch warns that an implicit choice is deprecated, without
#   saying which axis it took). In this run the model trains, worse, and its prediction for one string depends on the others in the batch: decoded alone, every position's
#   log-probabilities are $0$ and the argmax picks token 0 (`<pad>`), so nothing comes out right.
# - **Log-probabilities into `F.cross_entropy`** change nothing: $\operatorname{log\,softmax}$ subtracts the
#   log-sum-exp, and that of log-probabilities is $\log 1 = 0$. The training loss ends within 0.001 of the correct
#   run's (asserted): the two runs compute the same loss with other roundings, so their last digits may differ.
# - **Probabilities into `F.cross_entropy`**: the loss sees $\operatorname{softmax}(p)$ with every $p \in [0, 1]$,
#   so it can never go below $\ln(1 + (V-1)/e)$ (printed below). Here the argmax survives and greedy decoding still
#   works (over 90% exact, asserted), but the loss ends at that floor (within 0.05, asserted) and tells you nothing.
#
# **The probes**: `output_probe` says what a head returns; `batch_probe` runs each example alone:

# %%
warnings.filterwarnings("ignore", message="Implicit dimension choice")  # shown above
for name, model in results.items():
    model.eval()
    with torch.no_grad():
        out = decoder_of(model)(tgt_ids)  # (4, 9, V)
    print(f"{name}:\n  {output_probe(out)}")
joined = torch.cat([ids, tgt_ids], dim=1)  # (4, 8 + 9): each source followed by its target, one tensor to split


def seq2seq_of(model):
    return lambda st: decoder_of(model, st[:, :8])(st[:, 8:])  # -> (B, 9, V)


print(f"the floor for probabilities with V = {tok.vocab_size}: ln(1 + (V - 1)/e) = {floor:.4f}")

# %% [markdown]
# The batch probe on the model whose head forgot `dim` (how far an output moves depends on this run's weights):

# %% tags=["nbval-ignore-output"]
mixed = batch_probe(seq2seq_of(results["log_softmax without dim"]), joined)
print(mixed)
assert mixed.flagged

# %% [markdown]
# **Fix**: return the logits and let the loss normalise (`F.cross_entropy`); if the head must return
# log-probabilities, `F.log_softmax(x, dim=-1)` with `F.nll_loss`.
#
# <a id="bug-6"></a>
#
# ## Bug 6 · A module that forgets `super().__init__()`


# %%
class Forgetful(nn.Module):
    def __init__(self, d_model):
        self.proj = nn.Linear(d_model, d_model)  # BUG: super().__init__() never called


try:
    Forgetful(8)
except AttributeError as e:
    print("AttributeError:", e)

# %% [markdown]
# `nn.Module.__setattr__` intercepts `self.proj = ...` to register the submodule in `self._modules`, so that
# `parameters()`, `.to(device)` and `state_dict()` find it. That dictionary is created by `nn.Module.__init__`;
# without it there is nowhere to register, and PyTorch stops at the first assignment. **Fix**: call
# `super().__init__()` first in every module's `__init__`. No probe is needed: here PyTorch's error is the probe.
#
# <a id="bug-7"></a>
#
# ## Bug 7 · Scores scaled by √d_model instead of √d_k
#
# Each head's scores are dot products of $d_k$-dimensional vectors, so the scale is $\sqrt{d_k}$. Dividing by
# $\sqrt{d_{\text{model}}}$ (the width of the embedding) makes every score $\sqrt{h}$ times too small, and the
# softmax too flat. With 8 heads of $d_k = 4$ that is a factor $\sqrt 8 \approx 2.8$:


# %%
class WideScaleAttention(MultiHeadAttention):
    def forward(self, query, key, value, mask=None, **kwargs):
        q, k, v = (self._split_heads(w(x)) for w, x in ((self.w_q, query), (self.w_k, key), (self.w_v, value)))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)  # BUG: d_model, not d_k
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        return self.w_o((weights @ v).transpose(1, 2).reshape(query.shape)), weights


set_seed(0)
torch_attention = nn.MultiheadAttention(32, 8, batch_first=True)
ours = WideScaleAttention.from_torch(torch_attention)
x = 3 * torch.randn(2, 8, 32)
print(equality_probe(lambda x: ours(x, x, x), lambda x: torch_attention(x, x, x, average_attn_weights=False), x))


# %% tags=["nbval-ignore-output"]
def peak(model):
    """Mean largest cross-attention weight per row, on the test sources."""
    src, tgt = (t.to(device) for t in encode_pairs(test_pairs, tok, tok))
    with torch.no_grad(), record_attention(model.eval()) as attention:
        model(src, tgt[:, :-1], padding_mask(src, tok.pad_id), target_mask(tgt[:, :-1], tok.pad_id))
    return attention["decoder.layers.0.cross_attn"].amax(-1).mean().item()


runs = {}
for name in ("sqrt(d_k)", "sqrt(d_model)"):
    for seed in SEEDS:
        model = reverser(n_heads=8, seed=seed)
        if name == "sqrt(d_model)":
            swap_modules(model, MultiHeadAttention, lambda attn: WideScaleAttention(attn.d_model, attn.n_heads))
        model.to(device)
        before = peak(model)
        h = fit(model, steps=150, desc=f"{name}, seed {seed}", seed=seed)
        runs[name, seed] = (before, peak(model), h.loss[-1], accuracy(model))
for name in ("sqrt(d_k)", "sqrt(d_model)"):
    before, after, loss, acc = zip(*(runs[name, seed] for seed in SEEDS))
    print(f"{name:>13}, seeds {SEEDS}: mean largest cross-attention weight per row {min(before):.2f}-{max(before):.2f} at the start, "
          f"{min(after):.2f}-{max(after):.2f} after 150 steps; loss {min(loss):.4f}-{max(loss):.4f}, "
          f"exact match {min(acc):.1%}-{max(acc):.1%}")  # fmt: skip
slower = sum(runs["sqrt(d_model)", seed][2] > runs["sqrt(d_k)", seed][2] for seed in SEEDS)
print(f"the wide scale ends with the higher loss in {slower} of {len(SEEDS)} seeds")
assert slower == len(SEEDS)
assert max(runs["sqrt(d_model)", s][1] for s in SEEDS) < min(runs["sqrt(d_k)", s][1] for s in SEEDS)

# %% [markdown]
# The flatter softmax learns more slowly: in each of three seeds its loss after the same 150 steps is the higher
# (asserted), and its attention is less focused, at the start and after training (the printed ranges do not overlap;
# asserted after training). Dividing by too *little* (or not at all) is the opposite bug, chapter 01's: scores that
# grow with $d_k$ saturate the softmax. **The probe**: `equality_probe` against `nn.MultiheadAttention` with the
# same weights compares the attention weights too and reports which way they differ. **Fix**: divide by
# `math.sqrt(d_k)` with `d_k = d_model // n_heads`.
#
# <a id="bug-8"></a>
#
# ## Bug 8 · The mask convention flipped at PyTorch's border
#
# The course's masks say True = *may attend*, as `F.scaled_dot_product_attention`'s do; `nn.MultiheadAttention`
# and the `nn.Transformer*` layers take a bool mask with True = *blocked*. Passed across unchanged, the causal
# mask lets each position see only the future:


# %%
class TorchCausalBlock(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, n_heads, batch_first=True)

    def forward(self, x):
        out, _ = self.attn(x, x, x, attn_mask=causal_mask(x.size(1), x.device))  # BUG: torch reads True as blocked
        return x + out


set_seed(0)
embed, block = nn.Embedding(tok.vocab_size, 32), TorchCausalBlock(32, 2).eval()
with torch.no_grad():
    x = embed(ids.cpu()[:1, :6])  # (1, 6, 32)
    _, weights = block.attn(x, x, x, attn_mask=causal_mask(6))
print("attention weights (rows: queries, columns: keys):\n", weights[0].numpy().round(2))
future = weights[0, :-1].triu(1).sum(-1)  # weight on later keys, per row except the last
print(f"weight on later positions, rows 0-4: {future.numpy().round(3)}; the last row: {weights[0, -1].numpy()}")
print(causality_probe(lambda t: block(embed(t)), ids.cpu()[:, :6], tok.vocab_size))

# %% [markdown]
# Every row but the last puts all its weight on later positions: the leak is total. The last row has nothing left
# to attend to, and its softmax over nothing is NaN, which then spreads through any loss. **The probe**: the
# causality probe reports the NaN row and its usual cause. **Fix**: convert once, at the border: `attn_mask=
# ~causal_mask(T)`. Then the block equals the course's attention:

# %%
fixed = MultiHeadAttention.from_torch(block.attn)
x = torch.randn(2, 6, 32)
print(
    equality_probe(
        lambda x: fixed(x, x, x, is_causal=True), lambda x: block.attn(x, x, x, attn_mask=~causal_mask(6)), x
    )
)

# %% [markdown]
# <a id="bug-9"></a>
#
# ## Bug 9 · A padding mask broadcast along the wrong axis
#
# A padding mask must block *keys*: shape `(B, 1, 1, S)`, broadcast over the heads and the queries. Built as
# `(B, 1, S, 1)` it broadcasts over the keys instead: padded *queries* get no attention at all, while the real
# positions attend to the padding. In self-attention the shapes still fit and nothing fails (a padded query with
# no key left gets zeros from `F.scaled_dot_product_attention` in this PyTorch version, not NaN as from
# `nn.MultiheadAttention`). The reverser on
# strings of 3 to 8 letters, so that batches hold padding, with the bug in the encoder:


# %% tags=["nbval-ignore-output"]
class QueryAxisMask(Transformer):
    def encode(self, src, src_mask=None):
        x = self.positional(self.src_embed(src) * math.sqrt(self.d_model))
        mask = (src != tok.pad_id).unsqueeze(1).unsqueeze(-1)  # BUG: (B, 1, S, 1), the queries axis
        return self.encoder(x, mask)


def shorten(pairs, seed):
    lengths = torch.randint(3, 9, (len(pairs),), generator=torch.Generator().manual_seed(seed)).tolist()
    return [(s[:n], s[:n][::-1]) for (s, _), n in zip(pairs, lengths)]


short_train, short_test = shorten(train_pairs, 0), shorten(test_pairs, 1)
for name, cls in (("keys axis (correct)", Transformer), ("queries axis", QueryAxisMask)):
    model = reverser(cls=cls)
    fit(model, short_train, desc=name)
    model.eval()
    as_trained, more = accuracy(model, short_test), accuracy(model, short_test, extra_padding=4)
    print(f"{name:>19}: exact match {as_trained:.1%}; with 4 more <pad> after each source {more:.1%}")
    print(" " * 21, padding_probe(encoder_of(model), padded, tok.pad_id))
    if cls is Transformer:
        assert more == as_trained  # a correct mask: padding changes nothing
assert more < as_trained - 0.2

# %% [markdown]
# In this run the bug's model even scores *higher* on batches padded as in training (one run, one seed: the size
# of that gap is not a finding). A likely reason, not tested here: its real positions read the padding, and how
# much padding follows a string tells its length. What is asserted is the danger: its answers depend on how much
# padding a batch happens to have. In this run the same strings, with 4 more `<pad>` after them, come out more than
# 20 points worse, while the correct model's do not change (both asserted). **The probe**:
# `padding_probe` appends padding and measures how far the real positions' outputs move; with a correct mask they
# cannot move at all. **Fix**: `padding_mask(src, pad_id)`, `(B, 1, 1, S)`: `unsqueeze(1).unsqueeze(2)`. (In
# cross-attention, where $T \neq S$, the wrong shape does not broadcast and fails, so the bug survives in encoders.)
#
# <a id="bug-10"></a>
#
# ## Bug 10 · Label smoothing through log(0)
#
# Label smoothing (chapter 06) trains towards a target distribution $q$. Chapter 06 spreads $\varepsilon / V$ over
# every token; the variant here, common in translation code, keeps `<pad>` out: $1 - \varepsilon$ on the right
# token, the rest spread over the others, and 0 on `<pad>`. Its loss is the Kullback–Leibler divergence $\mathrm{KL}(q \,\|\, p) = \sum q (\log q - \log
# p)$ (cross-entropy minus $q$'s own entropy, a constant), and a direct transcription meets $\log 0 = -\infty$ twice. First in $\log q$: where $q = 0$, $0 \cdot
# (-\infty)$ is NaN. The reverser trained 150 steps with this loss:


# %% tags=["nbval-ignore-output"]
def smoothed_loss(logits, target, eps=0.1):
    V = logits.size(-1)
    q = torch.full_like(logits, eps / (V - 2))  # (N, V)
    q.scatter_(-1, target[:, None], 1 - eps)
    q[:, tok.pad_id] = 0  # never predict padding
    return (q * (q.log() - logits.log_softmax(-1))).sum(-1).mean()  # BUG: 0 * log(0) is NaN


def smoothed_seq2seq_loss(model, src, tgt):
    logits = model(src, tgt[:, :-1], padding_mask(src, tok.pad_id), target_mask(tgt[:, :-1], tok.pad_id))
    return smoothed_loss(logits.flatten(0, 1), tgt[:, 1:].flatten())  # (B * T, V), (B * T,)


model = reverser()
h = fit(model, steps=150, desc="log q", loss_fn=smoothed_seq2seq_loss)
nan_steps = sum(math.isnan(v) for v in h.loss)
print(f"NaN losses: {nan_steps} of {len(h.loss)} steps; exact match after training {accuracy(model):.1%}")
assert nan_steps == len(h.loss) and accuracy(model) > 0.9

# %% [markdown]
# Every loss is NaN, and yet the model learns (over 90% exact match, asserted): $\log q$ does not depend on the weights, so its NaN never enters
# the gradient. You train blind: no loss curve, and anything that reads the loss (a NaN guard that skips the step,
# early stopping, a scheduler on plateaus) misbehaves. The second $\log 0$ is worse. Computed as
# `torch.log(F.softmax(z))`, a probability that underflows to 0 in float32 (a logit 120 below the largest is
# enough) gives $\log p = -\infty$, an infinite loss, and a NaN gradient, since $\partial \log p / \partial p =
# 1/p$ is infinite. One optimizer step:


# %%
def smoothed_loss_from_probs(logits, target, eps=0.1):
    V = logits.size(-1)
    q = torch.full_like(logits, eps / (V - 1))
    q.scatter_(-1, target[:, None], 1 - eps)
    return -(q * torch.log(F.softmax(logits, dim=-1))).sum(-1).mean()  # BUG: log of a probability that can be 0


set_seed(0)
layer = nn.Linear(4, tok.vocab_size)
features = torch.randn(3, 4) * 100  # large inputs: logit gaps of hundreds
for loss_fn in (smoothed_loss_from_probs, lambda z, t: F.cross_entropy(z, t, label_smoothing=0.1)):
    layer_copy = nn.Linear(4, tok.vocab_size)
    layer_copy.load_state_dict(layer.state_dict())
    loss = loss_fn(layer_copy(features), torch.tensor(letters[:3]))
    loss.backward()
    torch.optim.SGD(layer_copy.parameters(), lr=0.1).step()
    print(
        f"loss {loss.item():.4g}; NaN in the gradient: {bool(layer_copy.weight.grad.isnan().any())}; "
        f"NaN in the weights after one step: {bool(layer_copy.weight.isnan().any())}"
    )
z = torch.randn(2, tok.vocab_size)
print(equality_probe(lambda z: torch.log(F.softmax(z, -1)), lambda z: F.log_softmax(z, -1), z * 100))

# %% [markdown]
# The first line is the buggy loss: infinite, its gradient NaN, and after one step the layer's weights are NaN: the
# model is gone. The second is `F.cross_entropy` with `label_smoothing=0.1` on the same logits: finite.
# **The probe**: `equality_probe` against `F.log_softmax` finds the infinities (the output is no longer finite where
# the reference is); in training, check `torch.isfinite(loss)` before `backward`. **Fix**: never take the log of a
# probability or of a target: `F.log_softmax`, and `torch.xlogy(q, q)`, defined as 0 where `q` is 0, if you need
# $q \log q$. Or `F.cross_entropy(..., label_smoothing=eps, ignore_index=pad_id)`, which does both safely; it spreads
# $\varepsilon$ over all $V$ tokens, `<pad>` included, a slightly different $q$ from the one above.
#
# <a id="bug-11"></a>
#
# ## Bug 11 · Embeddings initialised N(0, 1), then multiplied by √d_model
#
# The paper multiplies embeddings by $\sqrt{d_{\text{model}}}$. With `nn.Embedding`'s default start,
# $\mathcal N(0, 1)$, the product has standard deviation $\sqrt{d_{\text{model}}}$, while the positional encoding's
# entries lie in $[-1, 1]$ (chapter 06). The course's `Transformer` starts its embeddings at $\mathcal N(0,
# 1/d_{\text{model}})$; the bug is to keep the default:


# %% tags=["nbval-ignore-output"]
def default_embedding_init(model):
    for embedding in (model.src_embed, model.tgt_embed):
        nn.init.normal_(embedding.weight, mean=0.0, std=1.0)  # BUG: nn.Embedding's default, then times sqrt(d)
    return model


accuracies = {}
for name in ("N(0, 1/d)", "N(0, 1)"):
    for seed in SEEDS:
        model = reverser(seed=seed) if name == "N(0, 1/d)" else default_embedding_init(reverser(seed=seed))
        model.to(device).eval()
        scaled = (model.src_embed.weight * math.sqrt(model.d_model)).std().item()
        first_layer_input = lambda s, m=model: m.positional(m.src_embed(s) * math.sqrt(m.d_model))  # noqa: E731
        probe = position_probe(first_layer_input, ids)
        h = fit(model, desc=f"{name}, seed {seed}", seed=seed)
        accuracies[name, seed] = accuracy(model)
        if seed == SEEDS[0]:
            print(f"{name:>9}: scaled embeddings' std {scaled:.2f} (positional encoding's "
                  f"{model.positional.pe[:8].std():.2f}); before training: {probe}")  # fmt: skip
for name in ("N(0, 1/d)", "N(0, 1)"):
    print(
        f"{name:>9}, seeds {SEEDS}: exact match after 250 steps", ", ".join(f"{accuracies[name, s]:.1%}" for s in SEEDS)
    )
assert max(accuracies["N(0, 1)", s] for s in SEEDS) < min(accuracies["N(0, 1/d)", s] for s in SEEDS) - 0.5

# %% [markdown]
# The token signal is about ten times the positional one (the printed standard deviations), and the model does not
# learn positions in time: in each of three seeds, after the same 250 steps, the correct start reverses far more of
# the held-out strings than this one (more than 50 points apart, asserted; the figures are printed above). **The probe**: before any
# training, `position_probe` on what the first layer reads (the scaled embeddings plus the encoding) permutes the
# input and compares the change with that from new tokens; a drowned encoding moves it far less, and below a ratio
# of 0.2 (the probe's `drowned` argument) the report flags it. **Fix**: `nn.init.normal_(weight, std=d_model **
# -0.5)`, as `Transformer.reset_parameters` does (or drop the $\sqrt{d_{\text{model}}}$ factor).
#
# <a id="bug-12"></a>
#
# ## Bug 12 · Dropout left on at inference
#
# Every module starts in training mode (the mode `model.train()` sets), and the course's `train` function leaves a
# model in the mode it found it in. A hand-written decoding loop that never calls `model.eval()` decodes with dropout on:


# %% tags=["nbval-ignore-output"]
@torch.no_grad()
def my_greedy(model, src, steps=9):  # BUG: no model.eval()
    ys = torch.full((src.size(0), 1), tok.bos_id, device=src.device)
    for _ in range(steps):
        logits = model(src, ys, padding_mask(src, tok.pad_id), target_mask(ys, tok.pad_id))
        ys = torch.cat([ys, logits[:, -1:].argmax(-1)], dim=1)
    return ys


model = reverser(dropout=0.1)
fit(model, desc="dropout 0.1")
src, tgt = (t.to(device) for t in encode_pairs(test_pairs, tok, tok))
print(f"model.training = {model.training}")
runs = {}
for mode in ("training mode", "eval mode"):
    model.train(mode == "training mode")
    runs[mode] = [(my_greedy(model, src) == tgt[:, :10]).all(-1).float().mean().item() for _ in range(3)]
    print(f"{mode:>13}: exact match in 3 runs of the same loop: {', '.join(f'{a:.1%}' for a in runs[mode])}")
print(causality_probe(decoder_of(model.train()), tgt_ids, tok.vocab_size, exclude=specials))
assert len(set(runs["eval mode"])) == 1 and max(runs["training mode"]) < runs["eval mode"][0]
assert len(set(runs["training mode"])) > 1

# %% [markdown]
# In training mode the same loop gives answers that change from one pass to the next, in this run all worse than in
# eval mode (both asserted). **The probe**:
# every probe that runs a model (all but `output_probe`, which reads outputs already computed) first runs it twice on
# the same input; if the outputs differ, it reports dropout instead of measuring noise. **Fix**: `model.eval()` before evaluating or generating (`greedy_decode`, `beam_search` and
# `GPT.generate` do it themselves), and `model.train()` before training again.
#
# ## The probes in one table
#
# | Probe | What it does | Catches |
# | --- | --- | --- |
# | `causality_probe(fn, ids, V)` | changes each later token, measures earlier outputs | bugs 2, 3, 8 |
# | `equality_probe(ours, ref, *inputs)` | largest difference from a reference, and its pattern | bugs 1, 4, 7, 10 |
# | `padding_probe(fn, ids, pad_id)` | appends padding, measures the real positions | bug 9 |
# | `position_probe(fn, ids)` | permutes the input, compares with new tokens | bug 11; a missing encoding |
# | `batch_probe(fn, inputs)` | each example alone against the batch | bug 5 (no `dim`) |
# | `output_probe(outputs)` | logits, log-probabilities or probabilities, and along which axis | bug 5 |
# | every probe that runs a model | runs it twice first | bug 12 |
#
# ## Exercises
#
# {{EXERCISES}}
#
# **Exercises 1–4: find the bug.** Each mystery module below may hide a bug, not quite one this chapter showed. For
# each, write `diagnose_a()` (and so on): run the probes you choose on the mystery (choosing is half the
# diagnosis), print what you measure (your evidence), and return your diagnosis, one letter of the choices
# printed below. The checker says whether you are right and explains the bug; a function that returns its letter
# without running anything is a guess, and it is sent back. A flag is not a diagnosis: a probe measures one
# property, and its "likely bug" line lists every usual cause that leaves the same trace. For B and D more than one
# choice fits the first probe's report; a second experiment (another probe, on another part of the model, or one
# number you measure) tells them apart. Each mystery reads ids 0–11, with 0 as padding where padding
# matters; `mystery_ids` and `mystery_padded` are inputs to start from.

# %%
mystery_ids = torch.randint(1, 12, (4, 10), generator=torch.Generator().manual_seed(0))  # (4, 10), no padding
mystery_padded = mystery_ids.clone()
mystery_padded[0, 6:], mystery_padded[2, 4:] = 0, 0  # two shorter sequences
for name, mystery in MYSTERIES.items():
    print(f"Mystery {name}: {mystery.what}")
    for letter, choice in mystery.choices.items():
        print(f"   ({letter}) {choice}")

# %% [markdown]
# **Mystery A**, a language model: `mystery_model("A")(ids)` gives logits `(B, T, 12)`.

# %% tags=["exercise"]
mystery_a = mystery_model("A")


def diagnose_a():
    """Probe mystery A, print what you measure, return your diagnosis: one letter."""
    ### BEGIN SOLUTION
    print(causality_probe(mystery_a, mystery_ids, 12))
    return "a"
    ### END SOLUTION


check_diagnosis(diagnose_a, "A")

# %% [markdown]
# **Mystery B**, an encoder: `mystery_model("B")(ids)` gives states `(B, T, 32)`; `mystery_b.inputs(ids)` is what
# its first layer reads (the scaled embeddings plus the encoding), `mystery_b.embed` its embedding.

# %% tags=["exercise"]
mystery_b = mystery_model("B")


def diagnose_b():
    """Probe mystery B, print what you measure, return your diagnosis: one letter."""
    ### BEGIN SOLUTION
    print(position_probe(mystery_b, mystery_ids))  # weak positions: (b) or (d)?
    print(f"embedding scale: {mystery_b.embed.weight.std().item() * math.sqrt(32):.2f} (not drowning)")
    with torch.no_grad():
        added = mystery_b.inputs(mystery_ids) - mystery_b.embed(mystery_ids) * math.sqrt(32)  # the encoding's share
    print(equality_probe(added[0], sinusoidal_encoding(10, 32)))  # the paper's table times a constant: scaled down
    return "d"
    ### END SOLUTION


check_diagnosis(diagnose_b, "B")

# %% [markdown]
# **Mystery C**, multi-head attention built from an `nn.MultiheadAttention`, with its weights: compare the two.
# `mystery_c(x, x, x, need_weights=True)` returns `(output, per-head weights)`; for PyTorch's per-head weights
# pass `average_attn_weights=False`.

# %% tags=["exercise"]
set_seed(0)
reference = nn.MultiheadAttention(32, 4, batch_first=True).eval()
mystery_c = mystery_model("C", reference)
x = torch.randn(2, 6, 32)


def mystery_self_attention(x):
    return mystery_c(x, x, x, need_weights=True)  # (output, weights (B, h, T, T))


def torch_self_attention(x):
    return reference(x, x, x, average_attn_weights=False)  # (output, weights (B, h, T, T))


def diagnose_c():
    """Probe mystery C, print what you measure, return your diagnosis: one letter."""
    ### BEGIN SOLUTION
    print(equality_probe(mystery_self_attention, torch_self_attention, x))
    return "c"
    ### END SOLUTION


check_diagnosis(diagnose_c, "C")

# %% [markdown]
# **Mystery D**, a classifier: `mystery_model("D")(ids)` gives class logits `(B, 3)`, one row per sequence;
# `mystery_d.states(ids)` gives its encoder's states `(B, T, 32)`, before they are pooled.

# %% tags=["exercise"]
mystery_d = mystery_model("D")


def diagnose_d():
    """Probe mystery D, print what you measure, return your diagnosis: one letter."""
    ### BEGIN SOLUTION
    print(padding_probe(mystery_d, mystery_padded, 0))  # the output moves: (b) or (c)?
    print("before pooling:", padding_probe(mystery_d.states, mystery_padded, 0))  # quiet: the attention's mask is right
    return "b"
    ### END SOLUTION


check_diagnosis(diagnose_d, "D")

# %% [markdown]
# ## Summary
#
# - The classic bugs are silent in the settings shown: a missing mask, queries from the wrong side (with source and
#   target of equal length; otherwise the shapes fail), an encoding with 2i applied twice, a drowned one, a head
#   normalised along the wrong axis (PyTorch warns only of a deprecated default), dropout at inference. The code runs and, in this chapter's runs, the loss falls;
#   a flipped mask announces itself only as a row of NaN.
# - A low training loss is not evidence: in this chapter's runs the leaky GPT's loss is far below the correct one's,
#   and the reverser whose queries came from the encoder matched the correct one's loss while reversing nothing.
# - Each bug breaks a property that a correct model has: causality, equality with PyTorch's module, independence
#   from padding and from the rest of the batch, sensitivity to order, determinism in eval mode. A probe measures
#   the property, so it finds the bug without reading the code.
# - Prove a component equal to PyTorch's before training it; probe a model before trusting its loss.
#
# **Going further.** Run the probes on your own models from the earlier chapters' exercises, or on a Transformer
# from another tutorial. Add a bug of your own to the reverser (a dropout applied to the mask, a residual around
# the wrong sublayer, the decoder input not shifted) and find which probe, if any, catches it; if none does,
# design the probe.
#
# Next, the last chapter of Part I: [10 · GPT-2 and Llama](10_gpt2_and_llama.ipynb) loads Hugging Face's GPT-2 and
# Llama into the course's own classes and proves them equal. `course_utils` holds everything you built, tested
# against PyTorch's own modules; `benchmarks/` times it.
