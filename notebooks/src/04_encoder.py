# %% [markdown]
# # 04 · The encoder
#
# {{COLAB_BADGE}}
#
# *Transformers from Scratch*, Part I, chapter 4 of 10 · previous: [03 · Positional encoding](03_positional_encoding.ipynb) ·
# next: [05 · The decoder](05_decoder.ipynb)
#
# An encoder layer is multi-head self-attention followed by a small feed-forward network, each wrapped in a
# residual connection and a layer normalisation. Stack $N$ of them and you have the Transformer's encoder.
# This chapter builds every piece, checks each against PyTorch, and measures the choices that matter.
#
# **You will learn**
# - layer normalisation from scratch, equal to `nn.LayerNorm`, and how the popular "unbiased std" version differs;
# - why residual connections let deep stacks learn (measured);
# - the position-wise feed-forward network, and where dropout goes;
# - post-norm (the paper) versus pre-norm (most modern models), with a measured comparison of how each trains;
# - the encoder layer and the stack, equal to `nn.TransformerEncoderLayer`; padding masks; attention per layer and head;
# - in the exercises: RMSNorm, and the pre-norm layer written from the post-norm one.
#
# **Prerequisites:** chapters 01–03. **Time:** about 60 minutes.

# %% [markdown]
# ## Setup

# %% tags=["nbval-ignore-output"]
import subprocess
import sys

if "google.colab" in sys.modules:  # on Colab: install course_utils from the repository
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{PIP_SPEC}}"], check=True)

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn

from course_utils import (
    Encoder,
    EncoderLayer,
    FeedForward,
    LayerNorm,
    MultiHeadAttention,
    PositionalEncoding,
    TrainConfig,
    attention_grid,
    count_parameters,
    get_device,
    loss_curve,
    padding_mask,
    record_attention,
    set_seed,
    train,
)
from course_utils.checks import (
    check_encoder_layer,
    check_layer_norm,
    check_pre_norm_layer,
    check_prediction,
    check_rms_norm,
)

set_seed(0)
device = get_device()
print(f"PyTorch {torch.__version__}, running on {device}")

# %% [markdown]
# ## 1. The encoder layer at a glance
#
# For an input $x$ of shape `(B, T, d_model)`, the paper's layer computes
#
# $$h = \mathrm{LayerNorm}\big(x + \mathrm{MultiHeadSelfAttention}(x)\big), \qquad
#   y = \mathrm{LayerNorm}\big(h + \mathrm{FFN}(h)\big)$$
#
# and the output $y$ has the same shape as $x$, so layers stack. Attention mixes information **across
# positions**; the FFN transforms each position **on its own**; the residual connections ($x + \ldots$) and
# the normalisations keep a deep stack trainable. We build the pieces bottom-up. Where the encoder sits in the
# whole model (its left half here; the decoder is chapter 05):
#
# ![The Transformer: the encoder on the left, the decoder on the right](../images/transformer.png)
#
# ## 2. Layer normalisation
#
# For each token vector $x \in \mathbb{R}^{d}$ separately:
#
# $$\mathrm{LayerNorm}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta, \qquad
#   \mu = \frac{1}{d}\sum_j x_j, \quad \sigma^2 = \frac{1}{d}\sum_j (x_j - \mu)^2$$
#
# Two details matter: the variance divides by $d$ (the *biased* estimate), and $\epsilon$ sits **inside**
# the square root. $\gamma$ (scale, `weight`) and $\beta$ (shift, `bias`) are learned, one per feature.
#
# **Your turn.** Write `my_layer_norm(x, weight, bias, eps)` for `x` of shape `(..., d)` and `weight`, `bias` of
# shape `(d,)`; it returns the shape of `x`. The checker compares it with PyTorch's `F.layer_norm` and names the
# two classic slips. From here on the chapter uses `course_utils.LayerNorm`, so everything below runs even before
# your version is finished.


# %% tags=["exercise"]
def my_layer_norm(x, weight, bias, eps=1e-5):
    """gamma * (x - mean) / sqrt(var + eps) + beta over the last axis: (..., d) -> (..., d).

    Hint: mean and var with dim=-1, keepdim=True (shape (..., 1)) broadcast against x; var is biased (divides by d).
    """
    ### BEGIN SOLUTION
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1): biased, divides by d
    return (x - mean) / torch.sqrt(var + eps) * weight + bias  # (..., d)
    ### END SOLUTION


check_layer_norm(my_layer_norm)

# %% [markdown]
# `course_utils.LayerNorm` holds the same two parameters under the same names as `nn.LayerNorm`, so one's weights
# load into the other. Its forward runs the formula you just wrote as `F.layer_norm`, PyTorch's fused kernel (the
# checker proved your step-by-step version equal to it), so what the next cell shows is the names and the
# parameters: with random $\gamma$ and $\beta$ both give the same output:

# %%
set_seed(0)
x = torch.randn(2, 4, 8) * 5 + 3  # (B, T, d): far from mean 0, std 1
torch_norm = nn.LayerNorm(8)
with torch.no_grad():
    torch_norm.weight.normal_()
    torch_norm.bias.normal_()
course_norm = LayerNorm(8)
course_norm.load_state_dict(torch_norm.state_dict())  # same names, same order: weight (gamma), bias (beta)

torch.testing.assert_close(course_norm(x), torch_norm(x))
print("✓ course_utils.LayerNorm == nn.LayerNorm")
z = LayerNorm(8)(x)  # gamma = 1, beta = 0: the initial values
mean, std = z.mean(-1), z.std(-1, unbiased=False)  # (B, T) each
assert mean.abs().max() < 1e-6 and (std - 1).abs().max() < 1e-4  # 0 and 1, up to float rounding
print("each token now has mean 0 and standard deviation 1 (up to float rounding: within 1e-6 and 1e-4)")

# %% [markdown]
# ### The version many tutorials ship
#
# A popular "LayerNorm" from the material this course grew from reads
# `a * (x - mean) / (x.std(-1) + eps) + b`. It differs twice: `x.std()` is the **unbiased** standard deviation
# (divides by $d-1$), and $\epsilon$ is **outside** the root. The first makes every output too small by
# $\sqrt{(d-1)/d}$, which is worst for small $d$; the second matters when a token's features are nearly
# equal:


# %%
def tutorial_layer_norm(x, eps=1e-5):
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps)


for d in (4, 16, 512):
    x = torch.randn(1000, d)
    ratio = (tutorial_layer_norm(x) / F.layer_norm(x, (d,))).mean().item()
    print(f"d = {d:3d}: tutorial / true = {ratio:.4f}   (sqrt((d-1)/d) = {math.sqrt((d - 1) / d):.4f})")
flat = torch.tensor([[1.0, 1.001, 0.999, 1.0]])  # a token whose features are almost equal
print("nearly constant token, true:    ", F.layer_norm(flat, (4,)).round(decimals=3))
print("nearly constant token, tutorial:", tutorial_layer_norm(flat).round(decimals=3))
print(f"that token's variance: {flat.var(-1, unbiased=False).item():.0e}, far below eps = 1e-5")

# %% [markdown]
# The near-constant token shows the $\epsilon$ placement. Its variance (printed) is far below $\epsilon$, so in
# the true LayerNorm $\epsilon$ dominates the denominator and shrinks the token towards 0: its differences of
# $10^{-3}$ come out as about $\pm 0.3$. The tutorial version adds $\epsilon$ to the much larger standard
# deviation, where it hardly counts, and blows the same differences up to about $\pm 1.2$, as if they
# were as meaningful as those of any other token.
#
# Trained from scratch, $\gamma$ could absorb the constant factor; but weights trained with `nn.LayerNorm`
# (any pretrained model) give wrong outputs with the tutorial version, and the $\epsilon$ placement changes
# how near-constant tokens are treated. `course_utils.LayerNorm` is the real one.
#
# ## 3. Residual connections
#
# Each sublayer's output is **added** to its input: $x + \mathrm{Sublayer}(x)$. The identity path gives the
# gradient a direct route to early layers. Without it, the gradient must pass through every layer's Jacobian
# (the matrix of its outputs' derivatives with respect to its inputs), one matrix product per layer, and it
# shrinks (or explodes) with depth. Measured on 30 small layers at initialisation (PyTorch's default
# initialisation of `nn.Linear`):


# %%
def gradient_at_input(residual, depth=30, width=64):
    set_seed(0)
    layers = nn.ModuleList(nn.Sequential(nn.Linear(width, width), nn.Tanh()) for _ in range(depth))
    x = torch.randn(16, width, requires_grad=True)
    h = x
    for layer in layers:
        h = h + layer(h) if residual else layer(h)
    h.pow(2).mean().backward()
    return x.grad.norm().item()


print(f"gradient norm at the input of 30 layers: plain {gradient_at_input(False):.2e}, "
      f"residual {gradient_at_input(True):.2e}")  # fmt: skip

# %% [markdown]
# Many orders of magnitude apart: in the plain stack the first layers would barely learn. A careful
# initialisation narrows this gap in a plain stack, but only the residual path passes every layer the gradient
# of the layers above unchanged, whatever the weights, with the sublayer's own contribution added to it
# ($\partial(x + f(x))/\partial x = I + \partial f/\partial x$): one reason Transformers can be 6, 12 or 96 layers deep.
#
# ## 4. The position-wise feed-forward network
#
# $$\mathrm{FFN}(x) = \max(0,\, x W_1 + b_1)\, W_2 + b_2, \qquad W_1 \in \mathbb{R}^{d_{\text{model}} \times d_{ff}},\;
#   W_2 \in \mathbb{R}^{d_{ff} \times d_{\text{model}}}$$
#
# with $d_{ff} = 4 d_{\text{model}}$ in the paper (2048 for 512). "Position-wise" means the same small MLP is
# applied to every position independently: it never mixes positions (that is attention's job).

# %%
set_seed(0)
ffn = FeedForward(d_model=16, d_ff=64)  # course_utils: w_1, ReLU, dropout, w_2
x = torch.randn(2, 5, 16)  # (B, T, d_model)
out = ffn(x)  # (B, T, d_model)
print("FFN:", tuple(x.shape), "->", tuple(ffn.w_1(x).shape), "(d_ff) ->", tuple(out.shape))
torch.testing.assert_close(out[:, 3], ffn(x[:, 3:4])[:, 0])  # position 3 alone gives the same result
print("position 3 computed alone gives the same output: position-wise")

attention_params = count_parameters(MultiHeadAttention(512, 8))
ffn_params = count_parameters(FeedForward(512, 2048))
print(f"paper's base layer: attention {attention_params:,} parameters, FFN {ffn_params:,} "
      f"({ffn_params / (attention_params + ffn_params):.0%} of the two)")  # fmt: skip

# %% [markdown]
# Two thirds of an encoder layer's weights are in the FFN: attention decides *where* to look, the FFN
# does most of the *computing* on what was gathered.
#
# ## 5. Dropout
#
# During training, dropout zeroes each activation with probability $p$ and scales the survivors by $1/(1-p)$,
# so the expected value is unchanged; in evaluation it does nothing. The paper applies it to the output of
# every sublayer **before** the residual addition, and to the sum of embeddings and positional encodings;
# PyTorch's layers (and ours) also apply it to the attention weights and inside the FFN. Forgetting
# `model.eval()` at test time is a classic bug: outputs become noisy and change from call to call.

# %%
layer = EncoderLayer(d_model=16, n_heads=4, d_ff=64, dropout=0.1)
x = torch.randn(1, 5, 16)
layer.train()
print("train mode, two calls equal?", torch.equal(layer(x), layer(x)))
layer.eval()
print("eval mode,  two calls equal?", torch.equal(layer(x), layer(x)))

# %% [markdown]
# ## 6. The encoder layer, post-norm and pre-norm
#
# The paper normalises **after** each residual addition (*post-norm*). Most models since GPT-2 normalise the
# sublayer's **input** instead (*pre-norm*), leaving the residual stream untouched:
#
# $$\text{post-norm: } x \leftarrow \mathrm{LN}(x + \mathrm{Sublayer}(x)) \qquad\qquad
#   \text{pre-norm: } x \leftarrow x + \mathrm{Sublayer}(\mathrm{LN}(x))$$
#
# **Your turn.** Write the paper's post-norm forward, `my_encoder_layer(layer, x, mask)`, from the submodules of a
# `course_utils.EncoderLayer`: `layer.self_attn` (chapter 02's `MultiHeadAttention`, called as
# `self_attn(query, key, value, mask)`, which returns the pair `(output, weights)`, the weights `None` unless
# asked for), `layer.feed_forward`,
# `layer.norm1`, `layer.norm2`, and `layer.dropout1`, `layer.dropout2` for the sublayers' outputs (dropout is off
# in the checker, so they may be left out; where you do apply them, the checker checks that they act on the
# sublayer's output before the addition). `x` has shape `(B, T, d_model)`, `mask` `(B, 1, 1, T)` with True = real
# token; the output has the shape of `x`. The checker compares with `course_utils.EncoderLayer` and, at the real
# positions, with `nn.TransformerEncoderLayer`; the chapter goes on with `course_utils.EncoderLayer`.


# %% tags=["exercise"]
def my_encoder_layer(layer, x, mask):
    """Post-norm: h = norm1(x + SelfAttn(x)), then norm2(h + FFN(h)). (B, T, d_model) -> (B, T, d_model)."""
    ### BEGIN SOLUTION
    attended, _ = layer.self_attn(x, x, x, mask)  # (B, T, d_model); the weights are not needed
    h = layer.norm1(x + layer.dropout1(attended))
    return layer.norm2(h + layer.dropout2(layer.feed_forward(h)))  # (B, T, d_model)
    ### END SOLUTION


check_encoder_layer(my_encoder_layer)


# %% [markdown]
# ### `course_utils.EncoderLayer` equals `nn.TransformerEncoderLayer`
#
# `course_utils.EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first)` writes both orders as two explicit
# branches, as PyTorch does. `EncoderLayer.from_torch` copies the weights of a PyTorch layer (ReLU,
# `batch_first=True`, either norm order). PyTorch's padding mask is `True` = pad, the opposite of ours: we pass
# `~mask`. We compare the outputs at the real positions only: the outputs at padded positions are meaningless (no
# token attends to them, and no loss should read them), and PyTorch does not even promise them
# (`nn.TransformerEncoder`'s nested-tensor fast path, used in evaluation without gradients, returns zeros there).

# %%
src = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, 0, 0]])  # token ids, 0 = padding
mask = padding_mask(src, pad_id=0)  # (B, 1, 1, T)
real = src != 0  # (B, T)
x = torch.randn(2, 5, 16)
for norm_first in (False, True):
    set_seed(0)
    theirs = nn.TransformerEncoderLayer(16, 4, 64, dropout=0.1, batch_first=True, norm_first=norm_first).eval()
    course = EncoderLayer.from_torch(theirs).eval()
    expected = theirs(x, src_key_padding_mask=~mask[:, 0, 0])  # torch: True = padding
    torch.testing.assert_close(course(x, mask)[real], expected[real])
    print(f"✓ norm_first={norm_first}: course_utils.EncoderLayer == nn.TransformerEncoderLayer at the real positions")

# %% [markdown]
# From now on we use `course_utils.EncoderLayer` and `course_utils.Encoder`.
#
# ## 7. The stack, and padding
#
# `Encoder(d_model, n_heads, d_ff, n_layers, dropout, norm_first)` stacks $N$ layers. A pre-norm stack ends
# with one more LayerNorm (its residual stream is never normalised otherwise); a post-norm stack does not
# need one. The paper's base encoder:

# %%
base = Encoder(d_model=512, n_heads=8, d_ff=2048, n_layers=6, dropout=0.1)
torch_base = nn.TransformerEncoder(
    nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True), num_layers=6, enable_nested_tensor=False
)  # enable_nested_tensor=False turns off a speed-up for padded batches in evaluation; it changes no parameter
print(
    f"base encoder, N=6: {count_parameters(base):,} parameters (nn.TransformerEncoder: {count_parameters(torch_base):,})"
)
print("one layer:", f"{count_parameters(base.layers[0]):,}")

# %% [markdown]
# Padding must not leak into real tokens. Change what sits in the padded positions and compare the outputs at
# the real positions:

# %%
set_seed(0)
encoder = Encoder(d_model=16, n_heads=4, d_ff=64, n_layers=3, dropout=0.0).eval()
x = torch.randn(2, 5, 16)
noisy = x.clone()
noisy[~real] = 100 * torch.randn(int((~real).sum()), 16)  # garbage where the padding is
torch.testing.assert_close(encoder(noisy, mask)[real], encoder(x, mask)[real])
print("outputs at real positions are unchanged by whatever sits in the padding: the mask works")

# %% [markdown]
# ## 8. Post-norm or pre-norm? Measured
#
# The paper trained its post-norm Transformer with a learning-rate **warm-up** (chapter 02): small steps first,
# the full learning rate only later. Does the order of the norms change whether that warm-up is needed? Let us
# measure it first, and read the explanation after the results, on a toy task: **sort 10 digits**, an encoder-only problem (position $i$, counting from 0, must
# output the digit of rank $i$: position 0 the smallest).

# %%
T_SORT = 10


def sort_batch(n, generator):
    x = torch.randint(0, 10, (n, T_SORT), generator=generator)  # (n, T)
    return x, x.sort(dim=1).values  # inputs, targets


class Sorter(nn.Module):
    def __init__(self, n_layers, norm_first, d_model=32, n_heads=4):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(10, d_model)
        # times sqrt(d_model) below, as in the paper: std 1, the scale of the sinusoids (chapter 03)
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        self.positions = PositionalEncoding(d_model, max_len=T_SORT)
        self.encoder = Encoder(d_model, n_heads, 2 * d_model, n_layers, dropout=0.0, norm_first=norm_first)
        self.out = nn.Linear(d_model, 10)

    def forward(self, x):  # (B, T) -> (B, T, 10)
        return self.out(self.encoder(self.positions(self.embed(x) * math.sqrt(self.d_model))))


def sort_batches(batch_size, seed):
    generator = torch.Generator().manual_seed(seed)
    while True:
        yield sort_batch(batch_size, generator)


def sort_loss(model, x, y):
    return F.cross_entropy(model(x).flatten(0, 1), y.flatten())


# %% [markdown]
# Train a 12-layer sorter three ways with a learning rate that is high for 12 post-norm layers, `1e-2`, for 100
# steps (chapter 02 trained one layer at this rate, with a warm-up): post-norm
# without warm-up, post-norm with warm-up, and pre-norm without warm-up. `train` and `TrainConfig` are chapter
# 02's training loop and recipe. Besides the steps, the learning rate and the warm-up, three settings matter
# here:
#
# - `grad_clip=None` turns off gradient clipping, which `train` does by default: the runs compare the two orders
#   of the norms as they are, with nothing to rescue a large step;
# - `label_smoothing=0.0`: the loss is plain cross-entropy;
# - `schedule="constant"`: no decay. With `warmup_steps=0` the rate is `1e-2` from the first step; with
#   `warmup_steps=25` it rises linearly over the first 25 steps, a quarter of the run, then stays at `1e-2`.
#
# The recipe is printed once; only `norm_first` and `warmup_steps` change between the runs.
#
# **Predict, then run.** Same 12-layer sorter, same batches, `lr = 1e-2`, 100 steps. Which runs learn to sort?
#
# - (a) all three learn: the warm-up only makes post-norm a little faster;
# - (b) none learns: all three stay near $\ln 10$, `lr = 1e-2` being too high for 12 layers whatever the order;
# - (c) pre-norm without warm-up stalls near $\ln 10$; post-norm learns with or without a warm-up;
# - (d) post-norm without warm-up stalls near $\ln 10$; with a warm-up it learns, and so does pre-norm without one.

# %% tags=["exercise"]
### BEGIN SOLUTION
my_prediction = "d"
### END SOLUTION
check_prediction("post-norm-warmup", my_prediction)  # your answer: "a", "b", "c" or "d"

# %% tags=["nbval-ignore-output"]
base_config = TrainConfig(
    steps=100, batch_size=64, lr=1e-2, warmup_steps=0, schedule="constant", label_smoothing=0.0, grad_clip=None
)
print(base_config)
runs = {"post-norm, no warm-up": (False, 0), "post-norm, warm-up": (False, 25), "pre-norm, no warm-up": (True, 0)}
histories, sorters = {}, {}
for name, (norm_first, warmup) in runs.items():
    set_seed(0)
    sorters[name] = Sorter(n_layers=12, norm_first=norm_first).to(device)
    batches = sort_batches(64, seed=0)  # the same batches for every run
    config = dataclasses.replace(base_config, warmup_steps=warmup)
    histories[name] = train(sorters[name], batches, sort_loss, config, device=device, desc=name)
lr = histories["post-norm, warm-up"].lr
shown = ", ".join(f"{lr[step - 1]:.4f}" for step in (1, 12, 25, 100) if step <= len(lr))
print(f"warm-up run's learning rate at steps 1, 12, 25, 100: {shown}")

# %% [markdown]
# Now measure each sorter on 1,000 new sequences: the share of digits in the right place, and the share of
# sequences sorted without a single mistake. A model that knows nothing gives each of the 10 digits
# probability 1/10, a loss of $\ln 10$ (chapter 02's first-loss check).

# %% tags=["nbval-ignore-output", "measurement"]
test_x, test_y = (t.to(device) for t in sort_batch(1000, torch.Generator().manual_seed(99)))
uniform = math.log(10)
print(f"uniform guess over 10 digits: loss ln 10 = {uniform:.3f}\n")
print(f"{'':22} {'first loss':>10} {'final loss':>10} {'digits right':>13} {'sequences sorted':>17}")
final, digits, sequences = {}, {}, {}
for name, model in sorters.items():
    model.eval()  # train() leaves a model in the mode it found; evaluation wants eval mode
    with torch.no_grad():
        right = model(test_x).argmax(-1) == test_y  # (1000, T)
    loss = histories[name].loss
    final[name] = sum(loss[-10:]) / 10  # mean of the last 10 steps
    digits[name], sequences[name] = right.float().mean().item(), right.all(dim=1).float().mean().item()
    print(f"{name:22} {loss[0]:10.2f} {final[name]:10.2f} {digits[name]:13.0%} {sequences[name]:17.0%}")
    assert abs(loss[0] - uniform) < 0.3  # an untrained sorter starts near ln 10

stuck = histories["post-norm, no warm-up"].loss
# within 0.1: a collapsed model's batch losses still scatter around ln 10, by a few hundredths (0.06 seen)
settled = next((i + 1 for i in range(len(stuck)) if all(abs(v - uniform) < 0.1 for v in stuck[i:])), None)
print(f"\npost-norm, no warm-up: loss within 0.1 of ln 10 from step {settled} to the end")
assert settled is not None and settled <= 50  # stuck at ln 10 for (at least) the second half of the run
# what the prediction above asked: which runs learn
assert final["post-norm, no warm-up"] > 2.2 and sequences["post-norm, no warm-up"] == 0
assert final["post-norm, warm-up"] < 1.0 and final["pre-norm, no warm-up"] < 1.0
assert digits["pre-norm, no warm-up"] > 0.5 > digits["post-norm, no warm-up"]

# %% [markdown]
# The loss curves below are running means over 5 steps (`smooth=5`), on a log scale; the dashed line is
# $\ln 10$.

# %% tags=["nbval-ignore-output"]
loss_curve(
    *histories.values(), labels=list(histories), title="Sorting digits with 12 layers, lr = 1e-2", smooth=5,
    levels={"uniform guess, ln 10": uniform},
)  # fmt: skip

# %% [markdown]
# Read the table and the curves: answer (d), in this run (one seed for each stack). All three runs start near
# $\ln 10$. With this learning rate and no warm-up,
# the post-norm stack collapses to $\ln 10$ within a few steps and stays there to the end (the step is printed
# above; its curve lies on the dashed line). A loss of $\ln 10$ means it gives every digit a probability of
# about 1/10 whatever the input: it puts about one digit in ten in the right place and sorts no sequence. The
# same stack with a warm-up over the first quarter of the run learns, and the pre-norm
# stack learns without any warm-up. This is the instability the paper's warm-up guards against, and one reason
# most large models since are pre-norm. Why? Xiong et al. (2020, "On Layer Normalization in the Transformer
# Architecture") show that at initialisation a post-norm stack has large gradients for the parameters near its
# output, so large early steps are unstable; in a pre-norm stack, where each layer only *adds* to a residual
# path that no LayerNorm rescales, the gradients are well-behaved and the warm-up can be dropped. Liu et al.
# (2020, "Understanding the Difficulty of Training Transformers") trace post-norm's trouble to how strongly
# each layer's output depends on its residual branch, which amplifies small changes of the weights. When it does train well, post-norm can reach slightly better final
# quality than pre-norm (Liu et al. 2020 report this for translation), something a 100-step toy run cannot
# show; so both remain in use. `course_utils` defaults to the paper's post-norm, and `norm_first=True` switches.
#
# ## 9. What do the layers attend to?
#
# After 100 steps the pre-norm sorter puts most digits in the right place, though it sorts fewer whole
# sequences without a mistake (both printed above). `record_attention` (chapter 02) keeps every attention
# module's weights under the module's name; here it records all 12 layers on the 1,000 test sequences at once.
# How focused is each head? The **entropy** of an attention row $a$ over the $T$ keys,
# $H(a) = -\sum_j a_j \ln a_j$, is $\ln T$ when the row spreads its weight evenly and 0 when it puts it all on
# one key; $e^{H}$ is the number of keys an even split would spread over. The cell prints each head's entropy,
# averaged over rows and sequences (layers are counted from 1, as the text does, so layer 1 is `encoder.layers.0`; heads from 0, as the code indexes them).

# %% tags=["nbval-ignore-output"]
sorter = sorters["pre-norm, no warm-up"]
with torch.no_grad(), record_attention(sorter) as attention:  # every attention module's weights, by name
    prediction = sorter(test_x).argmax(-1)  # (1000, T)
n_layers, n_heads = len(sorter.encoder.layers), 4
weights = torch.stack([attention[f"encoder.layers.{i}.self_attn"] for i in range(n_layers)])  # (12, 1000, 4, T, T)
entropy = -(weights * weights.clamp_min(1e-12).log()).sum(-1).mean(dim=(1, 3))  # (12, 4): layer, head
print(f"mean entropy of each head's attention rows (even split over {T_SORT} keys: ln {T_SORT} = {uniform:.2f})")
print("         " + "".join(f"head {h}  " for h in range(n_heads)))
for i in range(n_layers):
    print(f"layer {i + 1:2}  " + "".join(f"{e:6.2f}  " for e in entropy[i].tolist()))
order = entropy.flatten().argsort().tolist()  # most focused head first
shown = [divmod(k, n_heads) for k in order[:3] + order[-3:]]  # (layer, head): 3 most focused, 3 most diffuse
(layer, head), lowest = shown[0], entropy.min().item()
print(f"\nmost focused head: layer {layer + 1}, head {head}, entropy {lowest:.2f}, "
      f"like an even split over {math.exp(lowest):.1f} of the {T_SORT} keys")  # fmt: skip
assert lowest > 0.5  # no head is close to one-hot

# %% [markdown]
# On average no head comes close to one-hot: even the most focused one spreads its weight like an even split
# over several keys (printed). Averages hide variety, though. Here are the three most focused heads (top row)
# and the three most diffuse (bottom row) on one test sequence, each row in order of entropy $H$ (in each
# panel's title): "focused 1" is the most focused head, "diffuse 3" the most diffuse. Columns are the input digits (keys); each row
# is an output position, labelled `i→d`: position `i`, which outputs digit `d`, the digit it must find among
# the columns; the output is the model's own, so it may hold mistakes (the target is printed beside it). All
# panels share one colour scale, so a diffuse head looks uniformly dark.

# %% tags=["nbval-ignore-output"]
print("input :", test_x[0].tolist())
print("output:", prediction[0].tolist())
wrong = (prediction[0] != test_y[0]).sum().item()
print("target:", test_y[0].tolist(), f"({wrong} of {T_SORT} digits wrong)" if wrong else "(sorted without a mistake)")
peaks = [weights[layer, 0, head].max().item() for layer, head in shown]  # largest weight in each panel
print("largest weight in each panel:", ", ".join(f"{p:.2f}" for p in peaks))
assert max(peaks[:3]) > 0.5 > max(peaks[3:])
names = [f"{'focused' if k < 3 else 'diffuse'} {k % 3 + 1}" for k in range(len(shown))]  # the panels' rows
attention_grid(
    torch.stack([weights[layer, 0, head] for layer, head in shown]),  # (6, T, T)
    keys=[str(d) for d in test_x[0].tolist()],
    queries=[f"{i}→{d}" for i, d in enumerate(prediction[0].tolist())],
    titles=[
        f"{n}: layer {layer + 1}, head {head}\nH = {entropy[layer, head]:.2f}"
        for n, (layer, head) in zip(names, shown, strict=True)
    ],
    ncols=3,
    suptitle="Pre-norm sorter on one sequence: its three most focused heads and three most diffuse",
)

# %% [markdown]
# In the focused heads, some rows put more than half of their weight on a single key while other rows stay
# spread out; in the diffuse heads no weight reaches one half (the largest weights are printed). Compare a
# bright cell's column digit with its row's output digit `d` to guess what a head looks for. Which head does
# what would differ with another seed; what to take away is the tool: any layer and head can be measured and
# drawn.
#
# ## Pitfalls
#
# | Mistake | What happens | Fix |
# | --- | --- | --- |
# | LayerNorm with `x.std()` (unbiased) and `+ eps` outside the root | not LayerNorm; pretrained weights misbehave | `torch.sqrt(var(unbiased=False) + eps)`, or `nn.LayerNorm` ([bug lab: bug 4](09_bug_lab.ipynb#bug-4)) |
# | normalising over the batch or time axis | tokens influence each other's normalisation | normalise over the last axis (features) only |
# | a pre-norm stack without a final LayerNorm | the output's scale grows with depth | `Encoder(norm_first=True)` adds it |
# | forgetting `model.eval()` | dropout stays on: outputs are noisy and change from call to call | `model.eval()` before evaluating ([bug lab: bug 12](09_bug_lab.ipynb#bug-12)) |
# | post-norm with a large learning rate from step 0 | training can stall (section 8) or diverge | warm-up, or pre-norm |
# | padding mask of the wrong convention for `nn.TransformerEncoderLayer` | attends only to padding; a row without padding blocks every key: NaN on PyTorch's fast path (eval, no gradients), a silently wrong output elsewhere | torch wants True = pad: `~mask` ([bug lab: bug 8](09_bug_lab.ipynb#bug-8)) |
#
# ## Summary
#
# - LayerNorm normalises each token over its features: biased variance, $\epsilon$ inside the root.
# - Residual connections keep gradients alive through deep stacks.
# - The FFN is a per-position MLP holding two thirds of a layer's weights.
# - At a high learning rate, post-norm (the paper's order) needed a warm-up to learn the sorting task here;
#   pre-norm learned without one.
# - `course_utils.EncoderLayer` equals `nn.TransformerEncoderLayer` in both norm orders.
#
# ## Exercises
#
# {{EXERCISES}}
#
# **Exercise 1 · RMSNorm.** Most recent language models (T5, LLaMA) replace LayerNorm by *RMSNorm* (Zhang and
# Sennrich 2019): it does not subtract the mean and has no shift $\beta$, only the scale $\gamma$. It divides each
# token by its root mean square:
#
# $$\mathrm{RMSNorm}(x) = \gamma \odot \frac{x}{\sqrt{\frac{1}{d}\sum_j x_j^2 + \epsilon}}$$
#
# Write `my_rms_norm(x, weight, eps)`: `x` of shape `(..., d)`, `weight` ($\gamma$) of shape `(d,)`; it returns the
# shape of `x`. Hint: section 2's two details carry over, a mean that divides by $d$ and $\epsilon$ inside the
# root. The checker compares with PyTorch's `F.rms_norm`.


# %% tags=["exercise"]
def my_rms_norm(x, weight, eps):
    """weight * x / sqrt(mean(x²) + eps) over the last axis: (..., d) -> (..., d)."""
    ### BEGIN SOLUTION
    mean_square = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
    return x / torch.sqrt(mean_square + eps) * weight  # (..., d)
    ### END SOLUTION


check_rms_norm(my_rms_norm)

# %% [markdown]
# **Exercise 2 · From post-norm to pre-norm.** In section 6 you wrote the paper's post-norm layer. Now write
# the forward pass of a **pre-norm** layer, $x \leftarrow x + \mathrm{Sublayer}(\mathrm{LN}(x))$, from the same
# submodules of `layer` (`layer.norm1`, `layer.self_attn`, `layer.norm2`, `layer.feed_forward`; dropout is off):
# `x` of shape `(B, T, d_model)`, `mask` of shape `(B, 1, 1, T)`, output of the shape of `x`. Hint: the residual
# stream itself is never normalised; each sublayer reads a normalised copy of it.


# %% tags=["exercise"]
def my_pre_norm_forward(layer, x, mask):
    ### BEGIN SOLUTION
    h = layer.norm1(x)
    x = x + layer.self_attn(h, h, h, mask)[0]  # the output; the weights are not needed
    return x + layer.feed_forward(layer.norm2(x))
    ### END SOLUTION


check_pre_norm_layer(my_pre_norm_forward)

# %% [markdown]
# **Going further.** Rerun section 8 with 6 layers instead of 12, or with `lr=3e-3`: when does post-norm stop
# needing its warm-up?
#
# Next: [05 · The decoder](05_decoder.ipynb): masked self-attention, cross-attention, and teacher forcing.
