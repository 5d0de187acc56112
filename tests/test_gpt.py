"""The GPT: causality, the key/value cache, sampling, size, and that it learns."""

from dataclasses import replace

import pytest
import torch
from helpers import benchmark_module
from torch.testing import assert_close

from course_utils import GPT, KVCache, MultiHeadAttention, TrainConfig, estimate_loss, train


def small(**kw):
    torch.manual_seed(0)
    return GPT(vocab_size=11, block_size=16, d_model=32, n_heads=4, n_layers=2, **kw).eval()


def test_changing_future_tokens_never_changes_earlier_logits():
    model = small()
    idx = torch.randint(0, 11, (2, 10))
    changed = idx.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 11
    assert_close(model(changed)[0][:, :6], model(idx)[0][:, :6])


def test_cached_forward_equals_the_full_forward():
    model = small()
    idx = torch.randint(0, 11, (2, 12))
    full, _ = model(idx)
    caches = [KVCache() for _ in model.blocks]
    prefix, _ = model(idx[:, :7], caches=caches)  # several new positions at once
    steps = [model(idx[:, t : t + 1], caches=caches)[0] for t in range(7, 12)]  # then one at a time
    assert_close(torch.cat([prefix, *steps], dim=1), full)
    assert len(caches[0]) == 12


def test_attention_with_a_cache_equals_causal_attention_over_everything():
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 9, 16)
    expected, _ = mha(x, x, x, is_causal=True)
    cache = KVCache()
    first, _ = mha(x[:, :5], x[:, :5], x[:, :5], is_causal=True, cache=cache)
    second, _ = mha(x[:, 5:], x[:, 5:], x[:, 5:], is_causal=True, cache=cache)  # 4 queries after 5 cached keys
    assert_close(torch.cat([first, second], dim=1), expected)


@pytest.mark.parametrize("temperature, top_k", [(0.0, None), (1.0, None), (0.8, 3)])
def test_cached_and_uncached_generation_produce_identical_tokens(temperature, top_k):
    model = small()
    prompt = torch.randint(0, 11, (2, 3))
    outs = [
        model.generate(prompt, 25, temperature, top_k, use_cache=cache, generator=torch.Generator().manual_seed(5))
        for cache in (True, False)
    ]  # 28 tokens: beyond block_size=16, so the window also slides
    assert outs[0].shape == (2, 28)
    assert torch.equal(outs[0], outs[1])
    assert torch.equal(outs[0][:, :3], prompt)


def test_top_k_one_is_greedy_and_generation_keeps_the_mode():
    model = small().train()
    prompt = torch.randint(0, 11, (1, 4))
    greedy = model.generate(prompt, 8, temperature=0.0)
    assert torch.equal(model.generate(prompt, 8, temperature=1.0, top_k=1), greedy)
    assert model.training


def test_bad_arguments_give_clear_errors():
    model = small()
    with pytest.raises(ValueError, match="exceed block_size=16"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="temperature >= 0"):
        model.generate(torch.zeros(1, 1, dtype=torch.long), 2, temperature=-1.0)
    with pytest.raises(ValueError, match=r"token ids of shape \(B, T\)"):
        model(torch.zeros(4))
    V = model.head.out_features
    for bad in (V, -1):  # nn.Embedding's IndexError says only "index out of range in self"
        with pytest.raises(
            ValueError, match=rf"idx holds ids outside \[0, {V}\) \(from {min(bad, 0)} to {max(bad, 0)}\)"
        ):
            model(torch.tensor([[0, bad]]))

    class ShortPositions(GPT):  # a table of its own, indexed out of range: PyTorch's error stands, ids not blamed
        def embed(self, idx, past):
            return self.token_embed(idx) + torch.nn.functional.embedding(torch.arange(idx.size(1)), torch.zeros(2, 32))

    short = ShortPositions(vocab_size=11, block_size=16, d_model=32, n_heads=4, n_layers=1)
    with pytest.raises(IndexError, match="index out of range"):
        short(torch.tensor([[1, 2, 3]]))
    prompt = torch.zeros(1, 2, dtype=torch.long)
    for bad in (-1, 2.0, True):
        with pytest.raises(ValueError, match="max_new_tokens must be an int >= 0"):
            model.generate(prompt, bad)
    assert model.generate(prompt, 0).equal(prompt)
    assert model.generate(prompt, torch.tensor(2)).shape == (1, 4)  # a 0-d integer tensor counts too
    with pytest.raises(ValueError, match=r"at least one token long; got torch.int64 \(1, 0\)"):
        model.generate(prompt[:, :0], 2)
    with pytest.raises(ValueError, match=r"add a batch dimension, idx\[None\]"):
        model.generate(prompt[0], 2)
    with pytest.raises(ValueError, match="token ids"):
        model.generate(prompt.float(), 2)


def test_the_nanogpt_shakespeare_size_has_10_65_million_parameters_and_tied_weights():
    model = GPT(vocab_size=65, block_size=256, d_model=384, n_heads=6, n_layers=6, dropout=0.2, bias=False)
    assert model.head.weight is model.token_embed.weight
    total = sum(p.numel() for p in model.parameters())  # the tied matrix once
    assert total - model.position_embed.weight.numel() == 10_646_784  # nanoGPT reports "10.65M"


@pytest.mark.slow
def test_a_small_gpt_learns_a_repeating_sequence():
    model = small().train()
    pattern = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3] * 10)

    def windows():
        g = torch.Generator().manual_seed(0)
        while True:
            starts = torch.randint(0, len(pattern) - 17, (16,), generator=g)
            w = pattern[starts[:, None] + torch.arange(17)]
            yield w[:, :-1], w[:, 1:]

    config = TrainConfig(steps=150, lr=3e-3, warmup_steps=10, schedule="cosine", label_smoothing=0.0)
    train(model, windows(), lambda m, x, y: m(x, y)[1], config, progress=False)
    losses = estimate_loss(model, {"pattern": pattern}, batch_size=8, iters=4)
    assert losses["pattern"] < 0.2
    assert model.generate(pattern[None, :10], 10, temperature=0.0)[0, 10:].tolist() == pattern[10:20].tolist()


@pytest.mark.parametrize("autocast", [False, True], ids=["float32", "bfloat16 autocast"])
def test_a_training_step_runs_within_3_percent_of_the_operators_of_nanogpts_architecture(autocast):
    """The CPU's proxy for a GPU's kernel launches: the ATen operators that compute in one training step (forward,
    loss, backward, clipping, AdamW) of the GPU recipe's structure. Three separate query, key and value
    projections would cost 36 more matrix products a step here; packed (packed_linear), only one copy per layer."""
    profile = benchmark_module("profile_gpt")
    bench = benchmark_module("bench_gpt")
    sizes = replace(bench.PRESETS["gpu"].model, d_model=64, n_heads=4, block_size=32, n_layers=3)
    config = bench.PRESETS["gpu"].training
    ours, theirs = (profile.operators_per_step(kind, sizes, config, autocast=autocast) for kind in bench.MODELS)
    assert ours.computing["mm"] == theirs.computing["mm"], (ours.computing["mm"], theirs.computing["mm"])
    assert sum(ours.computing.values()) <= 1.03 * sum(theirs.computing.values()), (ours.computing, theirs.computing)


@pytest.mark.slow  # torch.compile traces both models
def test_the_compiled_graphs_of_a_step_hold_within_3_percent_of_nanogpts_operators_too():
    """What torch.compile traces (forward and backward graphs, before Inductor fuses them), bfloat16 autocast."""
    profile = benchmark_module("profile_gpt")
    bench = benchmark_module("bench_gpt")
    sizes = replace(bench.PRESETS["gpu"].model, d_model=64, n_heads=4, block_size=32, n_layers=3)
    ours, theirs = (profile.compiled_operators(kind, sizes) for kind in bench.MODELS)
    assert ours["mm"] == theirs["mm"] > 0
    assert sum(ours.values()) <= 1.03 * sum(theirs.values()), (ours, theirs)
