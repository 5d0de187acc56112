# ---
# jupyter:
#   accelerator: GPU
# ---

# %% [markdown]
# # 07 · A GPT on Shakespeare
#
# {{COLAB_BADGE}}
#
# *Transformers from Scratch*, chapter 7 of 7 · previous: [06 · The full Transformer](06_transformer.ipynb)
#
# Drop the encoder, drop cross-attention, keep the causal decoder, and train it to predict the next character
# of a real text: that is a GPT, the architecture behind today's language models. We train one on the
# complete works of Shakespeare in miniature (Tiny Shakespeare, 1.1 million characters) and watch it learn
# to write.
#
# **You will learn**
# - how a decoder-only language model differs from chapter 05's decoder: learned positions, pre-norm, tied weights;
# - to train on real text with train/validation loss curves, and samples before, during and after training;
# - temperature and top-k sampling, with examples;
# - what the attention heads of a trained language model look at;
# - the key/value cache that makes generation fast, explained and timed.
#
# **Prerequisites:** chapters 01–06. **Time:** about 60 minutes. On a CPU this notebook trains a small model
# for about a minute; on a GPU (Colab: *Runtime → Change runtime type → GPU*) the same cells train the
# 10.65 M-parameter model of nanoGPT's Shakespeare example.

# %% [markdown]
# ## Setup

# %% tags=["nbval-ignore-output"]
import subprocess
import sys

if "google.colab" in sys.modules:  # on Colab: install course_utils from the repository
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{PIP_SPEC}}"], check=True)

import os
import time
from dataclasses import asdict

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from course_utils import (
    GPT,
    SHAKESPEARE_GPT_CPU,
    SHAKESPEARE_GPT_GPU,
    CharTokenizer,
    attention_chart,
    attention_grid,
    count_parameters,
    estimate_loss,
    evaluation_curve,
    get_device,
    load_pretrained,
    load_tiny_shakespeare,
    random_windows,
    record_attention,
    set_seed,
    split_ids,
    train,
)
from course_utils.checks import check_next_token_targets, check_temperature, check_top_k

set_seed(0)
device = get_device()
# No time or no GPU? SKIP_TRAINING = True (or COURSE_SKIP_TRAINING=1 in Jupyter's environment) makes the training
# cell load the CPU model this chapter's recipe produced, shipped with course_utils, instead of training.
SKIP_TRAINING = os.environ.get("COURSE_SKIP_TRAINING") == "1"
print(f"PyTorch {torch.__version__}, running on {device}" + (", skipping training" if SKIP_TRAINING else ""))

# %% [markdown]
# ## 1. The data
#
# `load_tiny_shakespeare` downloads the corpus once from its canonical address, checks its SHA-256, and keeps it
# in the course's `data/` folder (or `~/.cache/transformers-from-scratch` when the course is installed from
# pip). Offline, it tells you where to put the file.

# %%
text = load_tiny_shakespeare()
print(f"{len(text):,} characters")
print(text[:250])

# %% [markdown]
# The tokenizer is the simplest one possible: one token per character. The first 90% of the text is for
# training, the last 10% for validation: a model that merely memorised the training text would do badly there.

# %%
tokenizer = CharTokenizer(text, specials=False)
print(f"vocabulary: {tokenizer.vocab_size} characters:", repr("".join(tokenizer.itos)))
train_ids, val_ids = split_ids(text, tokenizer)
print(f"train {len(train_ids):,} tokens, validation {len(val_ids):,} tokens")
print("'Romeo' ->", tokenizer.encode("Romeo"), "->", repr(tokenizer.decode(tokenizer.encode("Romeo"))))

# %% [markdown]
# ## 2. From the decoder to a language model
#
# A language model assigns a probability to the next token given all previous ones,
# $p(x_t \mid x_{<t})$. Chapter 05's decoder already does this for the target sentence; a GPT is that decoder
# **without** an encoder, so without cross-attention. Every training window of $T + 1$ characters gives $T$
# examples at once: position $t$ reads characters $0 \ldots t$ and must predict character $t + 1$.

# %%
x, y = next(random_windows(train_ids, block_size=16, batch_size=1, seed=3))  # (1, 16) each
print("input  x:", repr(tokenizer.decode(x[0])))
print("target y:", repr(tokenizer.decode(y[0])), " (x shifted by one)")

# %% [markdown]
# `course_utils.GPT` differs from the 2017 decoder in three ways that later models made standard:
#
# - **learned positions** (`nn.Embedding(block_size, d_model)`) instead of sinusoids (chapter 03);
# - **pre-norm** blocks (chapter 04) and one final LayerNorm; GELU instead of ReLU in the feed-forward network;
# - the output head **shares its weight** with the token embedding (*weight tying*): the same matrix reads and
#   writes characters, and the model has fewer parameters.
#
# Each block is `x + CausalSelfAttention(LN(x))`, then `x + FFN(LN(x))`, built from the course's own
# `MultiHeadAttention`, `LayerNorm` and `FeedForward`.
#
# ## 3. The recipe
#
# The model sizes and training settings of nanoGPT's Shakespeare example, kept once in `course_utils.recipes`:
# on a GPU, `SHAKESPEARE_GPT_GPU`, the full model (6 layers, 6 heads, 384 dimensions, 256 characters of context,
# dropout 0.2, batches of 64), trained for 2,500 steps (nanoGPT runs 5,000); on a CPU, `SHAKESPEARE_GPT_CPU`, a small variant (3 layers, 4 heads,
# 128 dimensions, 64 characters of context, batches of 12), trained for under a minute. Both use AdamW with
# weight decay 0.1 and a learning rate warmed up, then decayed along a cosine to a tenth of its peak: nanoGPT's
# peak of $10^{-3}$ on the GPU; on the CPU $4 \times 10^{-3}$, which so small a model tolerates and which gets
# it further in a minute (`benchmarks/README.md` lists the rates tried). Each recipe is the model's sizes
# (a `GPTConfig`, whose fields are `GPT`'s arguments), the training settings (a `TrainConfig`) and how often
# to evaluate:

# %%
recipe = SHAKESPEARE_GPT_GPU if device.type == "cuda" and not SKIP_TRAINING else SHAKESPEARE_GPT_CPU
model_config, config = recipe.model, recipe.training
print(model_config)
print(config)
print(f"evaluate every {recipe.eval_every} steps, on {recipe.eval_batches} batches of each split")

set_seed(0)
model = GPT(tokenizer.vocab_size, **asdict(model_config)).to(device)
n_params = count_parameters(model)
print(f"{n_params:,} parameters ({n_params - model.position_embed.weight.numel():,} without the position table)")

# %% [markdown]
# ## 4. Before training
#
# An untrained model predicts every character with about equal probability, so its loss is near
# $\ln 65 \approx 4.17$, and it writes noise:

# %% tags=["nbval-ignore-output"]
splits = {"train": train_ids, "val": val_ids}
print({name: round(loss, 3) for name, loss in estimate_loss(model, splits, config.batch_size, iters=20).items()})
prompt = torch.tensor([tokenizer.encode("\n")], device=device)
sample = model.generate(prompt, 120, generator=torch.Generator(device=device).manual_seed(0))
print(tokenizer.decode(sample[0]))

# %% [markdown]
# ## 5. Training
#
# Every `eval_every` steps the loop estimates the training and validation loss on fixed windows and, for the
# record, writes a short sample; the progress bar shows the latest figures.

# %% tags=["nbval-ignore-output"]
samples = []


def evaluate(model):
    losses = estimate_loss(model, splits, config.batch_size, iters=recipe.eval_batches)
    out = model.generate(prompt, 200, temperature=0.8, generator=torch.Generator(device=device).manual_seed(0))
    samples.append(tokenizer.decode(out[0]))
    return losses


def lm_loss(model, x, y):
    return model(x, y)[1]


set_seed(0)
if SKIP_TRAINING:  # the CPU recipe, trained by tools/build_checkpoints.py
    pretrained = load_pretrained("shakespeare_gpt", device)
    assert pretrained.recipe == recipe
    model.load_state_dict(pretrained.state_dict)
    history, samples = pretrained.history, pretrained.samples
    print("loaded", pretrained.describe())
else:
    history = train(
        model, random_windows(train_ids, model_config.block_size, config.batch_size, seed=0), lm_loss, config,
        device=device, eval_fn=evaluate, eval_every=recipe.eval_every, desc="GPT",
    )  # fmt: skip
    tokens_per_second = config.steps * config.batch_size * model_config.block_size / history.seconds
    print(f"{config.steps} steps in {history.seconds:.0f} s of training on {device} "
          f"({1000 * history.seconds / config.steps:.1f} ms/step, {tokens_per_second:,.0f} tokens/s)")  # fmt: skip
model.eval()  # from here on the model writes, it does not learn: dropout off
for step, losses in history.evals:
    print(f"step {step:5d}: train loss {losses['train']:.3f}, validation loss {losses['val']:.3f}")

# %%
best_val = min(losses["val"] for _, losses in history.evals)
print(f"best validation loss: {best_val:.3f}")
assert best_val < 2.2, "the model should have learnt a good deal of the text's structure"
if recipe == SHAKESPEARE_GPT_CPU:
    assert best_val <= 1.95, "the CPU recipe gets below 1.95"
evaluation_curve(history, title="Tiny Shakespeare: training and validation loss")

# %% [markdown]
# The validation loss follows the training loss closely: the model is learning the language, not the
# training text. The CPU model, small and trained for about a minute, gets below 1.95 (the cell above asserts
# it). nanoGPT reports about 1.47 for the full model trained on a GPU; this course has not measured that yet.
#
# ## 6. Samples during training
#
# The same prompt, the same random seed, at the first, a middle and the last evaluation. Watch spelling, then words, then the shape of a
# play (names in capitals followed by a colon, lines of verse) appear:

# %% tags=["nbval-ignore-output"]
for (step, _), sample in zip(history.evals, samples):
    if step in (history.evals[0][0], history.evals[len(history.evals) // 2][0], history.evals[-1][0]):
        print(f"--- after {step} steps ---{sample}\n")

# %% [markdown]
# ## 7. Temperature and top-k
#
# Generation samples each next character from $\mathrm{softmax}(z / \tau)$, where $z$ are the logits and $\tau$
# the **temperature**: $\tau < 1$ sharpens the distribution (safer, more repetitive text), $\tau > 1$ flattens it
# (more surprising, more errors), $\tau \to 0$ always takes the most likely character. **Top-k** sampling keeps
# only the $k$ most likely characters before sampling, cutting off the long tail of unlikely ones.
#
# The next-character distribution after "ROMEO:\nWhat light through yonder window br", at three temperatures:

# %%
context = "ROMEO:\nWhat light through yonder window br"
ids = torch.tensor([tokenizer.encode(context)[-model_config.block_size :]], device=device)
with torch.no_grad():
    logits = model(ids)[0][0, -1]  # (V,): the logits of the next character
top = torch.topk(logits, 8).indices
fig, axes = plt.subplots(1, 3, figsize=(11, 2.8), layout="constrained", sharey=True)
for ax, temperature in zip(axes, (0.5, 1.0, 2.0)):
    probs = F.softmax(logits / temperature, dim=-1)
    ax.bar([repr(tokenizer.itos[i])[1:-1] for i in top.tolist()], probs[top].cpu())
    ax.set_title(f"temperature {temperature}")
axes[0].set_ylabel("probability")
plt.close(fig)
fig

# %% [markdown]
# And whole samples from the same prompt and seed:

# %% tags=["nbval-ignore-output"]
romeo = torch.tensor([tokenizer.encode("ROMEO:\n")], device=device)
for temperature, top_k in ((0.2, None), (0.8, None), (1.5, None), (1.5, 5)):
    out = model.generate(romeo, 150, temperature, top_k, generator=torch.Generator(device=device).manual_seed(1))
    print(f"--- temperature {temperature}, top_k {top_k} ---\n{tokenizer.decode(out[0])}\n")

# %% [markdown]
# At 0.2 the text is safe and repetitive; at 1.5 it falls apart into invented words; top-k rescues the high
# temperature by never choosing a really unlikely character.
#
# ## 8. What do the heads look at?
#
# Run the trained model on a line of text with `record_attention` (chapter 02), which asks every attention
# module for its weights, and plot the heads of the first and last layer. Row = the character being read; column = an earlier character
# it attends to. The causal mask makes every map lower-triangular.

# %% tags=["nbval-ignore-output"]
line = "HAMLET:\nTo be, or not to be: that"  # 33 characters
ids = torch.tensor([tokenizer.encode(line)], device=device)
with torch.no_grad(), record_attention(model) as attention:
    model(ids)
labels = ["⏎" if c == "\n" else "␣" if c == " " else c for c in line]
n_layers = model_config.n_layers
first, last = attention["blocks.0.self_attn"][0], attention[f"blocks.{n_layers - 1}.self_attn"][0]  # (h, T, T)
heads = torch.cat([first[:2], last[:2]])
attention_grid(
    heads,
    labels,
    titles=[
        "layer 1, head 0",
        "layer 1, head 1",
        f"layer {n_layers}, head 0",
        f"layer {n_layers}, head 1",
    ],
    ncols=2,
)

# %% [markdown]
# Typical patterns: heads that look at the previous one or two characters (a diagonal just below the main one),
# heads that jump back to the last space or newline (the start of the current word or line), and heads that
# spread over the whole line. Explore every head of the last layer interactively:

# %% tags=["nbval-ignore-output"]
names = [f"layer {n_layers}, head {h}" for h in range(model_config.n_heads)]
attention_chart(last, labels, head_names=names, title="Self-attention of the last layer (pick a head)", cell=14)

# %% [markdown]
# ## 9. The key/value cache
#
# Generating token $t$ needs attention between the new query and the keys and values of **all** earlier
# positions. Without a cache, each step runs the whole context through the model again: $O(T)$ positions per
# step, $O(T^2)$ for a whole text. But the keys and values of earlier positions never change (the causal mask
# guarantees it), so a `KVCache` per layer keeps them, and each step processes **one** new token:
#
# ```
# step 1:  prompt  ->  compute q, k, v for every prompt position; store k, v
# step 2:  token   ->  compute q, k, v for the new token only; append k, v; attend over all stored k, v
# ```
#
# `MultiHeadAttention(..., cache=cache)` does the bookkeeping; `GPT.generate(use_cache=...)` switches it. Both ways
# must produce **exactly** the same text; timed here over one full context window:

# %% tags=["nbval-ignore-output"]
n_new = model_config.block_size - 1  # the cache helps until the text fills the context window
seconds, texts = {}, {}
for use_cache in (False, True):
    for _ in range(2):  # the first run warms up
        start = time.perf_counter()
        texts[use_cache] = model.generate(
            prompt, n_new, temperature=0.8, use_cache=use_cache, generator=torch.Generator(device=device).manual_seed(0)
        )
        if device.type == "cuda":  # a GPU works asynchronously: wait for it before reading the clock
            torch.cuda.synchronize()
        seconds[use_cache] = time.perf_counter() - start
assert torch.equal(texts[True], texts[False]), "the cache must not change the text"
print(f"{n_new} new tokens: without cache {1000 * seconds[False]:.0f} ms, with cache {1000 * seconds[True]:.0f} ms "
      f"({seconds[False] / seconds[True]:.1f}x faster), identical text")  # fmt: skip

# %% [markdown]
# The gain grows with the context length: each uncached step costs as much as the whole context, each cached
# step as much as one token. (With learned absolute positions, once the text outgrows the window every position
# shifts and the cache must be rebuilt; rotary embeddings, chapter 03, avoid this, which is one reason modern
# models use them.)
#
# ## 10. Saving the model
#
# As in chapter 06: the `state_dict`, loaded back with `weights_only=True`.

# %%
torch.save(model.state_dict(), "shakespeare_gpt.pt")
restored = GPT(tokenizer.vocab_size, **asdict(model_config)).to(device)
restored.load_state_dict(torch.load("shakespeare_gpt.pt", map_location=device, weights_only=True))
same = torch.equal(restored.generate(prompt, 50, temperature=0.0), model.generate(prompt, 50, temperature=0.0))
print("the restored model writes the same text:", same)
assert same

# %% [markdown]
# ## Pitfalls
#
# | Mistake | What happens | Fix |
# | --- | --- | --- |
# | no causal mask | the loss drops to almost 0 in training (it reads the answer) and generation is gibberish | `is_causal=True` in every block |
# | targets not shifted | the model learns to copy its input | `y` = `x` shifted by one |
# | validating on random windows of the *training* text | a memorising model looks good | hold out a contiguous part of the text |
# | generating with dropout on | worse, random text | `generate` switches to eval mode |
# | a context longer than `block_size` | an indexing error in the position table | crop to the last `block_size` tokens (as `generate` does) |
# | a KV cache with the wrong positions | subtly different text | test cached against uncached generation (done above) |
#
# ## Summary
#
# - A GPT is the Transformer's decoder alone, trained to predict the next token of real text.
# - Learned positions, pre-norm blocks, GELU and tied embeddings are its usual refinements.
# - Temperature and top-k trade safety for variety when sampling.
# - A key/value cache makes each generation step cost one token instead of the whole context.
#
# ## Exercises
#
# **Exercise 1.** Write `my_xy(window)`: from windows of $T + 1$ tokens `(B, T + 1)`, the inputs and the
# next-token targets, each `(B, T)`.


# %%
def my_xy(window):
    # your code here
    raise NotImplementedError


check_next_token_targets(my_xy)

# %% [markdown]
# <details><summary>Show a solution</summary>
#
# ```python
# def my_xy(window):
#     return window[:, :-1], window[:, 1:]
# ```
# </details>
#
# **Exercise 2.** Write `my_probs(logits, temperature)`: the sampling probabilities at a given temperature.


# %%
def my_probs(logits, temperature):
    # your code here
    raise NotImplementedError


check_temperature(my_probs)

# %% [markdown]
# <details><summary>Show a solution</summary>
#
# ```python
# def my_probs(logits, temperature):
#     return torch.softmax(logits / temperature, dim=-1)
# ```
# </details>
#
# **Exercise 3.** Write `my_top_k(logits, k)`: keep the `k` largest logits of each row, set the others to
# $-\infty$ (so that their probability is exactly 0).


# %%
def my_top_k(logits, k):
    # your code here
    raise NotImplementedError


check_top_k(my_top_k)

# %% [markdown]
# <details><summary>Show a solution</summary>
#
# ```python
# def my_top_k(logits, k):
#     kth_largest = torch.topk(logits, k).values[:, -1:]  # (B, 1)
#     return logits.masked_fill(logits < kth_largest, float("-inf"))
# ```
# </details>
#
# **Going further.** Train with `dropout=0.2` on the CPU recipe and compare the validation curves. Or write a
# word-level tokenizer and compare: what happens to the vocabulary size, and to the samples?
#
# This is the end of the course: from one attention head to a model that writes in the style of Shakespeare.
# `course_utils` holds everything you built; `benchmarks/` measures it against PyTorch's own implementation.
