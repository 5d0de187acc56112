"""Chapter 10's package pieces that need no Hugging Face model: the Llama-style model, peak_memory, and the promise
that only chapter 10 needs `transformers`."""

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from helpers import operators

from course_utils import GPT, KVCache, Llama, LlamaConfig, RMSNorm, SwiGLU, peak_memory
from course_utils.model.llama import swiglu_hidden_size

ROOT = Path(__file__).resolve().parent.parent


def test_course_utils_imports_no_transformers():
    code = "import sys, course_utils, course_utils.checks, course_utils.grade; print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


def test_only_chapters_10_and_12_import_transformers():
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        code = "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code")
        assert ("import transformers" in code) == path.name.startswith(("10_", "12_")), path.name


def test_rms_norm_equals_pytorch_and_keeps_dtype():
    norm = RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_()
    x = torch.randn(3, 5, 16) * 4 + 2
    torch.testing.assert_close(norm(x), F.rms_norm(x, (16,), norm.weight, 1e-6))
    assert norm.bfloat16()(x.bfloat16()).dtype == torch.bfloat16  # a bfloat16 model stays in bfloat16


def test_swiglu_is_the_gated_formula_and_its_hidden_size_rule():
    ffn = SwiGLU(8, 24)
    x = torch.randn(2, 3, 8)
    expected = ffn.w_down(F.silu(ffn.w_gate(x)) * ffn.w_up(x))
    torch.testing.assert_close(ffn(x), expected)
    assert swiglu_hidden_size(64) == 192 and swiglu_hidden_size(96, multiple_of=1) == 256
    assert all(layer.bias is None for layer in (ffn.w_gate, ffn.w_up, ffn.w_down))


def test_llama_caches_generation_and_parameters():
    torch.manual_seed(0)
    config = LlamaConfig(block_size=16, d_model=32, n_heads=4, n_kv_heads=2, n_layers=2)
    model = Llama(50, **asdict(config)).eval()
    prompt = torch.randint(0, 50, (2, 3))
    cached = model.generate(prompt, 10, temperature=0, use_cache=True)
    uncached = model.generate(prompt, 10, temperature=0, use_cache=False)
    assert torch.equal(cached, uncached)
    longer = model.generate(prompt, 20, temperature=0)  # past block_size: the window slides, no error
    assert longer.shape == (2, 23)
    caches = [KVCache() for _ in model.blocks]
    model(prompt, caches=caches)
    assert caches[0].keys is not None and caches[0].keys.shape == (2, 2, 3, 8)  # (B, n_kv_heads, T, d_k)
    assert model.head.weight is not model.token_embed.weight
    tied = Llama(50, **{**asdict(config), "tie_embeddings": True})
    assert tied.head.weight is tied.token_embed.weight
    with pytest.raises(ValueError, match="exceed block_size"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="n_kv_heads in"):
        Llama(50, d_model=32, n_heads=4, n_kv_heads=3)


def test_llama_and_gpt_share_generate():
    assert Llama.generate is GPT.generate


def test_peak_memory_counts_live_tensors_once():
    def two_at_once():
        a = torch.ones(1000, 1000)  # 4 MB
        b = a * 2  # 4 MB more, while a lives
        view = b.view(-1)  # no new memory
        return float(view[0])

    def one_at_a_time():
        total = 0.0
        for _ in range(3):
            a = torch.ones(1000, 1000)
            total += float(a.sum())
            del a
        return total

    result, peak = peak_memory(two_at_once)
    assert result == 2.0 and 8_000_000 <= peak < 8_100_000
    _, peak = peak_memory(one_at_a_time)
    assert 4_000_000 <= peak < 4_100_000  # freed before the next one


def test_the_rotary_angles_are_computed_once_per_forward_not_once_per_layer():
    model = Llama(32, block_size=16, d_model=32, n_heads=4, n_kv_heads=2, n_layers=3)
    idx = torch.randint(0, 32, (2, 10))
    assert operators(lambda: model(idx))["cos"] == 1
    # and a layer called alone still computes its own: the same output
    block, x = model.blocks[0], torch.randn(2, 10, 32)
    positions = torch.arange(10)
    from course_utils.model.positional import rotary_angles

    assert torch.equal(block(x), block(x, rotary=rotary_angles(positions, 8, block.self_attn.rope_theta)))
