# %% [markdown]
# # 02 · Multi-head attention
#
# {{COLAB_BADGE}}
#
# *Transformers from Scratch*, chapter 2 of 7 · previous: [01 · Attention](01_attention.ipynb) ·
# next: [03 · Positional encoding](03_positional_encoding.ipynb)
#
# One attention gives every position one weighted average of the others: one question asked, one answer.
# A word usually needs several kinds of context at once. Multi-head attention runs several attentions side
# by side, each in its own small subspace, and concatenates the answers.
#
# **You will learn**
# - the projections $W_i^Q, W_i^K, W_i^V$ of each head, and the output projection $W^O$;
# - the reshape/transpose that splits `(B, T, d_model)` into heads `(B, h, T, d_k)` and back, shape by shape;
# - why the number of heads does not change the number of parameters;
# - that `course_utils.MultiHeadAttention` equals PyTorch's `nn.MultiheadAttention` (whose masks mean the opposite);
# - that heads really do learn **different** jobs: a tiny model trained in seconds, measured head by head.
#
# **Prerequisites:** chapter 01 (scaled dot-product attention, masks). **Time:** about 45 minutes.

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
    MultiHeadAttention,
    PositionalEncoding,
    TrainConfig,
    attention_chart,
    attention_grid,
    count_parameters,
    get_device,
    padding_mask,
    record_attention,
    scaled_dot_product_attention,
    set_seed,
    train,
)
from course_utils.checks import check_merge_heads, check_mha_parameter_count, check_split_heads

set_seed(0)
device = get_device()
print(f"PyTorch {torch.__version__}, running on {device}")

# %% [markdown]
# ## 1. Several heads, one formula
#
# $$\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \ldots, \mathrm{head}_h)\, W^O,
# \qquad \mathrm{head}_i = \mathrm{Attention}(Q W_i^Q,\; K W_i^K,\; V W_i^V)$$
#
# with $W_i^Q, W_i^K \in \mathbb{R}^{d_{\text{model}} \times d_k}$, $W_i^V \in \mathbb{R}^{d_{\text{model}} \times d_v}$,
# $W^O \in \mathbb{R}^{h d_v \times d_{\text{model}}}$ and, as in the paper, $d_k = d_v = d_{\text{model}} / h$.
# The paper uses $d_{\text{model}} = 512$ and $h = 8$ heads of $d_k = 64$.
#
# Each head projects the tokens into its **own** small space, so each can ask a different question
# ("who is my subject?", "what came just before me?"). Because every head is $h$ times narrower, all of
# them together cost about as much as one full-width attention.
#
# ## 2. $h$ small projections are one big one
#
# Nobody stores $h$ separate $d_{\text{model}} \times d_k$ matrices: one
# `nn.Linear(d_model, d_model)` computes all $h$ heads' queries at once, and head $i$ owns the $i$-th block
# of $d_k$ output features. Check it on head 2 of a random projection:

# %%
set_seed(0)
B, T, d_model, n_heads = 2, 5, 16, 4
d_k = d_model // n_heads
x = torch.randn(B, T, d_model)  # (B, T, d_model)
w_q = nn.Linear(d_model, d_model)

all_heads = w_q(x)  # (B, T, d_model): every head's queries side by side
head = 2
W_2 = w_q.weight[head * d_k : (head + 1) * d_k]  # (d_k, d_model): the rows that belong to head 2
b_2 = w_q.bias[head * d_k : (head + 1) * d_k]
q_head2 = x @ W_2.T + b_2  # (B, T, d_k): head 2's own projection, computed alone
torch.testing.assert_close(all_heads[..., head * d_k : (head + 1) * d_k], q_head2)
print(f"one Linear({d_model}, {d_model}) = {n_heads} heads of d_k = {d_k}: head {head}'s block matches")

# %% [markdown]
# ## 3. Splitting into heads and merging them back, shape by shape
#
# The only tricky part of multi-head attention is bookkeeping. The whole journey first, then each step in code:
#
# ![Shapes through multi-head attention: project, view as heads, transpose, attend, transpose back, merge, project](../images/multi_head_shapes.png)

# %%
set_seed(0)
w_k, w_v, w_o = (nn.Linear(d_model, d_model) for _ in range(3))

q = w_q(x)
print("1. project            q = w_q(x)            ", tuple(q.shape), "(B, T, d_model)")
q = q.view(B, T, n_heads, d_k)
print("2. split the features q.view(B, T, h, d_k)  ", tuple(q.shape), "(B, T, h, d_k)")
q = q.transpose(1, 2)
print("3. heads before time  q.transpose(1, 2)     ", tuple(q.shape), "(B, h, T, d_k)")
k = w_k(x).view(B, T, n_heads, d_k).transpose(1, 2)  # (B, h, T, d_k)
v = w_v(x).view(B, T, n_heads, d_k).transpose(1, 2)  # (B, h, T, d_k)
out, weights = scaled_dot_product_attention(q, k, v)
print("4. attention, per head weights               ", tuple(weights.shape), "(B, h, T, T)")
print("                       output                ", tuple(out.shape), "(B, h, T, d_k)")
out = out.transpose(1, 2)
print("5. time before heads  out.transpose(1, 2)   ", tuple(out.shape), "(B, T, h, d_k)")
out = out.reshape(B, T, d_model)
print("6. concatenate heads  out.reshape(B, T, d)  ", tuple(out.shape), "(B, T, h * d_k)")
out = w_o(out)
print("7. mix the heads      w_o(out)              ", tuple(out.shape), "(B, T, d_model)")

# %% [markdown]
# Step 3 matters: attention works on the last two axes, `(T, d_k)`, and treats everything before them as
# a batch. Moving the head axis in front of $T$ makes PyTorch run all heads in one batched matrix product.
#
# **A classic bug** is to skip the transpose and write `x.view(B, h, T, d_k)` directly. The shape is right,
# so nothing complains, but the values are scrambled. Number the features to see it:

# %%
demo = torch.arange(T * d_model).view(1, T, d_model)  # entry = 16 * position + feature
right = demo.view(1, T, n_heads, d_k).transpose(1, 2)  # (1, h, T, d_k)
wrong = demo.view(1, n_heads, T, d_k)  # same shape...
print("head 0, right: positions of its rows =", (right[0, 0, :, 0] // d_model).tolist())
print("head 0, wrong: positions of its rows =", (wrong[0, 0, :, 0] // d_model).tolist(), "<- mixed up")

# %% [markdown]
# With the correct split, head 0's rows are positions 0, 1, 2, 3, 4. With the plain `view`, "head 0"
# holds pieces of positions 0 and 1 only, spread over five fake time steps.
#
# ## 4. The module
#
# Here is the whole thing as an `nn.Module`. The names follow the paper: `w_q`, `w_k`, `w_v`, `w_o`.


# %%
class MyMultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be divisible by n_heads"
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d_model, d_model) for _ in range(4))

    def forward(self, query, key, value, mask=None):
        B, T_q, d_model = query.shape
        T_k = key.size(1)
        q = self.w_q(query).view(B, T_q, self.n_heads, self.d_k).transpose(1, 2)  # (B, h, T_q, d_k)
        k = self.w_k(key).view(B, T_k, self.n_heads, self.d_k).transpose(1, 2)  # (B, h, T_k, d_k)
        v = self.w_v(value).view(B, T_k, self.n_heads, self.d_k).transpose(1, 2)  # (B, h, T_k, d_k)
        out, weights = scaled_dot_product_attention(q, k, v, mask)  # (B, h, T_q, d_k), (B, h, T_q, T_k)
        out = out.transpose(1, 2).reshape(B, T_q, d_model)  # (B, T_q, h * d_k)
        return self.w_o(out), weights  # (B, T_q, d_model) and per-head weights, the pair nn.MultiheadAttention returns


# %% [markdown]
# ### Equal to `course_utils` and to PyTorch
#
# `course_utils.MultiHeadAttention` has the same parameter names, so it can load our module's weights
# directly. It adds input checks with clear messages, and like `nn.MultiheadAttention` it returns a pair
# `(output, weights)`. Unlike PyTorch's module, which computes the weights by default (averaged over the heads
# unless told `average_attn_weights=False`), ours computes them only when asked for with `need_weights=True`, per
# head, and returns `None` otherwise. Then it runs PyTorch's fused kernel `F.scaled_dot_product_attention`, which
# computes the same output without ever storing the $T_q \times T_k$ weights: faster, and lighter on memory. Both
# paths are checked below.
#
# PyTorch's `nn.MultiheadAttention` packs $W^Q, W^K, W^V$ into one `in_proj_weight` of shape
# `(3 d_model, d_model)`; `MultiHeadAttention.from_torch` unpacks it. **Careful with masks:** PyTorch's
# boolean `attn_mask` and `key_padding_mask` mean `True` = *blocked*, the opposite of ours. We convert
# with `~` at that border, and only there. The test uses cross-attention ($T_q \neq T_k$) with padding:

# %%
set_seed(0)
mine = MyMultiHeadAttention(d_model, n_heads)
course = MultiHeadAttention(d_model, n_heads)
course.load_state_dict(mine.state_dict())  # same names: w_q, w_k, w_v, w_o

torch_mha = nn.MultiheadAttention(d_model, n_heads, batch_first=True)
from_torch = MultiHeadAttention.from_torch(torch_mha)
mine_like_torch = MyMultiHeadAttention(d_model, n_heads)
mine_like_torch.load_state_dict(from_torch.state_dict())

query = torch.randn(B, 3, d_model)  # T_q = 3 target positions
memory = torch.randn(B, 6, d_model)  # T_k = 6 source positions
src = torch.tensor([[7, 8, 9, 4, 0, 0], [5, 6, 7, 8, 9, 3]])  # 0 = padding
mask = padding_mask(src, 0)  # ours: True = may attend, (B, 1, 1, T_k)

out, weights = mine(query, memory, memory, mask)  # (B, 3, d_model), (B, h, 3, 6)
course_out, course_weights = course(query, memory, memory, mask, need_weights=True)  # the readable path
fused_out, no_weights = course(query, memory, memory, mask)  # the default: the fused kernel, no weights
torch.testing.assert_close(out, course_out)
torch.testing.assert_close(weights, course_weights)
torch.testing.assert_close(out, fused_out)
assert no_weights is None

expected, expected_weights = torch_mha(
    query, memory, memory, key_padding_mask=~mask[:, 0, 0], average_attn_weights=False
)
out, weights = mine_like_torch(query, memory, memory, mask)
torch.testing.assert_close(out, expected)
torch.testing.assert_close(weights, expected_weights)
print("✓ MyMultiHeadAttention == course_utils.MultiHeadAttention (both paths) == nn.MultiheadAttention (weights too)")

# %% [markdown]
# From here on, later chapters use `course_utils.MultiHeadAttention`. Its checks turn the easy mistakes
# into clear messages:

# %%
try:
    MultiHeadAttention(d_model=10, n_heads=3)
except ValueError as error:
    print("ValueError:", error)

# %% [markdown]
# ## 5. How many parameters?
#
# Four $d_{\text{model}} \times d_{\text{model}}$ matrices plus four bias vectors: $4 d_{\text{model}}^2 + 4 d_{\text{model}}$,
# **whatever the number of heads**: more heads means more, narrower heads, not more weights.

# %%
for h in (1, 2, 4, 8):
    print(f"d_model=512, n_heads={h}: {count_parameters(MultiHeadAttention(512, h)):,} parameters")
print(f"4 * 512**2 + 4 * 512 = {4 * 512**2 + 4 * 512:,}; nn.MultiheadAttention(512, 8): "
      f"{count_parameters(nn.MultiheadAttention(512, 8)):,}")  # fmt: skip

# %% [markdown]
# ## 6. Do heads really learn different things? An experiment
#
# Let us train a tiny model on a task that needs **two different kinds of attention** at once:
#
# - each input is 12 random digits; one of them, at a random place, is marked (shown as `*7`);
# - at every position the model must output two things: the **previous** digit, and the **marked** digit.
#
# Finding the previous digit is a question about *position* (look one step back); finding the marked digit
# is a question about *content* (look for the marker, wherever it is). The model has one multi-head
# attention layer with **two heads**, positions added by the sinusoidal encoding of chapter 03, and two
# linear read-outs. Nothing tells a head what to do.

# %%
T_TASK = 12


def marker_batch(n, generator):
    """Digits 0-9; the marked one is stored as 10 + digit. Returns inputs, both targets, marker positions."""
    x = torch.randint(0, 10, (n, T_TASK), generator=generator)  # (n, T)
    where = torch.randint(0, T_TASK, (n,), generator=generator)  # (n,): the marker's position
    rows = torch.arange(n)
    marked = x[rows, where].clone()  # (n,): the marked digit
    x[rows, where] += 10
    previous = torch.cat([torch.full((n, 1), -100), x[:, :-1] % 10], dim=1)  # (n, T); -100: no previous at t=0
    return x, previous, marked[:, None].expand(n, T_TASK), where


class TwoJobModel(nn.Module):
    def __init__(self, d_model=32, n_heads=2):
        super().__init__()
        self.digit = nn.Embedding(10, d_model)  # which digit
        self.is_marked = nn.Embedding(2, d_model)  # marked or not
        self.positions = PositionalEncoding(d_model, max_len=T_TASK)
        self.attn = MultiHeadAttention(d_model, n_heads)
        self.read_previous = nn.Linear(d_model, 10)
        self.read_marked = nn.Linear(d_model, 10)

    def forward(self, x):  # x: (B, T)
        h = self.positions(self.digit(x % 10) + self.is_marked((x >= 10).long()))  # (B, T, d_model)
        h, _ = self.attn(h, h, h)  # (B, T, d_model); the weights are not needed to train
        return self.read_previous(h), self.read_marked(h)  # two (B, T, 10) logits


def labels(x):
    return ["*" + str(int(t) - 10) if t >= 10 else str(int(t)) for t in x]


x, previous, marked, where = marker_batch(1, torch.Generator().manual_seed(7))
print("input   :", " ".join(labels(x[0])))
print("previous:", previous[0].tolist())
print("marked  :", marked[0].tolist())

# %% [markdown]
# Training takes a few seconds with `course_utils.train`, a standard loop (AdamW, warm-up, a progress
# bar) that chapter 06 takes apart. The configuration is printed first.

# %% tags=["nbval-ignore-output"]
set_seed(0)
config = TrainConfig(steps=600, batch_size=64, lr=1e-2, warmup_steps=50, schedule="cosine", label_smoothing=0.0)
print(config)
model = TwoJobModel().to(device)
data = torch.Generator().manual_seed(0)


def batches():
    while True:
        x, previous, marked, _ = marker_batch(config.batch_size, data)
        yield x, previous, marked


def loss_fn(model, x, previous, marked):
    logits_previous, logits_marked = model(x)
    return F.cross_entropy(logits_previous.flatten(0, 1), previous.flatten(), ignore_index=-100) + F.cross_entropy(
        logits_marked.flatten(0, 1), marked.flatten()
    )


history = train(model, batches(), loss_fn, config, device=device, desc="two-job model")

# %% [markdown]
# Now measure on 1,000 fresh sequences: how accurate is the model, and where does each head look? For each
# head we average its weight on the previous position, on the marked position, and on the token itself.
#
# The model's `forward` throws the weights away. To look inside any model, `record_attention(model)` asks every
# `MultiHeadAttention` in it for its weights (`need_weights=True`) while the `with` block runs, and keeps those of
# each module's latest call under the module's name: here `"attn"`, because the module is `model.attn`.

# %% tags=["nbval-ignore-output"]
model.eval()  # evaluation from here on (this model has no dropout, but the habit matters)
x, previous, marked, where = (t.to(device) for t in marker_batch(1000, torch.Generator().manual_seed(1234)))
with torch.no_grad(), record_attention(model) as attention:
    logits_previous, logits_marked = model(x)
print({name: tuple(weights.shape) for name, weights in attention.items()}, "= (B, h, T, T)")
seen = previous != -100
accuracy_previous = (logits_previous.argmax(-1)[seen] == previous[seen]).float().mean().item()
accuracy_marked = (logits_marked.argmax(-1) == marked).float().mean().item()
print(f"accuracy: previous digit {accuracy_previous:.1%}, marked digit {accuracy_marked:.1%}")
assert min(accuracy_previous, accuracy_marked) > 0.95, "the two-job model should solve both jobs"

w = attention["attn"]  # (1000, h, T, T)
t = torch.arange(1, T_TASK)
on_previous = w[:, :, t, t - 1].mean(dim=(0, 2))  # (h,)
on_marker = w[torch.arange(1000), :, :, where].mean(dim=(0, 2))  # (h,)
on_itself = w.diagonal(dim1=-2, dim2=-1).mean(dim=(0, 2))  # (h,)
print(f"{'':8}{'previous':>10}{'marker':>10}{'itself':>10}")
for i in range(w.size(1)):
    print(f"head {i}: {on_previous[i]:10.2f}{on_marker[i]:10.2f}{on_itself[i]:10.2f}")
job = {"previous": int(on_previous.argmax()), "marker": int(on_marker.argmax())}
if job["previous"] != job["marker"]:
    print(f"-> head {job['previous']} looks back one step; head {job['marker']} finds the marker.")
else:
    print("-> in this run one head does both jobs: try another seed (nothing forces heads to split the work).")

# %% [markdown]
# The heads split the work: one puts most of its weight one step back, the other on the marked digit, and
# neither was told to. Seeing is believing; here are both heads on one sequence (`attention_grid` from
# `course_utils`):

# %% tags=["nbval-ignore-output"]
x1 = x[:1]  # one sequence: (1, T)
with torch.no_grad(), record_attention(model) as attention:
    model(x1)
one = attention["attn"][0]  # (h, T, T)
attention_grid(one, labels(x1[0]), titles=["head 0", "head 1"], suptitle="Two heads, two jobs")

# %% [markdown]
# One head draws a diagonal just below the main one (each position looks one step back); the other draws a
# vertical stripe at the marked digit (every position looks there). The same, interactively: pick the head
# in the menu and hover the cells.

# %% tags=["nbval-ignore-output"]
attention_chart(one, labels(x1[0]), head_names=["head 0", "head 1"], title="Pick a head")

# %% [markdown]
# This is what "multi-head" buys: one head alone would have to split a single softmax between the two
# positions and could not tell the two digits apart. Real models have many heads per layer; some
# specialise as cleanly as these, many do not, which is why such claims must be measured, as here.
#
# ## Pitfalls
#
# | Mistake | What happens | Fix |
# | --- | --- | --- |
# | `x.view(B, h, T, d_k)` without transpose | right shape, scrambled values, no error | `view(B, T, h, d_k).transpose(1, 2)` |
# | merging with `reshape` before transposing back | heads and positions interleaved | `transpose(1, 2)` first, then `reshape(B, T, d_model)` |
# | `.view` after a transpose | `RuntimeError: view size is not compatible` | `.reshape`, or `.contiguous().view` |
# | passing our mask to `nn.MultiheadAttention` | attends exactly where it must not | torch wants True = blocked: pass `~mask` |
# | a mask without the head axis | `(B, T, T)` does not broadcast against `(B, h, T, T)` | `(B, 1, T, T)`, or `(B, 1, 1, T)` for padding |
# | `d_model % n_heads != 0` | heads of unequal size | pick `n_heads` among the divisors of `d_model` |
#
# ## Summary
#
# - Multi-head attention runs $h$ attentions in parallel, each in a $d_k = d_{\text{model}}/h$ subspace, then
#   concatenates them and mixes them with $W^O$.
# - In code: one `Linear` per role, then `view(B, T, h, d_k).transpose(1, 2)`; back with `transpose(1, 2).reshape`.
# - $4 d_{\text{model}}^2 + 4 d_{\text{model}}$ parameters, whatever $h$.
# - Heads can learn clearly different jobs, and you can measure which.
#
# ## Exercises
#
# **Exercise 1.** Write `my_split_heads(x, n_heads)`: `(B, T, d_model)` $\to$ `(B, n_heads, T, d_k)`.


# %%
def my_split_heads(x, n_heads):
    # your code here
    raise NotImplementedError


check_split_heads(my_split_heads)

# %% [markdown]
# <details><summary>Show a solution</summary>
#
# ```python
# def my_split_heads(x, n_heads):
#     B, T, d_model = x.shape
#     return x.view(B, T, n_heads, d_model // n_heads).transpose(1, 2)
# ```
# </details>
#
# **Exercise 2.** Write `my_merge_heads(x)`: `(B, n_heads, T, d_k)` $\to$ `(B, T, n_heads * d_k)`, the inverse.


# %%
def my_merge_heads(x):
    # your code here
    raise NotImplementedError


check_merge_heads(my_merge_heads)

# %% [markdown]
# <details><summary>Show a solution</summary>
#
# ```python
# def my_merge_heads(x):
#     B, h, T, d_k = x.shape
#     return x.transpose(1, 2).reshape(B, T, h * d_k)
# ```
# </details>
#
# **Exercise 3.** Write `mha_parameters(d_model, n_heads)`: the number of parameters of multi-head
# attention with biases, as a formula (no module).


# %%
def mha_parameters(d_model, n_heads):
    # your code here
    raise NotImplementedError


check_mha_parameter_count(mha_parameters)

# %% [markdown]
# <details><summary>Show a solution</summary>
#
# ```python
# def mha_parameters(d_model, n_heads):
#     return 4 * d_model * d_model + 4 * d_model  # w_q, w_k, w_v, w_o: weights and biases
# ```
# </details>
#
# **Going further.** Train `TwoJobModel(n_heads=1)` and compare the accuracy on the previous digit. Then try
# `n_heads=4`: how many heads end up doing each job?
#
# Next: [03 · Positional encoding](03_positional_encoding.ipynb): how a Transformer knows where each token is.
