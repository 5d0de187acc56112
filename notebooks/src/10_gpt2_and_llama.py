# %% [markdown]
# # 10 · From the course's GPT to GPT-2 and Llama
#
# {{COLAB_BADGE}}
#
# *Transformers from Scratch*, Part I, chapter 10 of 10 · previous: [09 · The bug lab](09_bug_lab.ipynb) ·
# next, Part II: [11 · Beyond one GPU](11_distributed.ipynb)
#
# Chapter 07 built a GPT that nobody outside this course uses. How does it relate to the models everyone talks
# about? This chapter answers with proofs, not analogies: it loads Hugging Face's GPT-2 into the course's own `GPT`
# and shows the two compute the same logits and write the same text; then it builds a Llama-style model from the
# pieces chapters 02 to 04 left as exercises (grouped-query attention, rotary positions, RMSNorm) plus one new one
# (SwiGLU), and proves it equal to Hugging Face's Llama in the same way. Last, it measures what the modern choices
# buy: memory for the KV cache, time and memory of attention, and the loss on Tiny Shakespeare.
#
# **You will learn**
# - every difference between chapter 07's GPT and GPT-2, one at a time: GELU's tanh form, Conv1D's transposed
#   weights, the packed query/key/value layer, the names of the weights;
# - `from_hf`, which copies a `transformers` GPT-2 or Llama into the course's classes through one name table, and
#   how to prove such a copy right (logits within $10^{-5}$, the same greedy text with the KV cache);
# - the Llama block: RMSNorm, rotary positions and the two ways to pair their dimensions, SwiGLU, grouped-query
#   attention, no biases, an untied head;
# - what grouped-query attention saves in the KV cache, what the fused attention kernel saves in time and memory,
#   and how the Llama-style model compares with the GPT at the same number of parameters.
#
# **Prerequisites:** chapters 01–07 and the exercises of chapters 02 (grouped-query attention), 03 (rotary
# embeddings) and 04 (RMSNorm). **Time:** about 60 minutes. This chapter also needs Hugging Face's `transformers`:
# Colab has it; elsewhere `pip install transformers` (or `pip install ".[hf]"` in the course's folder).

# %% [markdown]
# ## Setup

# %% tags=["nbval-ignore-output"]
import subprocess
import sys

if "google.colab" in sys.modules:  # on Colab: install course_utils from the repository
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{{PIP_SPEC}}"], check=True)

import math
import os
import socket
import statistics
import time
from functools import partial

import torch
import torch.nn.functional as F

try:
    import transformers
except ImportError:
    raise ImportError("this chapter needs Hugging Face transformers: pip install transformers") from None

from course_utils import (
    GPT,
    GPT2_NAMES,
    GPT2_PACKED,
    LLAMA_NAMES,
    CausalLM,
    CharTokenizer,
    GroupedQueryAttention,
    KVCache,
    Llama,
    RMSNorm,
    SwiGLU,
    TrainConfig,
    apply_rotary,
    causal_mask,
    count_parameters,
    estimate_loss,
    expand_kv,
    from_hf,
    from_hf_state,
    get_device,
    load_tiny_shakespeare,
    peak_memory,
    random_windows,
    scaled_dot_product_attention,
    set_seed,
    split_ids,
    synchronize,
    train,
)
from course_utils.checks import check_expand_kv, check_gpt2_block_weights, check_prediction, check_rotary_halves

transformers.logging.set_verbosity_error()  # random test models have no tokenizer; spare us the warnings
set_seed(0)
device = get_device()
print(f"PyTorch {torch.__version__}, transformers {transformers.__version__}, running on {device}")

# %% [markdown]
# ## 1. GPT-2 is chapter 07's GPT, almost
#
# GPT-2 (Radford et al. 2019) is the model chapter 07 built: token embeddings plus *learned* position embeddings,
# a stack of pre-norm blocks (causal self-attention, then a feed-forward network, each after a LayerNorm and inside
# a residual connection), a final LayerNorm, and an output head tied to the token embedding. The released weights
# (124 M parameters for the smallest) have the sizes of `GPT2Config()`'s defaults:

# %%
small = transformers.GPT2Config()
print(f"{small.n_layer} blocks of {small.n_embd} dimensions, {small.n_head} heads, a context of "
      f"{small.n_positions:,} tokens, a vocabulary of {small.vocab_size:,} byte-level BPE tokens")  # fmt: skip

# %% [markdown]
# We do not need the released weights to compare the architectures: `transformers` builds a GPT-2 of any size from a
# `GPT2Config`, with random weights, offline. The cell below builds a small one, 2 blocks of 64 dimensions.
#
# A freshly built model has zero biases, LayerNorm scales of exactly 1 and small weights (standard deviation 0.02,
# printed below): a copy that forgot the biases or swapped two LayerNorms would still agree with it, and tiny
# activations hide the differences between activation functions. So `perturb` adds noise to every parameter: a proof
# on such weights leaves no parameter unseen.


# %%
def perturb(model, scale=0.2):
    """Add N(0, scale²) noise to every parameter of model, in place: no bias 0, no norm scale 1."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * scale)
    return model


set_seed(0)
gpt2_config = transformers.GPT2Config(vocab_size=100, n_positions=64, n_embd=64, n_layer=2, n_head=4)
hf_gpt2 = transformers.GPT2LMHeadModel(gpt2_config).eval()
block = hf_gpt2.transformer.h[0]
print(f"fresh: weights' standard deviation {block.mlp.c_fc.weight.std():.2f}, biases all 0: "
      f"{bool((block.mlp.c_fc.bias == 0).all())}, LayerNorm scales all 1: {bool((block.ln_1.weight == 1).all())}")  # fmt: skip
perturb(hf_gpt2)
print(
    type(hf_gpt2).__name__,
    "with",
    count_parameters(hf_gpt2),
    "parameters; its blocks:",
    type(hf_gpt2.transformer.h[0]).__name__,
)

# %% [markdown]
# The same sizes in the course's `GPT` have the same number of parameters in all (GPT-2's one `c_attn` holds what our
# `w_q`, `w_k` and `w_v` hold). What differs, the next sections take one at a time:
#
# | | chapter 07's `GPT` | GPT-2 |
# | --- | --- | --- |
# | positions | learned table | learned table (the same) |
# | biases | `bias=True` by default (chapter 07's recipes train with `bias=False`) | yes |
# | head | tied to the token embedding | tied (the same) |
# | LayerNorm $\epsilon$ | $10^{-5}$ | $10^{-5}$ (`layer_norm_epsilon`) |
# | activation | exact GELU, $x\,\Phi(x)$ | GELU's tanh approximation (§3) |
# | layers | `nn.Linear`, weight `(out, in)` | `Conv1D`, weight `(in, out)` (§2) |
# | queries, keys, values | three layers `w_q`, `w_k`, `w_v` | one layer `c_attn` of width $3\,d_\text{model}$ (§2) |
# | names | `blocks.0.norm1` ... | `transformer.h.0.ln_1` ... (§2) |

# %%
ours = GPT(vocab_size=100, block_size=64, d_model=64, n_heads=4, n_layers=2).eval()  # chapter 07's GPT, GPT-2's sizes
print("the course's GPT, same sizes:", count_parameters(ours), "parameters")
assert count_parameters(ours) == count_parameters(hf_gpt2)
print("GPT-2's head is its token embedding:", hf_gpt2.lm_head.weight is hf_gpt2.transformer.wte.weight)
print("LayerNorm epsilon: GPT-2", gpt2_config.layer_norm_epsilon, "| ours", ours.norm.eps)
assert ours.norm.eps == gpt2_config.layer_norm_epsilon

# %% [markdown]
# ## 2. The weights: names, Conv1D, one layer for three
#
# Here are the weights of GPT-2's first block, with their shapes, then ours:

# %%
hf_state = hf_gpt2.state_dict()
for name, tensor in hf_state.items():
    if name.startswith("transformer.h.0."):
        print(f"{name:34} {tuple(tensor.shape)}")
print()
for name, tensor in ours.state_dict().items():
    if name.startswith("blocks.0."):
        print(f"{name:34} {tuple(tensor.shape)}")

# %% [markdown]
# Three things differ.
#
# **Names.** `ln_1` is our `norm1`, `attn.c_proj` our `self_attn.w_o`, `mlp.c_fc` and `mlp.c_proj` our
# `feed_forward.w_1` and `w_2`. `course_utils` keeps such renamings in one table per model family, pairs of
# (our name, theirs), read a dotted segment at a time: the mechanism behind chapter 06's
# `TorchTransformer.from_course`, whose table pairs our names with those of PyTorch's own layers.
#
# **One layer for queries, keys and values.** `c_attn` maps $d_\text{model}$ to $3\,d_\text{model}$: queries, keys and
# values side by side, in that order. We split it into `w_q`, `w_k`, `w_v` (chapter 02 showed the two are the same
# computation).
#
# **Transposed weights.** `c_fc`'s weight is `(64, 256)`, ours `(256, 64)`. GPT-2's layers are `Conv1D` modules, a
# name kept from the original TensorFlow code: they are linear layers that store their weight as `(in, out)` and
# compute $x W + b$, where `nn.Linear` stores `(out, in)` and computes $x W^\top + b$. The cell checks both claims:

# %%
c_fc = hf_gpt2.transformer.h[0].mlp.c_fc
print(type(c_fc).__name__, "weight", tuple(c_fc.weight.shape), "= (in, out)")
x = torch.randn(3, 64)  # (N, d_model)
with torch.no_grad():
    linear = torch.nn.Linear(64, 256)  # weight (out, in) = (256, 64)
    linear.weight.copy_(c_fc.weight.t())  # transposed: (64, 256) -> (256, 64)
    linear.bias.copy_(c_fc.bias)
    print("Conv1D(x) == x @ W + b:", torch.allclose(c_fc(x), x @ c_fc.weight + c_fc.bias, atol=1e-6))
    print("Conv1D(x) == nn.Linear with W transposed:", torch.allclose(c_fc(x), linear(x), atol=1e-6))
for ours_name, theirs in GPT2_NAMES:
    print(f"{ours_name:18} <-> {theirs}")

# %% [markdown]
# ## 3. One difference at a time
#
# Let us load GPT-2's weights into the course's `GPT` by hand, fixing one difference at a time and measuring how far
# our logits are from GPT-2's after each fix. `from_hf_state(state, table, transposed, packed)` renames a state dict
# with a table, transposes the weights it is told to, and splits a packed layer.
#
# **Names only.** Rename, split `c_attn` in three along its first dimension, transpose nothing:

# %%
idx = torch.randint(0, 100, (2, 24), generator=torch.Generator().manual_seed(1))  # (B, T): a batch of token ids
with torch.no_grad():
    reference = hf_gpt2(idx).logits  # (B, T, V): what GPT-2 computes
try:
    ours.load_state_dict(from_hf_state(hf_state, GPT2_NAMES, packed=GPT2_PACKED))
except RuntimeError as error:
    print(str(error).splitlines()[1].strip())

# %% [markdown]
# The non-square weights do not even fit: `c_attn` is `(64, 192)`, and splitting it along its first dimension cuts
# 64 rows in three. The square one, `attn.c_proj` `(64, 64)`, would have loaded silently, transposed the wrong way:
# that is the dangerous case. **Transpose every `Conv1D` weight** (found by their module type, as the loader below does):

# %%
conv1d = {f"{name}.weight" for name, module in hf_gpt2.named_modules() if type(module).__name__ == "Conv1D"}
print(len(conv1d), "Conv1D weights, e.g.", sorted(conv1d)[:2])
renamed = from_hf_state(hf_state, GPT2_NAMES, transposed=conv1d, packed=GPT2_PACKED)
loaded = ours.load_state_dict(renamed)  # strict: any key missing or unexpected raises
print("keys missing:", loaded.missing_keys, "unexpected:", loaded.unexpected_keys)

# %% tags=["nbval-ignore-output"]
with torch.no_grad():
    exact_gelu_gap = (ours(idx)[0] - reference).abs().max().item()
# its last digit depends on the processor's rounding: the cell asserts the range, which does not
print(f"largest logit difference with chapter 07's exact GELU: {exact_gelu_gap:.1e}")
assert 1e-5 < exact_gelu_gap < 1e-2  # far above float rounding (1e-5); the cell after it shows what it is

# %% [markdown]
# The weights load, and the logits are close but not equal. What is left is the activation. Chapter 07's GPT uses the
# exact GELU, $x\,\Phi(x)$ with $\Phi$ the standard normal distribution function; GPT-2 was trained with its tanh
# approximation,
#
# $$\mathrm{GELU}_{\tanh}(x) = \tfrac{1}{2}\,x\left(1 + \tanh\!\left[\sqrt{2/\pi}\,\left(x + 0.044715\,x^3\right)\right]\right),$$
#
# which differs from the exact form by less than 0.001 (the cell measures it on $[-6, 6]$; further out both are
# within rounding of 0 or of $x$), enough to move every logit a little. `GPT(activation="gelu_tanh")` uses it:

# %%
grid = torch.linspace(-6, 6, 10001)
gelu_gap = (F.gelu(grid) - F.gelu(grid, approximate="tanh")).abs().max().item()
print(f"largest |GELU(x) - GELU_tanh(x)| on [-6, 6]: {gelu_gap:.5f}")
assert gelu_gap < 0.001
ours = GPT(vocab_size=100, block_size=64, d_model=64, n_heads=4, n_layers=2, activation="gelu_tanh").eval()
ours.load_state_dict(renamed)
with torch.no_grad():
    tanh_gap = (ours(idx)[0] - reference).abs().max().item()
print("largest logit difference with GELU's tanh form below 1e-5:", tanh_gap < 1e-5)
assert tanh_gap < 1e-5

# %% [markdown]
# Below $10^{-5}$: what remains is float32 rounding (the two models add the same numbers in other orders). Every
# difference is accounted for. `from_hf(model)` does all of this: it reads the sizes from `model.config` (and refuses
# a setting the course's classes do not have, rather than compute something else), renames, transposes, splits,
# loads, and returns a `GPT` in the model's dtype, device and mode.
#
# ## 4. The proof: same logits, same text
#
# Two claims, each checked, each proving what the other cannot. **The logits** agree within $10^{-5}$ at every
# position of a full context window (64 tokens: every learned position is used), on a GPT-2 whose LayerNorm $\epsilon$
# is not the default: a loader that dropped a weight, swapped two layers, used the exact GELU or kept its own
# $\epsilon$ would be further off (the cell measures the last one). **Greedy text** proves something else: the
# course's `generate`, through its KV cache, writes what Hugging Face's `generate` (with its own cache) writes.
# Text alone proves little about the weights: §3's copy with the exact GELU, $10^{-3}$ off in its logits, writes the
# same 40 tokens here (printed): on these two prompts so small a gap changed none of the 80 greedy choices.

# %%
set_seed(1)
eps_config = transformers.GPT2Config(vocab_size=100, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                     layer_norm_epsilon=0.1)  # fmt: skip
hf_eps = perturb(transformers.GPT2LMHeadModel(eps_config).eval())
window = torch.randint(0, 100, (2, 64), generator=torch.Generator().manual_seed(2))  # (B, block_size): every position
copy, own_eps = from_hf(hf_eps), from_hf(hf_eps)
for module in own_eps.modules():  # a loader that kept the course's default epsilon in every LayerNorm
    if hasattr(module, "eps"):
        module.eps = 1e-5
with torch.no_grad():
    reference_window = hf_eps(window).logits  # (B, 64, V)
    gaps = {name: (m(window)[0] - reference_window).abs().max().item() for name, m in
            (("from_hf", copy), ("epsilon left at 1e-5", own_eps))}  # fmt: skip
# float32 rounding, whose digits depend on the processor, is printed as a bound; the other gaps as numbers
print(f"LayerNorm epsilon {copy.norm.eps}; largest logit difference over 2 x 64 positions: from_hf below 1e-5: "
      f"{gaps['from_hf'] < 1e-5}; a copy with epsilon 1e-5: {gaps['epsilon left at 1e-5']:.1f}")  # fmt: skip
prompt = idx[:, :4]  # (2, 4): two prompts of 4 tokens
theirs = hf_gpt2.generate(prompt, max_new_tokens=40, do_sample=False, eos_token_id=None, pad_token_id=0)
mine = from_hf(hf_gpt2).generate(prompt, max_new_tokens=40, temperature=0, use_cache=True)
exact = GPT(vocab_size=100, block_size=64, d_model=64, n_heads=4, n_layers=2).eval()  # §3's exact GELU
exact.load_state_dict(renamed)
print("same greedy continuations (40 tokens, 2 prompts):", torch.equal(mine, theirs))
print(
    "the same text from §3's exact-GELU copy, 1e-3 off:", torch.equal(exact.generate(prompt, 40, temperature=0), theirs)
)
assert gaps["from_hf"] < 1e-5 < 1e-3 < gaps["epsilon left at 1e-5"] and torch.equal(mine, theirs)

# %% [markdown]
# ## 5. Real GPT-2, where the hub is reachable
#
# On Colab, the next cell downloads the released GPT-2 (124 M parameters, about 500 MB) from the Hugging Face hub,
# copies it into the course's `GPT` with `from_hf`, checks the logits once more, and lets the course's `generate`
# continue a sentence: your code writing GPT-2's text. Where the hub cannot be reached (the course's tests run
# offline), it says so and skips; nothing below depends on it.


# %% tags=["nbval-ignore-output"]
def hub_reachable(host="huggingface.co", seconds=3.0):
    """Whether the Hugging Face hub answers (and downloads are not switched off)."""
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return False
    try:
        socket.create_connection((host, 443), timeout=seconds).close()
        return True
    except OSError:
        return False


if hub_reachable():
    tokenizer = transformers.AutoTokenizer.from_pretrained("gpt2")
    released = transformers.GPT2LMHeadModel.from_pretrained("gpt2").to(device).eval()
    gpt2 = from_hf(released)
    ids = torch.tensor([tokenizer.encode("The Transformer is a model that")], device=device)  # (1, T)
    with torch.no_grad():
        gap = (gpt2(ids)[0] - released(ids).logits).abs().max().item()
    print(f"{count_parameters(gpt2):,} parameters; largest logit difference from Hugging Face's GPT-2: {gap:.1e}")
    text = gpt2.generate(ids, max_new_tokens=30, temperature=0)
    print(tokenizer.decode(text[0]))
else:
    print("skipped: the Hugging Face hub is not reachable from here (run this chapter on Colab to see real GPT-2)")

# %% [markdown]
# ## 6. A Llama-style model, piece by piece
#
# Llama (Touvron et al. 2023) keeps GPT's layout, a stack of pre-norm decoder blocks, and changes almost every part
# inside it. Chapters 02 to 04 met most of them as exercises; `course_utils` now has each as a module. RMSNorm and
# SwiGLU are shown equal to Llama's own modules below, rotary positions and grouped-query attention through the
# whole-model proof that follows them:
#
# | | GPT / GPT-2 | Llama |
# | --- | --- | --- |
# | normalisation | LayerNorm (mean and variance, shift) | RMSNorm: root mean square only (chapter 04's exercise) |
# | positions | learned table added to the embeddings | rotary, inside attention (chapter 03's exercise) |
# | attention | multi-head | grouped-query: fewer key/value heads (chapter 02's exercise) |
# | feed-forward | GELU, $4\,d_\text{model}$ | SwiGLU, a gated network (new here) |
# | biases | GPT-2 yes; the course's `GPT` as its `bias` says | none |
# | head | tied to the embedding | its own matrix (the smallest Llama-family models tie it; `from_hf` follows the config) |
#
# **RMSNorm** divides each vector by its root mean square, $x / \sqrt{\frac{1}{d}\sum_j x_j^2 + \epsilon}$, then
# scales it by $\gamma$: no mean subtracted, no shift. `RMSNorm` computes in float32 whatever the input's dtype,
# as Llama does. Equal to PyTorch's `F.rms_norm` and to Llama's own module:

# %%
from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm

h = torch.randn(2, 5, 64) * 3 + 1  # (B, T, d_model): a mean far from 0, so that subtracting it would show
norm = RMSNorm(64, eps=1e-6)
theirs_norm = LlamaRMSNorm(64, eps=1e-6)
with torch.no_grad():
    norm.weight.normal_()
    theirs_norm.weight.copy_(norm.weight)
    print("RMSNorm == F.rms_norm:", torch.allclose(norm(h), F.rms_norm(h, (64,), norm.weight, 1e-6), atol=1e-6))
    print("RMSNorm == Llama's LlamaRMSNorm:", torch.allclose(norm(h), theirs_norm(h), atol=1e-6))

# %% [markdown]
# **Rotary positions.** Chapter 03's exercise turned each pair of dimensions $(2i, 2i+1)$ of a query or key at
# position $m$ by the angle $m\,\omega_i$, $\omega_i = \theta^{-2i/d_k}$, so that a query-key score depends on the two
# positions only through their distance. That is the pairing of the RoFormer paper and of Meta's original Llama code.
# Hugging Face's Llama, GPT-NeoX and most code you will read pair dimension $i$ with $i + d_k/2$ instead: the first
# half of the vector with the second. `apply_rotary(x, positions, theta, pairing)` does both. Same angles, other
# pairs: the two are the same function up to a fixed reordering of the dimensions, which the cell checks.

# %%
d_k = 8
x = torch.randn(1, 1, 6, d_k)  # (B, h, T, d_k): one head, 6 positions
positions = torch.arange(6)  # (T,)
halves = apply_rotary(x, positions, pairing="halves")
interleaved = apply_rotary(x, positions, pairing="interleaved")
# pair i is (i, i + d_k/2) in one and (2i, 2i + 1) in the other: this order of the dimensions maps one onto the other
order = torch.stack([torch.arange(d_k // 2), torch.arange(d_k // 2) + d_k // 2], dim=-1).flatten()  # 0, 4, 1, 5, ...
print("dimension order:", order.tolist())
print("the pairings differ:", not torch.allclose(halves, interleaved, atol=1e-3))
print(
    "and agree once the dimensions are reordered:",
    torch.allclose(halves[..., order], apply_rotary(x[..., order], positions, pairing="interleaved"), atol=1e-6),
)

# %% [markdown]
# Converting Meta's checkpoints to Hugging Face's format reorders the rows of $W^Q$ and $W^K$ in just this way, so
# that the halves pairing computes what Meta's model computed with neighbours.
#
# **Your turn: rotary embeddings, Llama's way.** Write `my_rotary(x, positions, theta)`: `x` of shape
# `(B, h, T, d)`, `positions` of shape `(T,)` (after a KV cache they do not start at 0), and `theta` the base of the
# frequencies. Pair dimension $i$ with $i + d/2$, and turn pair $i$ at position $m$ by the angle $m\,\theta^{-2i/d}$:
# $(a, b) \mapsto (a\cos - b\sin,\; a\sin + b\cos)$. Chapter 03's exercise paired neighbours; this one is what
# Hugging Face's Llama computes. Return the shape of `x`. The checker compares with `apply_rotary`, which the cells
# below use, and also runs your function on a stand-in for a GPU: make new tensors, such as the exponents, where `x`
# is (`device=x.device`).


# %% tags=["exercise"]
def my_rotary(x, positions, theta):
    ### BEGIN SOLUTION
    d = x.size(-1)
    two_i = torch.arange(0, d, 2, dtype=torch.float32, device=x.device)  # (d/2,): arange already gives 2i
    omega = theta ** (-two_i / d)  # (d/2,)
    angles = positions.float()[:, None] * omega  # (T, d/2)
    cos, sin = angles.cos(), angles.sin()
    a, b = x[..., : d // 2], x[..., d // 2 :]  # (B, h, T, d/2) each: pair i = (i, i + d/2)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)  # (B, h, T, d)
    ### END SOLUTION


check_rotary_halves(my_rotary)

# %% [markdown]
# **SwiGLU.** Llama's feed-forward network has three matrices: an up-projection, a *gate* that passes through SiLU
# ($x \cdot \sigma(x)$), and a down-projection:
#
# $$\mathrm{FFN}(x) = W_\text{down}\left(\mathrm{SiLU}(x\,W_\text{gate}) \odot x\,W_\text{up}\right)$$
#
# The gate decides, feature by feature and token by token, how much of the up-projection passes. Three matrices of
# width $d_\text{ff}$ hold as many weights as GPT's two of width $4\,d_\text{model}$ when $d_\text{ff} =
# \tfrac{8}{3}\,d_\text{model}$, Llama's choice, rounded up, here to a multiple of 16 ($\tfrac{8}{3} \times 64
# \approx 171$, so 176; Llama's own sizes round up to a multiple of 256).
# Equal to Llama's `LlamaMLP`:

# %%
llama_config = transformers.LlamaConfig(  # rotary base and RMSNorm epsilon not the defaults: the proof below reads them
    vocab_size=100, hidden_size=64, intermediate_size=176, num_hidden_layers=2, num_attention_heads=8,
    num_key_value_heads=2, max_position_embeddings=64, rope_theta=500000.0, rms_norm_eps=1e-3,
)  # fmt: skip
swiglu = SwiGLU(64, 176)
theirs_mlp = LlamaMLP(llama_config)
with torch.no_grad():
    for ours_layer, their_layer in (
        (swiglu.w_gate, theirs_mlp.gate_proj),
        (swiglu.w_up, theirs_mlp.up_proj),
        (swiglu.w_down, theirs_mlp.down_proj),
    ):
        ours_layer.weight.copy_(their_layer.weight)  # nn.Linear both: (out, in), nothing to transpose
    print("SwiGLU == LlamaMLP:", torch.allclose(swiglu(h), theirs_mlp(h), atol=1e-6))
print(
    f"weights: SwiGLU at d_ff=176: {count_parameters(swiglu):,}; GPT's network at 4 x 64 without biases: {2 * 64 * 256:,}"
)

# %% [markdown]
# **Grouped-query attention.** Chapter 02's exercise let $h$ query heads share $g < h$ key/value heads, each
# key/value head serving $h/g$ neighbouring query heads. `expand_kv(x, n_rep)` repeats each key/value head next to
# itself, `(B, g, T, d_k)` to `(B, h, T, d_k)`: query head $j$ reads key head $\lfloor j / (h/g) \rfloor$. Only the
# $g$ heads are computed and kept in the KV cache; the expansion happens at every step. `GroupedQueryAttention`
# puts it together with the rotary embedding; `Llama` stacks `LlamaBlock`s (RMSNorm, attention, RMSNorm, SwiGLU).
# `GPT` and `Llama` share one `generate`, KV cache included, from their base class `CausalLM`: both take token ids
# and return logits, whatever happens inside.

# %%
keys = torch.arange(3.0).view(1, 3, 1, 1)  # (B, g=3, T=1, d_k=1): key head i holds the number i
print("key head read by each of 6 query heads:", expand_kv(keys, 2).flatten().tolist())
attention = GroupedQueryAttention(d_model=64, n_heads=8, n_kv_heads=2)
cache = KVCache()
out, _ = attention(torch.randn(1, 5, 64), cache)
print("output", tuple(out.shape), "| cached keys", tuple(cache.keys.shape), "= (B, n_kv_heads, T, d_k)")
set_seed(0)
llama = Llama(vocab_size=100, block_size=64, d_model=64, n_heads=8, n_kv_heads=2, n_layers=2, d_ff=176)
print(llama.blocks[0])
print("generate comes from CausalLM for both:", isinstance(llama, CausalLM) and isinstance(ours, CausalLM))

# %% [markdown]
# **The proof.** `from_hf` copies a `LlamaForCausalLM` too, through `LLAMA_NAMES` (Llama's layers are `nn.Linear`:
# nothing to transpose, nothing packed). On the random model configured above, with 8 query heads and 2 key/value
# heads, Llama 3's rotary base (500,000) and an RMSNorm epsilon of $10^{-3}$, the same two claims as for GPT-2, with
# a copy that kept the defaults (base 10,000, epsilon $10^{-6}$) beside it:

# %%
set_seed(0)
hf_llama = perturb(transformers.LlamaForCausalLM(llama_config).eval())
llama = from_hf(hf_llama)
print(
    type(llama).__name__,
    "| n_kv_heads:",
    llama.blocks[0].self_attn.n_kv_heads,
    "| rotary theta:",
    llama.blocks[0].self_attn.rope_theta,
)
defaults = from_hf(hf_llama)  # a loader that kept Llama 2's rotary base and the course's epsilon
for module in defaults.modules():
    if isinstance(module, RMSNorm):
        module.eps = 1e-6
    if isinstance(module, GroupedQueryAttention):
        module.rope_theta = 10000.0
with torch.no_grad():
    reference_window = hf_llama(window).logits  # (B, 64, V): every position of the window
    llama_gap = (llama(window)[0] - reference_window).abs().max().item()
    defaults_gap = (defaults(window)[0] - reference_window).abs().max().item()
    reference = hf_llama(idx).logits  # (B, T, V): the batch the cells below compare on
theirs = hf_llama.generate(prompt, max_new_tokens=40, do_sample=False, eos_token_id=None, pad_token_id=0)
mine = llama.generate(prompt, max_new_tokens=40, temperature=0, use_cache=True)
print(f"largest logit difference over 2 x 64 positions: from_hf below 1e-5: {llama_gap < 1e-5}; with theta 10000 "
      f"and epsilon 1e-6: {defaults_gap:.1f} | same greedy continuations: {torch.equal(mine, theirs)}")  # fmt: skip
assert llama_gap < 1e-5 < 1e-3 < defaults_gap and torch.equal(mine, theirs)
print()
for ours_name, theirs_name in LLAMA_NAMES[:6]:
    print(f"{ours_name:20} <-> {theirs_name}")

# %% [markdown]
# **Predict, then run.** The copy's logits agree with Llama's. Suppose instead every attention layer of the copy paired
# its rotary dimensions $(2i, 2i+1)$, as chapter 03 did, with the same weights. What happens to the logits of a
# sequence, compared with Llama's?
#
# - (a) they stay the same: both pairings turn by the same angles;
# - (b) they change at every position, the first one included;
# - (c) an error: the shapes no longer fit;
# - (d) the first position's logits stay the same; every later position's change.
#
# Write your letter below; the cell after it measures the answer.

# %% tags=["exercise"]
### BEGIN SOLUTION
my_prediction = "d"
### END SOLUTION
check_prediction("rotary-pairing", my_prediction)  # your answer: "a", "b", "c" or "d"

# %% tags=["nbval-ignore-output"]
with torch.no_grad():
    for block in llama.blocks:
        block.self_attn.rotary_pairing = "interleaved"
    wrong = llama(idx)[0]  # (B, T, V)
    for block in llama.blocks:
        block.self_attn.rotary_pairing = "halves"
per_position = (wrong - reference).abs().amax(dim=(0, 2))  # (T,): the largest difference at each position
print("largest logit difference at positions 0, 1, 2, 3:", [f"{d:.1e}" for d in per_position[:4].tolist()])
assert per_position[0] < 1e-5 and (per_position[1:] > 1e-4).all()
# why the first position is spared: under the causal mask its query sees one key, which takes all the weight,
# whatever the scores are, so whatever the rotation does to them
scores = torch.randn(4, 4, generator=torch.Generator().manual_seed(0)) * 10  # any scores at all
first_row = scores.masked_fill(~causal_mask(4), float("-inf")).softmax(dim=-1)[0]
print("the first query's attention weights, for any scores:", first_row.tolist())
assert first_row.tolist() == [1.0, 0.0, 0.0, 0.0]

# %% [markdown]
# ## 7. What the modern choices buy
#
# ### The KV cache: multi-head against grouped-query attention
#
# During generation every layer keeps the keys and values of every earlier token (chapter 07): per token,
#
# $$\text{bytes per token} = 2 \times n_\text{layers} \times n_\text{kv heads} \times d_k \times \text{bytes per number},$$
#
# the 2 for keys and values. Grouped-query attention divides it by $h / g$. The cell fills the caches of three
# versions of the model above (8 key/value heads, that is multi-head attention; 2; and 1, multi-query attention)
# with 32 tokens, measures the bytes the caches hold and asserts the formula:

# %%
T = 32
tokens = torch.randint(0, 100, (1, T), generator=torch.Generator().manual_seed(2))  # (1, T)
print("n_kv_heads | bytes per token, measured | formula")
for g in (8, 2, 1):
    model = Llama(vocab_size=100, block_size=64, d_model=64, n_heads=8, n_kv_heads=g, n_layers=2, d_ff=176).eval()
    caches = [KVCache() for _ in model.blocks]
    with torch.no_grad():
        model(tokens, caches=caches)
    measured = sum(t.numel() * t.element_size() for c in caches for t in (c.keys, c.values)) / T
    formula = 2 * 2 * g * 8 * 4  # 2 layers, g heads of d_k = 8, float32
    print(f"{g:10d} | {measured:25.0f} | {formula:7d}")
    assert measured == formula

# %% [markdown]
# The same formula at the sizes of released models (their published configurations), with 2-byte numbers
# (bfloat16), per token and for a whole context of each model's length:

# %%
released = {  # layers, key/value heads, d_k, context
    "GPT-2 small (multi-head)": (12, 12, 64, 1024),
    "Llama 2 7B (multi-head)": (32, 32, 128, 4096),
    "Llama 3 8B (grouped-query, 8 of 32 heads)": (32, 8, 128, 8192),
}
for name, (layers, kv_heads, head_size, context) in released.items():
    per_token = 2 * layers * kv_heads * head_size * 2
    print(
        f"{name:42} {per_token / 1024:4.0f} KiB per token, {per_token * context / 2**30:5.3f} GiB at {context:,} tokens"
    )

# %% [markdown]
# Per token, Llama 3 8B keeps a quarter of what a multi-head model of its shape keeps (Llama 2 7B's 512 KiB), so its
# context of twice the length costs half the memory: grouped-query attention is much of why long contexts fit on one
# GPU. What it costs in quality is a question of training at scale
# that this notebook cannot measure; the GQA paper reports quality close to multi-head attention.
#
# ### Attention: the readable path against the fused kernel
#
# `scaled_dot_product_attention` of chapter 01 builds the `(T, T)` matrix of scores, then its softmax: memory that
# grows with $T^2$. PyTorch's `F.scaled_dot_product_attention` (which `MultiHeadAttention` and
# `GroupedQueryAttention` call unless you ask for the weights) computes the same output block by block and never
# holds the whole matrix. `peak_memory(fn)` measures the most memory a call holds at once. On a GPU that is CUDA's
# own count, everything included. On a CPU PyTorch keeps no such count: `peak_memory` adds up the tensors PyTorch's
# operations return, so a kernel's memory *inside* one operation is not seen. There the fused column is what the
# kernel returns, the output and one log-sum-exp per row (kept for the backward pass), and the cell asserts exactly
# that; on a GPU it asserts the fused kernel holds less than a quarter of the readable path. One sequence, 4 heads of
# 64 dimensions, causal:


# %% tags=["nbval-ignore-output"]
def median_ms(fn, repeats=3):
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


print("     T | readable: ms | MiB    | fused: ms | MiB  | the (h, T, T) scores: MiB")
rows = {}
for T in (256, 512, 1024, 2048):
    q, k, v = (torch.randn(1, 4, T, 64, device=device) for _ in range(3))  # (B, h, T, d_k)
    triangle = torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T): True = may attend
    readable = partial(scaled_dot_product_attention, q, k, v, triangle)  # returns (output, weights)
    fused = partial(F.scaled_dot_product_attention, q, k, v, is_causal=True)  # returns the output
    assert torch.allclose(readable()[0], fused(), atol=1e-4)  # the same function
    matrix = 4 * T * T * 4 / 2**20  # the scores: h * T * T float32 numbers
    rows[T] = (
        median_ms(readable),
        peak_memory(readable, device)[1] / 2**20,
        median_ms(fused),
        peak_memory(fused, device)[1] / 2**20,
    )
    print(f"{T:6d} | {rows[T][0]:12.1f} | {rows[T][1]:6.1f} | {rows[T][2]:9.1f} | {rows[T][3]:4.1f} | {matrix:9.1f}")
    assert rows[T][1] >= matrix  # the readable path holds (T, T) matrices
    returned = (4 * T * 64 + 4 * T) * 4 / 2**20  # the output (h, T, d_k) and a log-sum-exp per row, float32
    if device.type == "cpu":  # what the CPU count sees of the fused kernel: what it returns
        assert math.isclose(rows[T][3], returned, rel_tol=0.01)
    else:  # CUDA's count, the kernel's own memory included
        assert rows[T][3] < rows[T][1] / 4
assert rows[2048][3] < 2.5 * rows[1024][3] and rows[2048][1] > 3.5 * rows[1024][1]  # growth with T vs with T²
assert rows[2048][2] < rows[2048][0]  # fused is faster at the longest context

# %% [markdown]
# The readable path holds several `(h, T, T)` matrices at once (the masked scores, their softmax, the weights): its
# memory grows four-fold each time $T$ doubles (printed; asserted above 3.5-fold from 1,024 to 2,048). What the fused kernel returns grows in proportion to $T$;
# on a GPU, where its own memory is counted too, it holds a small fraction of the readable path's (asserted there).
# In this run the fused kernel was also the faster one (asserted at the longest context only: timings vary from run
# to run), in part because a causal kernel skips the blocks above the diagonal, about half the work, where the
# readable path computes every score and then hides half of them. Never holding the $T \times T$ matrix is what makes long
# contexts affordable on a GPU (FlashAttention, Dao et al. 2022).
#
# ### GPT against Llama-style, at the same size, on Tiny Shakespeare
#
# Last, does the Llama recipe learn faster than chapter 07's GPT at equal size? Two character-level models of about
# 107 thousand parameters, trained for 200 steps each with the same data, batches and schedule: chapter 07's GPT
# without biases, and the Llama-style model with 2 key/value heads for 4 query heads (it has no position table and
# half the key/value weights; its untied head and a SwiGLU network of $d_\text{ff}$ = 192 take them back). Three
# seeds each, validation loss at the end. A third model tells the share of the rotary positions apart: the same
# Llama-style model with GPT's learned position table instead (every rotation by the angle 0, so attention sees no
# distance but what the table teaches it). `Llama` builds its inputs in two methods a subclass may override:
# `embed(idx, past)`, the vectors of the new tokens (`past` is how many positions a cache already holds), and
# `layer_inputs(idx, past)`, what every layer gets besides the stream, the rotary angles' cosines and sines. The third
# model adds its table in the first and gives every angle 0 (cosine 1, sine 0) in the second. Its table is
# $64 \times 64$ = 4,096 more weights than the Llama-style model's, which if anything helps it. (On a GPU they train in bfloat16, or, on one without it such as Colab's
# free T4, in float16 with a gradient scaler, chapter 02's `amp`: a run there gives other figures than the CPU's.)

# %% tags=["nbval-ignore-output"]
text = load_tiny_shakespeare()
chars = CharTokenizer(text, specials=False)
train_ids, val_ids = split_ids(text, chars)
gpt_sizes = dict(block_size=64, d_model=64, n_heads=4, n_layers=2, bias=False)
llama_sizes = dict(block_size=64, d_model=64, n_heads=4, n_kv_heads=2, n_layers=2, d_ff=192)


class LearnedPositionLlama(Llama):
    """The Llama-style model with GPT's learned position table in place of rotary angles."""

    def __init__(self, vocab_size, **sizes):
        super().__init__(vocab_size, **sizes)
        self.position_embed = torch.nn.Embedding(sizes["block_size"], sizes["d_model"])  # (block_size, d_model)
        torch.nn.init.normal_(self.position_embed.weight, std=0.02)  # as GPT's

    def embed(self, idx, past):
        positions = torch.arange(past, past + idx.size(1), device=idx.device)  # (T,)
        return self.dropout(self.token_embed(idx) + self.position_embed(positions))  # (B, T, d_model)

    def layer_inputs(self, idx, past):
        cos, sin = super().layer_inputs(idx, past)["rotary"]  # (T, d_k / 2) each
        return {"rotary": (torch.ones_like(cos), torch.zeros_like(sin))}  # the angle 0: no rotation


builders = {
    "GPT": lambda: GPT(chars.vocab_size, **gpt_sizes),
    "Llama-style": lambda: Llama(chars.vocab_size, **llama_sizes),
    "Llama, learned": lambda: LearnedPositionLlama(chars.vocab_size, **llama_sizes),
}
config = TrainConfig(
    steps=200, batch_size=32, lr=3e-3, warmup_steps=20, schedule="cosine", label_smoothing=0.0, betas=(0.9, 0.95)
)
val_loss, seconds, cpu_seconds = ({name: [] for name in builders} for _ in range(3))
sizes = {}
for seed in (0, 1, 2):  # the three models in turn, seed by seed: a busy moment of the machine slows each alike
    for name, build in builders.items():
        set_seed(seed)
        model = build().to(device)
        started = time.process_time()  # this process's processor time: other programs hardly change it
        history = train(
            model,
            random_windows(train_ids, 64, config.batch_size, seed=seed),
            lambda m, x, y: m(x, y)[1],
            config,
            desc=f"{name}, seed {seed}",
        )
        seconds[name].append(history.seconds)
        cpu_seconds[name].append(time.process_time() - started)
        val_loss[name].append(estimate_loss(model, {"val": val_ids}, config.batch_size, iters=20)["val"])
        sizes[name] = count_parameters(model)
for name in builders:
    clock, processor = 1000 * statistics.median(seconds[name]) / 200, 1000 * min(cpu_seconds[name]) / 200
    print(f"{name:14} {sizes[name]:,} parameters, {clock:.1f} ms a step (median of the seeds); "
          f"processor time, cheapest seed: {processor:.1f} ms")  # fmt: skip
for name, losses in val_loss.items():
    print(f"{name:14} validation loss by seed: {', '.join(f'{v:.3f}' for v in losses)}; "
          f"mean {statistics.mean(losses):.3f}, spread {max(losses) - min(losses):.3f}")  # fmt: skip
means = {name: statistics.mean(losses) for name, losses in val_loss.items()}
assert max(val_loss["Llama-style"]) < min(val_loss["GPT"])  # no seed of one overlaps any seed of the other
assert max(val_loss["Llama-style"]) < min(val_loss["Llama, learned"])  # rotary against the table, same model
assert means["GPT"] - means["Llama, learned"] < (means["GPT"] - means["Llama-style"]) / 4  # most of the gap
if device.type == "cpu":  # the Llama-style step costs more processor time (each model's cheapest seed compared)
    assert min(cpu_seconds["Llama-style"]) > min(cpu_seconds["GPT"])

# %% [markdown]
# In this run the Llama-style model ended below the GPT at every seed: its worst seed beat the GPT's best (asserted),
# and the gap between the means is several times either spread (printed). Where does it come from? Not from the
# parameter count, which is nearly the same (printed above). The third row answers most of it: with GPT's learned
# position table instead of rotary angles, the same Llama-style model lands near the GPT, every seed above the rotary
# model's (asserted), and its mean is closer to the GPT's than a quarter of the GPT's gap to the rotary model
# (asserted). A learned table starts random and must learn what every position means, while rotary embeddings give
# attention the distance between two characters from the first step. On the CPU the Llama-style step is also the slower
# one, on the clock and in processor time (both printed; processor time adds up every thread PyTorch runs, so on several
# cores it exceeds the clock). The assert compares processor time, which a machine busy with other programs disturbs far
# less than the clock. Where its time goes is not measured here (candidates: SwiGLU's third matrix, the rotation, three
# separate projections where the GPT packs them into one product, RMSNorm's several operations). This is a comparison at
# 200 steps of a tiny model on characters; it says nothing about which recipe wins at scale, where the choices were made
# for cost (the cache, no biases) as much as for loss.
#
# ## Pitfalls
#
# | Mistake | What happens | Fix |
# | --- | --- | --- |
# | a `Conv1D` weight copied without transposing | non-square weights fail to load; a square one (`attn.c_proj`) loads silently and the model is wrong | transpose every `Conv1D` weight (`from_hf` finds them by type) |
# | `c_attn` split in the wrong order or along the wrong axis | wrong attention, no error for square pieces | transpose, then split into queries, keys, values along the output dimension |
# | exact GELU for GPT-2's tanh form | logits close but not equal | `activation="gelu_tanh"` |
# | rotary pairs $(2i, 2i+1)$ with Hugging Face's weights | the first position right, every later one wrong, no error | pair $i$ with $i + d_k/2$ (or reorder $W^Q$, $W^K$) |
# | `repeat` instead of `repeat_interleave` for the key/value heads | query heads read the wrong group's keys, no error | each key/value head repeated next to itself |
# | a "proof" with all-zero biases or unit norm scales | a swapped bias or norm goes unseen | compare on weights where every parameter matters, and on generated text |
#
# ## Summary
#
# - GPT-2 is chapter 07's GPT with GELU's tanh form; its weights need renaming, a split of `c_attn` and every `Conv1D`
#   weight transposed. `from_hf` does it through one name table, and the copy agrees within $10^{-5}$ and writes the
#   same greedy text.
# - Llama changes the parts, not the layout: RMSNorm, rotary positions (paired $i$ with $i + d_k/2$ in Hugging
#   Face's code), SwiGLU, grouped-query attention, no biases, an untied head. `from_hf` copies it too, proven the same
#   way.
# - Grouped-query attention divides the KV cache by $h/g$ (formula asserted); the fused attention kernel is built
#   never to hold the $T \times T$ matrix (a CPU run measures only what it returns, a GPU run all it holds); at equal
#   size the Llama-style model reached a lower loss in this run's three seeds, most
#   of it from its rotary positions.
#
# ## Exercises
#
# {{EXERCISES}}
#
# **Exercise 1 · Key/value heads without copying first.** Write `my_expand_kv(x, n_rep)`, from `(B, g, T, d)` to
# `(B, g * n_rep, T, d)`, where output head $j$ is input head $j$ // `n_rep`. Any way that gives those heads passes
# (`repeat_interleave` does); try it with `expand` and `reshape` alone, as Llama does: `expand` is a view, no memory
# copied, and the `reshape` that merges the axes then copies once. Hint: give `x` a new axis of size 1 right after the
# heads, expand that axis to `n_rep`, then merge it with the heads. Which order of the two axes in the merge gives
# head 0, 0, 1, 1 rather than 0, 1, 0, 1?


# %% tags=["exercise"]
def my_expand_kv(x, n_rep):
    ### BEGIN SOLUTION
    B, g, T, d = x.shape
    return x[:, :, None].expand(B, g, n_rep, T, d).reshape(B, g * n_rep, T, d)  # (B, g, n_rep, T, d) -> merged
    ### END SOLUTION


check_expand_kv(my_expand_kv)

# %% [markdown]
# **Exercise 2 · One GPT-2 block, by hand.** Write `my_gpt2_block_state(block_state)`: it takes the state dict of
# one GPT-2 block (keys `ln_1.weight`, `ln_1.bias`, `attn.c_attn.weight`, `attn.c_attn.bias`, `attn.c_proj.weight`,
# ..., `mlp.c_proj.bias`; print `block_state.keys()` to see them) and returns the state dict of the course's
# `GPTBlock` (keys `norm1.weight`, `self_attn.w_q.weight`, ..., `feed_forward.w_2.bias`). Use what sections 2 and 3
# showed, not `from_hf`. The checker loads your weights into a GPT and compares its logits with GPT-2's.


# %% tags=["exercise"]
def my_gpt2_block_state(block_state):
    ### BEGIN SOLUTION
    state = {}
    for ours_name, theirs in [("norm1", "ln_1"), ("norm2", "ln_2"), ("self_attn.w_o", "attn.c_proj"),
                              ("feed_forward.w_1", "mlp.c_fc"), ("feed_forward.w_2", "mlp.c_proj")]:  # fmt: skip
        weight = block_state[f"{theirs}.weight"]
        state[f"{ours_name}.weight"] = weight.t() if theirs.startswith(("attn", "mlp")) else weight  # Conv1D: (in, out)
        state[f"{ours_name}.bias"] = block_state[f"{theirs}.bias"]
    qkv_weight = block_state["attn.c_attn.weight"].t()  # (d, 3d) -> (3d, d)
    qkv_bias = block_state["attn.c_attn.bias"]  # (3d,)
    for i, part in enumerate(("w_q", "w_k", "w_v")):
        state[f"self_attn.{part}.weight"] = qkv_weight.chunk(3, dim=0)[i]
        state[f"self_attn.{part}.bias"] = qkv_bias.chunk(3)[i]
    return state
    ### END SOLUTION


check_gpt2_block_weights(my_gpt2_block_state)

# %% [markdown]
# **Going further.** Load the released `gpt2` on Colab (section 5) and sample from it with `temperature=0.8`
# (chapter 07's) and `top_k=40`; then take `"gpt2-medium"` and compare. Or copy a small Llama-family model
# from the hub (`HuggingFaceTB/SmolLM2-135M` is one) with `from_hf`: which settings of its configuration does
# `from_hf` check, and what would it say if one did not fit?
#
# This is the last chapter of Part I. From here, the code you would read next (nanoGPT, `transformers`'
# `modeling_llama.py`, *LLMs from Scratch*) is made of the pieces you have now written yourself. Part II goes on with
# what such models need next: [chapter 11](11_distributed.ipynb) trains them on more than one process, and survives a
# disconnect.
