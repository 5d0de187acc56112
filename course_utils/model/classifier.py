"""A pretrained language model turned classifier: its last hidden state, read at each text's last token, through
a new linear layer (as Hugging Face's ``GPT2ForSequenceClassification`` and Radford et al., 2018, do).

In a causal model only the last position has seen the whole text, so that is the one to read; with right padding,
each row's own last token, not the padding after it.

Shape letters: B batch, T sequence length, C classes.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .causal_lm import CausalLM

__all__ = ["SequenceClassifier"]


class SequenceClassifier(nn.Module):
    """``backbone`` (a ``GPT`` or ``Llama``, pretrained or not) and a new head ``d_model -> n_classes``.

    ``forward(idx (B, T), lengths (B,) or None)`` returns the class logits ``(B, C)``; ``lengths`` gives each row's
    number of tokens before its padding (None: no padding)."""

    def __init__(self, backbone: CausalLM, n_classes: int) -> None:
        super().__init__()
        if n_classes < 2:
            raise ValueError(f"n_classes={n_classes}: a classifier needs at least 2 classes")
        self.backbone = backbone
        self.score = nn.Linear(backbone.head.in_features, n_classes, bias=False)  # as Hugging Face's `score`

    def forward(self, idx: Tensor, lengths: Tensor | None = None) -> Tensor:
        hidden = self.backbone.hidden_states(idx)  # (B, T, d_model)
        B, T = idx.shape
        if lengths is None:
            lengths = torch.full((B,), T, device=idx.device)
        if lengths.shape != (B,) or bool((lengths < 1).any()) or bool((lengths > T).any()):
            raise ValueError(f"lengths must hold one length in 1..{T} per row, shape ({B},); got {lengths.tolist()}")
        last = hidden[torch.arange(B, device=idx.device), lengths - 1]  # (B, d_model): each row's last token
        return self.score(last)  # (B, C)
