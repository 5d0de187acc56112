# %% [markdown]
# # 03 · Positional encoding
#
# {{COLAB_BADGE}}
#
# *Transformers from Scratch*, chapter 3 of 7 · previous: [02 · Multi-head attention](02_multi_head_attention.ipynb) ·
# next: [04 · The encoder](04_encoder.ipynb)
#
# Attention compares contents, never places: to it, "the dog bit the man" and "the man bit the dog" are
# the same bag of words. The Transformer fixes this by adding to each token embedding a vector that
# encodes its **position**. This chapter builds the paper's sinusoidal encoding and shows why its
# design is so clever.
#
# **You will learn**
# - that attention without positions is *permutation-equivariant*, shown on real tensors;
# - the sinusoidal formula, and the common bug that applies $2i$ twice;
# - how to read the encoding: as a heatmap (static and interactive), as waves of growing wavelength;
# - why it encodes *relative* positions: $PE(p+k) = M_k\,PE(p)$ with $M_k$ a rotation, verified numerically;
# - the alternatives: learned position embeddings and rotary embeddings (RoPE).
#
# **Prerequisites:** chapters 01–02. **Time:** about 40 minutes.

# %% [markdown]
# ## Setup

# %% tags=["nbval-ignore-output"]
import subprocess
import sys

if "google.colab" in sys.modules:  # on Colab: install course_utils from the repository
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{PIP_SPEC}}"], check=True)

import math

import matplotlib.pyplot as plt
import torch
from torch import nn

from course_utils import (
    MultiHeadAttention,
    PositionalEncoding,
    get_device,
    positional_encoding_chart,
    positional_encoding_heatmap,
    positional_waves,
    set_seed,
    sinusoidal_encoding,
)
from course_utils.checks import check_position_shift, check_sinusoidal_encoding

set_seed(0)
device = get_device()
print(f"PyTorch {torch.__version__}, running on {device}")

# %% [markdown]
# ## 1. Attention cannot see order
#
# Shuffle the tokens of a sequence and feed both versions to a self-attention layer. If the layer knew
# about order, the outputs would be unrelated. Instead, the output of the shuffled sequence is **exactly
# the original output, shuffled the same way**: attention is *permutation-equivariant*.

# %%
set_seed(0)
attention = MultiHeadAttention(d_model=16, n_heads=4).eval()
x = torch.randn(1, 6, 16)  # (B, T, d_model): six token vectors
shuffle = torch.tensor([3, 0, 5, 1, 4, 2])  # a permutation of the six positions

out, _ = attention(x, x, x)  # (output, weights): the output is what we compare
out_of_shuffled, _ = attention(x[:, shuffle], x[:, shuffle], x[:, shuffle])
torch.testing.assert_close(out_of_shuffled, out[:, shuffle])
print("attention(shuffled tokens) == shuffled attention(tokens): order is invisible")

# %% [markdown]
# Each output row depends only on *which* tokens are around, not *where*. To tell "dog bit man" from "man
# bit dog" the model needs the position inside the token vectors themselves.
#
# ## 2. The sinusoidal encoding
#
# The paper adds to the embedding of the token at position $pos$ a vector $PE(pos) \in \mathbb{R}^{d_{\text{model}}}$:
#
# $$PE(pos, 2i) = \sin\!\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right), \qquad
#   PE(pos, 2i+1) = \cos\!\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right)$$
#
# Each pair of dimensions $(2i, 2i+1)$ is a (sine, cosine) pair turning at its own angular frequency
# $\omega_i = 1/10000^{2i/d_{\text{model}}}$: fast for the first pairs (wavelength $2\pi$), slower and slower up
# to a wavelength of $10000 \cdot 2\pi$ for the last ones, like the hands of a clock with many hands.
#
# In code, `two_i` *is* $2i$: the even indices 0, 2, 4, ... The formula is written once, as printed.


# %%
def my_sinusoidal_encoding(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (d_model / 2,): 0, 2, 4, ... = 2i
    angle = pos / 10000 ** (two_i / d_model)  # (max_len, d_model / 2), by broadcasting
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)  # even dimensions
    pe[:, 1::2] = torch.cos(angle)  # odd dimensions
    return pe  # (max_len, d_model)


pe = my_sinusoidal_encoding(50, 64)
print("PE:", tuple(pe.shape), "= (max_len, d_model)")
print("position 1, first 6 dims:", pe[1, :6].round(decimals=4))
print("math.sin(1), math.cos(1):", round(math.sin(1), 4), round(math.cos(1), 4))

# %% [markdown]
# It equals `course_utils.sinusoidal_encoding` (computed in float64 and rounded once) and the formula
# evaluated one entry at a time in plain Python:

# %%
torch.testing.assert_close(pe, sinusoidal_encoding(50, 64))
by_hand = torch.tensor(
    [[(math.sin if d % 2 == 0 else math.cos)(p / 10000 ** ((d - d % 2) / 64)) for d in range(64)] for p in range(50)]
)
torch.testing.assert_close(pe, by_hand)
print("✓ my_sinusoidal_encoding == course_utils.sinusoidal_encoding == the formula, entry by entry")

# %% [markdown]
# ### The classic bug: $2i$ applied twice
#
# Many tutorials loop with `for i in range(0, d_model, 2)` (so `i` already **is** $2i$) and then write
# `10000 ** (2 * i / d_model)`. The exponent then runs up to almost 2 instead of 1, and the wavelengths
# explode:


# %%
def buggy_encoding(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for i in range(0, d_model, 2):  # i = 0, 2, 4, ...: already 2i
            pe[pos, i] = math.sin(pos / 10000 ** (2 * i / d_model))  # ...doubled again
            pe[pos, i + 1] = math.cos(pos / 10000 ** (2 * i / d_model))
    return pe


d = 64
pair = torch.arange(d // 2)
fig, ax = plt.subplots(figsize=(7, 3), layout="constrained")
ax.plot(pair, 2 * math.pi * 10000 ** (2 * pair / d), label="correct: 10000^(2i/d)")
ax.plot(pair, 2 * math.pi * 10000 ** (4 * pair / d), "--", label="bug: 10000^(2·2i/d)")
ax.axhline(2 * math.pi * 10000, color="gray", lw=0.8)
ax.set(yscale="log", xlabel="pair index i", ylabel="wavelength (positions)", title="Wavelength of each (sin, cos) pair")
ax.legend()
plt.close(fig)
fig

# %% [markdown]
# With the bug, about half of the pairs get wavelengths far beyond the paper's longest, $10000 \cdot 2\pi$:
# over any realistic sentence they barely move, so those dimensions carry (almost) no position at all.
# Nothing crashes, which is why this bug survives in so many tutorials. Measured:

# %%
two_i = torch.arange(0, d, 2, dtype=torch.float64)
wavelength = {"correct": 2 * math.pi * 10000 ** (two_i / d), "buggy": 2 * math.pi * 10000 ** (2 * two_i / d)}
for name, w in wavelength.items():
    print(f"{name:>8}: longest wavelength {w.max():>13,.0f} positions; "
          f"pairs beyond 10000·2π: {int((w > 2 * math.pi * 10000).sum())} of {d // 2}")  # fmt: skip
torch.testing.assert_close(buggy_encoding(50, d)[:, :2], sinusoidal_encoding(50, d)[:, :2])  # the first pair agrees...
print("the first pair is identical, so a quick look at PE[:, :2] does not reveal the bug")

# ## 3. Looking at the encoding
#
# Each row is one position, each column one dimension. The left columns oscillate fast, the right ones
# slowly: every position gets a unique pattern, and nearby positions get similar ones.

# %%
positional_encoding_heatmap(sinusoidal_encoding(50, 64))

# %% [markdown]
# The same matrix, interactive: hover any cell to read position, dimension and value.

# %% tags=["nbval-ignore-output"]
positional_encoding_chart(sinusoidal_encoding(50, 64))

# %% [markdown]
# Single columns are plain sine and cosine waves. Their wavelength grows geometrically with the dimension:

# %%
positional_waves(
    sinusoidal_encoding(100, 64), dims=(0, 1, 10, 20, 40), title="Columns of PE: waves of growing wavelength"
)

# %% [markdown]
# ## 4. Similarity depends on distance only
#
# How similar are the encodings of two positions? For each pair,
# $PE(p) \cdot PE(p+k) = \sum_i \left[\sin(\omega_i p)\sin(\omega_i (p+k)) + \cos(\omega_i p)\cos(\omega_i (p+k))\right]
#  = \sum_i \cos(\omega_i k)$:
# it depends on the distance $k$ only, not on $p$. Measured from three different starting positions:

# %%
pe = sinusoidal_encoding(200, 64)
fig, ax = plt.subplots(figsize=(7, 3), layout="constrained")
for p, style, width in ((20, "-", 5), (60, "--", 2.5), (100, ":", 1.5)):
    ks = torch.arange(-20, 81)
    ax.plot(ks, pe[p + ks] @ pe[p], style, lw=width, label=f"from position {p}")
ax.set(xlabel="distance k", ylabel="PE(p) · PE(p + k)", title="Dot product between positions")
ax.legend()
plt.close(fig)
fig

# %% [markdown]
# The three curves lie exactly on top of each other: the similarity is the same function of distance wherever you start, highest at
# $k = 0$ and symmetric in $\pm k$.
#
# ## 5. Relative positions are rotations
#
# The paper chose sinusoids because "for any fixed offset $k$, $PE_{pos+k}$ can be represented as a linear
# function of $PE_{pos}$". Indeed, by the angle-addition formulas, each (sin, cos) pair of position $p + k$
# is the pair of position $p$ **rotated** by the angle $\omega_i k$:
#
# $$\begin{pmatrix} \sin \omega_i (p+k) \\ \cos \omega_i (p+k) \end{pmatrix}
#  = \begin{pmatrix} \cos \omega_i k & \sin \omega_i k \\ -\sin \omega_i k & \cos \omega_i k \end{pmatrix}
#    \begin{pmatrix} \sin \omega_i p \\ \cos \omega_i p \end{pmatrix}$$
#
# So $PE(p+k) = M_k\, PE(p)$ with $M_k$ block-diagonal, built from $k$ alone. Check it for every $p$ at once:


# %%
def shift_matrix(k, d_model):
    """M_k: a 2x2 rotation by the angle k * omega_i for every (sin, cos) pair."""
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    omegas = 1 / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    for j, omega in enumerate(omegas):
        c, s = math.cos(k * omega), math.sin(k * omega)
        M[2 * j : 2 * j + 2, 2 * j : 2 * j + 2] = torch.tensor([[c, s], [-s, c]])
    return M


pe = sinusoidal_encoding(300, 64).double()
for k in (1, 7, 50):
    M = shift_matrix(k, 64)
    torch.testing.assert_close(pe[:-k] @ M.T, pe[k:], atol=1e-6, rtol=0)  # row p: M_k @ PE(p) == PE(p + k)
    print(f"k = {k:2d}: M_k PE(p) == PE(p + k) for all {300 - k} positions p")

# %% [markdown]
# A linear map is something attention's projections $W^Q$ and $W^K$ can learn. That is how, in chapter 02,
# one head learned to look exactly one step back from every position.
#
# ## 6. The module
#
# `course_utils.PositionalEncoding(d_model, dropout, max_len)` precomputes the table once and adds its first
# $T$ rows to embeddings of shape `(B, T, d_model)`. The table is a **buffer**: it moves with
# `.to(device)`, but it is not a parameter (nothing learns it) and not saved in the state dict.

# %%
positional = PositionalEncoding(d_model=16, dropout=0.0, max_len=100)
embeddings = torch.zeros(2, 5, 16)  # (B, T, d_model)
out = positional(embeddings)
print(
    "output:",
    tuple(out.shape),
    "| buffer pe:",
    tuple(positional.pe.shape),
    "| parameters:",
    sum(p.numel() for p in positional.parameters()),
)
torch.testing.assert_close(out[0], my_sinusoidal_encoding(5, 16))

# %% [markdown]
# With positions added, the permutation test of section 1 fails, as it should: the layer now sees order.

# %%
with_positions = positional(x)
shuffled_with_positions = positional(x[:, shuffle])
out, _ = attention(with_positions, with_positions, with_positions)
out_of_shuffled, _ = attention(shuffled_with_positions, shuffled_with_positions, shuffled_with_positions)
same = torch.allclose(out_of_shuffled, out[:, shuffle], atol=1e-5)
print("still permutation-equivariant?", same)

# %% [markdown]
# Adding (rather than concatenating) keeps the width at $d_{\text{model}}$. It works because embeddings and
# encodings get on together: the paper multiplies embeddings by $\sqrt{d_{\text{model}}}$, and
# `course_utils.Transformer` initialises them so that the product has the same scale as the sinusoids in
# $[-1, 1]$ (chapter 06). An embedding thousands of times larger would drown the position signal.
#
# ## 7. Alternatives
#
# **Learned position embeddings** (BERT, GPT-2, chapter 07): a table `nn.Embedding(max_len, d_model)`
# trained like the word embeddings. Simple and flexible, but it has $\text{max\_len} \times d_{\text{model}}$
# parameters and knows nothing about positions it never saw in training; the paper found both variants
# "nearly identical" in quality.

# %%
learned = nn.Embedding(num_embeddings=100, embedding_dim=16)  # max_len x d_model
positions = torch.arange(5)  # (T,)
print("learned positions:", tuple(learned(positions).shape), "|", learned.weight.numel(), "parameters")
try:
    learned(torch.tensor([150]))
except IndexError as error:
    print("position 150 of a table of 100:", type(error).__name__, "-", error)

# %% [markdown]
# **Rotary position embeddings** (RoPE; Su et al. 2021, used by LLaMA and most recent models) take the
# rotation idea of section 5 one step further: instead of *adding* a position vector, they *rotate* each
# query and key by an angle proportional to its position. A dot product of two rotated vectors depends only
# on the **difference** of their angles, so attention scores depend on relative position directly:


# %%
def rotate(v, position, omega=0.3):
    """Rotate a 2-D vector by the angle position * omega (RoPE for a single pair)."""
    c, s = math.cos(position * omega), math.sin(position * omega)
    return torch.tensor([[c, -s], [s, c]]) @ v


q, k = torch.tensor([1.0, 0.5]), torch.tensor([0.2, -1.0])
for m, n in ((3, 1), (10, 8), (42, 40)):
    print(f"query at {m:2d}, key at {n:2d} (distance {m - n}): score = {rotate(q, m) @ rotate(k, n):.4f}")

# %% [markdown]
# Same distance, same score. Real RoPE applies this to every pair of dimensions with the frequencies
# $\omega_i$ of the sinusoidal encoding.
#
# ## Pitfalls
#
# | Mistake | What happens | Fix |
# | --- | --- | --- |
# | `10000 ** (2 * i / d)` with `i` already stepping by 2 | half the dimensions nearly constant; no error | `two_i = arange(0, d, 2)` and `10000 ** (two_i / d)` |
# | sin and cos swapped, or interleaved differently | a valid but different encoding; pretrained weights break | even dims sine, odd dims cosine, as printed |
# | the table as an `nn.Parameter`, or a plain attribute | it gets trained, or stays on the CPU when the model moves | `register_buffer("pe", ..., persistent=False)` |
# | sequences longer than `max_len` | an indexing error deep in the model | build with a large enough `max_len`; `PositionalEncoding` says so |
# | embeddings far larger than the encoding | positions drowned out | scale embeddings to match (chapter 06) |
#
# ## Summary
#
# - Attention alone is permutation-equivariant: it sees a bag of tokens.
# - The sinusoidal encoding gives each pair of dimensions a (sin, cos) at frequency $\omega_i = 10000^{-2i/d_{\text{model}}}$.
# - Similarity between positions depends on their distance only, and a shift by $k$ is a fixed rotation $M_k$.
# - Learned embeddings and rotary embeddings are the main alternatives.
#
# ## Exercises
#
# **Exercise 1.** Write the sinusoidal encoding yourself, `(max_len, d_model)` for even `d_model`.


# %%
def my_encoding(max_len, d_model):
    # your code here
    raise NotImplementedError


check_sinusoidal_encoding(my_encoding)

# %% [markdown]
# <details><summary>Show a solution</summary>
#
# ```python
# def my_encoding(max_len, d_model):
#     pos = torch.arange(max_len, dtype=torch.float32)[:, None]
#     two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
#     pe = torch.zeros(max_len, d_model)
#     pe[:, 0::2] = torch.sin(pos / 10000 ** (two_i / d_model))
#     pe[:, 1::2] = torch.cos(pos / 10000 ** (two_i / d_model))
#     return pe
# ```
# </details>
#
# **Exercise 2.** Without looking at section 5, build `my_shift(k, d_model)`: the `(d_model, d_model)` matrix
# $M_k$ such that $M_k\,PE(p) = PE(p + k)$ for every position $p$.


# %%
def my_shift(k, d_model):
    # your code here
    raise NotImplementedError


check_position_shift(my_shift)

# %% [markdown]
# <details><summary>Show a solution</summary>
#
# ```python
# def my_shift(k, d_model):
#     M = torch.zeros(d_model, d_model)
#     for j in range(d_model // 2):
#         angle = k / 10000 ** (2 * j / d_model)
#         c, s = math.cos(angle), math.sin(angle)
#         M[2 * j : 2 * j + 2, 2 * j : 2 * j + 2] = torch.tensor([[c, s], [-s, c]])
#     return M
# ```
# </details>
#
# **Going further.** In chapter 02's two-job model, replace `PositionalEncoding` with a learned
# `nn.Embedding(12, d_model)` of positions. Does the "previous digit" head still appear?
#
# Next: [04 · The encoder](04_encoder.ipynb): layer normalisation, residual connections, the feed-forward
# network, and the encoder layer, checked against `nn.TransformerEncoderLayer`.
