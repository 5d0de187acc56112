# %% [markdown]
# # 03 · Positional encoding
#
# {{COLAB_BADGE}}
#
# *Transformers from Scratch*, Part I, chapter 3 of 10 · previous: [02 · Multi-head attention](02_multi_head_attention.ipynb) ·
# next: [04 · The encoder](04_encoder.ipynb)
#
# Attention compares contents, never places: to it, "the dog bit the man" and "the man bit the dog" are
# the same bag of words. The Transformer fixes this by adding to each token embedding a vector that
# encodes its **position**. This chapter builds the paper's sinusoidal encoding and shows why its
# design is so clever.
#
# **You will learn**
# - what attention without positions does with the order of its tokens, shown on real tensors;
# - the sinusoidal formula, and the common bug that applies $2i$ twice;
# - how to read the encoding: as a heatmap (static and interactive), as waves of growing wavelength;
# - why it encodes *relative* positions: $PE(p+k) = M_k\,PE(p)$ with $M_k$ a rotation, verified numerically;
# - the alternatives: learned position embeddings, rotary embeddings (RoPE) and ALiBi's distance bias, the last
#   two written by you in the exercises.
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
from course_utils.checks import (
    check_alibi_bias,
    check_prediction,
    check_rotary_embedding,
    check_sinusoidal_encoding,
)

set_seed(0)
device = get_device()
print(f"PyTorch {torch.__version__}, running on {device}")

# %% [markdown]
# ## 1. Attention cannot see order
#
# Shuffle the tokens of a sequence and feed both versions to a self-attention layer, with no positions added:
# six random token vectors `x` of shape `(1, 6, d_model)`, then the same six in the order `shuffle`.
#
# **Predict, then run.** How do the outputs for the shuffled tokens compare with the outputs for the original ones?
#
# - (a) the outputs are the original outputs, shuffled the same way as the tokens;
# - (b) nothing changes: the outputs come out as before, in the original order;
# - (c) every output changes: each token now has different neighbours, so it gets a new vector.

# %% tags=["exercise"]
### BEGIN SOLUTION
my_prediction = "a"
### END SOLUTION
check_prediction("shuffled-tokens", my_prediction)  # your answer: "a", "b" or "c"

# %%
set_seed(0)
attention = MultiHeadAttention(d_model=16, n_heads=4).eval()
x = torch.randn(1, 6, 16)  # (B, T, d_model): six token vectors
shuffle = torch.tensor([3, 0, 5, 1, 4, 2])  # a permutation of the six positions

out, _ = attention(x, x, x)  # (output, weights): the output is what we compare
out_of_shuffled, _ = attention(x[:, shuffle], x[:, shuffle], x[:, shuffle])
torch.testing.assert_close(out_of_shuffled, out[:, shuffle])  # the same rows, moved with their tokens
assert not torch.allclose(out_of_shuffled, out)  # and the rows did move
print("attention(shuffled tokens) == shuffled attention(tokens): order is invisible")

# %% [markdown]
# Answer (a): the output of the shuffled sequence is **exactly the original output, shuffled the same way**.
# Attention is *permutation-equivariant*. Each output row depends only on *which* tokens are around, not *where*.
# To tell "dog bit man" from "man bit dog" the model needs the position inside the token vectors themselves.
#
# ## 2. The sinusoidal encoding
#
# The paper adds to the embedding of the token at position $pos$ a vector $PE(pos) \in \mathbb{R}^{d_{\text{model}}}$:
#
# $$PE(pos, 2i) = \sin\!\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right), \qquad
#   PE(pos, 2i+1) = \cos\!\left(\frac{pos}{10000^{2i/d_{\text{model}}}}\right)$$
#
# Each pair of dimensions $(2i, 2i+1)$ is a (sine, cosine) pair turning at its own angular frequency
# $\omega_i = 1/10000^{2i/d_{\text{model}}}$, that is with wavelength $2\pi \cdot 10000^{2i/d_{\text{model}}}$
# positions: fastest for the first pair (wavelength $2\pi$), slower and slower up to
# $2\pi \cdot 10000^{(d_{\text{model}}-2)/d_{\text{model}}}$ for the last pair (47,117 positions for
# $d_{\text{model}} = 64$, printed below), below the paper's bound of $10000 \cdot 2\pi$. Like a clock
# with many hands, each turning at its own speed.
#
# **Your turn.** Write `my_sinusoidal_encoding(max_len, d_model)`: the `(max_len, d_model)` table for an even
# `d_model`. In code, let `two_i` *be* $2i$: `torch.arange(0, d_model, 2)`, the even indices 0, 2, 4, ..., so the
# formula is written once, as printed. All positions and pairs at once: `pos` as a column `(max_len, 1)` divided
# by the row `10000 ** (two_i / d_model)` broadcasts to the `(max_len, d_model / 2)` angles. The checker compares
# your table with `course_utils.sinusoidal_encoding`, which the rest of the chapter uses: everything below runs
# even before your version is finished.


# %% tags=["exercise"]
def my_sinusoidal_encoding(max_len, d_model):
    """PE[pos, 2i] = sin(pos / 10000^(2i / d_model)), PE[pos, 2i+1] = cos(the same angle).

    max_len, d_model (even): ints -> the (max_len, d_model) float32 table, one row per position.
    Hint: fill the even columns pe[:, 0::2] with the sines and the odd ones pe[:, 1::2] with the cosines.
    """
    ### BEGIN SOLUTION
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (d_model / 2,): 0, 2, 4, ... = 2i
    angle = pos / 10000 ** (two_i / d_model)  # (max_len, d_model / 2), by broadcasting
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angle)  # even dimensions
    pe[:, 1::2] = torch.cos(angle)  # odd dimensions
    return pe  # (max_len, d_model)
    ### END SOLUTION


check_sinusoidal_encoding(my_sinusoidal_encoding)

# %% [markdown]
# `course_utils.sinusoidal_encoding` (computed in float64, then rounded once) at position 1: the first pair is
# $(\sin 1, \cos 1)$, since $\omega_0 = 1$. It equals the formula evaluated one entry at a time in plain Python:

# %%
pe = sinusoidal_encoding(50, 64)
print("PE:", tuple(pe.shape), "= (max_len, d_model)")
print("position 1, first 6 dims:", pe[1, :6].round(decimals=4))
print("math.sin(1), math.cos(1):", round(math.sin(1), 4), round(math.cos(1), 4))
by_hand = torch.tensor(
    [[(math.sin if d % 2 == 0 else math.cos)(p / 10000 ** ((d - d % 2) / 64)) for d in range(64)] for p in range(50)]
)
torch.testing.assert_close(pe, by_hand)
print("✓ course_utils.sinusoidal_encoding == the formula, entry by entry")

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
ax.plot(pair, 2 * math.pi * 10000 ** (2 * pair / d), label=r"correct: $2\pi \cdot 10000^{2i/d}$")
ax.plot(pair, 2 * math.pi * 10000 ** (4 * pair / d), "--", label=r"bug: $2\pi \cdot 10000^{2 \cdot 2i/d}$")
ax.axhline(2 * math.pi * 10000, color="gray", lw=0.8, label=r"the paper's bound, $10000 \cdot 2\pi$")
ax.set(yscale="log", xlabel="pair index i", ylabel="wavelength (positions)", title="Wavelength of each (sin, cos) pair")
ax.legend()
plt.close(fig)
fig

# %% [markdown]
# With the bug, about half of the pairs get wavelengths beyond the paper's bound $10000 \cdot 2\pi$:
# over any realistic sentence they barely move, so those dimensions carry (almost) no position at all.
# Nothing crashes, which is why this bug survives in so many tutorials. Measured below: the longest
# wavelength, the pairs beyond the bound, and the pairs that turn by less than 0.1 radian over a whole
# sequence of 512 positions (their sine moves by less than 0.1, their cosine stays near 1: nearly constant).

# %%
two_i = torch.arange(0, d, 2, dtype=torch.float64)
wavelength = {"correct": 2 * math.pi * 10000 ** (two_i / d), "buggy": 2 * math.pi * 10000 ** (2 * two_i / d)}
T_long = 512  # positions 0 .. 511
for name, w in wavelength.items():
    turn = 2 * math.pi / w * (T_long - 1)  # (d / 2,): angle each pair turns from position 0 to 511
    print(f"{name:>8}: longest wavelength {w.max():>13,.0f} positions; "
          f"pairs beyond 10000·2π: {int((w > 2 * math.pi * 10000).sum()):2d} of {d // 2}; "
          f"pairs turning < 0.1 rad over {T_long} positions: {int((turn < 0.1).sum()):2d} of {d // 2}")  # fmt: skip
torch.testing.assert_close(buggy_encoding(50, d)[:, :2], sinusoidal_encoding(50, d)[:, :2])  # the first pair agrees...
print("the first pair is identical, so a quick look at PE[:, :2] does not reveal the bug")

# %% [markdown]
# With the correct formula only the last 2 pairs are that slow over 512 positions (they are there to tell
# apart positions thousands of steps apart); with the bug it is more than half of them.
#
# ## 3. Looking at the encoding
#
# Each row is one position, each column one dimension; $+1$ is dark red, $-1$ dark blue. The left columns
# oscillate fast, and the further right, the slower: every position gets its own pattern of colours, and
# nearby positions get similar ones. The right-most columns barely change over these 50 positions (sine
# columns stay near 0, white; cosine columns near 1, red): their wavelengths run into the thousands, so they
# only tell apart positions that are far apart. The cell prints where that starts.

# %%
pe = sinusoidal_encoding(50, 64)
change = pe.max(dim=0).values - pe.min(dim=0).values  # (64,): how far each column moves over 50 positions
still = next(dim for dim in range(64) if (change[dim:] < 0.1).all())
print(f"from dimension {still} on, every column moves by less than 0.1 over these 50 positions")
positional_encoding_heatmap(pe)

# %% [markdown]
# The same matrix as an interactive chart, with the same colours: hover any cell to read its position,
# dimension and value.

# %% tags=["nbval-ignore-output"]
positional_encoding_chart(sinusoidal_encoding(50, 64))

# %% [markdown]
# Single columns are plain sine and cosine waves, sampled at whole positions (the dots). Their wavelength
# $2\pi \cdot 10000^{2i/d_{\text{model}}}$ grows geometrically with the pair index $i$. Five columns over
# 100 positions:

# %%
pe = sinusoidal_encoding(100, 64)
dims = (0, 1, 10, 20, 40)
for dim in dims:
    print(f"dim {dim:2d}: wavelength {2 * math.pi * 10000 ** ((dim - dim % 2) / 64):7,.1f} positions")
print(f"dim 40 over positions 0..99: from {pe[0, 40]:.2f} to {pe[99, 40]:.2f}")
positional_waves(pe, dims=dims, title="Columns of PE: waves of growing wavelength")

# %% [markdown]
# Dimensions 0 and 1 are a sine and its cosine with the same short wavelength $2\pi$, a quarter-turn apart:
# they swing through a full cycle about every 6.3 positions (never repeating exactly at whole positions, since
# $2\pi$ is not a whole number), which is why the left columns of the heatmap look like noise. Dimension 10 completes a cycle about every 26 positions, dimension 20
# just under one in these 100 positions. Dimension 40 (wavelength 1,986.9) has only begun its first rise
# and looks like a straight line from 0.00 to 0.31: of little use for telling neighbours apart, but it still moves
# over hundreds of positions, where the fast columns have long since repeated.

# %% [markdown]
# ## 4. Similarity depends on distance only
#
# How similar are the encodings of two positions? For each pair,
# $PE(p) \cdot PE(p+k) = \sum_i \left[\sin(\omega_i p)\sin(\omega_i (p+k)) + \cos(\omega_i p)\cos(\omega_i (p+k))\right]
#  = \sum_i \cos(\omega_i k)$:
# it depends on the distance $k$ only, not on $p$. At $k = 0$ every term is $\sin^2 + \cos^2 = 1$, so the
# peak is $d_{\text{model}}/2$. Measured from three different starting positions:

# %%
pe = sinusoidal_encoding(200, 64)
ks = torch.arange(-20, 81)  # distances k = -20 .. 80
omegas = 1 / 10000 ** (torch.arange(0, 64, 2) / 64)  # (32,): omega_i
formula = torch.cos(ks[:, None] * omegas).sum(dim=1)  # (101,): sum_i cos(omega_i k)
fig, ax = plt.subplots(figsize=(7, 3), layout="constrained")
for p, style, width in ((20, "-", 5), (60, "--", 2.5), (100, ":", 1.5)):
    similarity = pe[p + ks] @ pe[p]  # (101,): PE(p + k) . PE(p) for every k
    torch.testing.assert_close(similarity, formula, atol=1e-4, rtol=0)  # the same curve from every p
    ax.plot(ks, similarity, style, lw=width, label=f"from position {p}")
ax.set(
    xlabel="offset k (negative: earlier positions)", ylabel="PE(p) · PE(p + k)", title="Dot product between positions"
)
ax.legend()
plt.close(fig)
fig

# %% [markdown]
# The three curves lie on top of each other, and on $\sum_i \cos(\omega_i k)$ (the cell asserts it): the
# similarity is the same function of distance wherever you start. It is highest at $k = 0$ and symmetric in
# $\pm k$, since cosine is even:

# %%
peak = int(formula.argmax())
print(f"highest at k = {int(ks[peak])}: PE(p) · PE(p) = {float(pe[20] @ pe[20]):.1f} = d_model / 2")
assert int(ks[peak]) == 0 and (formula[ks != 0] < formula[peak]).all()
for k in range(1, 21):  # the plotted range of negative distances
    torch.testing.assert_close(pe[60 - k] @ pe[60], pe[60 + k] @ pe[60], atol=1e-4, rtol=0)
print("symmetric: PE(p) · PE(p - k) == PE(p) · PE(p + k) for k = 1 .. 20")
bumps = [k for k in range(1, 80) if formula[k + 20] > formula[k + 19] and formula[k + 20] > formula[k + 21]]
print("but not falling all the way: local maxima at k =", bumps)  # k = ks[k + 20]: ks starts at -20

# %% [markdown]
# The curve does not fall all the way, though: it has small bumps (the local maxima printed), where several of the
# fast waves come back into step at once. The encoding tells near positions from far ones on the whole, not at
# every single distance; attention's learned projections decide which of these differences to use.
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
# A linear map is something attention's projections $W^Q$ and $W^K$ can learn: if $W^Q$ turns $PE(p)$ into
# $M_1 PE(p)$, about $PE(p + 1)$, then a query at $p + 1$ matches best the key at $p$, one step back. Chapter 02's
# two-job model had such a head, one step back from every position; whether it learned exactly this map, the
# chapter did not measure.
#
# ## 6. The module
#
# `course_utils.PositionalEncoding(d_model, dropout, max_len)` precomputes the `(max_len, d_model)` table
# once and adds its first $T$ rows to embeddings of shape `(B, T, d_model)`. It then applies *dropout*:
# during training, each entry is zeroed with probability `dropout` (and the others scaled up by
# $1/(1-\text{dropout})$), a regulariser that chapter 04 explains; `dropout=0.0`, used here, turns it off.
#
# The table is stored with one line in `__init__`:
#
# ```python
# self.register_buffer("pe", sinusoidal_encoding(max_len, d_model), persistent=False)
# ```
#
# A **buffer** is a tensor that belongs to the module without being a parameter: it follows `.to(device)`
# and `.to(dtype)` with the rest of the model, but nothing learns it. `persistent=False` also keeps it out
# of the state dict, so checkpoints do not store a table that is recomputed anyway.

# %%
positional = PositionalEncoding(d_model=16, dropout=0.0, max_len=100)
embeddings = torch.zeros(2, 5, 16)  # (B, T, d_model)
out = positional(embeddings)
print("output:", tuple(out.shape), "= (B, T, d_model)")
torch.testing.assert_close(out[0], sinusoidal_encoding(5, 16))  # zeros + PE = PE
print("buffers:", [(name, tuple(buffer.shape)) for name, buffer in positional.named_buffers()])
print("parameters:", sum(p.numel() for p in positional.parameters()))
print("state dict keys:", list(positional.state_dict()))
assert list(positional.state_dict()) == [] and not list(positional.parameters())


class PlainAttribute(nn.Module):  # the table as a plain attribute instead of a buffer
    def __init__(self):
        super().__init__()
        self.pe = sinusoidal_encoding(100, 16)


print("after .to(torch.float64): buffer", PositionalEncoding(16, 0.0, 100).to(torch.float64).pe.dtype,
      "| plain attribute", PlainAttribute().to(torch.float64).pe.dtype)  # fmt: skip

# %% [markdown]
# The plain attribute did not follow the module; on a GPU it would stay behind on the CPU in the same way.
# A sequence longer than `max_len` is refused with a clear message:

# %%
try:
    positional(torch.zeros(1, 150, 16))  # T = 150 > max_len = 100
except ValueError as error:
    print("ValueError:", error)

# %% [markdown]
# With positions added, the permutation test of section 1 fails, as it should: the layer now sees order.

# %%
with_positions = positional(x)
shuffled_with_positions = positional(x[:, shuffle])
out, _ = attention(with_positions, with_positions, with_positions)
out_of_shuffled, _ = attention(shuffled_with_positions, shuffled_with_positions, shuffled_with_positions)
same = torch.allclose(out_of_shuffled, out[:, shuffle], atol=1e-5)
print("still permutation-equivariant?", same)
assert not same

# %% [markdown]
# Adding (rather than concatenating) keeps the width at $d_{\text{model}}$. It works because embeddings and
# encodings get on together: the paper multiplies embeddings by $\sqrt{d_{\text{model}}}$, and
# the full model of chapter 06 initialises them so that the product has the same scale as the sinusoids in
# $[-1, 1]$. Much larger embeddings drown the position signal: with `nn.Embedding`'s default initialisation the
# scaled embeddings are 32 times larger than the encoding at $d_{\text{model}} = 512$ (chapter 06 measures it), and
# the bug lab (chapter 09, bug 11) trains a model that way.
#
# ## 7. Alternatives
#
# **Learned position embeddings** (BERT, GPT-2, chapter 07): a table `nn.Embedding(max_len, d_model)`
# trained like the word embeddings. Simple and flexible, but it has `max_len` $\times\ d_{\text{model}}$
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
# on the **difference** of their angles, so attention scores depend on relative position directly. (The
# matrix below is the usual rotation of a vector $(x, y)$; section 5's $M_k$ looks transposed only because its
# pairs are written $(\sin, \cos)$, with the sine first.)


# %%
def rotate(v, position, omega=0.3):
    """Rotate a 2-D vector by the angle position * omega (RoPE for a single pair)."""
    c, s = math.cos(position * omega), math.sin(position * omega)
    return torch.tensor([[c, -s], [s, c]]) @ v


q, key = torch.tensor([1.0, 0.5]), torch.tensor([0.2, -1.0])
scores = []
for m, n in ((3, 1), (10, 8), (42, 40)):
    scores.append(rotate(q, m) @ rotate(key, n))
    print(f"query at {m:2d}, key at {n:2d} (distance {m - n}): score = {scores[-1]:.4f}")
torch.testing.assert_close(torch.stack(scores), scores[0].expand(3))

# %% [markdown]
# Same distance, same score. Real RoPE applies this to every pair of dimensions with the frequencies
# $\omega_i$ of the sinusoidal encoding: Exercise 1 asks you to write it. A third family adds no position
# vector at all and instead lowers each attention score by an amount that grows with the distance between query
# and key (ALiBi, Exercise 2).
#
# ## Pitfalls
#
# | Mistake | What happens | Fix |
# | --- | --- | --- |
# | `10000 ** (2 * i / d)` with `i` already stepping by 2 | about half the pairs nearly constant over a sequence (17 of 32 above); no error | `two_i = arange(0, d, 2)` and `10000 ** (two_i / d)` ([bug lab: bug 1](09_bug_lab.ipynb#bug-1)) |
# | sin and cos swapped, or interleaved differently | a valid but different encoding; pretrained weights break | even dims sine, odd dims cosine, as printed |
# | the table as an `nn.Parameter`, or a plain attribute | it gets trained, or stays on the CPU when the model moves | `register_buffer("pe", ..., persistent=False)` |
# | sequences longer than `max_len` | `PositionalEncoding` raises a `ValueError` that names both lengths; a learned table fails with an `IndexError` | build with `max_len` at least the longest sequence |
# | embeddings far larger than the encoding | positions drowned out | scale embeddings to match (chapter 06) ([bug lab: bug 11](09_bug_lab.ipynb#bug-11)) |
#
# ## Summary
#
# - Attention alone is permutation-equivariant: it sees a bag of tokens.
# - The sinusoidal encoding gives each pair of dimensions a (sin, cos) at frequency $\omega_i = 10000^{-2i/d_{\text{model}}}$.
# - Similarity between positions depends on their distance only, and a shift by $k$ is a fixed rotation $M_k$.
# - Learned embeddings, rotary embeddings and distance biases (ALiBi) are the main alternatives.
#
# ## Exercises
#
# {{EXERCISES}}
#
# **Exercise 1 · Rotary embeddings.** Section 7 rotated a single 2-D pair. Write `my_rope(x)` for a whole tensor
# of queries or keys, `x` of shape `(B, n_heads, T, d_k)` with `d_k` even: at position $m$ (`0 .. T-1`, along
# dimension $-2$), rotate each pair of features $(x_{2i}, x_{2i+1})$ by the angle $m\,\omega_i$, with the
# frequencies of the sinusoidal table, $\omega_i = 1/10000^{2i/d_k}$:
#
# $$\begin{pmatrix} x'_{2i} \\ x'_{2i+1} \end{pmatrix}
#  = \begin{pmatrix} \cos m\omega_i & -\sin m\omega_i \\ \sin m\omega_i & \cos m\omega_i \end{pmatrix}
#    \begin{pmatrix} x_{2i} \\ x_{2i+1} \end{pmatrix}$$
#
# Return a tensor of the same shape, `(B, n_heads, T, d_k)`. Hint: build the `(T, d_k / 2)` table of angles by
# broadcasting, as in section 2, and rotate all pairs at once through `x[..., 0::2]` and `x[..., 1::2]`. Besides
# comparing with a reference, the checker tests what RoPE is for: the same query and key vectors placed at
# positions $m$ and $n$ score $q'_m \cdot k'_n$, a number that must depend on $m - n$ only. It also runs your
# function on a stand-in for a GPU: a tensor you create, such as the positions, must be made where `x` is,
# `torch.arange(T, device=x.device)`, or PyTorch refuses to combine the two.


# %% tags=["exercise"]
def my_rope(x):
    """Rotary position embedding: each pair (2i, 2i+1) at position m rotated by m * omega_i.

    x: (B, n_heads, T, d_k) -> (B, n_heads, T, d_k).
    """
    ### BEGIN SOLUTION
    T, d_k = x.shape[-2], x.shape[-1]
    pos = torch.arange(T, dtype=torch.float32, device=x.device)[:, None]  # (T, 1), where x is (a GPU in Colab)
    two_i = torch.arange(0, d_k, 2, dtype=torch.float32, device=x.device)  # (d_k / 2,): 2i
    angle = pos / 10000 ** (two_i / d_k)  # (T, d_k / 2): m * omega_i
    cos, sin = torch.cos(angle), torch.sin(angle)
    a, b = x[..., 0::2], x[..., 1::2]  # (B, n_heads, T, d_k / 2) each: the pairs' two features
    out = torch.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out  # (B, n_heads, T, d_k)
    ### END SOLUTION


check_rotary_embedding(my_rope)

# %% [markdown]
# **Exercise 2 · A distance penalty instead of position vectors.** ALiBi (Press et al. 2022, "Train Short, Test
# Long") adds nothing to the embeddings. It lowers each attention score by an amount proportional to the distance
# between query $i$ and key $j$, with a fixed slope $s$, one per head (the paper writes the slope $m$; here $m$ is
# already a position):
#
# $$\text{score}_{ij} = \frac{q_i \cdot k_j}{\sqrt{d_k}} - s\,|i - j|$$
#
# Write `my_alibi_bias(T, slope)`: the `(T, T)` float tensor $-s\,|i - j|$ (row $i$ the query, column $j$ the key),
# to be added to the `(T, T)` scores before the softmax. The paper's version is causal and only looks back; this
# symmetric one suits an encoder. Hint: `torch.arange(T)[:, None] - torch.arange(T)[None, :]` is the `(T, T)`
# table of $i - j$.


# %% tags=["exercise"]
def my_alibi_bias(T, slope):
    """The (T, T) distance bias -slope * |i - j| added to attention scores: 0 on the diagonal, lower further away."""
    ### BEGIN SOLUTION
    distance = torch.arange(T)[:, None] - torch.arange(T)[None, :]  # (T, T): i - j
    return -slope * distance.abs().float()  # (T, T)
    ### END SOLUTION


check_alibi_bias(my_alibi_bias)

# %% [markdown]
# **Going further.** In chapter 02's two-job model, replace `PositionalEncoding` with a learned table
# `self.positions = nn.Embedding(12, d_model)`. It is not a drop-in swap: the table maps position numbers to
# vectors, so `forward` must add them itself: with `tokens = self.digit(x % 10) + self.is_marked((x >= 10).long())`,
# `h = tokens + self.positions(torch.arange(x.size(1), device=x.device))`.
# Does the "previous digit" head still appear?
#
# Next: [04 · The encoder](04_encoder.ipynb): layer normalisation, residual connections, the feed-forward
# network, and the encoder layer, checked against `nn.TransformerEncoderLayer`.
