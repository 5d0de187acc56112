# %% [markdown]
# # 05 · The decoder
#
# {{COLAB_BADGE}}
#
# *Transformers from Scratch*, chapter 5 of 7 · previous: [04 · The encoder](04_encoder.ipynb) ·
# next: [06 · The full Transformer](06_transformer.ipynb)
#
# The encoder reads the source; the decoder **writes** the target, one token at a time, looking back at
# what it has written and across at what the encoder read. It has three sublayers instead of two: masked
# self-attention, cross-attention, and the feed-forward network.
#
# **You will learn**
# - the causal mask in the decoder, and a demonstration that future tokens never change earlier outputs;
# - cross-attention: queries from the decoder, keys and values from the encoder, and what breaks when a
#   tutorial swaps them;
# - the decoder layer and stack, equal to `nn.TransformerDecoderLayer`;
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
    FeedForward,
    LayerNorm,
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
from course_utils.checks import check_cross_attention, check_shift_right, check_target_mask

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
# Now the demonstration that matters: change the **future** target tokens and check that **earlier** outputs
# do not move, with and without the mask.

# %%
set_seed(0)
layer = DecoderLayer(d_model=16, n_heads=4, d_ff=64, dropout=0.0).eval()
y = torch.randn(1, 6, 16)  # the target so far: (B, T, d_model)
memory = torch.randn(1, 9, 16)  # the encoder's output: (B, S, d_model)
changed = y.clone()
changed[:, 4:] = torch.randn(1, 2, 16)  # rewrite positions 4 and 5: the "future" of positions 0-3

for name, tgt_mask in (("with the causal mask", causal_mask(6)), ("without a mask", None)):
    before = layer(y, memory, tgt_mask=tgt_mask)
    after = layer(changed, memory, tgt_mask=tgt_mask)
    moved = (after[:, :4] - before[:, :4]).abs().max().item()
    print(f"{name:22}: largest change of outputs 0-3 = {moved:.2e}")

# %% [markdown]
# With the mask, positions 0–3 are untouched (exactly zero change); without it, every position depends on
# the future. The same test on a whole trained model is among `course_utils`'s unit tests.
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
# Some tutorials take the queries from the encoder. With different lengths the shapes catch it (the output
# would have the source's length 7). With **equal** lengths everything runs, and the model is silently broken:
# each output position now mixes target tokens from **all** positions, the future included, through the
# back door of cross-attention. The causal mask on self-attention cannot help. Measured with the same test
# as in section 2:


# %%
class SwappedDecoderLayer(DecoderLayer):
    def _cross_attention(self, x, memory, src_mask):  # the bug: queries from the encoder
        out, _ = self.cross_attn(query=memory, key=x, value=x)
        return self.dropout2(out)


set_seed(0)
right = DecoderLayer(16, 4, 64, dropout=0.0).eval()
swapped = SwappedDecoderLayer(16, 4, 64, dropout=0.0).eval()
swapped.load_state_dict(right.state_dict())
y, memory = torch.randn(1, 6, 16), torch.randn(1, 6, 16)  # S = T: the bug hides
changed = y.clone()
changed[:, 4:] = torch.randn(1, 2, 16)
for name, layer in (("queries from the decoder", right), ("queries from the encoder", swapped)):
    moved = layer(changed, memory, tgt_mask=causal_mask(6))[:, :4] - layer(y, memory, tgt_mask=causal_mask(6))[:, :4]
    print(f"{name}: largest change of outputs 0-3 when 4-5 change = {moved.abs().max().item():.2e}")

# %% [markdown]
# The swapped layer leaks the future even though its self-attention is masked: in training it would learn to
# read the answer, and it would fail at generation. `course_utils` writes the roles by keyword,
# `self.cross_attn(query=x, key=memory, value=memory, mask=src_mask)`, so a swap stands out in review, and its
# tests use $T \neq S$.
#
# ## 4. The module, checked against PyTorch
#
# Written out with the same names as `course_utils.DecoderLayer`, both norm orders as explicit branches:


# %%
class MyDecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout=0.1, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(dropout), nn.Dropout(dropout), nn.Dropout(dropout)

    def forward(self, x, memory, src_mask=None, tgt_mask=None):  # x: (B, T, d); memory: (B, S, d)
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(query=h, key=h, value=h, mask=tgt_mask)[0])  # [0]: the output
            h = self.norm2(x)
            x = x + self.dropout2(self.cross_attn(query=h, key=memory, value=memory, mask=src_mask)[0])
            x = x + self.dropout3(self.feed_forward(self.norm3(x)))
        else:
            x = self.norm1(x + self.dropout1(self.self_attn(query=x, key=x, value=x, mask=tgt_mask)[0]))
            x = self.norm2(x + self.dropout2(self.cross_attn(query=x, key=memory, value=memory, mask=src_mask)[0]))
            x = self.norm3(x + self.dropout3(self.feed_forward(x)))
        return x  # (B, T, d_model)


# %% [markdown]
# PyTorch's `nn.TransformerDecoderLayer` calls cross-attention `multihead_attn` and wants its masks inverted
# (True = blocked): the causal `tgt_mask` as `~causal_mask(T)`, the paddings as `(B, T)` and `(B, S)` key-padding
# masks. The test uses a target of 4 tokens and a source of 7, both padded:

# %%
src = torch.tensor([[4, 5, 6, 7, PAD, PAD, PAD], [4, 5, 6, 7, 8, 9, 3]])  # S = 7
tgt = torch.tensor([[1, 5, 6, PAD], [1, 7, 8, 9]])  # T = 4
x, memory = torch.randn(2, 4, 16), torch.randn(2, 7, 16)
for norm_first in (False, True):
    set_seed(0)
    theirs = nn.TransformerDecoderLayer(16, 4, 64, dropout=0.1, batch_first=True, norm_first=norm_first).eval()
    course = DecoderLayer.from_torch(theirs).eval()
    mine = MyDecoderLayer(16, 4, 64, norm_first=norm_first).eval()
    mine.load_state_dict(course.state_dict())
    expected = theirs(
        x, memory, tgt_mask=~causal_mask(4), tgt_key_padding_mask=tgt == PAD, memory_key_padding_mask=src == PAD
    )
    ours = mine(x, memory, src_mask=padding_mask(src, PAD), tgt_mask=target_mask(tgt, PAD))
    torch.testing.assert_close(ours, expected)
    torch.testing.assert_close(course(x, memory, padding_mask(src, PAD), target_mask(tgt, PAD)), ours)
    print(f"✓ norm_first={norm_first}: MyDecoderLayer == course_utils.DecoderLayer == nn.TransformerDecoderLayer")

# %% [markdown]
# From now on we use `course_utils.DecoderLayer` and `Decoder`, the stack of $N$ layers. The paper's base
# decoder has about a third more parameters than its encoder (the extra cross-attention):

# %%
base_decoder = Decoder(d_model=512, n_heads=8, d_ff=2048, n_layers=6)
print(
    f"base decoder, N=6: {count_parameters(base_decoder):,} parameters; one layer {count_parameters(base_decoder.layers[0]):,}"
)

# %% [markdown]
# ## 5. Teacher forcing and the shifted target
#
# A target sentence is wrapped as `<bos> y1 y2 ... yn <eos>`. In training, the decoder reads the target
# **shifted right** and predicts it **shifted left**: position $t$ sees `<bos> y1 ... y_t` and must output
# $y_{t+1}$. Feeding the true previous tokens (not the model's own guesses) is called **teacher forcing**.
# Thanks to the causal mask, all positions train at once, in one forward pass.

# %%
tok = CharTokenizer("abcdefghij")
tgt = tok.encode_batch(["cab"], bos=True, eos=True)  # (1, 5): <bos> c a b <eos>
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
# cross-entropy between those distributions and the labels, ignoring padding. `course_utils.Transformer`
# puts it all together (chapter 06 takes it apart), and `seq2seq_loss` does the shifting:

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
print(
    f"untrained loss {manual.item():.3f}; a uniform guess over V = {tok.vocab_size} tokens scores ln(V) = {uniform:.3f}"
)

# %% [markdown]
# A uniform guess would score $\ln V$. The untrained model does no better, and usually worse: its random
# logits are confidently wrong. Training brings the loss towards 0.
#
# ## 7. The whole decoder at work
#
# Let us train a small encoder-decoder for a few seconds on the classic toy task: **reverse a string of
# 8 letters**. Every output letter must come from one particular source position, so cross-attention has a
# clear job.

# %% tags=["nbval-ignore-output"]
set_seed(0)
pairs = reversal_pairs(20000, length=8, seed=0)
print("examples:", pairs[:3])
src_ids, tgt_ids = encode_pairs(pairs, tok, tok)  # (N, 8), (N, 10)
config = TrainConfig(steps=250, batch_size=64, lr=5e-3, warmup_steps=40, schedule="cosine", label_smoothing=0.0)
print(config)
reverser = Transformer(
    tok.vocab_size, tok.vocab_size, d_model=32, n_heads=2, n_layers=1, d_ff=64, dropout=0.0, max_len=16
)
history = train(
    reverser,
    random_batches(src_ids, tgt_ids, batch_size=config.batch_size),
    lambda m, s, t: seq2seq_loss(m, s, t, tok.pad_id),
    config,
    device=device,
    desc="reverser",
)

# %% [markdown]
# At test time there is no teacher: `greedy_decode` starts from `<bos>`, feeds each predicted token back in,
# and stops at `<eos>`. Exact-match accuracy on 500 strings never seen in training:

# %% tags=["nbval-ignore-output"]
held_out = reversal_pairs(500, length=8, seed=1)
accuracy, predictions = exact_match(reverser, held_out, tok, tok)
print(f"exact match on held-out strings: {accuracy:.1%}")
assert accuracy > 0.95, "the reverser should reverse unseen strings"
for (s, t), p in list(zip(held_out, predictions))[:3]:
    print(f"  {s} -> {p}   {'✓' if p == t else '✗ expected ' + t}")
src = tok.encode_batch(["abcdefgh"]).to(device)
out = greedy_decode(reverser, src, padding_mask(src, tok.pad_id), max_len=10, bos_id=tok.bos_id, eos_id=tok.eos_id)
print("greedy_decode ids:", out[0].tolist(), "=", tok.decode(out[0]))

# %% [markdown]
# Now the cross-attention of the trained decoder on "abcdefgh": rows are the decoder's positions (each
# labelled with the token it reads), columns the source letters.

# %% tags=["nbval-ignore-output"]
tgt = tok.encode_batch(["hgfedcba"], bos=True, eos=True).to(device)
reverser.eval()
with torch.no_grad(), record_attention(reverser) as attention:
    reverser(src, tgt[:, :-1], padding_mask(src, tok.pad_id), target_mask(tgt[:, :-1], tok.pad_id))
weights = attention["decoder.layers.0.cross_attn"][0]  # (h, T, S)
attention_grid(weights, tok.tokens(src[0]), tok.tokens(tgt[0, :-1]), suptitle="Cross-attention of the reverser")

# %% [markdown]
# An anti-diagonal: the position reading `<bos>` (about to write the first output letter, `h`) looks at the
# **last** source letter, the next looks at the one before, and so on. Nobody told the model where to look;
# it found the alignment. The same weights, interactive (pick the head):

# %% tags=["nbval-ignore-output"]
attention_chart(weights, tok.tokens(src[0]), tok.tokens(tgt[0, :-1]), head_names=["head 0", "head 1"])

# %% [markdown]
# ## Pitfalls
#
# | Mistake | What happens | Fix |
# | --- | --- | --- |
# | no causal mask in the decoder | training copies from the future; generation fails | `target_mask(tgt, pad)`: causal and padding |
# | cross-attention queries from the encoder | output of the source's length, or (if $S = T$) silent future leak | `cross_attn(query=x, key=memory, value=memory)` |
# | decoder input and labels not shifted | the model learns the identity | read `tgt[:, :-1]`, predict `tgt[:, 1:]` |
# | padding counted in the loss | the model learns to predict `<pad>` | `ignore_index=pad_id` |
# | source padding not masked in cross-attention | attends to padding | pass `src_mask` to the decoder |
# | a decoder layer that unpacks a tuple its attention never returns | crashes, or hides a different bug | one return value, as here; tests |
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
# **Exercise 1.** Write `my_target_mask(tgt, pad_id)`: the decoder's `(B, 1, T, T)` self-attention mask.


# %%
def my_target_mask(tgt, pad_id):
    # your code here
    raise NotImplementedError


check_target_mask(my_target_mask)

# %% [markdown]
# <details><summary>Show a solution</summary>
#
# ```python
# def my_target_mask(tgt, pad_id):
#     T = tgt.size(1)
#     causal = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)
#     return (tgt != pad_id)[:, None, None, :] & causal  # (B, 1, 1, T) & (T, T) -> (B, 1, T, T)
# ```
# </details>
#
# **Exercise 2.** Write `my_shift(tgt)`: from `<bos> y1 ... yn <eos>` (padded), return the pair
# `(decoder_input, labels)` used by teacher forcing.


# %%
def my_shift(tgt):
    # your code here
    raise NotImplementedError


check_shift_right(my_shift)

# %% [markdown]
# <details><summary>Show a solution</summary>
#
# ```python
# def my_shift(tgt):
#     return tgt[:, :-1], tgt[:, 1:]
# ```
# </details>
#
# **Exercise 3.** Use the multi-head attention module `attn` as **cross-attention**: `x` is the decoder's stream
# `(B, T, d)`, `memory` the encoder's output `(B, S, d)`, `src_mask` the source padding mask. Return the
# output `(B, T, d)` (remember that `attn` returns `(output, weights)`).


# %%
def my_cross_attention(attn, x, memory, src_mask):
    # your code here
    raise NotImplementedError


check_cross_attention(my_cross_attention)

# %% [markdown]
# <details><summary>Show a solution</summary>
#
# ```python
# def my_cross_attention(attn, x, memory, src_mask):
#     out, _ = attn(query=x, key=memory, value=memory, mask=src_mask)
#     return out
# ```
# </details>
#
# **Going further.** Train the reverser with `n_layers=2`: does each layer's cross-attention still draw the
# anti-diagonal? Then swap the roles in cross-attention (section 3) and train again: what happens to the
# loss, and to greedy decoding?
#
# Next: [06 · The full Transformer](06_transformer.ipynb): everything together, trained on a real task.
