# ---
# jupyter:
#   accelerator: GPU
# ---

# %% [markdown]
# # 07 · A GPT on Shakespeare
#
# {{COLAB_BADGE}}
#
# *Transformers from Scratch*, Part I, chapter 7 of 10 · previous: [06 · The full Transformer](06_transformer.ipynb) ·
# next: [08 · Translating real sentences](08_translation.ipynb)
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
# - the key/value cache that makes generation cheaper: how it works, what it saves, what it costs in memory.
#
# **Prerequisites:** chapters 01–06. **Time:** about 60 minutes. On two CPU cores this notebook trains a small model
# for about a minute (the training cell prints how long it took); on a GPU (Colab: *Runtime → Change runtime type → GPU*) the same cells train the
# 10.65 M-parameter model of nanoGPT's Shakespeare example (section 3 counts it).

# %% [markdown]
# ## Setup

# %% tags=["nbval-ignore-output"]
import subprocess
import sys

if "google.colab" in sys.modules:  # on Colab: install course_utils from the repository
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{PIP_SPEC}}"], check=True)

import inspect
import math
import os
import re
import textwrap
import time
from dataclasses import asdict, replace

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from course_utils import (
    GPT,
    SHAKESPEARE_GPT_CPU,
    SHAKESPEARE_GPT_GPU,
    CharTokenizer,
    GPTBlock,
    KVCache,
    attention_chart,
    attention_grid,
    checkpoint_path,
    count_parameters,
    estimate_loss,
    evaluation_curve,
    get_device,
    gpu_branch,
    load_pretrained,
    load_tiny_shakespeare,
    random_windows,
    record_attention,
    set_seed,
    split_ids,
    synchronize,
    train,
)
from course_utils.checks import (
    check_gpt_block,
    check_kv_cache_step,
    check_prediction,
    check_sampling_step,
    check_top_p,
)

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
# pip). Offline, it tells you where to put the file. To work offline later (a train, a classroom without Wi-Fi),
# run `from course_utils import download_all; download_all()` once while online (or `python -m course_utils.data` in
# a terminal): it fetches every data file the course reads (this corpus, chapter 08's Multi30k and chapter 12's
# GPT-2 tokenizer files).

# %%
text = load_tiny_shakespeare()
print(f"{len(text):,} characters")
print(text[:250])

# %% [markdown]
# The tokenizer is the simplest one possible: one token per character. Chapter 05's `CharTokenizer` added the
# special tokens `<pad>`, `<bos>`, `<eos>` and `<unk>`; running text needs none of them (every training window
# is full, so nothing needs padding; the text runs on, with no sentence to begin or end; and every character it
# contains is in the vocabulary), hence `specials=False`.
# `split_ids(text, tokenizer)` encodes the text and splits it once: the first 90% for training, the last 10%
# for validation. A model that merely memorised the training text would do badly on the validation part, which
# is, moreover, a different stretch of the plays: most of its speakers never speak in the training part.

# %%
tokenizer = CharTokenizer(text, specials=False)
print(f"vocabulary: {tokenizer.vocab_size} characters:", repr("".join(tokenizer.itos)))
train_ids, val_ids = split_ids(text, tokenizer)
print(f"train {len(train_ids):,} tokens, validation {len(val_ids):,} tokens")
print("'Romeo' ->", tokenizer.encode("Romeo"), "->", repr(tokenizer.decode(tokenizer.encode("Romeo"))))

train_text, val_text = text[: len(train_ids)], text[len(train_ids) :]  # one token per character
speakers = {name: set(re.findall(r"^([A-Z][A-Z' ]+):$", part, re.MULTILINE)) for name, part in
            (("train", train_text), ("validation", val_text))}  # fmt: skip
new_speakers = speakers["validation"] - speakers["train"]
print(f"speakers (a name in capitals and a colon on its own line): {len(speakers['train'])} in the training part, "
      f"{len(speakers['validation'])} in the validation part, {len(new_speakers)} of them never in the training part")  # fmt: skip
assert len(new_speakers) > len(speakers["validation"]) / 2

# %% [markdown]
# ## 2. From the decoder to a language model
#
# A language model assigns a probability to the next token given all previous ones,
# $p(x_t \mid x_{<t})$. Chapter 05's decoder already does this for the target sentence; a GPT is that decoder
# **without** an encoder, so without cross-attention. Every training window of $T + 1$ characters gives $T$
# examples at once: position $t$ reads characters $0 \ldots t$ and must predict character $t + 1$.
#
# `random_windows(ids, block_size, batch_size, seed)` yields such batches forever: `batch_size` windows of
# `block_size + 1` consecutive tokens, each starting at a random place, split into the inputs `x` (the first
# `block_size` tokens) and the targets `y` (the last `block_size`), each `(B, block_size)`:

# %%
x, y = next(random_windows(train_ids, block_size=16, batch_size=1, seed=3))  # (1, 16) each
print("input  x:", repr(tokenizer.decode(x[0])))
print("target y:", repr(tokenizer.decode(y[0])), " (x shifted by one)")

# %% [markdown]
# `course_utils.GPT` differs from the 2017 decoder in three ways that later models made standard:
#
# - **learned positions** (`nn.Embedding(block_size, d_model)`, one trained vector per position) instead of
#   sinusoids (chapter 03 presented both);
# - **pre-norm** blocks (chapter 04) and one final LayerNorm; in the feed-forward network, **GELU** instead of
#   ReLU: $\mathrm{GELU}(x) = x\,\Phi(x)$, where $\Phi$ is the standard normal distribution function, a smooth
#   ReLU (about 0 for very negative $x$, about $x$ for large $x$, smooth in between);
# - the output head **shares its weight** with the token embedding (*weight tying*): the same matrix reads and
#   writes characters, and the model has fewer parameters.
#
# Each block is a `GPTBlock`, built from the course's own `MultiHeadAttention`, `LayerNorm` and `FeedForward`
# (its submodules `self_attn`, `norm1`, `norm2`, `feed_forward`). For an input $x$ of shape `(B, T, d_model)`:
#
# $$x \leftarrow x + \mathrm{CausalSelfAttn}(\mathrm{LN}_1(x)), \qquad
#   x \leftarrow x + \mathrm{FFN}(\mathrm{LN}_2(x)).$$
#
# `is_causal=True` is the built-in form of chapter 01's causal mask: the attention kernel lets position $i$ see
# positions $0 \ldots i$ only, with no mask tensor to build.
#
# **Your turn.** Write the block's forward pass from its submodules. `block.self_attn(query=h, key=h, value=h,
# is_causal=True)` returns `(output, weights)`, as in chapter 02; keep the output. The block's dropout does
# nothing here (the checker's block has none), so leave it out. The checker compares with `GPTBlock` itself and
# recognises a missing causal mask, post-norm (chapter 04) and missing residual connections.


# %% tags=["exercise"]
def my_gpt_block(block, x):
    """A pre-norm GPT block, from `block.norm1`, `block.self_attn`, `block.norm2`, `block.feed_forward`.

    x: (B, T, d_model) -> (B, T, d_model). Hint: two lines of the form `x = x + sublayer(norm(x))`.
    """
    ### BEGIN SOLUTION
    h = block.norm1(x)  # (B, T, d_model)
    x = x + block.self_attn(query=h, key=h, value=h, is_causal=True)[0]  # (B, T, d_model)
    return x + block.feed_forward(block.norm2(x))  # (B, T, d_model)
    ### END SOLUTION


check_gpt_block(my_gpt_block)

# %% [markdown]
# From here on the chapter uses `course_utils.GPTBlock` (inside `course_utils.GPT`), so everything below runs
# even before your version is finished. Its `forward`, in full, with the two sublayers it calls: they add dropout
# after each sublayer (training only), and a `cache` argument for generation (section 9):

# %%
for method in (GPTBlock.forward, GPTBlock.self_attention_block, GPTBlock.feed_forward_block):
    print(textwrap.dedent(inspect.getsource(method)))

# %% [markdown]
# ## 3. The recipe
#
# The sizes and training settings are those of nanoGPT's Shakespeare example (Andrej Karpathy's minimal GPT;
# its `config/train_shakespeare_char.py`), kept once in `course_utils.training.recipes`. A recipe holds the model's
# sizes (a `GPTConfig`, a frozen dataclass whose fields are `GPT`'s arguments), the training settings (a
# `TrainConfig`, chapter 02) and how often to evaluate. The cell below prints both recipes and counts their
# parameters:
#
# - `SHAKESPEARE_GPT_GPU`, for a GPU: nanoGPT's model (6 layers, 6 heads, 384 dimensions, 256 characters of
#   context, dropout 0.2, batches of 64), trained for 2,500 steps, half the five thousand of nanoGPT's
#   configuration;
# - `SHAKESPEARE_GPT_CPU`, for a CPU: a small variant (3 layers, 4 heads, 128 dimensions, 64 characters of
#   context, batches of 12, no dropout), trained for about a minute.
#
# What the settings mean, where this chapter meets them for the first time:
#
# - `d_ff=None`: the feed-forward network's hidden size is $4\,d_\text{model}$; `bias=False`: no biases in the
#   linear layers and LayerNorms (as in nanoGPT's Shakespeare model);
# - `weight_decay=0.1`: besides its Adam update, AdamW (the optimizer of chapter 02's `train`) shrinks every
#   weight matrix a little at each step, $w \leftarrow w - \mathrm{lr} \cdot \mathrm{wd} \cdot w$, which keeps
#   small the weights that the loss does not need; `course_utils` applies it to matrices (weights, embeddings)
#   only, never to biases or LayerNorm scales;
# - `betas=(0.9, 0.99)`: Adam keeps running averages of the gradient and of its square, which average over about
#   $1/(1-\beta)$ steps; the paper's $\beta_2 = 0.98$ (`TrainConfig`'s default) averages over about 50, nanoGPT's
#   $0.99$ over about 100 (its configuration says: "because number of tokens per iter is small");
# - `lr`, `warmup_steps`, `schedule="cosine"`: as in chapter 02, a linear warm-up, then a cosine decay to a tenth
#   of the peak. The peak is nanoGPT's $10^{-3}$ on the GPU; on the CPU $4 \times 10^{-3}$, which so small a
#   model tolerates and which gets it further in a minute (`benchmarks/README.md` lists the rates tried);
# - `grad_clip` and `amp` as in chapter 02 (`amp` runs the forward pass in bfloat16 on GPUs that compute it
#   natively, in float16 with a gradient scaler on those that do not, such as Colab's free T4, where one line before
#   the progress bar says so, and changes nothing on a CPU); no label smoothing (`label_smoothing=0.0`, chapter 06).
#   The course has not yet timed this recipe on a T4.
#
# Which recipe runs: `gpu_branch(device)` is true on a GPU, and the notebook then trains `SHAKESPEARE_GPT_GPU`. (It is
# also true when the environment sets `COURSE_GPU_DRY_RUN=1`: then a CPU takes the GPU's code paths for 3 training
# steps each, a test of that code on machines without a GPU, whose trained figures mean nothing.)

# %%
for name, r in (("SHAKESPEARE_GPT_CPU", SHAKESPEARE_GPT_CPU), ("SHAKESPEARE_GPT_GPU", SHAKESPEARE_GPT_GPU)):
    n = count_parameters(GPT(tokenizer.vocab_size, **asdict(r.model)))
    n_positions = r.model.block_size * r.model.d_model  # the learned position table
    print(f"{name}: {n:,} parameters, {n - n_positions:,} = {(n - n_positions) / 1e6:.2f} M without the position table")
    print("   ", r.model)
    print("   ", r.training)
    print(f"    evaluate every {r.eval_every} steps, on {r.eval_batches} batches of each split")

recipe = SHAKESPEARE_GPT_GPU if gpu_branch(device) and not SKIP_TRAINING else SHAKESPEARE_GPT_CPU
model_config, config = recipe.model, recipe.training
print("this run uses", "SHAKESPEARE_GPT_GPU" if recipe == SHAKESPEARE_GPT_GPU else "SHAKESPEARE_GPT_CPU")
set_seed(0)
model = GPT(tokenizer.vocab_size, **asdict(model_config)).to(device)

# %% [markdown]
# nanoGPT counts a model's parameters without the position table (its `get_num_params`), which gives the
# "10.65 M" it prints for its Shakespeare model: the second figure of the `SHAKESPEARE_GPT_GPU` line above.
#
# ## 4. Before training
#
# An untrained GPT gives every character about the same probability: its output weights (the tied embedding)
# start small, with standard deviation 0.02, so all logits are close to 0. Chapter 02's first-loss check then
# predicts a loss of about $\ln V = \ln 65 \approx 4.17$. It comes out slightly above (printed below): small
# random logits are close to uniform, not exactly uniform. And the model writes noise:

# %% tags=["nbval-ignore-output"]
splits = {"train": train_ids, "val": val_ids}
untrained = estimate_loss(model, splits, config.batch_size, iters=20)
uniform = math.log(tokenizer.vocab_size)
print(f"untrained loss: train {untrained['train']:.3f}, validation {untrained['val']:.3f}; "
      f"ln {tokenizer.vocab_size} = {uniform:.3f}")  # fmt: skip
assert all(abs(loss - uniform) < 0.15 for loss in untrained.values()), "an untrained model should score about ln V"
prompt = torch.tensor([tokenizer.encode("\n")], device=device)
sample = model.generate(prompt, 120, generator=torch.Generator(device=device).manual_seed(0))
print(tokenizer.decode(sample[0]))

# %% [markdown]
# `estimate_loss(model, splits, batch_size, iters)` averages the loss over `iters` batches of random windows
# from each split. The windows are the same at every call (a fixed seed), so that successive estimates
# compare the model, not the windows.
#
# ## 5. Training
#
# `train` (chapter 02) minimises `lm_loss`, the cross-entropy of next-character prediction (`model(x, y)`
# returns the logits and that loss), over batches from `random_windows`. Every `eval_every` steps it calls
# `evaluate`, which estimates the training and validation loss and, for the record, writes a 200-character
# sample from a newline at temperature 0.8 (section 7 explains temperature), always with the same random seed;
# the progress bar shows the latest figures.
#
# The run also survives a disconnect. At each evaluation `train` saves a **checkpoint**: the model, the optimizer, the
# step, the samples so far and the state of every random generator, in `checkpoints/07_gpt_cpu.ckpt` beside the
# notebook (`07_gpt_gpu.ckpt` for the GPU recipe; `checkpoint_path` chooses the place). If the kernel dies or Colab
# disconnects, run the notebook again: this cell goes on from the last checkpoint instead of from step 0, and ends
# with the weights the uninterrupted run would have had (chapter 11 proves it). On Colab, mount Google Drive first,
# `from google.colab import drive; drive.mount("/content/drive")`, and the checkpoint is kept there, where it outlives
# the runtime. To train afresh, delete the file.

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
    checkpoint = checkpoint_path("07_gpt_gpu" if recipe == SHAKESPEARE_GPT_GPU else "07_gpt_cpu")  # None: keep none
    history = train(
        model, random_windows(train_ids, model_config.block_size, config.batch_size, seed=0), lm_loss, config,
        device=device, eval_fn=evaluate, eval_every=recipe.eval_every, desc="GPT",
        checkpoint=checkpoint, checkpoint_every=recipe.eval_every, keep={"samples": samples},
    )  # fmt: skip
    tokens_per_second = config.steps * config.batch_size * model_config.block_size / history.seconds
    print(f"{config.steps} steps in {history.seconds:.0f} s of training on {device} "
          f"({1000 * history.seconds / config.steps:.1f} ms/step, {tokens_per_second:,.0f} tokens/s)")  # fmt: skip

# %% [markdown]
# `evaluation_curve(history, levels=...)` draws each evaluation's figures against the step, over the loss of
# every training batch (grey), with labelled reference lines:

# %% tags=["nbval-ignore-output"]
model.eval()  # from here on the model writes, it does not learn: dropout off
best_val = min(losses["val"] for _, losses in history.evals)
print(f"first training batch: loss {history.loss[0]:.3f} (ln {tokenizer.vocab_size} = {uniform:.3f})")
for step, losses in history.evals:
    print(f"step {step:5d}: train loss {losses['train']:.3f}, validation loss {losses['val']:.3f}, "
          f"gap {losses['val'] - losses['train']:.3f}")  # fmt: skip
print(f"best validation loss: {best_val:.3f}")
assert best_val < 2.2, "the model should have learnt a good deal of the text's structure"
if recipe == SHAKESPEARE_GPT_CPU:
    assert best_val < 2.0, "four seeds of the CPU recipe got 1.920 to 1.943"
    gaps = [losses["val"] - losses["train"] for _, losses in history.evals]
    assert gaps == sorted(gaps) and gaps[0] > 0, "without dropout, the gap between the curves widens"
evaluation_curve(history, title="Tiny Shakespeare: training and validation loss",
                 levels={f"ln {tokenizer.vocab_size}: a uniform guess": uniform})  # fmt: skip

# %% [markdown]
# The figures above are this run's: another processor rounds the last bits of every sum in its own way, and a
# thousand training steps carry those differences into other weights, so your run on a CPU prints other losses in
# the second or third decimal (the cell asserts what holds for every run; on a GPU the notebook trains the larger
# recipe, and the losses are others altogether). With `SKIP_TRAINING` they are those of the run that produced the
# shipped weights, which differ from these in the same way. How much of the training text the recipes read does
# not depend on the processor:

# %%
for name, r in (("this run", recipe), ("the GPU recipe", SHAKESPEARE_GPT_GPU)):
    characters_read = r.training.steps * r.training.batch_size * r.model.block_size
    print(f"{name}: training predicts {characters_read:,} characters, {characters_read / len(train_ids):.2f} times "
          f"the length of the training text")  # fmt: skip

# %% [markdown]
# The grey training loss starts at about the $\ln 65$ line, as chapter 02's first-loss check predicts, and both
# evaluated losses fall steadily. They do not stay together, though: the gap between validation and training
# loss (printed above) widens from one evaluation to the next. The model gets better at its own training text
# faster than at text it has never seen: besides English spelling and the layout of a play, it learns what is
# particular to the training part (its plays, their speakers and words; section 1 showed that the validation
# part has mostly other speakers). It cannot be reciting windows it has read many times: the CPU recipe
# predicts fewer characters than the training text holds, so on average it sees each one less than once. It
# has no dropout; the GPU recipe, which reads its training text many times over (printed above), uses dropout
# 0.2 (chapter 04) against such overfitting.
#
# The CPU model, small and trained for about a minute, gets to a validation loss of about 1.92 to 1.94 (four seeds of
# its recipe, `tools/seed_spread.py shakespeare`; the cell with the losses asserts below 2.0). On a GPU
# this notebook trains `SHAKESPEARE_GPT_GPU` instead (that cell then asserts only that it gets below 2.2); what it
# reached on one GPU, beside nanoGPT's own training of the same model there, is in `benchmarks/gpu/report.md`.
#
# ## 6. Samples during training
#
# The same prompt (a newline) and the same random seed, at every evaluation. For each sample, the share of its
# words (runs of letters, in any case) that occur somewhere in the training text; then the samples of the
# first, a middle and the last evaluation:

# %% tags=["nbval-ignore-output"]
train_words = set(re.findall(r"[a-z]+", train_text.lower()))


def real_word_share(sample):
    """The share of a text's words (runs of letters, in any case) that occur in the training text."""
    words = re.findall(r"[a-z]+", sample.lower())
    return sum(word in train_words for word in words) / max(len(words), 1)


shares = [real_word_share(sample) for sample in samples]
for (step, _), share in zip(history.evals, shares):
    print(f"after {step:5d} steps: {share:.0%} of the sample's words are real")
assert shares[-1] > shares[0], "training should make the samples' words more often real"
shown = {history.evals[0][0], history.evals[len(history.evals) // 2][0], history.evals[-1][0]}
for (step, _), sample in zip(history.evals, samples):
    if step in shown:
        print(f"\n--- after {step} steps ---{sample}")

# %% [markdown]
# In the run shown, the share of real words rises from one evaluation to the next (the cell asserts only that the
# last sample has more than the first: one 200-character sample is a noisy measure). The first sample already
# has line breaks and short real words (*I*, *hath*) among invented ones; the last one has more real
# words, sentences with commas, lines that begin with a capital, and the layout of a play: a speaker's name in
# capitals followed by a colon on its own line, then the speech.
#
# ## 7. Temperature and top-k
#
# Generation samples each next character from $\mathrm{softmax}(z / \tau)$, where $z$ are the logits and $\tau$
# the **temperature**: $\tau < 1$ sharpens the distribution (safer, more repetitive text), $\tau > 1$ flattens it
# (more surprising, more errors). **Top-k** sampling keeps only the $k$ most likely characters before sampling,
# cutting off the long tail of unlikely ones: it sets every other logit to $-\infty$, whose probability is
# exactly 0.
#
# The next-character distribution after "ROMEO:\nWhat light through yonder window br", at three temperatures
# (the eight most likely characters):

# %% tags=["nbval-ignore-output"]
context = "ROMEO:\nWhat light through yonder window br"
ids = torch.tensor([tokenizer.encode(context)[-model_config.block_size :]], device=device)
with torch.no_grad():
    logits = model(ids)[0][0, -1]  # (V,): the logits of the next character
top = torch.topk(logits, 8).indices
probs_1 = F.softmax(logits, dim=-1)
print("most likely at temperature 1:", ", ".join(f"{tokenizer.itos[i]!r} {probs_1[i]:.2f}" for i in top[:3].tolist()))
fig, axes = plt.subplots(1, 3, figsize=(11, 2.8), layout="constrained", sharey=True)
for ax, temperature in zip(axes, (0.5, 1.0, 2.0)):
    probs = F.softmax(logits / temperature, dim=-1)
    ax.bar([repr(tokenizer.itos[i])[1:-1] for i in top.tolist()], probs[top].cpu())
    ax.set_title(f"temperature {temperature}")
    ax.set_xlabel("next character")
    ax.tick_params(axis="x", labelsize=16)  # the characters are what the chart is about
axes[0].set_ylabel("probability")
plt.close(fig)
fig

# %% [markdown]
# The order of the characters is the same at every temperature; only how much of the probability the first
# few take changes. Notice the ranking itself: the model has not learnt Romeo's line ("... yonder window
# breaks"); in the run saved here it puts 'o' first, ahead of 'e' (printed above). Your run's model holds other
# weights in their last digits, and may rank the characters a little differently.
#
# **Predict, then run.** The next cell draws the next character of this context 2,000 times at each of the
# temperatures 1, 0.5, 0.1 and 0.02. As the temperature goes to 0, the draws become...
#
# - (a) more varied: more different characters come up;
# - (b) unchanged: dividing every logit by the same number keeps their order, so the draws stay the same;
# - (c) uniformly random: every character comes up about equally often;
# - (d) the greedy choice, repeated: nearly every draw is the most likely character.

# %% tags=["exercise"]
### BEGIN SOLUTION
my_prediction = "d"
### END SOLUTION
check_prediction("temperature-to-zero", my_prediction)  # your answer: "a", "b", "c" or "d"

# %% tags=["nbval-ignore-output"]
n_draws = 2000
greedy = logits.argmax().item()  # the most likely character
greedy_share = {}
for temperature in (1.0, 0.5, 0.1, 0.02):
    probs = F.softmax(logits / temperature, dim=-1)
    drawn = torch.multinomial(probs, n_draws, replacement=True, generator=torch.Generator(device=device).manual_seed(0))
    counts = torch.bincount(drawn, minlength=tokenizer.vocab_size)  # (V,): how often each character was drawn
    greedy_share[temperature] = counts[greedy].item() / n_draws
    print(f"temperature {temperature:4}: {(counts > 0).sum().item():2d} of the {tokenizer.vocab_size} characters "
          f"drawn at least once; the most likely one, {tokenizer.itos[greedy]!r}, in {greedy_share[temperature]:6.1%} "
          "of the draws")  # fmt: skip
shares = list(greedy_share.values())
assert shares == sorted(shares) and shares[-1] > 0.99  # what the prediction above asked

# %% [markdown]
# Dividing the logits by $\tau$ multiplies the gaps between them by $1 / \tau$, and the softmax turns large gaps
# into nearly all the probability for the largest logit. As $\tau \to 0$, sampling becomes the argmax: *greedy*
# decoding, the same character every time. That is why `GPT.generate` treats `temperature=0` as "take the most
# likely character" instead of dividing by 0.
#
# **Your turn.** Write one sampling step as `GPT.generate` takes it: `my_sample_step(logits, temperature, top_k,
# generator)` with `logits` of shape `(B, V)` (the last position's logits of each sequence) returns one token id
# per row, `(B, 1)`:
#
# - at `temperature == 0`, the most likely token (`argmax`, no sampling);
# - otherwise divide the logits by the temperature; if `top_k` is not None, keep the `top_k` largest logits of
#   each row and set the others to $-\infty$ (hint: `torch.topk(z, k).values[:, -1:]` is the $k$-th largest,
#   `(B, 1)`); take the softmax and draw one token per row with
#   `torch.multinomial(probs, num_samples=1, generator=generator)`.
#
# The checker draws many thousands of times from one row and compares the frequencies with the probabilities; it names the
# usual mistakes (temperature multiplied instead of divided, the top-k mask inverted or set to 0 instead of
# $-\infty$).


# %% tags=["exercise"]
def my_sample_step(logits, temperature, top_k, generator):
    """One token per row, (B, V) -> (B, 1): argmax at temperature 0, else a draw from softmax(top-k(logits / T))."""
    ### BEGIN SOLUTION
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
    z = logits / temperature  # (B, V)
    if top_k is not None:
        kth_largest = torch.topk(z, top_k).values[:, -1:]  # (B, 1)
        z = z.masked_fill(z < kth_largest, float("-inf"))
    return torch.multinomial(z.softmax(dim=-1), num_samples=1, generator=generator)  # (B, 1)
    ### END SOLUTION


check_sampling_step(my_sample_step)

# %% [markdown]
# From here on the chapter samples with `course_utils.GPT.generate`, which takes this step at every position,
# so everything below runs even before your version is finished.
#
# Now whole samples. One sample is a small basis for comparing settings, so for each setting the cell writes
# twenty samples at once (a batch of twenty copies of the prompt), each as long as fits in the context window
# (once a text outgrows the window, every further step costs more; section 9 explains why), prints the first
# two, and measures all twenty: their share of real words (as in section 6) and their number of capitals inside a word
# (a lower-case letter directly followed by a capital), a sign of very unlikely characters:

# %% tags=["nbval-ignore-output"]
romeo = torch.tensor([tokenizer.encode("ROMEO:\n")] * 20, device=device)  # (20, 7): twenty copies of the prompt
n_chars = model_config.block_size - romeo.size(1)  # as many characters as fit in the window
real = {}
for temperature, top_k in ((0.2, None), (0.8, None), (1.5, None), (1.5, 5)):
    out = model.generate(romeo, n_chars, temperature, top_k, generator=torch.Generator(device=device).manual_seed(1))
    written = [tokenizer.decode(row[romeo.size(1) :]) for row in out]  # without the prompt
    real[temperature, top_k] = real_word_share("\n".join(written))
    inner_capitals = sum(len(re.findall(r"[a-z][A-Z]", text)) for text in written)
    print(f"=== temperature {temperature}, top_k {top_k}: over {len(written)} samples of {n_chars} characters, "
          f"{real[temperature, top_k]:.0%} real words and {inner_capitals} capitals inside a word ===")  # fmt: skip
    for text in written[:2]:
        print(f"ROMEO:\n{text}\n---")
assert real[0.2, None] > real[1.5, None] and real[1.5, 5] > real[1.5, None]

# %% [markdown]
# In the run saved here, at 0.2 the text is safe and repetitive (the same few words again and again), and most of
# its words are real; at 0.8 it is more varied, with more invented words; at 1.5 it falls apart: far fewer real
# words, and capitals inside words. Top-k with $k = 5$ at the same temperature removes most of those very unlikely
# characters and brings back many real words, but not all of them: it cuts off the tail of the distribution, yet at
# $\tau = 1.5$ the five characters it keeps are flattened towards equal odds, and the wrong letters among them are
# chosen often. The cell asserts the two robust comparisons: more real words at 0.2 than at 1.5, and more at 1.5
# with top-k than without.
#
# ## 8. What do the heads look at?
#
# Run the trained model on a line of text with `record_attention` (chapter 02), which asks every attention
# module for its weights. For every head of every layer, the cell looks at where each row (each query, from
# the second on) puts its largest weight, and prints two summaries: the most common distance back from the
# query to that key (0: the query's own character, 1: the previous character), and the key that is most often
# the favourite; each with the share of rows. Then it plots the four heads of the first layer.
# Each panel: one row per query (the character being read, down), one column per key (an earlier character it
# attends to, across), one colour scale shared by all panels; the causal mask makes every map lower-triangular.
# The line is short, 21 characters, so that the panels stay legible two to a row.

# %% tags=["nbval-ignore-output"]
line = "HAMLET:\nTo be, or not"
ids = torch.tensor([tokenizer.encode(line)], device=device)
with torch.no_grad(), record_attention(model) as attention:
    model(ids)
labels = ["⏎" if c == "\n" else "␣" if c == " " else c for c in line]
T, n_layers, n_heads = len(line), model_config.n_layers, model_config.n_heads


def head_summary(weights):
    """For one head's (T, T) weights, over the rows from the second on: the most common distance back to the
    row's largest weight and the most common key of it, each with the share of rows where it occurs."""
    favourite = weights[1:].argmax(dim=-1)  # (T - 1,): the key each row attends to most
    back = torch.arange(1, T, device=weights.device) - favourite  # (T - 1,): how far back that key is
    distances, keys = torch.bincount(back, minlength=T), torch.bincount(favourite, minlength=T)  # counts of rows
    n = T - 1  # the rows counted
    return distances.argmax().item(), distances.max().item() / n, keys.argmax().item(), keys.max().item() / n


previous_share, favourite_share = {}, {}
for layer in range(n_layers):
    for head, weights in enumerate(attention[f"blocks.{layer}.self_attn"][0]):  # (T, T) each
        distance, distance_share, key, key_share = head_summary(weights)
        previous_share[layer, head] = distance_share if distance == 1 else 0.0
        favourite_share[layer, head] = key_share
        print(f"layer {layer + 1}, head {head}: largest weight {distance} back in {distance_share:4.0%} of rows; "
              f"on '{labels[key]}' (position {key}) in {key_share:4.0%}")  # fmt: skip
if recipe == SHAKESPEARE_GPT_CPU:
    assert max(previous_share[0, h] for h in range(n_heads)) > 0.8, "layer 1 should have a previous-character head"
    assert max(favourite_share[n_layers - 1, h] for h in range(n_heads)) >= 0.5, "the last layer: one fixed key"
first = attention["blocks.0.self_attn"][0]  # (h, T, T)
attention_grid(first, labels, titles=[f"layer 1, head {h}" for h in range(n_heads)], ncols=2)

# %% [markdown]
# Layer 1 has a **previous-character head** (head 1 in the run shown; the cell asserts that one exists): in
# almost every row its largest weight lies just left of the diagonal, on the character before the query (1 back
# in the table). In the run shown, another head looks mostly two characters back, a second diagonal one step
# further left, and the other heads spread their weight over several earlier characters, their strongest weights
# often on punctuation (read from the figure; the shipped weights draw the same figure everywhere, but only the
# previous-character head is asserted). Together they tell each position what the last characters were, which is what spelling needs.
#
# The heads of the last layer, one at a time (in a live notebook, pick a head from the menu and hover a cell for its
# weight):

# %% tags=["nbval-ignore-output"]
last = attention[f"blocks.{n_layers - 1}.self_attn"][0]  # (h, T, T)
names = [f"head {h}" for h in range(n_heads)]  # the title names the layer
attention_chart(last, labels, head_names=names, title=f"Self-attention of layer {n_layers}", cell=18)

# %% [markdown]
# The last layer looks different. At least one of its heads puts most of each row's weight on one and the same
# early character, whatever the row's own character: in the run shown, the newline after the name; with other
# weights (the shipped ones, another seed) it can be a letter of the name or the colon. In the table, these are the
# heads whose favourite key holds half of the rows or more (the cell asserts that the last layer has one); the rows
# above that character cannot see it and attend elsewhere. In the run shown, a head of layer 2 does the same in
# half of its rows, and the other heads mix recent characters with such fixed positions. A common reading of the
# pattern: a head that has nothing useful to fetch for a query must still put its weights somewhere (they sum
# to 1), and parking them on one fixed position acts as "do nothing". Large language models show the same habit, called an *attention
# sink* (Xiao et al., 2023, *Efficient Streaming Language Models with Attention Sinks*), usually on the very
# first token.
#
# ## 9. The key/value cache
#
# `GPT.generate` writes one character at a time: it runs the model on the text so far, samples the next
# character from the logits of the last position, appends it, and starts again. Without a cache, every step runs
# all $T$ positions of the context through every layer, although only the last position's output is used.
# Yet the keys and values of the earlier positions are the same at every step: because of the causal mask,
# position $i$'s vectors in every layer depend only on the characters $0 \ldots i$ (and their positions, which
# do not move while the text fits in the window). So each attention module can keep them in a `KVCache`:
#
# ```
# first call:  the prompt, T tokens  ->  q, k, v of every position; the cache stores k and v
# each step:   the newest token only ->  its q, k, v; k and v are appended to the cache;
#                                        its query attends over every stored key and value, its own included
# ```
#
# `KVCache()` starts empty; `cache.extend(keys, values)` appends the new positions' keys and values (shape
# `(B, h, T_new, d_k)`) along the position axis and returns all of them so far; `len(cache)` is the number of
# positions stored. `MultiHeadAttention(..., cache=cache)` calls it (see `GPTBlock.forward` in section 2), and
# `GPT.forward(idx, caches=caches)` hands one cache to each block and numbers the new positions after the
# cached ones. With a cache, the course's `is_causal=True` lines the new queries up with the *last* keys: a single
# new query may see every cached position (all earlier than it), and several new queries get the causal triangle
# shifted by the cache's length. (PyTorch's `F.scaled_dot_product_attention(..., is_causal=True)` lines them up
# with the *first* keys instead, its mask's top-left corner: one new query would see only position 0. The course's
# attention builds the shifted mask itself where keys outnumber queries.) The cache keeps its tensors as `cache.keys` and `cache.values`. By hand, with the
# trained model:

# %%
context_ids = torch.tensor([tokenizer.encode(context)], device=device)  # (1, 42): section 7's context
caches = [KVCache() for _ in model.blocks]  # one per block, empty
with torch.no_grad():
    model(context_ids[:, :-1], caches=caches)  # the first 41 characters fill the caches
    cached = model(context_ids[:, -1:], caches=caches)[0]  # (1, 1, V): one new position, 41 cached ones
    full = model(context_ids)[0]  # (1, 42, V): every position computed again
print(f"{len(caches)} caches, each holding {len(caches[0])} positions: keys {tuple(caches[0].keys.shape)}, "
      f"values {tuple(caches[0].values.shape)} (B, h, T, d_k)")  # fmt: skip
torch.testing.assert_close(cached[:, -1], full[:, -1], rtol=1e-4, atol=1e-5)
print("the last position's logits are the same with the cache as without it")

# %% [markdown]
# `GPT.generate(use_cache=True)`, the default, does exactly this at every step; `use_cache=False` recomputes
# the whole context. Both must produce **exactly** the same text. Timed over one full context window
# (`synchronize(device)` waits for a GPU to finish its queued work before the clock
# is read, and does nothing on a CPU):

# %% tags=["nbval-ignore-output"]
n_new = model_config.block_size - 1  # from a 1-character prompt until the text fills the context window
seconds, texts = {}, {}
for use_cache in (False, True):
    for _ in range(2):  # the first run warms up
        synchronize(device)
        start = time.perf_counter()
        texts[use_cache] = model.generate(
            prompt, n_new, temperature=0.8, use_cache=use_cache, generator=torch.Generator(device=device).manual_seed(0)
        )
        synchronize(device)
        seconds[use_cache] = time.perf_counter() - start
assert torch.equal(texts[True], texts[False]), "the cache must not change the text"
print(f"{n_new} new tokens: without cache {1000 * seconds[False]:.0f} ms, with cache {1000 * seconds[True]:.0f} ms "
      f"({seconds[False] / seconds[True]:.1f}x faster), identical text")  # fmt: skip

# %% [markdown]
# What does the cache save? Without it, a step at context length $T$ computes all $T$ positions; with it, one.
# Per position and per layer the work is the same: the projections and the feed-forward network,
# $12\,d_\text{model}^2$ multiply-adds (four $d \times d$ projections, two $d \times 4d$ layers), plus attention
# over up to $T$ keys, $2\,T\,d_\text{model}$. So the uncached step does up to $T$ times the arithmetic of the
# cached one; the cached step still grows with $T$, since its query reads all $T$ cached keys and values.
#
# The cell below measures one step at several context lengths. Timing needs no trained weights, so it builds an
# untrained twin of our model, the same sizes but a position table of 1,024, to reach contexts longer than our
# window of 64. Each figure is the best of five timings, taken in alternation with and without the cache;
# filling the caches with the first $T - 1$ tokens is not timed. The cell also measures the caches: keys and
# values for every layer, head and position,
# $2 \times n_\text{layers} \times B \times h \times T \times d_k$ numbers of 4 bytes each.

# %% tags=["nbval-ignore-output"]
long_model = GPT(tokenizer.vocab_size, **asdict(replace(model_config, block_size=1024))).to(device).eval()


def step_ms(model, T, repeats=5):
    """One generation step at context length T, without and with a cache, timed in alternation: the best of
    `repeats` timings of each, in ms; and the caches."""
    ids = torch.randint(tokenizer.vocab_size, (1, T), generator=torch.Generator().manual_seed(T)).to(device)
    best = {False: float("inf"), True: float("inf")}
    with torch.no_grad():
        for _ in range(repeats):
            for use_cache in (False, True):
                if use_cache:
                    caches = [KVCache() for _ in model.blocks]
                    model(ids[:, :-1], caches=caches)  # the T - 1 earlier tokens fill the caches: not timed
                synchronize(device)
                start = time.perf_counter()
                model(ids[:, -1:], caches=caches) if use_cache else model(ids)
                synchronize(device)
                best[use_cache] = min(best[use_cache], time.perf_counter() - start)
    return 1000 * best[False], 1000 * best[True], caches


step_ms(long_model, 16)  # warm-up
print("context T | one step without cache | with cache | speed-up | cache memory")
cache_bytes, speed_up = {}, {}
for T in (16, 64, 256, 1024):
    without, with_cache, caches = step_ms(long_model, T)
    speed_up[T] = without / with_cache
    cache_bytes[T] = sum(t.numel() * t.element_size() for cache in caches for t in (cache.keys, cache.values))
    print(f"{T:9d} | {without:19.2f} ms | {with_cache:7.2f} ms | {without / with_cache:7.1f}x | "
          f"{cache_bytes[T] / 1024:7.0f} KiB")  # fmt: skip
    bytes_per_number = next(long_model.parameters()).element_size()
    assert cache_bytes[T] == 2 * model_config.n_layers * 1 * model_config.d_model * T * bytes_per_number
assert speed_up[16] < speed_up[1024] < 1024, "the speed-up timing should grow with T, far below T"
gpu = SHAKESPEARE_GPT_GPU.model
gpu_per_position = 2 * gpu.n_layers * gpu.d_model * 4  # bytes, in float32
per_position = cache_bytes[1024] / 1024  # bytes per cached position (T = 1024)
print(f"per position: {per_position / 1024:.0f} KiB for this model's sizes; {gpu_per_position / 1024:.0f} KiB for "
      f"the GPU recipe's model, {gpu_per_position * gpu.block_size / 2**20:.1f} MiB at its full context of {gpu.block_size}")  # fmt: skip

# %% [markdown]
# Reading the table (its timings vary from machine to machine and from run to run; the cache memory does not):
#
# - Without the cache, the step time grows with $T$: the step computes all $T$ positions. With the cache it
#   grows far more slowly: its one new query still reads all $T$ cached keys and values (and appending to a
#   cache copies it), but at these sizes that reading costs little next to the step's fixed costs.
# - So the speed-up grows with $T$, but stays far below $T$, the ratio of the arithmetic (the cell asserts that it
#   is larger at $T$ = 1024 than at 16, and below 1024 there). A cached step does
#   little arithmetic (at the CPU recipe's sizes, about $3 \times 12 \times 128^2$, some 0.6 million
#   multiply-adds, plus attention), and its time is mostly fixed per-step costs that the uncached step pays
#   too: Python, and launching many small operations in each layer. In a wider model the arithmetic weighs
#   more, and we expect (this chapter does not measure it) the speed-up to come closer to $T$. The full-window generation timed above gains less than
#   the table's last rows: its contexts run from 1 to 64 characters, and every step also samples a character,
#   which costs the same either way.
# - The cache's memory grows linearly with $T$ (the cell asserts the formula): $2 \times 3 \times 128$ numbers
#   of 4 bytes, 3 KiB, per position for the CPU recipe's sizes; 18 KiB for the GPU recipe's model, 6 layers of
#   384 dimensions (the last line). It grows in proportion to the batch, the layers and the width just as well.
#
# And once the text outgrows the window? `generate` crops the text to its last `block_size` tokens, so at
# every further step each token moves one position to the left. With learned absolute positions every key
# and value in the cache was computed for a position the token no longer has, so `generate` drops the cache
# and recomputes the cropped window at each step, exactly as without a cache: past the window, both ways cost
# the same. Rotary embeddings (chapter 03) put only the *distance* between two positions into their attention
# score, so a model that uses them can keep its cached keys while the window slides; but only approximately:
# the keys and values of the second and later layers were computed from vectors that attended to the token
# that has just dropped out, so they differ a little from a fresh run on the cropped window.
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
# | no causal mask | the loss drops far below an honest model's in training (it reads the answer) and generation is gibberish | `is_causal=True` in every block ([bug lab: bug 2](09_bug_lab.ipynb#bug-2)) |
# | targets not shifted | the model learns to copy its input | `y` = `x` shifted by one |
# | validating on random windows of the *training* text | a memorising model looks good | hold out a contiguous part of the text |
# | generating with dropout on | worse, random text | `generate` switches to eval mode ([bug lab: bug 12](09_bug_lab.ipynb#bug-12)) |
# | a context longer than `block_size` | an indexing error in the position table | crop to the last `block_size` tokens (as `generate` does) |
# | a KV cache with the wrong positions | subtly different text | test cached against uncached generation (done above) |
# | keeping the cache once the window slides (learned positions) | keys and values computed for the wrong positions | recompute the cropped window (as `generate` does) |
#
# ## Summary
#
# - A GPT is the Transformer's decoder alone, trained to predict the next token of real text.
# - Learned positions, pre-norm blocks, GELU and tied embeddings are its usual refinements.
# - Temperature and top-k trade safety for variety when sampling; top-k removes very unlikely tokens, not every
#   error.
# - A key/value cache keeps the keys and values of earlier positions, so that a generation step computes one new
#   position instead of the whole context (it still attends over all of them); it costs memory that grows
#   linearly with the context. The arithmetic it saves grows with the context length; at this small width, fixed
#   per-step costs keep the measured speed-up well below that.
#
# ## Exercises
#
# {{EXERCISES}}
#
# **Exercise 1: top-p (nucleus) sampling.** Top-k keeps a fixed number of tokens, however the probability is
# spread: where the model is sure, $k = 5$ still lets four unlikely tokens in; where it hesitates between twenty,
# it cuts fifteen plausible ones. *Top-p* sampling (Holtzman et al., 2019, *The Curious Case of Neural Text
# Degeneration*) keeps instead the smallest set of most likely tokens whose probabilities add up to at least
# $p$, the *nucleus*, and renormalises their probabilities to sum to 1.
#
# Write `my_top_p(logits, p)`: logits `(B, V)` and a number $0 < p \le 1$ in, the sampling probabilities
# `(B, V)` out: the nucleus tokens' probabilities divided by their sum, 0 for every other token. The token whose
# probability makes the running sum cross $p$ belongs to the nucleus (so the most likely token always does).
# Hint: sort each row's probabilities in descending order (`torch.sort(..., descending=True)` also returns the
# order), take the running sum with `cumsum`, keep a token while the mass of the tokens *before* it is below
# $p$, and put the mask back in vocabulary order with `scatter`.
#
# Example: probabilities 0.1, 0.5, 0.3, 0.1 and $p = 0.7$: sorted 0.5, 0.3, 0.1, 0.1, running sums 0.5, 0.8, ...;
# the nucleus is the 0.5 and the 0.3 tokens, renormalised to $5/8$ and $3/8$.


# %% tags=["exercise"]
def my_top_p(logits, p):
    """Top-p probabilities: (B, V) logits -> (B, V) probabilities, renormalised over the nucleus, 0 elsewhere."""
    ### BEGIN SOLUTION
    probs = logits.softmax(dim=-1)  # (B, V)
    sorted_probs, order = probs.sort(dim=-1, descending=True)  # (B, V) each, most likely first
    before = sorted_probs.cumsum(dim=-1) - sorted_probs  # (B, V): the mass of the more likely tokens
    keep = (before < p).scatter(-1, order, before < p)  # (B, V), back in vocabulary order
    kept = probs * keep
    return kept / kept.sum(dim=-1, keepdim=True)
    ### END SOLUTION


check_top_p(my_top_p)

# %% [markdown]
# **Exercise 2: one step with a key/value cache.** Section 9's `MultiHeadAttention` does this inside, for every
# head at once; here you write it alone. During generation an attention module keeps the keys and values of
# every earlier position; at each step the newest token brings its own query, key and value, one position each.
#
# Write `my_kv_cache_step(cache_k, cache_v, q, k, v)`: `cache_k` and `cache_v` of shape `(B, h, T, d_k)` hold
# the $T$ earlier positions; `q`, `k`, `v`, each `(B, h, 1, d_k)`, are the new token's. Return `(out, cache_k,
# cache_v)`: the new token's attention output `(B, h, 1, d_k)`, $\mathrm{softmax}(q K^\top / \sqrt{d_k})\, V$
# over all $T + 1$ positions, and the grown caches, each `(B, h, T + 1, d_k)`. Hint: append first (along the
# position axis, with the new position last), then attend. Think about the mask: which of the $T + 1$ positions
# may the newest token see? The checker compares with PyTorch's `F.scaled_dot_product_attention` and recognises a
# causal mask misapplied to the single query, a cache grown along the wrong axis, and attention taken before
# appending.


# %% tags=["exercise"]
def my_kv_cache_step(cache_k, cache_v, q, k, v):
    """Append the new key/value (B, h, 1, d_k) to the caches (B, h, T, d_k); attend with q over all T + 1."""
    ### BEGIN SOLUTION
    cache_k = torch.cat([cache_k, k], dim=2)  # (B, h, T + 1, d_k)
    cache_v = torch.cat([cache_v, v], dim=2)  # (B, h, T + 1, d_k)
    scores = q @ cache_k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, h, 1, T + 1)
    # no mask: the newest token is the last position, so it may see every cached position and itself
    return scores.softmax(dim=-1) @ cache_v, cache_k, cache_v  # (B, h, 1, d_k)
    ### END SOLUTION


check_kv_cache_step(my_kv_cache_step)

# %% [markdown]
# **Going further.** Train the CPU recipe with dropout: `GPTConfig` is frozen, so make a changed copy,
# `model_config = replace(model_config, dropout=0.2)` (`replace` is imported at the top), before building the
# model, and compare the gap between the validation and training curves. The first run's checkpoint is of the model
# without dropout, so `train` refuses to resume from it and says so: delete the file it names, or change the name
# given to `checkpoint_path`, to start afresh. Or write a word-level tokenizer and compare: what happens to
# the vocabulary size, and to the samples?
#
# Chapter 08 goes back to the encoder-decoder, to translate real sentences: a subword tokenizer, beam search
# (which uses this section's cache in the decoder) and BLEU. `course_utils` holds everything you built;
# `benchmarks/` times it against references: the Transformer against PyTorch's own layers, the GPT against a
# model written with nanoGPT's architecture.
