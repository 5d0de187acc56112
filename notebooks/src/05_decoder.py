# %% [markdown]
# # 05 · The decoder
#
# {{COLAB_BADGE}}
#
# *Transformers from Scratch*, Part I, chapter 5 of 10 · previous: [04 · The encoder](04_encoder.ipynb) ·
# next: [06 · The full Transformer](06_transformer.ipynb)
#
# The encoder reads the source; the decoder **writes** the target, one token at a time, looking back at
# what it has written and across at what the encoder read. It has three sublayers instead of two: masked
# self-attention, cross-attention, and the feed-forward network.
#
# **You will learn**
# - the causal mask in the decoder, and what it guarantees, measured;
# - cross-attention: queries from the decoder, keys and values from the encoder, and what breaks when a
#   tutorial swaps them;
# - to write the decoder layer yourself, checked equal to `nn.TransformerDecoderLayer`, and the decoder stack of
#   $N$ layers;
# - teacher forcing and the shifted target; the projection to vocabulary logits;
# - a small encoder-decoder trained in seconds, whose cross-attention you can read.
#
# **Prerequisites:** chapters 01–04. **Time:** about 50 minutes.

# %% [markdown]
# ## Setup

# %% tags=["nbval-ignore-output"]
import subprocess
import sys

if "google.colab" in sys.modules:  # on Colab: install course_utils from the repository
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{PIP_SPEC}}"], check=True)

import torch
import torch.nn.functional as F
from torch import nn

from course_utils import (
    CharTokenizer,
    Decoder,
    DecoderLayer,
    Encoder,
    MultiHeadAttention,
    TrainConfig,
    Transformer,
    attention_chart,
    attention_grid,
    causal_mask,
    count_parameters,
    encode_pairs,
    exact_match,
    get_device,
    greedy_decode,
    padding_mask,
    random_batches,
    record_attention,
    reversal_pairs,
    seq2seq_loss,
    set_seed,
    target_mask,
    train,
)
from course_utils.checks import (
    check_decoder_layer,
    check_prediction,
    check_prefix_lm_mask,
    check_teacher_forcing_batch,
)

set_seed(0)
device = get_device()
print(f"PyTorch {torch.__version__}, running on {device}")

# %% [markdown]
# ## 1. The decoder layer
#
# For the target so far $y$ (shape `(B, T, d_model)`) and the encoder's output, the **memory** $m$
# (shape `(B, S, d_model)`), the paper's post-norm layer computes
#
# $$\begin{aligned}
# a &= \mathrm{LN}\big(y + \mathrm{SelfAttn}(y, y, y;\ \text{causal mask})\big) && \text{look back at the target written so far}\\
# c &= \mathrm{LN}\big(a + \mathrm{CrossAttn}(Q{=}a,\ K{=}m,\ V{=}m;\ \text{source padding mask})\big) && \text{look across at the source}\\
# \text{out} &= \mathrm{LN}\big(c + \mathrm{FFN}(c)\big) && \text{compute}
# \end{aligned}$$
#
# The output has the target's shape `(B, T, d_model)` whatever the source length $S$.
#
# ## 2. The causal mask: no peeking
#
# At generation time the decoder produces token $t$ knowing only tokens $< t$. Training must see the same
# thing, or the model learns to copy the answer from the future and fails the moment it has to generate.
# The target's self-attention mask combines the causal triangle with the target's padding:

# %%
PAD = 0
tgt = torch.tensor([[1, 7, 8, 9, 2], [1, 5, 2, PAD, PAD]])  # <bos>=1 ... <eos>=2, padded
mask = target_mask(tgt, PAD)  # padding_mask(tgt) & causal_mask(T)
print("target mask:", tuple(mask.shape), "= (B, 1, T, T); the second sequence:")
print(mask[1, 0].int())

# %% [markdown]
# Row $t$ may see columns $\le t$, and never the padding (columns 3 and 4 of the second sequence).
#
# Now the demonstration that matters. A decoder layer reads a target of 6 positions; we rewrite positions 4 and 5
# (the "future" of positions 0-3) and run the layer again, with the causal mask. **Predict first:** which of the six
# outputs change?
#
# - (a) only outputs 4 and 5 change; outputs 0-3 do not move at all;
# - (b) all six outputs change;
# - (c) outputs 4 and 5 change a lot, outputs 0-3 a tiny bit (softmax and LayerNorm mix every position);
# - (d) no output changes: the mask hides the changed tokens.

# %% tags=["exercise"]
### BEGIN SOLUTION
my_prediction = "a"
### END SOLUTION
check_prediction("decoder-future", my_prediction)  # your answer: "a", "b", "c" or "d"

# %% [markdown]
# The measurement, with the mask and without it:

# %%
set_seed(0)
layer = DecoderLayer(d_model=16, n_heads=4, d_ff=64, dropout=0.0).eval()
y = torch.randn(1, 6, 16)  # the target so far: (B, T, d_model)
memory = torch.randn(1, 9, 16)  # the encoder's output: (B, S, d_model)
changed = y.clone()
changed[:, 4:] = torch.randn(1, 2, 16)  # rewrite positions 4 and 5: the "future" of positions 0-3

moved = {}
for name, tgt_mask in (("with the causal mask", causal_mask(6)), ("without a mask", None)):
    before = layer(y, memory, tgt_mask=tgt_mask)
    after = layer(changed, memory, tgt_mask=tgt_mask)
    moved[name] = (after - before)[0].abs().amax(dim=-1)  # (6,): largest change at each position
    print(f"{name:22}: largest change of outputs 0-5 =", ", ".join(f"{v:.2e}" for v in moved[name].tolist()))
assert (moved["with the causal mask"][:4] == 0).all(), "masked: earlier outputs must not move at all"
assert (moved["with the causal mask"][4:] > 0).all(), "masked: the rewritten positions' own outputs change"
assert (moved["without a mask"][:4] > 0).all(), "unmasked: every earlier output sees the future"

# %% [markdown]
# With the mask, positions 0–3 are untouched: exactly zero change, not merely a small one (the cell asserts it);
# only the rewritten positions 4 and 5 move. Nothing else in the layer mixes positions: the masked scores are
# $-\infty$, so the softmax gives them weight exactly 0, and LayerNorm and the feed-forward network work on each
# position alone. Without the mask, each of positions 0–3 moves: every position depends on the future. The same test on a whole
# (untrained) `Transformer`, the complete model of section 6, is one of the repository's tests
# (`test_changing_future_target_tokens_never_changes_earlier_logits` in `tests/test_model.py`).
#
# ## 3. Cross-attention: who asks whom
#
# In cross-attention the **decoder asks** and the **encoder answers**: queries come from the decoder's
# stream, keys and values from the memory. Each target position gets one weighted average of source
# positions, so the output has the **target's** length:

# %%
cross = MultiHeadAttention(d_model=16, n_heads=4).eval()
y, memory = torch.randn(2, 3, 16), torch.randn(2, 7, 16)  # T = 3 target positions, S = 7 source positions
src = torch.tensor([[4, 5, 6, 7, 8, PAD, PAD], [4, 5, 6, 7, 8, 9, 3]])
out, weights = cross(query=y, key=memory, value=memory, mask=padding_mask(src, PAD), need_weights=True)
print("queries", tuple(y.shape), "keys/values", tuple(memory.shape), "-> output", tuple(out.shape))
print("weights", tuple(weights.shape), "= (B, h, T_target, S_source)")

# %% [markdown]
# ### The swapped bug
#
# Some tutorials take the queries from the encoder. With different lengths the shapes usually catch it (the output
# would have the source's length 7; only a target of one token, $T = 1$, broadcasts without an error, as the end of
# the cell below shows, so generating one token at a time, §7's greedy decoding, would fail at its second step, not
# its first). With **equal** lengths everything runs, and the model is silently broken:
# each output position now mixes target tokens from **all** positions, the future included, through the
# back door of cross-attention. The causal mask on self-attention cannot help. Measured with the same test
# as in section 2. `course_utils.DecoderLayer` computes each sublayer in one method made to be overridden, as
# PyTorch's own layers do (`_sa_block`, `_mha_block`, `_ff_block`): `cross_attention_block(x, memory, src_mask,
# cache)` is attention, then dropout (section 4 writes the whole layer out). The bug is a subclass that overrides only
# that method (`cache` serves fast decoding, unused here). The subclass also drops the source mask, which this test
# does not need:


# %%
class SwappedDecoderLayer(DecoderLayer):
    def cross_attention_block(self, x, memory, src_mask, cache=None):  # the bug: queries from the encoder
        out, _ = self.cross_attn(query=memory, key=x, value=x)
        return self.dropout2(out)


set_seed(0)
right = DecoderLayer(16, 4, 64, dropout=0.0).eval()
swapped = SwappedDecoderLayer(16, 4, 64, dropout=0.0).eval()
swapped.load_state_dict(right.state_dict())
y, memory = torch.randn(1, 6, 16), torch.randn(1, 6, 16)  # S = T: the bug hides
changed = y.clone()
changed[:, 4:] = torch.randn(1, 2, 16)
moved = {}
for name, layer in (("queries from the decoder", right), ("queries from the encoder", swapped)):
    change = layer(changed, memory, tgt_mask=causal_mask(6))[:, :4] - layer(y, memory, tgt_mask=causal_mask(6))[:, :4]
    moved[name] = change.abs().max().item()
    print(f"{name}: largest change of outputs 0-3 when 4-5 change = {moved[name]:.2e}")
assert moved["queries from the decoder"] == 0, "the right layer never sees the future"
assert moved["queries from the encoder"] > 1e-3, "the swapped layer leaks it"
one = swapped(y[:, :1], memory, tgt_mask=causal_mask(1))  # T = 1, S = 6: (B, 1, d) + (B, S, d) broadcasts
print("T = 1, S = 6: the swapped layer runs and returns", tuple(one.shape), "= (B, S, d_model), the source's length")
assert one.shape == (1, 6, 16)

# %% [markdown]
# The swapped layer leaks the future even though its self-attention is masked: in training it would learn to
# read the answer, and it would fail at generation. `course_utils` writes the roles by keyword,
# `self.cross_attn(query=x, key=memory, value=memory, mask=src_mask)`, so a swap stands out in review, and its
# tests use $T \neq S$.
#
# ## 4. The module, checked against PyTorch
#
# Your turn: write the layer's forward, the three equations of section 1, using the submodules of `layer`, a
# `course_utils.DecoderLayer`: `layer.self_attn` and `layer.cross_attn` (each a `MultiHeadAttention` of chapter 02,
# which returns `(output, weights)`), `layer.feed_forward`, and `layer.norm1`, `layer.norm2`, `layer.norm3`. Shapes:
# `x` `(B, T, d_model)`, `memory` `(B, S, d_model)`, `src_mask` `(B, 1, 1, S)`, `tgt_mask` `(B, 1, T, T)`; the output is
# `(B, T, d_model)`. Pass the attention roles by keyword, `query=..., key=..., value=..., mask=...`, so that a swap
# shows. The checker builds PyTorch's `nn.TransformerDecoderLayer` with a target of 4 positions and a source of 7,
# both padded, copies its weights into a `course_utils.DecoderLayer`, and compares your output with PyTorch's.


# %% tags=["exercise"]
def my_decoder_layer(layer, x, memory, src_mask, tgt_mask):
    """The paper's post-norm decoder layer, from the submodules of ``layer``.

    x (B, T, d_model): the target so far; memory (B, S, d_model): the encoder's output;
    src_mask (B, 1, 1, S): the source padding; tgt_mask (B, 1, T, T): causal and padding. Returns (B, T, d_model).
    Hint: three sublayers, each followed by "add, then norm"; the queries of cross-attention come from the decoder.
    """
    ### BEGIN SOLUTION
    a = layer.norm1(x + layer.dropout1(layer.self_attn(query=x, key=x, value=x, mask=tgt_mask)[0]))  # (B, T, d)
    c = layer.norm2(a + layer.dropout2(layer.cross_attn(query=a, key=memory, value=memory, mask=src_mask)[0]))
    return layer.norm3(c + layer.dropout3(layer.feed_forward(c)))  # (B, T, d_model)
    ### END SOLUTION


check_decoder_layer(my_decoder_layer)

# %% [markdown]
# From here on the chapter uses `course_utils.DecoderLayer`, so everything below runs even before your version is
# finished. It has the same names, applies each sublayer's dropout before the residual addition, and writes the
# pre-norm order of chapter 04 (`norm_first=True`) as a second explicit branch.
#
# PyTorch's `nn.TransformerDecoderLayer` calls cross-attention `multihead_attn` and wants its masks inverted
# (True = blocked): the causal `tgt_mask` as `~causal_mask(T)`, the paddings as `(B, T)` and `(B, S)` key-padding
# masks. The cell compares both norm orders, with a target of 4 tokens and a source of 7, both padded:

# %%
src = torch.tensor([[4, 5, 6, 7, PAD, PAD, PAD], [4, 5, 6, 7, 8, 9, 3]])  # S = 7
tgt = torch.tensor([[1, 5, 6, PAD], [1, 7, 8, 9]])  # T = 4
x, memory = torch.randn(2, 4, 16), torch.randn(2, 7, 16)
for norm_first in (False, True):
    set_seed(0)
    theirs = nn.TransformerDecoderLayer(16, 4, 64, dropout=0.1, batch_first=True, norm_first=norm_first).eval()
    course = DecoderLayer.from_torch(theirs).eval()
    expected = theirs(
        x, memory, tgt_mask=~causal_mask(4), tgt_key_padding_mask=tgt == PAD, memory_key_padding_mask=src == PAD
    )
    ours = course(x, memory, src_mask=padding_mask(src, PAD), tgt_mask=target_mask(tgt, PAD))
    torch.testing.assert_close(ours, expected)
    print(f"✓ norm_first={norm_first}: course_utils.DecoderLayer == nn.TransformerDecoderLayer")

# %% [markdown]
# From now on we use `course_utils.DecoderLayer` and `Decoder`, the stack of $N$ layers: each layer's output is
# the next one's input, and every layer's cross-attention reads the same memory, the output of the encoder's
# last layer. How much bigger is the paper's base decoder than the base encoder of chapter 04?

# %%
base_decoder = Decoder(d_model=512, n_heads=8, d_ff=2048, n_layers=6)
base_encoder = Encoder(d_model=512, n_heads=8, d_ff=2048, n_layers=6)
n_dec, n_enc = count_parameters(base_decoder), count_parameters(base_encoder)
print(f"base decoder, N=6: {n_dec:,} parameters; base encoder: {n_enc:,}; ratio {n_dec / n_enc:.2f}")
layer = base_decoder.layers[0]
n_layer, n_enc_layer = count_parameters(layer), count_parameters(base_encoder.layers[0])
n_cross, n_norm = count_parameters(layer.cross_attn), count_parameters(layer.norm3)
print(f"one decoder layer {n_layer:,} = one encoder layer {n_enc_layer:,}")
print(f"                  + cross-attention {n_cross:,} + a third LayerNorm {n_norm:,}")
assert n_layer == n_enc_layer + n_cross + n_norm

# %% [markdown]
# The decoder has about a third more parameters than the encoder (ratio 1.33): each of its layers adds a
# cross-attention (1,050,624 parameters, as many as the self-attention) and a third LayerNorm (1,024).

# %% [markdown]
# ## 5. Teacher forcing and the shifted target
#
# A target sentence is wrapped as `<bos> y1 y2 ... yn <eos>`. In training, the decoder reads the target
# **shifted right** and predicts it **shifted left**: position $t$ sees `<bos> y1 ... y_t` and must output
# $y_{t+1}$. Feeding the true previous tokens (not the model's own guesses) is called **teacher forcing**.
# Thanks to the causal mask, all positions train at once, in one forward pass.
#
# Our targets are strings of letters. `CharTokenizer(chars)` gives each character an id: ids 0–3 are the
# special tokens `<pad>` (padding), `<bos>` and `<eos>` (begin and end of sequence) and `<unk>` (a character
# not in the vocabulary), then come the characters in sorted order. With the 10 letters `a` to `j` the
# vocabulary has $V = 14$ tokens. `encode_batch(texts, bos=True, eos=True)` wraps each string and pads the
# rows to one length, giving a `(B, T)` tensor of ids; `tokens(ids)` turns ids back into labels.

# %%
tok = CharTokenizer("abcdefghij")
print("vocabulary:", dict(enumerate(tok.itos)), f"V = {tok.vocab_size}")
tgt = tok.encode_batch(["cab"], bos=True, eos=True)  # (1, 5): <bos> c a b <eos>
print("<bos> c a b <eos> =", tgt[0].tolist())
decoder_input, labels = tgt[:, :-1], tgt[:, 1:]  # (1, 4) each
print(f"{'position':>8} | {'decoder reads (so far)':<26} | must predict")
for t in range(decoder_input.size(1)):
    seen = " ".join(tok.itos[i] for i in decoder_input[0, : t + 1].tolist())
    print(f"{t:>8} | {seen:<26} | {tok.itos[labels[0, t]]}")

# %% [markdown]
# ## 6. From vectors to words: the output projection
#
# The decoder's output `(B, T, d_model)` goes through one `nn.Linear(d_model, V)` to **logits** over the
# target vocabulary, `(B, T, V)`; a softmax turns each row into a next-token distribution. The loss is the
# cross-entropy of chapter 02 between those distributions and the labels: the mean over positions of
# $-\ln p(\text{right token})$, where positions whose label is `<pad>` are left out (`ignore_index=pad_id`).
#
# > **Preview** (chapter 06): `Transformer` is the whole encoder-decoder model: token embeddings plus
# > positional encoding, an `Encoder`, a `Decoder`, and the output projection to logits;
# > `model(src, tgt_in, src_mask, tgt_mask)` returns logits `(B, T, V)`. Chapter 06 takes it apart.
#
# `seq2seq_loss(model, src, tgt, pad_id)` does the rest: it splits `tgt` into decoder input and labels as in
# section 5, builds the masks, runs the model and returns that cross-entropy. The cell checks it against the
# loss computed by hand:

# %%
set_seed(0)
model = Transformer(
    src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, d_model=32, n_heads=2, n_layers=1, d_ff=64
).eval()
src = tok.encode_batch(["bac"])  # (1, S)
logits = model(src, decoder_input, padding_mask(src, tok.pad_id), target_mask(decoder_input, tok.pad_id))
print("logits:", tuple(logits.shape), "= (B, T, V); next-token probabilities of position 0 sum to",
      round(logits[0, 0].softmax(-1).sum().item(), 4))  # fmt: skip
manual = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=tok.pad_id)
torch.testing.assert_close(seq2seq_loss(model, src, tgt, tok.pad_id), manual)
uniform = torch.log(torch.tensor(float(tok.vocab_size))).item()
# model.generator is the output projection, d_model -> V logits (the name the Annotated Transformer gave it)
print(f"output projection: weights with standard deviation {model.generator.weight.std().item():.2f}")
print(f"largest |logit| of the untrained model: {logits.abs().max().item():.2f}")
print(
    f"untrained loss {manual.item():.3f}; a uniform guess over V = {tok.vocab_size} tokens scores ln(V) = {uniform:.3f}"
)
assert abs(manual.item() - uniform) < 0.1, "an untrained model should score about ln V"

# %% [markdown]
# The untrained model scores about $\ln V$, as chapter 02's first-loss check predicts. `Transformer` starts its
# output projection near zero (weights with standard deviation 0.02), so every logit is close to 0, the
# softmax is close to uniform, each token gets probability about $1/V$, and the loss is about
# $-\ln(1/V) = \ln V$. A first loss far above $\ln V$ would mean confidently wrong random logits; one far
# below, a leak of the answer.
#
# ## 7. The whole decoder at work
#
# Let us train a small encoder-decoder for a few seconds on the classic toy task: **reverse a string of
# 8 letters**. Every output letter must come from one particular source position, so cross-attention has a
# clear job.
#
# - `reversal_pairs(n, length=8, seed=0)` draws `n` random strings of letters `a`–`j` and pairs each with its
#   reverse: `(source, target)`.
# - `encode_pairs(pairs, src_tok, tgt_tok)` turns them into two padded id tensors: the sources `(N, S)`, and
#   the targets wrapped as `<bos> ... <eos>`, `(N, 10)` for strings of 8 letters.
# - `random_batches(src_ids, tgt_ids, batch_size=64)` yields batches of matching rows forever, in a random order
#   that is reshuffled after each pass over the data.
#
# Training uses `train` and `TrainConfig` from chapter 02: AdamW, gradient clipping at norm `grad_clip`, and a
# learning rate that warms up linearly for `warmup_steps` steps and then decays along a cosine to a tenth of
# `lr` (`schedule="cosine"`). Label smoothing stays off (`label_smoothing=0.0`; chapter 06 explains it), and
# `amp` only matters on a GPU, where the forward pass then runs in a 16-bit format (chapter 02: bfloat16, or float16
# with a gradient scaler on a GPU without it, such as Colab's free T4).

# %% tags=["nbval-ignore-output"]
set_seed(0)
pairs = reversal_pairs(20000, length=8, seed=0)
print("examples:", pairs[:3])
src_ids, tgt_ids = encode_pairs(pairs, tok, tok)  # (N, 8), (N, 10)
print("sources", tuple(src_ids.shape), "targets", tuple(tgt_ids.shape))
config = TrainConfig(steps=250, batch_size=64, lr=5e-3, warmup_steps=40, schedule="cosine", label_smoothing=0.0)
print(config)
reverser = Transformer(
    tok.vocab_size, tok.vocab_size, d_model=32, n_heads=2, n_layers=1, d_ff=64, dropout=0.0, max_len=16
)
history = train(
    reverser,
    random_batches(src_ids, tgt_ids, batch_size=config.batch_size),
    lambda m, s, t: seq2seq_loss(m, s, t, tok.pad_id, label_smoothing=config.label_smoothing),
    config,
    device=device,
    desc="reverser",
)
print(f"first training loss {history.loss[0]:.2f} (ln V = {uniform:.2f}); last {history.loss[-1]:.4f}")
assert abs(history.loss[0] - uniform) < 0.1, "the first loss should be about ln V"
assert history.loss[-1] < 0.05, "training should bring the loss close to 0"

# %% [markdown]
# The first loss is about $\ln V$, as in section 6, and training brings it close to 0 (both printed above).
#
# At test time there is no teacher: `greedy_decode` starts from `<bos>`, feeds each predicted token back in,
# and stops at `<eos>`. It is **greedy** because at each step it takes the single most likely next token and
# never reconsiders. `exact_match(model, pairs, src_tok, tgt_tok)` greedy-decodes every source and returns the
# fraction of outputs equal to the target, with the outputs. We measure it on 500 new strings (the cell
# checks that none of them is among the training sources):

# %% tags=["nbval-ignore-output"]
held_out = reversal_pairs(500, length=8, seed=1)
seen_in_training = {s for s, _ in held_out} & {s for s, _ in pairs}
print(f"held-out strings also among the training strings: {len(seen_in_training)}")
assert not seen_in_training, "the held-out strings must be new"
accuracy, predictions = exact_match(reverser, held_out, tok, tok)
print(f"exact match on held-out strings: {accuracy:.1%}")
assert accuracy > 0.95, "the reverser should reverse unseen strings"
for (s, t), p in list(zip(held_out, predictions))[:3]:
    print(f"  {s} -> {p}   {'✓' if p == t else '✗ expected ' + t}")
src = tok.encode_batch(["abcdefgh"]).to(device)
# max_len: at most this many ids, <bos> and <eos> included
out = greedy_decode(reverser, src, padding_mask(src, tok.pad_id), max_len=10, bos_id=tok.bos_id, eos_id=tok.eos_id)
print("greedy_decode ids:", out[0].tolist(), "=", tok.decode(out[0]))

# %% [markdown]
# Now the cross-attention of the trained decoder on `abcdefgh`. Rows are the queries: the decoder's 9
# positions, each labelled with the token it reads (`<bos>`, then `h` down to `a`). Columns are the keys: the
# 8 source letters. The row reading `<bos>` must write `h`, so it should look at the **last** source letter;
# the next row must write `g`, and so on: the mirrored letter of row $t$ is column $7 - t$. The cell measures
# that for each head, then draws both heads on one colour scale.

# %% tags=["nbval-ignore-output"]
tgt = tok.encode_batch(["hgfedcba"], bos=True, eos=True).to(device)
reverser.eval()
with torch.no_grad(), record_attention(reverser) as attention:
    reverser(src, tgt[:, :-1], padding_mask(src, tok.pad_id), target_mask(tgt[:, :-1], tok.pad_id))
weights = attention["decoder.layers.0.cross_attn"][0].cpu()  # (h, T, S) = (2, 9, 8)
letters, rows = tok.tokens(src[0]), tok.tokens(tgt[0, :-1])
mirror = torch.arange(7, -1, -1)  # rows 0-7 (<bos>, h, ..., b) should look at source positions 7, 6, ..., 0
on_mirror = weights[:, torch.arange(8), mirror].mean(dim=-1)  # (h,): mean weight on the mirrored letter
for head in range(weights.size(0)):
    most = " ".join(letters[i] for i in weights[head].argmax(dim=-1).tolist())
    print(f"head {head}: mean weight on the mirrored letter {on_mirror[head]:.2f}; most-attended letter by row: {most}")
print(f"the sharper head: head {on_mirror.argmax().item()}")
assert (weights.mean(0).argmax(-1)[:8] == mirror).all(), "averaged over heads, rows 0-7 should draw the anti-diagonal"
attention_grid(weights, letters, rows, suptitle="Cross-attention of the reverser")

# %% [markdown]
# An anti-diagonal: the row reading `<bos>` (about to write the first output letter, `h`) looks at the
# **last** source letter, the next row at the one before, and so on. Averaged over the two heads, each of the
# first 8 rows puts most weight on its mirrored letter (the cell asserts it). Nobody told the model where to
# look; it found the alignment.
#
# The two heads are not equally sharp. The sharper one (named above) puts most of each row's weight on
# one letter. The other is blurrier: its mean weight on the mirrored letter is lower (both printed above), though
# its most-attended letter is mostly the mirrored one too; the rest of its weight spreads to other letters (the
# figure shows where).
#
# There are 9 rows for 8 columns. The last row reads `a` and must write `<eos>`: there is no letter left to
# fetch (every string has 8 letters, so the position alone says the string is over), and its weights need
# not follow the pattern. The same weights, interactive (pick the head, hover a cell):

# %% tags=["nbval-ignore-output"]
attention_chart(weights, letters, rows, head_names=["head 0", "head 1"], title="Cross-attention of the reverser")

# %% [markdown]
# ## Pitfalls
#
# | Mistake | What happens | Fix |
# | --- | --- | --- |
# | no causal mask in the decoder | training copies from the future; generation fails | `target_mask(tgt, pad)`: causal and padding ([bug lab: bug 2](09_bug_lab.ipynb#bug-2)) |
# | cross-attention queries from the encoder | output of the source's length, or (if $S = T$) silent future leak | `cross_attn(query=x, key=memory, value=memory)` ([bug lab: bug 3](09_bug_lab.ipynb#bug-3)) |
# | decoder input and labels not shifted | the model learns the identity | read `tgt[:, :-1]`, predict `tgt[:, 1:]` |
# | padding counted in the loss | the model learns to predict `<pad>` | `ignore_index=pad_id` |
# | source padding not masked in cross-attention | attends to padding | pass `src_mask` to the decoder ([bug lab: bug 9](09_bug_lab.ipynb#bug-9) trains a model whose real positions attend to padding, through a mask on the wrong axis) |
# | forgetting that attention returns `(output, weights)` | the tuple reaches the dropout or the residual addition: `TypeError` | `out, _ = self.cross_attn(...)`, or take `[0]` |
#
# ## Summary
#
# - The decoder layer: masked self-attention, cross-attention (queries from the decoder, keys and values from
#   the memory), feed-forward; residuals and norms around each.
# - The causal mask keeps each position from seeing the future; with it, changing future tokens changes
#   nothing earlier.
# - Teacher forcing trains all positions at once on the shifted target; generation feeds predictions back.
# - `course_utils.DecoderLayer` equals `nn.TransformerDecoderLayer`.
#
# ## Exercises
#
# {{EXERCISES}}
#
# **Exercise 1: a prefix-LM mask.** Some decoder-only models (T5's prefix LM, UniLM, PaliGemma) read a prompt, the
# **prefix**, in both directions, like an encoder, and write the rest causally, like a decoder. Query position $i$
# may attend to key position $j$ when $j$ lies in the prefix ($j < P$) **or** $j \le i$. The prefix never sees past
# its own end, and the positions after it see the whole prefix and their own past. Write
# `my_prefix_lm_mask(prefix_len, size)`: `prefix_len` is a LongTensor `(B,)`, one prefix length $P$ per sequence,
# and `size` the length $T$; return a bool mask `(B, 1, T, T)`, True = may attend. $P = 0$ gives the causal mask,
# $P = T$ no mask at all.
#
# *Hint:* build the causal part `(T, T)` and the "key in the prefix" part `(B, 1, T)` by comparing
# `torch.arange(size, device=prefix_len.device)` with `prefix_len[:, None, None]`; an `|` of the two broadcasts to
# `(B, T, T)`; then add the head axis with `[:, None]`. (`device=prefix_len.device` builds the positions where the
# lengths are: on a GPU, in Colab, the comparison fails with tensors on two devices. The checker tries that too.)


# %% tags=["exercise"]
def my_prefix_lm_mask(prefix_len, size):
    ### BEGIN SOLUTION
    j = torch.arange(size, device=prefix_len.device)  # key positions, where the lengths are (a GPU in Colab)
    in_prefix = j < prefix_len[:, None, None]  # (B, 1, T): key j lies in the prefix, for every query
    causal = j[None, :] <= j[:, None]  # (T, T): key j <= query i
    return (causal | in_prefix)[:, None]  # (B, T, T) -> (B, 1, T, T)
    ### END SOLUTION


check_prefix_lm_mask(my_prefix_lm_mask)

# %% [markdown]
# **Exercise 2: a teacher-forcing batch from raw sequences.** Section 5 split a target that was already wrapped
# and padded. Start one step earlier: `sequences` is a list of $B$ lists of token ids of different lengths, with no
# special tokens. Write `my_teacher_forcing_batch(sequences, bos_id, eos_id, pad_id)`, which returns the pair
# `(decoder_input, labels)`, two LongTensors `(B, L + 1)` with $L$ the longest length: each row of `decoder_input`
# reads `<bos> y_1 ... y_n`, each row of `labels` is `y_1 ... y_n <eos>`, and both are padded with `pad_id` on the
# right. (Where a label is `<pad>` the loss ignores the prediction, so the input may hold `<pad>` or `<eos>` there.)
#
# *Hint:* where does `<eos>` go in a short row, before or after the padding? Wrap first, then pad, then shift.


# %% tags=["exercise"]
def my_teacher_forcing_batch(sequences, bos_id, eos_id, pad_id):
    ### BEGIN SOLUTION
    width = max(len(s) for s in sequences) + 2  # <bos> y <eos>
    rows = [[bos_id, *s, eos_id] + [pad_id] * (width - 2 - len(s)) for s in sequences]
    full = torch.tensor(rows, dtype=torch.long)  # (B, L + 2)
    return full[:, :-1], full[:, 1:]  # (B, L + 1) each: read shifted right, predict shifted left
    ### END SOLUTION


check_teacher_forcing_batch(my_teacher_forcing_batch)

# %% [markdown]
# **Going further.** Train the reverser with `n_layers=2`: does each layer's cross-attention still draw the
# anti-diagonal?
#
# Then train it with the roles swapped in cross-attention: build the `Transformer`, and turn each of its
# decoder layers into the `SwappedDecoderLayer` of section 3
# (`for layer in model.decoder.layers: layer.__class__ = SwappedDecoderLayer`: each layer keeps its weights and
# takes the subclass's methods). Here $S = 8$ but the decoder
# reads $T = 9$ tokens, so the shapes catch the bug at the first step: try it, and read the error. To see the
# silent leak, make $S = T$: pad every source with one `<pad>`
# (`src_ids = F.pad(src_ids, (0, 1), value=tok.pad_id)`: `F.pad` adds 0 columns on the left and 1 on the right) and
# train again. What happens to the teacher-forced
# loss? And to greedy decoding, where the decoder's input grows one token at a time?
#
# <details><summary>What to expect</summary>
#
# The teacher-forced loss still falls close to 0: each position reads the answer from the future through
# cross-attention. Greedy decoding breaks: the swapped cross-attention returns one vector per **source**
# position, which no longer matches the growing target, so a shape error stops it; and even with matching
# shapes the model would need letters that are not written yet.
# </details>
#
# Next: [06 · The full Transformer](06_transformer.ipynb): everything together, trained on a real task.
