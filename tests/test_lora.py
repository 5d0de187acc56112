"""LoRA (``course_utils.model.lora``) against Hugging Face ``peft``'s, the library people fine-tune with: the same
rank, alpha, targets and adapter weights give the same outputs, the same gradients of the adapters and the same
merged weights, on the course's GPT and on GPT-2 and Llama from ``transformers`` (random configurations, offline)."""

from __future__ import annotations

import copy

import pytest
import torch
from test_hf_outside import make_gpt2, make_llama
from torch import nn
from torch.testing import assert_close

from course_utils.model import GPT, GPT2_NAMES, from_hf
from course_utils.model.lora import LoRALinear, add_lora, lora_parameters, merge_lora


def tiny_gpt(seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(61, block_size=24, d_model=32, n_heads=4, n_layers=2).eval()


def with_peft(model: nn.Module, targets: list[str], r: int = 4, alpha: float = 8, **settings):
    peft = pytest.importorskip("peft")  # here, not at the top: its import takes seconds, for the tests that use it
    config = peft.LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, **settings)
    return peft.get_peft_model(copy.deepcopy(model), config)


def randomise_adapters(model: nn.Module, seed: int = 1) -> None:
    """``B`` starts at zero, where every adapter computes nothing: draw both matrices, so that a wrong product
    shows."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in lora_parameters(model).values():
            p.copy_(torch.randn(p.shape, generator=g) * 0.1)


def copy_adapters_to_peft(ours: nn.Module, theirs: nn.Module, rename=lambda name: name) -> int:
    """Our ``...w_q.lora_A`` into peft's ``base_model.model....w_q.lora_A.default.weight``; how many were copied."""
    adapters = lora_parameters(ours)
    with torch.no_grad():
        for name, p in adapters.items():
            module, kind = name.rsplit(".", 1)
            theirs.get_parameter(f"base_model.model.{rename(module)}.{kind}.default.weight").copy_(p)
    return len(adapters)


def adapter_gradients(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad for name, p in model.named_parameters() if p.requires_grad and p.grad is not None}


def test_a_new_adapter_changes_nothing_and_only_adapters_train():
    model, ids = tiny_gpt(), torch.randint(0, 61, (2, 24))
    before, _ = model(ids)
    names = add_lora(model, ["w_q", "w_v"], r=4, lora_alpha=8)
    assert names == [f"blocks.{i}.self_attn.w_{x}" for i in range(2) for x in "qv"]
    assert torch.equal(model(ids)[0], before)  # B = 0: the pretrained model exactly
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable == [f"{name}.lora_{m}" for name in names for m in "AB"]
    assert sum(model.get_parameter(n).numel() for n in trainable) == 4 * 4 * (32 + 32)  # r (d_in + d_out) per layer


@pytest.mark.parametrize("targets", [["w_q", "w_v"], ["w_q", "w_k", "w_v", "w_o", "w_1", "w_2"], ["head"]])
def test_the_course_gpt_with_adapters_computes_what_peft_computes(targets):
    base, ids = tiny_gpt(), torch.randint(0, 61, (3, 24))
    theirs = with_peft(base, targets)
    ours = copy.deepcopy(base)
    add_lora(ours, targets, r=4, lora_alpha=8)
    randomise_adapters(ours)
    assert copy_adapters_to_peft(ours, theirs) == sum("lora_" in name for name, _ in theirs.named_parameters())
    _, our_loss = ours.train()(ids[:, :-1], ids[:, 1:])
    _, their_loss = theirs.train()(ids[:, :-1], ids[:, 1:])
    assert_close(our_loss, their_loss)
    assert our_loss is not None and their_loss is not None
    our_loss.backward()
    their_loss.backward()
    theirs_by_our_names = {
        name.removeprefix("base_model.model.").replace(".default.weight", ""): g
        for name, g in adapter_gradients(theirs).items()
    }
    ours_grads = adapter_gradients(ours)
    assert ours_grads.keys() == theirs_by_our_names.keys()
    for name, g in ours_grads.items():
        assert_close(g, theirs_by_our_names[name], rtol=1e-4, atol=1e-6)


def test_merged_weights_equal_peft_merged_and_unmerging_gives_the_pretrained_weights_back():
    base, ids = tiny_gpt(), torch.randint(0, 61, (3, 24))
    theirs = with_peft(base, ["w_q", "w_o", "w_1"])
    ours = copy.deepcopy(base)
    add_lora(ours, ["w_q", "w_o", "w_1"], r=4, lora_alpha=8)
    randomise_adapters(ours)
    copy_adapters_to_peft(ours, theirs)
    with torch.no_grad():
        adapted = ours(ids)[0]
        for m in ours.modules():
            if isinstance(m, LoRALinear):
                m.merge()
        assert_close(ours(ids)[0], adapted)  # merged: the same outputs
        for m in ours.modules():
            if isinstance(m, LoRALinear):
                m.unmerge()
    pretrained = base.state_dict()
    for name, w in ours.state_dict().items():
        if "lora" not in name:  # blocks.0.self_attn.w_q.base.weight is the pretrained blocks.0.self_attn.w_q.weight
            assert_close(w, pretrained[name.replace(".base.", ".")], rtol=0, atol=1e-6)
    plain = merge_lora(ours)
    unloaded = theirs.merge_and_unload()
    assert not any(isinstance(m, LoRALinear) for m in plain.modules())
    assert plain.state_dict().keys() == base.state_dict().keys()
    for name, w in unloaded.state_dict().items():
        assert_close(plain.state_dict()[name], w, rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        assert_close(plain(ids)[0], adapted, rtol=1e-5, atol=1e-5)


def test_gpt2_from_hf_with_adapters_computes_what_peft_computes_on_hugging_faces_gpt2():
    hf = make_gpt2()
    ours = from_hf(hf)
    ids = torch.randint(0, 61, (2, 24))
    # GPT-2's Conv1D layers store their weights as (d_in, d_out): peft is told so (fan_in_fan_out)
    theirs = with_peft(hf, ["attn.c_proj", "mlp.c_fc", "mlp.c_proj"], fan_in_fan_out=True)
    add_lora(ours, ["self_attn.w_o", "feed_forward.w_1", "feed_forward.w_2"], r=4, lora_alpha=8)
    randomise_adapters(ours)

    def hf_name(module: str) -> str:  # blocks.0.self_attn.w_o -> transformer.h.0.attn.c_proj
        for course, hugging_face in GPT2_NAMES:
            module = module.replace(course, hugging_face)
        return module

    assert copy_adapters_to_peft(ours, theirs, hf_name) == 12
    with torch.no_grad():
        assert_close(ours(ids)[0], theirs(ids).logits, rtol=1e-4, atol=1e-5)


def test_llama_from_hf_with_adapters_computes_what_peft_computes_on_hugging_faces_llama():
    hf = make_llama()
    ours = from_hf(hf)
    ids = torch.randint(0, 61, (2, 24))
    theirs = with_peft(hf, ["q_proj", "v_proj"])
    add_lora(ours, ["w_q", "w_v"], r=4, lora_alpha=8)
    randomise_adapters(ours)
    rename = {"blocks": "model.layers", "w_q": "q_proj", "w_v": "v_proj"}
    assert copy_adapters_to_peft(ours, theirs, lambda m: ".".join(rename.get(p, p) for p in m.split("."))) == 8
    with torch.no_grad():
        assert_close(ours(ids)[0], theirs(ids).logits, rtol=1e-4, atol=1e-5)


def test_dropout_acts_on_the_adapters_input_only_while_training():
    model, ids = tiny_gpt(), torch.randint(0, 61, (2, 24))
    add_lora(model, ["w_q"], r=2, lora_alpha=4, lora_dropout=0.5)
    randomise_adapters(model)
    with torch.no_grad():
        assert torch.equal(model.eval()(ids)[0], model(ids)[0])
        assert not torch.equal(model.train()(ids)[0], model.eval()(ids)[0])


def test_a_target_that_names_no_layer_a_rank_too_large_and_a_layer_that_is_not_linear_are_refused():
    with pytest.raises(
        ValueError, match=r"no layer of GPT is named \['q_proj'\]; its linear layers are \['head', 'w_1'"
    ):
        add_lora(tiny_gpt(), ["q_proj"])
    with pytest.raises(ValueError, match="r=64 for a layer 32 -> 32: the rank must be between 1 and 32"):
        add_lora(tiny_gpt(), ["w_q"], r=64)
    with pytest.raises(TypeError, match=r"blocks.0.norm1 \(LayerNorm\)"):
        add_lora(tiny_gpt(), ["norm1"])
