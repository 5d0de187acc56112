"""What every decoder-only model of the course shares (``GPT``, ``Llama``): the forward pass around its blocks, and
``generate``, with or without a ``KVCache`` per block.

Shape letters: B batch, T sequence length (at most ``block_size``), V vocabulary size.
"""

from __future__ import annotations

import numbers
import operator
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..dry_run import DRY_RUN_TOKENS, at_most
from ..utils import eval_mode
from .attention import KVCache

__all__ = ["CausalLM"]


class CausalLM(nn.Module):
    """What every decoder-only model of the course shares: ``generate``, with or without a ``KVCache`` per block.

    ``forward(idx (B, T), targets=None, caches=None)`` returns ``(logits (B, T, V), loss or None)``: the
    subclass's ``embed``, then its ``blocks`` (one cache each) and ``norm`` (``hidden_states``), then ``head``.
    ``block_size`` caps the positions.
    """

    blocks: nn.ModuleList
    block_size: int
    norm: nn.Module
    head: nn.Linear

    def embed(self, idx: Tensor, past: int) -> Tensor:
        """The input vectors ``(B, T, d_model)`` of token ids ``idx`` ``(B, T)`` at positions ``past, past + 1, ...``."""
        raise NotImplementedError

    def layer_inputs(self, idx: Tensor, past: int) -> dict[str, Any]:
        """What every block reads besides its input and its cache, computed once per forward (``Llama``: the
        rotary angles of the positions) and passed to each block by keyword. None for the GPT."""
        return {}

    def forward(
        self, idx: Tensor, targets: Tensor | None = None, caches: list[KVCache] | None = None
    ) -> tuple[Tensor, Tensor | None]:
        logits = self.head(self.hidden_states(idx, caches))  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    def hidden_states(self, idx: Tensor, caches: list[KVCache] | None = None) -> Tensor:
        """The last block's outputs after the final norm, ``(B, T, d_model)``: what ``head`` turns into logits, and
        what a new head reads to classify a text (``SequenceClassifier``)."""
        if idx.dim() != 2 or idx.is_floating_point():
            raise ValueError(f"idx must be token ids of shape (B, T); got {idx.dtype} {tuple(idx.shape)}")
        past = len(caches[0]) if caches else 0
        if past + idx.size(1) > self.block_size:
            raise ValueError(
                f"{past + idx.size(1)} positions exceed block_size={self.block_size}; crop the input (generate does)"
            )
        try:
            x = self.embed(idx, past)  # (B, T, d_model)
        except IndexError:  # nn.Embedding's "index out of range in self", on the CPU (a GPU asserts instead)
            found = getattr(self, "vocab_size", None)
            vocab_size = int(found) if isinstance(found, numbers.Integral) else None
            low, high = int(idx.min()), int(idx.max())
            if vocab_size is None or 0 <= low <= high < vocab_size:
                raise  # another table's index (a subclass's positions, say): PyTorch's own error
            raise ValueError(
                f"idx holds ids outside [0, {vocab_size}) (from {low} to {high}): check that the tokenizer matches "
                "the model's vocab_size"
            ) from None
        shared = self.layer_inputs(idx, past)
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches else None, **shared)
        return self.norm(x)

    @torch.no_grad()
    def generate(
        self,
        idx: Tensor,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Extend ``idx`` ``(B, T)`` by ``max_new_tokens`` sampled tokens; returns ``(B, T + max_new_tokens)``.

        Each step divides the last logits by ``temperature`` (0 means always take the most likely token),
        keeps only the ``top_k`` most likely tokens if given, and samples from the softmax.
        With ``use_cache`` the keys and values of earlier positions are reused (``KVCache``), so each step
        processes one token instead of the whole context. Once the text outgrows ``block_size``, the
        window slides and every position changes place, so each step recomputes the cropped window, as
        without a cache. Both ways produce the same tokens. Runs in eval mode and restores the mode. (A GPU dry
        run writes at most ``DRY_RUN_TOKENS``: ``course_utils.dry_run``.)
        """
        if temperature < 0 or (top_k is not None and top_k < 1):
            raise ValueError(f"need temperature >= 0 and top_k >= 1 or None; got {temperature}, {top_k}")
        if idx.dim() != 2 or idx.dtype.is_floating_point or idx.dtype.is_complex or idx.size(1) == 0:
            raise ValueError(
                f"generate continues a prompt of token ids (B, T), at least one token long; got {idx.dtype} "
                f"{tuple(idx.shape)}" + (": add a batch dimension, idx[None]" if idx.dim() == 1 and idx.numel() else "")
            )
        try:  # an int, NumPy's or a 0-d integer tensor; not a bool, a float or a string
            count = -1 if isinstance(max_new_tokens, bool) else operator.index(max_new_tokens)
        except TypeError:
            count = -1
        if count < 0:
            raise ValueError(f"max_new_tokens must be an int >= 0; got {max_new_tokens!r}")
        max_new_tokens = at_most("generate", count, DRY_RUN_TOKENS)
        with eval_mode(self):
            caches = None
            for _ in range(max_new_tokens):
                if use_cache and idx.size(1) < self.block_size:
                    if caches is None:  # first step: the whole prompt fills the caches
                        caches = [KVCache() for _ in self.blocks]
                        logits, _ = self(idx, caches=caches)
                    else:  # later steps: only the newest token
                        logits, _ = self(idx[:, -1:], caches=caches)
                else:
                    caches = None
                    logits, _ = self(idx[:, -self.block_size :])
                next_token = self._sample(logits[:, -1], temperature, top_k, generator)  # (B, 1)
                idx = torch.cat([idx, next_token], dim=1)
        return idx

    @staticmethod
    def _sample(logits: Tensor, temperature: float, top_k: int | None, generator: torch.Generator | None) -> Tensor:
        if temperature == 0:
            return logits.argmax(dim=-1, keepdim=True)
        logits = logits / temperature  # (B, V)
        if top_k is not None:
            kth = torch.topk(logits, min(top_k, logits.size(-1))).values[:, -1:]  # (B, 1): the k-th largest
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = logits.softmax(dim=-1)
        return torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)
