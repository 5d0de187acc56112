# %% [markdown]
# # 01 · Attention
#
# {{COLAB_BADGE}}
#
# *Transformers from Scratch*, Part I, chapter 1 of 10 · next: [02 · Multi-head attention](02_multi_head_attention.ipynb)
#
# Attention is the one idea the Transformer is built on: every position of a sequence looks at
# every other position and takes what it needs. In this chapter you build it from nothing.
#
# **You will learn**
# - queries, keys and values, and attention as a *soft dictionary lookup*;
# - scaled dot-product attention, $\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V$,
#   and **why** it divides by $\sqrt{d_k}$: measured here, not just asserted;
# - padding and causal masks, what a `False` entry does, and the NaN trap of a row with nothing to attend to;
# - self-attention versus cross-attention;
# - how to draw attention as a heatmap, static and interactive;
# - the $O(T^2)$ cost of attention, timed.
#
# **Prerequisites:** Python and a little PyTorch (tensors, `@`, `softmax`). No prior knowledge of attention.
#
# **Time:** about 45 minutes.

# %% [markdown]
# ## Setup
# On Colab this installs the course's small package, `course_utils` (Colab's own PyTorch is kept); on your computer
# the course's set-up installed it already ([*Run it*]({{REPOSITORY_URL}}#run-it) in the README). Seeds are fixed so
# that you see the numbers printed here.

# %% tags=["nbval-ignore-output"]
import subprocess
import sys

if "google.colab" in sys.modules:  # on Colab: install course_utils from the repository
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{PIP_SPEC}}"], check=True)

import math
import time

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from course_utils import (
    attention_chart,
    attention_heatmap,
    causal_mask,
    get_device,
    padding_mask,
    scaled_dot_product_attention,
    set_seed,
)
from course_utils.checks import (
    check_attention_with_bias,
    check_causal_mask,
    check_masked_mean,
    check_padding_mask,
    check_prediction,
    check_scaled_dot_product_attention,
    check_sliding_window_mask,
)

set_seed(0)
device = get_device()
print(f"PyTorch {torch.__version__}, running on {device}")

# %% [markdown]
# ## 1. A soft dictionary lookup
#
# A Python `dict` answers a query by finding the one key that **equals** it and returning that key's value.
# Attention does the same thing *softly*: it scores how well the query matches **every** key, turns
# the scores into weights that sum to 1, and returns the weighted average of **all** the values.
#
# Here the keys are 2-D vectors, the values are numbers, and the query is close to the key of "cat":

# %%
keys = torch.tensor([[1.0, 0.0], [0.9, 0.3], [0.0, 1.0]])  # "cat", "kitten", "car": (3 keys, 2 dims)
values = torch.tensor([10.0, 12.0, 50.0])  # one value per key
query = torch.tensor([1.0, 0.1])  # close to "cat"

scores = keys @ query  # (3,): one similarity per key, the dot product q . k
weights = scores.softmax(dim=0)  # (3,): positive, sum to 1
answer = weights @ values  # a weighted average of the values

contributions = weights * values  # (3,): what each key adds to the answer

print("scores :", scores)
print("weights:", weights.round(decimals=3), "sum =", round(weights.sum().item(), 4))
print("weight x value:", contributions.round(decimals=2), f"-> answer = {answer:.2f}  (a hard lookup of 'cat': 10)")
car_share = (contributions[2] / answer).item()
print(f"'car' gets {weights[2].item():.0%} of the weight but brings {car_share:.0%} of the answer")

# %% [markdown]
# "cat" and "kitten" (similar keys) get most of the weight, yet the answer, 17.75, is far from the 10 of a
# hard lookup. The culprit is "car": it gets only 17% of the weight, but its value, 50, is so far from the
# others that it brings 49% of the answer. A soft lookup **averages**, and a small weight on a far-off value
# still pulls.
#
# A query can make the lookup sharper by being **longer**. The same direction, 4 times as long, multiplies
# every score by 4, and the softmax then favours the best matches much more strongly:

# %%
sharp_query = 4 * query  # same direction as `query`, 4x longer: every score is multiplied by 4
sharp_weights = (keys @ sharp_query).softmax(dim=0)  # (3,)
sharp_contributions = sharp_weights * values
car_share = (sharp_contributions[2] / sharp_contributions.sum()).item()

print("weights:", sharp_weights.round(decimals=3))
print("weight x value:", sharp_contributions.round(decimals=2), f"-> answer = {sharp_contributions.sum():.2f}")
print(f"'car' now brings {car_share:.0%} of the answer")
assert car_share < 0.1  # the sharper query nearly ignores "car"

# %% [markdown]
# Now "car" hardly counts (under 10% of the answer), and the answer lies between the values of "cat" and
# "kitten". How large the scores are decides how *sharp* the lookup is; section 3 comes back to this.
#
# Nothing in the lookup is hard-coded: change the query and the answer moves smoothly. That smoothness is
# what makes attention **differentiable**, so a network can *learn* what to look for.
#
# ## 2. Queries, keys and values from a sentence
#
# In a Transformer, the sequence attends to itself. Every token $x_i$ (a vector of size $d_{\text{model}}$)
# is projected three times, by three learned matrices:
#
# $$q_i = x_i W^Q \quad\text{(what am I looking for?)}, \qquad k_i = x_i W^K \quad\text{(what do I offer?)}, \qquad v_i = x_i W^V \quad\text{(what do I pass on?)}$$
#
# Queries and keys have the same size, $d_k$ (a score is their dot product); values have size $d_v$, the size of
# each output vector. In the diagram below, $T_q$ and $T_k$ count the queries and the keys (equal here: every
# token asks and answers), and $B$, a batch of sequences, comes in section 4.
#
# To see the mechanism work before any training, we build a tiny world by hand. Each token is
# described by its word class, as a one-hot vector (a 1 at its class's index, 0 elsewhere), and $W^Q$ is chosen so that *verbs look for nouns*,
# *determiners look for nouns*, *nouns look for verbs*, *prepositions look for nouns*.

# %%
tokens = ["the", "cat", "sat", "on", "the", "mat"]
classes = ["det", "noun", "verb", "prep"]
word_class = {"the": "det", "cat": "noun", "sat": "verb", "on": "prep", "mat": "noun"}

X = torch.stack([F.one_hot(torch.tensor(classes.index(word_class[t])), len(classes)).float() for t in tokens])
print("X:", tuple(X.shape), "= (T, d_model): one row per token")

looks_for = {"det": "noun", "noun": "verb", "verb": "noun", "prep": "noun"}
W_q = torch.zeros(4, 4)
for c, target in looks_for.items():
    W_q[classes.index(c), classes.index(target)] = 6.0  # a query points at the class it looks for, and is long:
    # the longer a query, the sharper its softmax (section 1), so 6.0 puts most of a row's weight on that class
W_k = torch.eye(4)  # a key simply announces its own class
W_v = torch.eye(4)  # the value passes the class on

Q, K, V = X @ W_q, X @ W_k, X @ W_v  # Q, K: (T, d_k) = (6, 4); V: (T, d_v) = (6, 4), d_v = d_k here
print("Q, K:", tuple(Q.shape), tuple(K.shape), "= (T, d_k);  V:", tuple(V.shape), "= (T, d_v)")

# %% [markdown]
# ### Scores, scaling, softmax, weighted sum
#
# All the dot products at once are one matrix product: $S = QK^\top$, of shape $(T, T)$, with
# $S_{ij} = q_i \cdot k_j$: how much token $i$ wants token $j$. We divide by $\sqrt{d_k}$ (section 3
# explains why), apply a softmax along each **row**, and average the values with those weights.
#
# ![Scaled dot-product attention: Q and K give a score matrix, scaled, masked and soft-maxed row by row into weights that average V](../images/attention_flow.png)
#
# (The diagram's mask step is section 4's; without a mask, as here, the scaled scores go straight to the softmax.)

# %%
d_k = Q.size(-1)
scores = Q @ K.T  # (T, d_k) @ (d_k, T) -> (T, T)
weights = torch.softmax(scores / math.sqrt(d_k), dim=-1)  # (T, T): row i = how token i spreads its attention
output = weights @ V  # (T, T) @ (T, d_v) -> (T, d_v)

print("scores", tuple(scores.shape), "-> weights", tuple(weights.shape), "-> output", tuple(output.shape))
print("every row sums to 1:", torch.allclose(weights.sum(dim=-1), torch.ones(len(tokens))))
print(weights.round(decimals=2))

# %% [markdown]
# The same weights as a heatmap: row = the token that is attending (the query), column = the token
# attended to (the key). `attention_heatmap` comes from `course_utils`; it returns a matplotlib figure.

# %%
attention_heatmap(weights, tokens, title="Hand-built attention: who looks at whom")

# %% [markdown]
# "sat" looks at the nouns "cat" and "mat", each "the" looks at the nouns, the nouns look at the verb.
# Notice what is **missing**: "sat" cannot tell that "cat" is its subject and "mat" is not, and both
# "the"s behave identically. Attention compares *contents* only: it has no idea of word order.
# Chapter 03 adds positions.
#
# ## 3. Why divide by $\sqrt{d_k}$? Measured
#
# Suppose the components of $q$ and $k$ are independent with mean 0 and variance 1. Then
# $q \cdot k = \sum_{m=1}^{d_k} q_m k_m$ is a sum of $d_k$ terms of variance 1, so
# $\operatorname{Var}(q \cdot k) = d_k$: the scores spread out as $d_k$ grows. Let us check that, and see what
# it does to the softmax.
#
# **Predict, then run.** The next cells draw one query and 16 keys with random components of variance 1, for
# $d_k$ from 4 to 1024, and apply the softmax to their scores, once without the division by $\sqrt{d_k}$ and
# once with it. *Without* it, what happens to the largest weight of a row (averaged over many draws) as $d_k$
# grows?
#
# - (a) it stays near $1/16$: random keys look alike, so the weights stay uniform;
# - (b) it stays about the same: the weights always sum to 1, whatever $d_k$;
# - (c) it climbs towards 1: one key takes nearly all the weight;
# - (d) it falls: more dimensions spread the weight over more keys.
#
# Write your letter in the cell below and run it; the cell after it measures the answer.

# %% tags=["exercise"]
### BEGIN SOLUTION
my_prediction = "c"
### END SOLUTION
check_prediction("unscaled-scores", my_prediction)  # your answer: "a", "b", "c" or "d"

# %%
set_seed(0)
dims = [4, 16, 64, 256, 1024]
n_keys, n_trials = 16, 2000
rows = []
for dk in dims:
    q = torch.randn(n_trials, 1, dk)  # (trials, 1 query, d_k)
    k = torch.randn(n_trials, n_keys, dk)  # (trials, 16 keys, d_k)
    raw = (q @ k.transpose(1, 2)).squeeze(1)  # (trials, 16): unscaled scores
    for name, s in (("q.k", raw), ("q.k/sqrt(d_k)", raw / math.sqrt(dk))):
        p = s.softmax(dim=-1)
        # how much gradient can flow back through the softmax: d p_j / d s_j = p_j (1 - p_j)
        rows.append((dk, name, s.var().item(), p.max(dim=-1).values.mean().item(), (p * (1 - p)).sum(-1).mean().item()))

print(f"{'d_k':>5} {'scores':>14} {'variance':>9} {'mean max weight':>16} {'softmax slope':>14}")
for dk, name, var, top, slope in rows:
    print(f"{dk:>5} {name:>14} {var:>9.1f} {top:>16.2f} {slope:>14.3f}")
for dk, name, var, *_ in rows:  # the variance is d_k unscaled, 1 scaled (up to sampling noise)
    assert abs(var / (dk if name == "q.k" else 1) - 1) < 0.05
top_unscaled = [top for _, name, _, top, _ in rows if name == "q.k"]  # mean largest weight, d_k = 4 ... 1024
assert top_unscaled == sorted(top_unscaled) and top_unscaled[-1] > 0.9  # what the prediction above asked

# %%
fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), layout="constrained")
for name, style in (("q.k", "o-"), ("q.k/sqrt(d_k)", "s--")):
    sel = [r for r in rows if r[1] == name]
    for ax, col in zip(axes, (2, 3, 4)):
        ax.plot(dims, [r[col] for r in sel], style, label=name)
for ax, title in zip(axes, ("variance of the scores", "mean largest weight (16 keys)", "softmax slope  Σ p(1-p)")):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("d_k")
    ax.set_title(title)
    ax.legend()
axes[0].set_yscale("log")
plt.close(fig)
fig

# %% [markdown]
# Without scaling (round dots), the variance of the scores grows like $d_k$ (left; printed above: 4.0, 15.9,
# 64.0, 253.7, 1030.8). The softmax becomes ever more peaked (middle): on average its largest weight is
# 0.43 at $d_k = 4$ and 0.96 at $d_k = 1024$, where nearly all the weight sits on a single key.
#
# The right panel measures how much the weights can still move. Differentiating $p_j = e^{s_j} / \sum_m e^{s_m}$
# with respect to its own score gives $\partial p_j / \partial s_j = p_j (1 - p_j)$: the **slope** of weight $j$.
# The gradient reaches the scores through these slopes, so their sum over a row, $\sum_j p_j (1 - p_j)$, says how
# much of it gets there. (The cross terms, $\partial p_j / \partial s_m = -p_j p_m$ for $m \neq j$, add up in size
# to the same sum, since $\sum_{m \neq j} p_m = 1 - p_j$.) A weight near 0 or near 1 has a slope near 0. Unscaled, the slope collapses towards 0 (right: from 0.709 to
# 0.056): a **saturated** softmax barely learns. Dividing by $\sqrt{d_k}$ (squares) brings the variance back to 1 for every $d_k$,
# keeps the largest weight near 0.25 and the slope near 0.87: the weights stay spread out and the gradients
# alive. That is the reason for the $\sqrt{d_k}$ in
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V .$$
#
# ## 4. Masks: who may look at whom
#
# A mask is a boolean matrix laid over the scores. The course uses **one** convention everywhere, the
# one of PyTorch's `F.scaled_dot_product_attention`: **`True` means "may attend"**. A `False` entry
# has its score replaced by $-\infty$ *before* the softmax, so its weight $e^{-\infty} = 0$ is exactly zero,
# and the remaining weights of the row still sum to 1.
#
# ### Padding masks
# Sentences in a batch have different lengths, so the short ones are padded. No token should attend to
# padding. `padding_mask(tokens, pad_id)` is `True` at real tokens, with shape `(B, 1, 1, T)`: the two
# singleton axes broadcast over heads and query positions.
#
# *Heads?* Chapter 02 runs several attentions side by side, called **heads**, so the course's attention
# tensors carry a head axis: queries, keys and values of shape $(B, h, T, d)$, weights of shape
# $(B, h, T_q, T_k)$. Here there is a single head, $h = 1$.

# %%
PAD = 0
batch = torch.tensor([[5, 6, 7, 8], [5, 9, PAD, PAD]])  # two sentences, the second padded: (B=2, T=4)
mask = padding_mask(batch, PAD)
print("padding mask:", tuple(mask.shape), "= (B, 1, 1, T)")
print(mask[:, 0, 0].int())

set_seed(0)
x = torch.randn(2, 1, 4, 8)  # (B, h=1 head, T, d): stand-ins for the token vectors
_, w = scaled_dot_product_attention(x, x, x, mask)  # course_utils' version: returns (output, weights)
print("weights:", tuple(w.shape), "= (B, h, T_q, T_k); those of sentence 2, whose last two tokens are padding:")
print(w[1, 0].round(decimals=2))
print("row sums:", w[1, 0].sum(dim=-1))
assert (w[1, 0, :, 2:] == 0).all()  # exactly 0, not merely small

# %% [markdown]
# Columns 2 and 3, the padding *keys*, get exactly 0 from every query (the cell asserts `== 0`), and each
# row still sums to 1 over the two real tokens. (Rows 2 and 3 are padding *queries*: their outputs are
# computed but later ignored by the loss; chapter 05 shows how.)
#
# ### Causal masks
# A model that generates text one token at a time must not peek at the future: position $i$ may only
# attend to positions $j \le i$. That is the lower triangle:

# %%
print(causal_mask(5).int())

# %%
_, w = scaled_dot_product_attention(Q, K, V, causal_mask(len(tokens)))  # (T, T) = (6, 6)
for i in (0, 1, 2):  # the rows of the first "the", "cat" and "sat", without and with the mask
    print(f"{tokens[i]:>4}: no mask", " ".join(f"{x:.2f}" for x in weights[i].tolist()))
    print(f"{'':>4}  causal ", " ".join(f"{x:.2f}" for x in w[i].tolist()))
attention_heatmap(w, tokens, title="The hand-built attention with a causal mask")

# %% [markdown]
# The first "the" can only look at itself (weight 1.00). "cat" looks for a verb, but "sat" comes later and
# is hidden, so it spreads its attention evenly over what it may see: 0.50 on "the", 0.50 on itself.
# "sat" can no longer see "mat": the 0.45 it gave "mat" is gone, and the softmax over the keys it may still
# see gives "cat" 0.91 (printed above). Each row is renormalised over its visible keys. Note that each
# heatmap scales its colours to its own largest weight (0.80 without the mask, 1.00 with it): compare the
# numbers written in the cells, not the colours of the two figures.
#
# ### The NaN trap
# What if a row of the mask is **all** `False`, so a query has nothing at all to attend to? Then every
# score in that row is $-\infty$ and the softmax computes $0/0$:

# %%
scores = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
row_mask = torch.tensor([[True, True, False], [False, False, False]])  # the second query may see nothing
naive = scores.masked_fill(~row_mask, float("-inf")).softmax(dim=-1)
print("naive softmax:\n", naive)
print("one NaN poisons everything it touches: sum of the outputs =", (naive @ torch.ones(3, 2)).sum().item())

# %% [markdown]
# One NaN spreads through every later layer and into the loss, and training is ruined. It happens more
# easily than you would think, for example when a mask hides padding *queries* as well as keys, or when a
# mask written for another convention is passed in (PyTorch's `nn.MultiheadAttention` uses `True` =
# *blocked*). A popular "fix" is worse than it looks: filling with a large negative number such as
# `-1e9` instead of $-\infty$ avoids the NaN, but gives such a row **uniform** weights over the masked
# keys, so it silently attends to padding:

# %%
print("softmax with -1e9:\n", scores.masked_fill(~row_mask, -1e9).softmax(dim=-1))

# %% [markdown]
# The second query, which may see nothing, spreads $1/3$ over each of the three keys it must not see.
#
# `course_utils.scaled_dot_product_attention` gives such a row all-zero weights and a zero output,
# exactly what `F.scaled_dot_product_attention` returns. To give both functions the scores above, we
# pass the scores as queries and the identity matrix as keys, so that $QK^\top$ is the scores; the
# queries are multiplied by $\sqrt{3}$ to undo the division by $\sqrt{d_k} = \sqrt{3}$:

# %%
v = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (T_k, d_v) = (3, 2)
q = scores * math.sqrt(3)  # (T_q, d_k) = (2, 3): with identity keys, Q K^T / sqrt(3) = scores
ours, w = scaled_dot_product_attention(q, torch.eye(3), v, row_mask)
theirs = F.scaled_dot_product_attention(q, torch.eye(3), v, attn_mask=row_mask)
print("weights:\n", w.round(decimals=4))
print("outputs:\n", ours.round(decimals=4))
assert (w[1] == 0).all() and (ours[1] == 0).all()  # nothing to see: zero weights, zero output
print("same as PyTorch:", torch.allclose(ours, theirs))

# %% [markdown]
# ## 5. Self-attention and cross-attention
#
# Nothing forces queries, keys and values to come from the same sequence.
# - **Self-attention:** $Q$, $K$, $V$ all come from the same sequence: shape $(T, T)$ weights.
# - **Cross-attention:** $Q$ comes from one sequence (length $T_q$), $K$ and $V$ from another (length
#   $T_k$). The weights are $(T_q, T_k)$ and the output has one row **per query**. In a translation
#   model the *decoder* asks (queries) and the *encoder's output* answers (keys and values): chapter 05.

# %%
set_seed(0)
d = 8
source = torch.randn(7, d)  # e.g. 7 encoded words of a source sentence: (T_k, d)
target = torch.randn(3, d)  # 3 target words written so far: (T_q, d)
out, w = scaled_dot_product_attention(query=target, key=source, value=source)
print(
    "query",
    tuple(target.shape),
    "key/value",
    tuple(source.shape),
    "-> weights",
    tuple(w.shape),
    "-> output",
    tuple(out.shape),
)

# %% [markdown]
# The output has the length of the **queries**. That is how to spot the classic bug of taking the
# queries from the encoder in cross-attention: the output then has the source's length, which only goes
# unnoticed when source and target happen to be equally long.
#
# ## 6. Your version, the course's, and PyTorch's
#
# Now write everything above as one function, `attention`, for any number of leading batch dimensions
# `(..., T, d_k)`: the scores, the division by $\sqrt{d_k}$, the mask, the softmax over the keys, the weighted
# sum of the values. The checker below runs it with $T_q \neq T_k$, with and without masks, and compares it with
# `course_utils.scaled_dot_product_attention` and with PyTorch's fused `F.scaled_dot_product_attention`; an answer
# that calls one of those (or `nn.MultiheadAttention`) instead of writing the steps is sent back. It also runs your
# function on bfloat16 inputs (a 16-bit float format GPUs compute in, chapter 02's §7): a step may compute in float32,
# but return the result in the inputs' dtype. If you return the pair (output, weights), it checks the weights too.


# %% tags=["exercise"]
def attention(query, key, value, mask=None):
    """Scaled dot-product attention: softmax(Q K^T / sqrt(d_k)) V.

    query (..., T_q, d_k), key (..., T_k, d_k), value (..., T_k, d_v); mask: None, or bool (True = may attend)
    broadcastable to (..., T_q, T_k). Returns (output (..., T_q, d_v), weights (..., T_q, T_k)).
    Hint: key.transpose(-2, -1) swaps the last two axes; scores.masked_fill(~mask, float("-inf")) hides the
    scores where the mask is False; the softmax runs over the keys, dim=-1.
    """
    ### BEGIN SOLUTION
    d_k = query.size(-1)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)  # (..., T_q, T_k)
    return weights @ value, weights  # (..., T_q, d_v), (..., T_q, T_k)
    ### END SOLUTION


check_scaled_dot_product_attention(attention)

# %% [markdown]
# The course's own version, `course_utils.scaled_dot_product_attention`, adds input checks and the NaN-safe
# rows of section 4. It agrees with PyTorch's fused `F.scaled_dot_product_attention` on batched inputs with
# $T_q \neq T_k$, with and without a mask:

# %%
set_seed(0)
q, k, v = torch.randn(2, 4, 5, 16), torch.randn(2, 4, 9, 16), torch.randn(2, 4, 9, 16)  # (B, h, T, d_k)
m = torch.rand(2, 1, 5, 9) > 0.3
m[..., 0] = True  # every query may see at least one key
for mask in (None, m):
    course, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, T_q, d_v) = (2, 4, 5, 16)
    torch.testing.assert_close(course, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
print("✓ course_utils.scaled_dot_product_attention == F.scaled_dot_product_attention")

# %% [markdown]
# Your `attention` spells out every step. The course's `scaled_dot_product_attention`, which this chapter has
# used since section 4, computes the same thing; the rest of the chapter and of the course use it, so
# everything below runs even before your version is finished.
#
# ## 7. Interactive: hover over the attention
#
# The same hand-built weights as an interactive chart (Altair): hover a cell to read the query, the key and
# the exact weight; the hovered row is highlighted.
#
# Such charts are drawn by JavaScript that, by default, is loaded from the internet. With no internet (a
# classroom without Wi-Fi), run `from course_utils import use_offline_charts; use_offline_charts()` first
# (it needs the `vl-convert-python` package), or set the environment variable `COURSE_OFFLINE_CHARTS=1`
# before starting Jupyter: each chart then carries its own JavaScript.

# %% tags=["nbval-ignore-output"]
attention_chart(weights, tokens, title="Hand-built attention")

# %% [markdown]
# ## 8. The cost: $O(T^2)$
#
# The weight matrix has one entry per (query, key) pair: $T^2$ numbers per head. Doubling the sequence
# length therefore exactly quadruples the memory of the weights, and multiplies the arithmetic by four: the two
# matrix products, $QK^\top$ and the weights times $V$, each cost $T^2 d_k$ multiply-adds per head. The time
# follows only roughly: other costs and the machine's caches move the measured ratio either way. We time one attention call with $h = 4$ heads for
# growing $T$, keeping the best of 5 runs (timings vary from machine to machine and from run to run; look
# at the ratios):

# %% tags=["nbval-ignore-output"]
set_seed(0)
lengths = [256, 512, 1024, 2048]
seconds, mebibytes = [], []
for T in lengths:
    q = k = v = torch.randn(1, 4, T, 64)  # (B=1, h=4, T, d_k=64)
    scaled_dot_product_attention(q, k, v)  # warm-up
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        _, w = scaled_dot_product_attention(q, k, v)  # w: (1, 4, T, T)
        runs.append(time.perf_counter() - start)
    seconds.append(min(runs))  # the best of 5 runs: the least disturbed by other programs
    mebibytes.append(w.numel() * w.element_size() / 2**20)  # float32: 4 bytes a weight; 1 MiB = 2**20 bytes
    print(f"T = {T:5d}: {1000 * seconds[-1]:7.1f} ms, weights {mebibytes[-1]:6.1f} MiB")

time_ratios = [seconds[i] / seconds[i - 1] for i in range(1, len(lengths))]
memory_ratios = [mebibytes[i] / mebibytes[i - 1] for i in range(1, len(lengths))]
print("each doubling of T multiplies the time by  ", ", ".join(f"{r:.1f}" for r in time_ratios))
print("                      ... and the memory by", ", ".join(f"{r:.1f}" for r in memory_ratios))
assert memory_ratios == [4.0, 4.0, 4.0]  # T x T weights: exactly 4 times the memory per doubling

# %% [markdown]
# The memory ratios are exactly 4 (the cell asserts it). The time ratios are noisier, and differ from
# machine to machine and from run to run: on short sequences, fixed overheads (and other programs running
# at the same time) weigh as much as the arithmetic; on long ones the $T^2$ work dominates, and a doubling
# costs about 4 times as much, or more once the weights no longer fit in the processor's caches.
#
# This quadratic cost is why long contexts are expensive. Fused kernels such as
# `F.scaled_dot_product_attention` (FlashAttention on GPUs) compute the weights tile by tile and never store
# the whole $T \times T$ matrix, so the quadratic memory of the weights goes away; they still do $O(T^2)$
# work, so the time stays quadratic.
#
# ## Pitfalls
#
# | Mistake | What happens | Fix |
# | --- | --- | --- |
# | forgetting $/\sqrt{d_k}$ | softmax saturates for large $d_k$, gradients vanish (section 3) | divide the scores by `math.sqrt(d_k)`; by $\sqrt{d_k}$, not $\sqrt{d_{\text{model}}}$ ([bug lab: bug 7](09_bug_lab.ipynb#bug-7)) |
# | `softmax(dim=-2)` | each **key's** weights sum to 1 instead of each query's | softmax over the keys: `dim=-1` |
# | a mask of the other convention | attends exactly where it must not (PyTorch's `nn.MultiheadAttention` uses True = blocked) | one convention; convert once, with `~mask`, at the border ([bug lab: bug 8](09_bug_lab.ipynb#bug-8)) |
# | a query row with nothing to attend to | NaN everywhere, or silent attention to padding with `-1e9` | give such rows zero weight (as here), or never build them |
# | a `(B, T)` padding mask used as is | broadcasts against the wrong axes, or fails | reshape to `(B, 1, 1, T)` as `padding_mask` does ([bug lab: bug 9](09_bug_lab.ipynb#bug-9)) |
# | cross-attention queries from the encoder | output has the source's length; unnoticed when lengths match | queries from the decoder, keys/values from the encoder ([bug lab: bug 3](09_bug_lab.ipynb#bug-3)) |
#
# ## Summary
#
# - Attention is a soft dictionary lookup: scores $QK^\top$, softmax over the keys, weighted sum of $V$.
# - Dividing by $\sqrt{d_k}$ keeps the score variance at 1, so the softmax does not saturate.
# - Masks (True = may attend) set scores to $-\infty$; masked weights are exactly 0.
# - Self-attention: $Q, K, V$ from one sequence. Cross-attention: $Q$ from one, $K, V$ from another.
# - Attention alone ignores order, and costs $O(T^2)$ time, and $O(T^2)$ memory when the weights are stored.
#
# ## Exercises
#
# {{EXERCISES}}
#
# **Exercise 1.** Write `my_causal_mask(size)`: a bool `(size, size)` tensor, True where query $i$ may
# attend to key $j$. Hint: `torch.tril`.


# %% tags=["exercise"]
def my_causal_mask(size):
    ### BEGIN SOLUTION
    return torch.tril(torch.ones(size, size, dtype=torch.bool))
    ### END SOLUTION


check_causal_mask(my_causal_mask)

# %% [markdown]
# **Exercise 2.** Write `my_padding_mask(tokens, pad_id)`: from token ids `(B, T)`, a bool mask of shape
# `(B, 1, 1, T)` that is True at real tokens.


# %% tags=["exercise"]
def my_padding_mask(tokens, pad_id):
    ### BEGIN SOLUTION
    return (tokens != pad_id)[:, None, None, :]
    ### END SOLUTION


check_padding_mask(my_padding_mask)

# %% [markdown]
# **Exercise 3: a sliding-window mask.** Some language models that read very long texts (Mistral, for one) let each
# position attend only to the last few positions: itself and the `window - 1` before it. (Encoders such as
# Longformer use a window that looks both ways.) Write
# `sliding_window_mask(size, window)`: a bool `(size, size)` tensor, True where query $i$ may attend to key $j$,
# that is where $i - \text{window} < j \le i$. With `window >= size` it is the causal mask. Each row then has at
# most `window` True entries. Hint: `i = torch.arange(size)[:, None]` (a column of queries) and
# `j = torch.arange(size)` (a row of keys) broadcast to `(size, size)`; combine two comparisons with `&`.


# %% tags=["exercise"]
def sliding_window_mask(size, window):
    """(size, size) bool mask: query i may attend to keys i - window < j <= i."""
    ### BEGIN SOLUTION
    i, j = torch.arange(size)[:, None], torch.arange(size)  # (size, 1) queries, (size,) keys
    return (j <= i) & (j > i - window)  # (size, size)
    ### END SOLUTION


check_sliding_window_mask(sliding_window_mask)

# %% [markdown]
# **Exercise 4: mean pooling without the padding.** To classify a whole sentence, a model often averages its
# token vectors into one. In a padded batch the average must leave the padding out. Write
# `masked_mean(x, mask)`: from `x` of shape `(B, T, d)` and a bool `mask` of shape `(B, T)`, True at real
# tokens, return `(B, d)`: each sequence's mean over its real tokens only. Hint: `mask.unsqueeze(-1)` has shape
# `(B, T, 1)` and broadcasts over `d`; divide each sum by that sequence's number of real tokens, not by $T$.


# %% tags=["exercise"]
def masked_mean(x, mask):
    """x (B, T, d), mask (B, T) bool (True = real token) -> (B, d): the mean over the real tokens.
    Every sequence has at least one real token."""
    ### BEGIN SOLUTION
    keep = mask.unsqueeze(-1).to(x.dtype)  # (B, T, 1)
    return (x * keep).sum(dim=1) / keep.sum(dim=1)  # (B, d) / (B, 1)
    ### END SOLUTION


check_masked_mean(masked_mean)

# %% [markdown]
# **Exercise 5: attention with an additive bias.** A mask is a bias of $0$ (may attend) or $-\infty$ (may not)
# added to the scores. Some models add a finite, float bias instead: ALiBi penalises far-away keys by a
# slope times the distance, T5 adds a learned bias per distance. Write `attention_with_bias(query, key, value,
# bias)`: $\mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + \text{bias}\right)V$, with `query`
# `(..., T_q, d_k)`, `key` `(..., T_k, d_k)`, `value` `(..., T_k, d_v)` and a float `bias` broadcastable to
# `(..., T_q, T_k)`. Return the output `(..., T_q, d_v)`, or the pair (output, weights). Hint: where does
# `masked_fill` act in your `attention`? The bias acts there, on the scaled scores. (`F.scaled_dot_product_attention`
# adds a float `attn_mask` this way, so an answer that calls it is sent back, as in section 6.)


# %% tags=["exercise"]
def attention_with_bias(query, key, value, bias):
    """softmax(Q K^T / sqrt(d_k) + bias) V: query (..., T_q, d_k), bias (..., T_q, T_k) -> (..., T_q, d_v)."""
    ### BEGIN SOLUTION
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1)) + bias  # (..., T_q, T_k)
    weights = scores.softmax(dim=-1)  # (..., T_q, T_k)
    return weights @ value, weights  # (..., T_q, d_v), (..., T_q, T_k)
    ### END SOLUTION


check_attention_with_bias(attention_with_bias)

# %% [markdown]
# **Going further.** Change the hand-built $W^Q$ in section 2 so that nouns look at determiners, and
# predict the heatmap before you draw it.
#
# Next: [02 · Multi-head attention](02_multi_head_attention.ipynb): several attentions side by side,
# each with its own projections.
