# ---
# jupyter:
#   accelerator: GPU
# ---

# %% [markdown]
# # 06 · The full Transformer, trained end to end
#
# {{COLAB_BADGE}}
#
# *Transformers from Scratch*, chapter 6 of 7 · previous: [05 · The decoder](05_decoder.ipynb) ·
# next: [07 · A GPT on Shakespeare](07_gpt.ipynb)
#
# Everything comes together: embeddings, positional encoding, the encoder, the decoder and the output
# projection make the encoder-decoder of *Attention Is All You Need*. We train it on a real, if small,
# sequence-to-sequence task, **date normalisation**: "Sunday, 22 Nov 2026", "11/22/2026" or "the 22nd of
# November, 2026" must all become `2026-11-22`. The model has to find day, month and year wherever each
# format puts them, read month names, and ignore weekdays.
#
# **You will learn**
# - how the pieces assemble, why embeddings are multiplied by $\sqrt{d_{\text{model}}}$, and how they must be initialised;
# - label smoothing from scratch, and the warm-up learning-rate schedule;
# - to train with a progress bar and loss curve, and to decode greedily;
# - to evaluate honestly, on dates **never seen in training**, and to read the failures;
# - to look inside: cross-attention shows which characters the model reads for each one it writes;
# - to save and load weights, and to check the whole model against PyTorch's own layers.
#
# **Prerequisites:** chapters 01–05. **Time:** about 60 minutes (training: about half a minute on a laptop CPU,
# seconds on a GPU).

# %% [markdown]
# ## Setup

# %% tags=["nbval-ignore-output"]
import subprocess
import sys

if "google.colab" in sys.modules:  # on Colab: install course_utils from the repository
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{PIP_SPEC}}"], check=True)

import math
import os
import re
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from course_utils import (
    DATE_TRANSFORMER,
    DateTask,
    PositionalEncoding,
    TorchTransformer,
    Transformer,
    attention_chart,
    attention_grid,
    count_parameters,
    encode_pairs,
    exact_match,
    get_device,
    greedy_decode,
    load_pretrained,
    loss_curve,
    lr_factor,
    noam_lr,
    padding_mask,
    random_batches,
    record_attention,
    seq2seq_loss,
    set_seed,
    target_mask,
    train,
)
from course_utils.checks import check_label_smoothing, check_noam_lr

set_seed(0)
device = get_device()
# No time or no GPU? SKIP_TRAINING = True (or COURSE_SKIP_TRAINING=1 in Jupyter's environment) makes the training
# cell load the weights this chapter's recipe produced on a CPU, shipped with course_utils, instead of training.
SKIP_TRAINING = os.environ.get("COURSE_SKIP_TRAINING") == "1"
print(f"PyTorch {torch.__version__}, running on {device}" + (", skipping training" if SKIP_TRAINING else ""))

# %% [markdown]
# ## 1. The data: dates in many formats
#
# `course_utils.DateTask` renders dates between 1950 and 2049 in 18 human formats, paired with their
# ISO 8601 form. Before anything else it sets aside 10% of all **dates** (seeded): those dates never appear in
# training, in any format, so accuracy on them measures generalisation, not memory.

# %%
task = DateTask(seed=0)
print(f"{len(task.train_dates):,} training dates, {len(task.test_dates):,} held-out dates, {len(task.formats)} formats")
for text, iso, fmt in task.pairs(8, "train", seed=1, with_formats=True):
    print(f"  {text:<32} -> {iso}   ({fmt})")
src_tok, tgt_tok = task.src_tokenizer, task.tgt_tokenizer
print("source vocabulary:", src_tok.vocab_size, "characters;  target vocabulary:", tgt_tok.vocab_size, tgt_tok.itos)

# %% [markdown]
# Every string becomes a row of character ids; the targets are wrapped in `<bos>` ... `<eos>` for teacher
# forcing (chapter 05), and rows are padded to a common length:

# %%
train_pairs = task.pairs(100_000, "train", seed=0)
test_pairs = task.pairs(2_000, "test", seed=0)  # held-out dates only
src_ids, tgt_ids = encode_pairs(train_pairs, src_tok, tgt_tok)
print("training sources:", tuple(src_ids.shape), "targets:", tuple(tgt_ids.shape), "= (N, padded length)")
print("first pair as ids:", src_ids[0, :12].tolist(), "...", tgt_ids[0].tolist())

# %% [markdown]
# ## 2. Assembling the Transformer
#
# $$\text{logits} = \mathrm{Linear}\Big(\mathrm{Decoder}\big(\,\mathrm{PE}(\sqrt{d}\,E_{\text{tgt}}[y]),\;
#   \underbrace{\mathrm{Encoder}(\mathrm{PE}(\sqrt{d}\,E_{\text{src}}[x]))}_{\text{memory}}\big)\Big)$$
#
# `course_utils.Transformer` is exactly this: two embedding tables, one positional encoding, an `Encoder`
# and a `Decoder` of $N$ layers each, and a `generator` projecting to target logits. `encode` and `decode`
# are separate methods because generation runs the encoder once and the decoder once per output token.
#
# ![The Transformer: N encoder layers turn the source into memory; N decoder layers attend to the target so far and, through cross-attention, to memory; a linear layer gives next-token logits](../images/transformer.png)
#
# ### Why $\sqrt{d_{\text{model}}}$, and why initialisation matters
#
# The paper multiplies embeddings by $\sqrt{d_{\text{model}}}$ before adding the positional encoding, whose
# entries lie in $[-1, 1]$. With `nn.Embedding`'s default initialisation, $\mathcal{N}(0, 1)$, that product has
# standard deviation $\sqrt{d_{\text{model}}}$ and drowns the positions. `course_utils.Transformer` draws
# embeddings from $\mathcal{N}(0, 1/d_{\text{model}})$ so that the scaled embedding and the encoding have the same
# size. Measured for $d_{\text{model}} = 512$:

# %%
d = 512
pe_rms = PositionalEncoding(d).pe[:50].pow(2).mean().sqrt().item()
for name, embedding in (
    ("nn.Embedding default", nn.Embedding(100, d)),
    ("course_utils.Transformer", Transformer(100, 100, d_model=d, n_layers=1).src_embed),
):
    rms = (embedding.weight * math.sqrt(d)).pow(2).mean().sqrt().item()
    print(
        f"{name:25}: scaled embedding RMS {rms:6.2f}  vs positional encoding RMS {pe_rms:.2f}  (ratio {rms / pe_rms:5.1f})"
    )

# %% [markdown]
# With the default, the token signal is 32 times stronger than the position signal, and a model learns word
# order badly. Every other matrix gets Xavier initialisation, as in `nn.Transformer`.
#
# ### Our model
#
# The paper's base model ($d_{\text{model}} = 512$, $N = 6$, 65 M parameters) was built for translation. Dates
# need far less. The whole recipe is one frozen object, `course_utils.recipes.DATE_TRANSFORMER`: the model's sizes
# (a `TransformerConfig`, whose fields are `Transformer`'s arguments) and how to train it (a `TrainConfig`). The
# shipped weights and the benchmarks use the same object, so the three can never drift apart. Printed once:

# %%
recipe = DATE_TRANSFORMER
model_config, train_config = recipe.model, recipe.training
print(model_config)  # dropout 0: fresh examples every step leave nothing to overfit
print(train_config)

set_seed(0)
model = Transformer(src_tok.vocab_size, tgt_tok.vocab_size, **asdict(model_config)).to(device)
parts = {
    "embeddings": [model.src_embed, model.tgt_embed],
    "encoder": [model.encoder],
    "decoder": [model.decoder],
    "generator": [model.generator],
}
for part, modules in parts.items():
    print(f"{part:>10}: {sum(count_parameters(m) for m in modules):>8,} parameters")
print(f"{'total':>10}: {count_parameters(model):>8,}")

# %% [markdown]
# ## 3. The loss: cross-entropy with label smoothing
#
# Label smoothing (paper, section 5.4) trains against a softened target: the true token gets probability
# $1 - \varepsilon + \varepsilon/V$ and every other token $\varepsilon / V$. The model is discouraged from becoming
# absurdly confident, which "hurts perplexity, ... but improves accuracy". Written out, and checked against
# PyTorch's `F.cross_entropy(label_smoothing=...)`, which `seq2seq_loss` uses:


# %%
def smoothed_cross_entropy(logits, target, smoothing, ignore_index):
    """logits (N, V), target (N,): mean over non-ignored positions of -sum(q * log p)."""
    log_p = logits.log_softmax(dim=-1)  # (N, V)
    V = logits.size(-1)
    q = torch.full_like(log_p, smoothing / V)  # (N, V): the smoothed target distribution
    q.scatter_(1, target[:, None], 1 - smoothing + smoothing / V)
    loss = -(q * log_p).sum(dim=-1)  # (N,)
    keep = target != ignore_index
    return loss[keep].mean()


logits, target = torch.randn(6, tgt_tok.vocab_size), torch.tensor([4, 5, 6, 0, 7, 0])  # 0 = <pad>
ours = smoothed_cross_entropy(logits, target, 0.1, ignore_index=tgt_tok.pad_id)
torch.testing.assert_close(ours, F.cross_entropy(logits, target, label_smoothing=0.1, ignore_index=tgt_tok.pad_id))
print(f"✓ smoothed cross-entropy {ours:.4f} == F.cross_entropy(label_smoothing=0.1)")

# %% [markdown]
# (The Annotated Transformer spreads $\varepsilon$ over $V - 2$ tokens, excluding padding and the true token;
# PyTorch's convention, used here, spreads it over all $V$. Both smooth; the numbers differ slightly.)
#
# ## 4. The learning-rate schedule: warm-up
#
# The paper increases the learning rate linearly for `warmup` steps, then decays it as $1/\sqrt{\text{step}}$:
#
# $$\text{lrate} = d_{\text{model}}^{-0.5} \cdot \min(\text{step}^{-0.5},\; \text{step} \cdot \text{warmup}^{-1.5})$$
#
# Chapter 04 showed why a post-norm model needs the warm-up. Our short run warms up too, then follows a cosine
# decay, which ends training at a small learning rate: better for a run of a few hundred steps. Both schedules:

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3), layout="constrained")
steps = range(1, 20_001)
axes[0].plot(steps, [noam_lr(s, 512, 4000) for s in steps])
axes[0].set(title="The paper: d_model=512, warmup=4000", xlabel="step", ylabel="learning rate")
axes[1].plot([train_config.lr * lr_factor(s, train_config) for s in range(train_config.steps)])
axes[1].set(title=f"This run: warm-up {train_config.warmup_steps}, cosine decay", xlabel="step")
plt.close(fig)
fig

# %% [markdown]
# ## 5. Training
#
# `course_utils.train` is a plain loop: for each step, set the learning rate, take a batch, compute the loss,
# backpropagate, clip the gradient norm to 1, and take an AdamW step ($\beta = (0.9, 0.98)$, as in the paper).
# It shows a progress bar, records the loss, and leaves the model in the mode it found it in. Nothing in it makes
# the model faster: the model's attention and LayerNorm call PyTorch's fused kernels on their own, unless
# attention weights are asked for (chapter 02), so a loop of your own runs as fast. (`benchmarks/bench_gpt.py`
# times such a plain loop against a reference model with nanoGPT's architecture: within 5%.) On a GPU the same
# cell runs there. With `SKIP_TRAINING` (setup cell) it loads the weights this very recipe produced
# instead, and the rest of the notebook runs unchanged.

# %% tags=["nbval-ignore-output"]
set_seed(0)
batches = random_batches(src_ids, tgt_ids, batch_size=train_config.batch_size, seed=0)


def loss_fn(model, src, tgt):
    return seq2seq_loss(model, src, tgt, tgt_tok.pad_id, label_smoothing=train_config.label_smoothing)


if SKIP_TRAINING:  # the same recipe, trained by tools/build_checkpoints.py
    pretrained = load_pretrained("date_transformer", device)
    assert pretrained.recipe == recipe
    model.load_state_dict(pretrained.state_dict)
    history = pretrained.history
    print("loaded", pretrained.describe())
else:
    history = train(model, batches, loss_fn, train_config, device=device, desc="date transformer")
    print(f"trained {train_config.steps} steps in {history.seconds:.1f} s on {device}")
model = model.eval()  # from here on the model is used, not trained: evaluation mode

# %% tags=["nbval-ignore-output"]
loss_curve(history, labels=["course_utils.Transformer"], title="Training loss (label-smoothed cross-entropy)")

# %% [markdown]
# With label smoothing the loss cannot reach 0: its floor is the entropy of the smoothed targets.
#
# ## 6. Greedy decoding, and accuracy on unseen dates
#
# `greedy_decode` encodes the source once, then repeatedly feeds the tokens so far to the decoder and appends the
# most likely next token, until every row has produced `<eos>`. A prediction counts only if the **whole** date
# is right. The held-out set holds 2,000 dates the model never saw in training, in random formats.

# %% tags=["nbval-ignore-output"]
accuracy, predictions = exact_match(model, test_pairs, src_tok, tgt_tok)
print(f"held-out exact-match accuracy: {accuracy:.2%} ({round(accuracy * len(test_pairs))} of {len(test_pairs)} dates)")
assert accuracy >= 0.99, "the model should get at least 99% of unseen dates exactly right"

# %% [markdown]
# One decoding step by step, to see the mechanics:

# %% tags=["nbval-ignore-output"]
example = "Sunday, 22 Nov 2026"
src = src_tok.encode_batch([example]).to(device)
out = greedy_decode(
    model, src, padding_mask(src, src_tok.pad_id), max_len=14, bos_id=tgt_tok.bos_id, eos_id=tgt_tok.eos_id
)
print(f"{example!r} -> token ids {out[0].tolist()} -> {tgt_tok.decode(out[0])!r}")
assert tgt_tok.decode(out[0]) == "2026-11-22"

# %% [markdown]
# ### The failures
#
# What does the model still get wrong? Each failure with its format, and which field (year, month, day) is off:

# %% tags=["nbval-ignore-output"]
formats = [fmt for _, _, fmt in task.pairs(2_000, "test", seed=0, with_formats=True)]
failures = [(s, t, p, f) for (s, t), p, f in zip(test_pairs, predictions, formats) if p != t]
fields = Counter()
for text, truth, guess, fmt in failures:
    wrong = [
        name for name, a, b in zip(("year", "month", "day"), truth.split("-"), (guess + "--").split("-")) if a != b
    ]
    fields.update(wrong)
    print(f"  {text:<32} expected {truth}, got {guess}   ({fmt}; wrong {', '.join(wrong) or 'format'})")
print(f"{len(failures)} failures; fields wrong: {dict(fields)}; formats: {dict(Counter(f for *_, f in failures))}")

# %% [markdown]
# Each failure above gets the format right and one field wrong, usually by a single digit: the model found the
# field but misread or miscopied a digit. With so few errors there is no single cause to fix; train longer, or
# with another seed, and the list changes. What stays is the figure that matters: almost every unseen date is
# normalised exactly.
#
# ## 7. Inside the model: cross-attention
#
# Which source characters does the decoder read while it writes each output character? Run the model on the
# example with teacher forcing on its own output, and plot every cross-attention head of both decoder layers.
# Rows are labelled with the character being **written**.

# %% tags=["nbval-ignore-output"]
tgt_in = out[:, :-1]  # the decoder reads <bos> 2 0 2 6 - ... and writes 2 0 2 6 - ... <eos>
with torch.no_grad(), record_attention(model) as attention:
    model(src, tgt_in, padding_mask(src, src_tok.pad_id), target_mask(tgt_in, tgt_tok.pad_id))
cross = [attention[f"decoder.layers.{i}.cross_attn"][0] for i in range(model_config.n_layers)]  # (h, T, S) each
weights = torch.cat(cross)  # (layers * h, T, S)
titles = [f"layer {i + 1}, head {h}" for i in range(model_config.n_layers) for h in range(model_config.n_heads)]
keys, written = src_tok.tokens(src[0]), tgt_tok.tokens(out[0, 1:])
attention_grid(weights, keys, written, titles=titles, suptitle=f"Cross-attention while normalising {example!r}")

# %% [markdown]
# In the second layer the alignment is plain to see: the year digits walk along "2026", the month digits look at
# "Nov", the day digits at "22", and the weekday is ignored. The interactive version (pick a layer and head):

# %% tags=["nbval-ignore-output"]
attention_chart(weights, keys, written, head_names=titles, title="Cross-attention (pick a layer and head)")

# %% [markdown]
# One example could be luck. Measure it over all held-out dates written with a month **name**: for the output
# positions of the year, month and day, how much of the second layer's cross-attention (mean of its heads) falls
# on the source characters of that field, compared with what a uniform spread would give?

# %% tags=["nbval-ignore-output"]
NAMED = {"month_day", "mon_day", "day_month", "day_mon", "weekday_day_mon", "wkd_day_mon", "weekday_month_ordinal",
         "the_ordinal_of", "the_day_of", "dash_mon", "upper", "lower"}  # fmt: skip
MONTH_ABBREVIATIONS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]


def spans(text, iso):
    """Character positions of year, month (name) and day in `text`."""
    year, month, _ = iso.split("-")
    y = text.rfind(year)
    m = text.lower().find(MONTH_ABBREVIATIONS[int(month) - 1])
    month_end = m + len(re.match(r"[A-Za-z]+", text[m:]).group())
    day = next(match for match in re.finditer(r"(?<!\d)\d{1,2}(?!\d)", text))
    return {"year": range(y, y + 4), "month": range(m, month_end), "day": range(day.start(), day.end())}


ROWS = {"year": [0, 1, 2, 3], "month": [5, 6], "day": [8, 9]}  # output positions in YYYY-MM-DD
named = [(s, t) for (s, t), f in zip(test_pairs, formats) if f in NAMED][:300]
share = {field: [] for field in ROWS}
uniform = {field: [] for field in ROWS}
for text, iso in named:
    s = src_tok.encode_batch([text]).to(device)
    y = tgt_tok.encode_batch([iso], bos=True, eos=True).to(device)[:, :-1]
    with torch.no_grad(), record_attention(model) as attention:
        model(s, y, padding_mask(s, src_tok.pad_id), target_mask(y, tgt_tok.pad_id))
    w = attention[f"decoder.layers.{model_config.n_layers - 1}.cross_attn"][0].mean(0)  # (T, S): mean over heads
    for field, where in spans(text, iso).items():
        share[field].append(w[ROWS[field]][:, list(where)].sum(-1).mean().item())
        uniform[field].append(len(where) / len(text))
for field in ROWS:
    on_field, by_chance = sum(share[field]) / len(named), sum(uniform[field]) / len(named)
    print(f"{field:>5} digits: {on_field:.0%} of their attention on the {field} (a uniform spread: {by_chance:.0%})")
    assert on_field > 2 * by_chance, f"the {field} digits should look at the {field}"

# %% [markdown]
# Several times more than chance, on dates the model never saw: the decoder has learnt *where* to look for each
# field, in every format, from examples alone.
#
# ## 8. Try your own date
#
# Change `my_date` and run the cell. Formats the model was trained on work; others may or may not (the model
# has never seen them: try "2026.11.22" or "22nd November 2026" and see where it breaks).


# %% tags=["nbval-ignore-output"]
def normalise(text):
    unknown = sorted({c for c in text if c not in src_tok.stoi})
    if unknown:
        print(f"  (characters the model never saw: {unknown}; they are read as <unk>)")
    s = src_tok.encode_batch([text]).to(device)
    ids = greedy_decode(model, s, padding_mask(s, src_tok.pad_id), 14, tgt_tok.bos_id, tgt_tok.eos_id, tgt_tok.pad_id)
    return tgt_tok.decode(ids[0])


my_date = "the 1st of January, 2000"
for text in (my_date, "Friday, 13 Mar 2026", "2026.11.22", "22nd November 2026"):
    print(f"{text!r:>30} -> {normalise(text)}")

# %% [markdown]
# ## 9. Saving and loading the weights
#
# Save the `state_dict` (the tensors only), not the whole model object, and load it with `weights_only=True`,
# which refuses to run arbitrary code hidden in a checkpoint file. A fresh model with the loaded weights gives the
# same predictions:

# %%
checkpoint = Path("date_transformer.pt")
torch.save(model.state_dict(), checkpoint)
restored = Transformer(src_tok.vocab_size, tgt_tok.vocab_size, **asdict(model_config)).to(device)
restored.load_state_dict(torch.load(checkpoint, map_location=device, weights_only=True))
same = exact_match(restored, test_pairs[:200], src_tok, tgt_tok)[1] == predictions[:200]
print(f"saved {checkpoint} ({checkpoint.stat().st_size / 1e6:.2f} MB); the restored model predicts the same: {same}")
assert same

# %% [markdown]
# ## 10. The same model with `nn.Transformer`'s layers
#
# `course_utils.TorchTransformer` is our `Transformer` with its encoder and decoder built from PyTorch's own
# `nn.TransformerEncoderLayer` and `nn.TransformerDecoderLayer`; embeddings, positional encoding, output projection
# and the stacks' shape are the same. It converts our masks at the border: PyTorch's masks mean True = blocked.
# `TorchTransformer.from_course(model)` copies our trained weights into it, packing $W^Q, W^K, W^V$ into PyTorch's
# single `in_proj_weight`. If every layer we wrote computes what PyTorch's computes (chapters 04 and 05 checked
# one layer at a time), the copy must make the same predictions on every held-out date:

# %%
torch_model = TorchTransformer.from_course(model)
print(f"{count_parameters(model):,} parameters in ours, {count_parameters(torch_model):,} in the copy;",
      type(torch_model.encoder.stack.layers[0]).__name__, "inside")  # fmt: skip
s, t = encode_pairs(test_pairs[:256], src_tok, tgt_tok)
s, t_in = s.to(device), t[:, :-1].to(device)
masks = (padding_mask(s, src_tok.pad_id), target_mask(t_in, tgt_tok.pad_id))
real = t_in != tgt_tok.pad_id  # padded positions never reach the loss; PyTorch may leave them as it likes
with torch.no_grad():
    gap = (model(s, t_in, *masks) - torch_model(s, t_in, *masks))[real].abs().max().item()
torch_accuracy, torch_predictions = exact_match(torch_model, test_pairs, src_tok, tgt_tok)
print(f"largest logit difference {gap:.1e}; held-out accuracy {torch_accuracy:.2%} (ours {accuracy:.2%});",
      f"same prediction for {sum(p == q for p, q in zip(predictions, torch_predictions))} of {len(test_pairs)} dates")  # fmt: skip
assert gap < 1e-4 and torch_predictions == predictions

# %% [markdown]
# The same logits to float precision, the same answer for every date: the model we built from scratch is a real
# Transformer, layer for layer. How fast each trains is a question for `benchmarks/bench_transformer.py`, which
# trains both with this recipe and times them side by side (its figures are in `benchmarks/README.md`).
#
# ## Pitfalls
#
# | Mistake | What happens | Fix |
# | --- | --- | --- |
# | embeddings at `nn.Embedding`'s default scale, times $\sqrt{d}$ | positions drowned; word order learnt badly | initialise with std $d^{-1/2}$ (as here) |
# | evaluating on dates seen in training | accuracy measures memory | hold out **dates**, not just examples |
# | evaluation with dropout on | random, worse predictions | `model.eval()` (`greedy_decode` does it) |
# | token-level accuracy reported as the result | "99%" that still gets most dates wrong | exact match of the whole output |
# | `torch.save(model)` and `torch.load` without `weights_only` | pickles code; loading can run anything | save the `state_dict`, load with `weights_only=True` |
# | a learning rate with no warm-up for a post-norm model | training stalls (chapter 04) | warm-up |
#
# ## Summary
#
# - The Transformer = scaled embeddings + positional encoding + encoder + decoder + output projection.
# - Trained with label smoothing and a warm-up schedule, a 0.2 M-parameter model learns to normalise dates in
#   half a minute on a CPU, and gets at least 99% of **unseen** dates exactly right.
# - Cross-attention reveals the alignment it learnt, and can be measured, not just admired.
# - Copied into PyTorch's own layers, it makes the same prediction for every held-out date.
#
# ## Exercises
#
# **Exercise 1.** Write the label-smoothed cross-entropy `my_smoothed_ce(logits, target, smoothing)` for logits
# `(N, V)` and targets `(N,)`, with PyTorch's convention (no padding in this exercise).


# %%
def my_smoothed_ce(logits, target, smoothing):
    # your code here
    raise NotImplementedError


check_label_smoothing(my_smoothed_ce)

# %% [markdown]
# <details><summary>Show a solution</summary>
#
# ```python
# def my_smoothed_ce(logits, target, smoothing):
#     log_p = logits.log_softmax(-1)
#     nll = -log_p.gather(1, target[:, None]).squeeze(1)  # the usual cross-entropy
#     uniform = -log_p.mean(-1)  # cross-entropy against the uniform distribution
#     return ((1 - smoothing) * nll + smoothing * uniform).mean()
# ```
# </details>
#
# **Exercise 2.** Write the paper's schedule `my_noam(step, d_model, warmup)` (steps count from 1).


# %%
def my_noam(step, d_model, warmup):
    # your code here
    raise NotImplementedError


check_noam_lr(my_noam)

# %% [markdown]
# <details><summary>Show a solution</summary>
#
# ```python
# def my_noam(step, d_model, warmup):
#     return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
# ```
# </details>
#
# **Going further.** Train with `n_layers=1`, or with `label_smoothing=0.0`, or for 500 steps: how does the
# held-out accuracy move? Add a date format of your own to `course_utils.dates.DATE_FORMATS` (in a copy) and
# check whether the trained model handles it without retraining.
#
# Next: [07 · A GPT on Shakespeare](07_gpt.ipynb): a decoder-only language model trained on real text.
