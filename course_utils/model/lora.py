r"""LoRA (Hu et al., 2021, "LoRA: Low-Rank Adaptation of Large Language Models"): fine-tune a pretrained model by
training a small correction beside some of its linear layers, the pretrained weights frozen.

A linear layer computes :math:`h = W x + b`, with :math:`W` of shape ``(d_out, d_in)``. LoRA adds a product of two
thin matrices, :math:`A` ``(r, d_in)`` and :math:`B` ``(d_out, r)``, with a rank :math:`r` far below both sizes:

.. math:: h = W x + b + \frac{\alpha}{r} B A x

- :math:`B` starts at zero, so training starts from the pretrained model exactly; :math:`A` starts random (as an
  ``nn.Linear``'s weight), or :math:`B`'s gradient would be zero too and nothing would move.
- :math:`\alpha / r` scales the correction, so that changing the rank does not change how far a step moves it.
- Trained, the correction can be **merged**: :math:`W \leftarrow W + \frac{\alpha}{r} B A` gives a plain linear layer
  with no extra cost at inference; **unmerged**, the pretrained weights come back.

Names and shapes are those of Hugging Face ``peft``'s ``LoraConfig`` (``r``, ``lora_alpha``, ``target_modules``,
``lora_dropout``) and its ``lora_A``/``lora_B``, so weights copy between the two one to one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import Tensor, nn

__all__ = ["LoRALinear", "add_lora", "lora_parameters", "merge_lora"]


class LoRALinear(nn.Module):
    """``base`` (an ``nn.Linear``, frozen) plus the trainable low-rank correction ``(alpha / r) B A``.

    ``x`` ``(..., d_in)`` -> ``(..., d_out)``; ``lora_A`` ``(r, d_in)``, ``lora_B`` ``(d_out, r)``."""

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0) -> None:
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(f"LoRA adapts nn.Linear layers; got {type(base).__name__}")
        d_out, d_in = base.weight.shape
        if not 1 <= r <= min(d_in, d_out):
            raise ValueError(
                f"r={r} for a layer {d_in} -> {d_out}: the rank must be between 1 and {min(d_in, d_out)} (a rank that "
                "large is already a full matrix; LoRA's ranks are small, 4 to 64)"
            )
        self.base, self.r, self.alpha, self.scaling = base, r, alpha, alpha / r
        for p in base.parameters():
            p.requires_grad_(False)
        device, dtype = base.weight.device, base.weight.dtype
        self.lora_A = nn.Parameter(torch.empty(r, d_in, device=device, dtype=dtype))
        self.lora_B = nn.Parameter(torch.zeros(d_out, r, device=device, dtype=dtype))  # zero: starts as pretrained
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # as nn.Linear's weight (and peft's lora_A)
        self.dropout = nn.Dropout(dropout)
        self.merged = False

    def extra_repr(self) -> str:
        return f"r={self.r}, alpha={self.alpha:g}, merged={self.merged}"

    def delta_weight(self) -> Tensor:
        """The correction as a weight, ``(alpha / r) B A``: ``(d_out, d_in)``."""
        return (self.lora_B @ self.lora_A) * self.scaling

    def forward(self, x: Tensor) -> Tensor:
        out = self.base(x)  # (..., d_out)
        if self.merged:  # the correction is inside base's weight already
            return out
        low = self.dropout(x) @ self.lora_A.T  # (..., r): the narrow middle
        return out + (low @ self.lora_B.T) * self.scaling  # (..., d_out)

    @torch.no_grad()
    def merge(self) -> None:
        """Add the correction into ``base.weight``: the same outputs, one matrix product."""
        if not self.merged:
            self.base.weight += self.delta_weight()
            self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        """Take the correction out of ``base.weight`` again (the pretrained weight, up to rounding)."""
        if self.merged:
            self.base.weight -= self.delta_weight()
            self.merged = False


def _matches(name: str, targets: list[str]) -> bool:
    """``peft``'s rule: a module is a target if its name is one of ``targets`` or ends with ``"." + target``."""
    return any(name == t or name.endswith("." + t) for t in targets)


def add_lora(
    model: nn.Module, target_modules: Iterable[str], r: int = 8, lora_alpha: float = 16, lora_dropout: float = 0.0
) -> list[str]:
    """Wrap each ``nn.Linear`` of ``model`` whose name ends with one of ``target_modules`` (``["w_q", "w_v"]``) in a
    ``LoRALinear``, in place, and freeze every other parameter: only the adapters train. Returns the wrapped names."""
    targets = [target_modules] if isinstance(target_modules, str) else list(target_modules)
    found = [(name, m) for name, m in model.named_modules() if name and _matches(name, targets)]
    if not found:
        linears = sorted({name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, nn.Linear)})
        raise ValueError(f"no layer of {type(model).__name__} is named {targets}; its linear layers are {linears}")
    wrong = [f"{name} ({type(m).__name__})" for name, m in found if not isinstance(m, nn.Linear)]
    if wrong:
        raise TypeError(f"LoRA adapts nn.Linear layers; {', '.join(wrong)} are not")
    for p in model.parameters():
        p.requires_grad_(False)
    for name, m in found:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        setattr(parent, child, LoRALinear(m, r, lora_alpha, lora_dropout))  # pyright: ignore[reportArgumentType]
    return [name for name, _ in found]


def lora_parameters(model: nn.Module) -> dict[str, Tensor]:
    """The adapters' weights alone, by name (a few hundred kilobytes where the model has hundreds of megabytes)."""
    return {name: p for name, p in model.named_parameters() if name.endswith((".lora_A", ".lora_B"))}


def merge_lora(model: nn.Module) -> nn.Module:
    """Merge every adapter into its layer and put the plain ``nn.Linear`` back in its place (in place; ``peft``'s
    ``merge_and_unload``): a model of the original architecture, with the fine-tuned weights."""
    for name, m in list(model.named_modules()):
        if isinstance(m, LoRALinear):
            m.merge()
            parent_name, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent_name), child, m.base)
    return model
