"""The full encoder-decoder Transformer (section 3 of the paper).

Shape letters: B batch, S source length, T target length, V vocabulary size.
Masks are bool, True = may attend: ``src_mask`` ``(B, 1, 1, S)``, ``tgt_mask`` ``(B, 1, T, T)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch import Tensor, nn

from ..utils import require_sizes
from .decoder import Decoder, DecoderCache
from .encoder import Encoder
from .positional import PositionalEncoding

__all__ = ["Transformer", "TransformerConfig"]


def validate_tokens(tokens: Tensor, vocab_size: int, name: str) -> None:
    """Clear errors for token tensors of the wrong shape, dtype or (on the CPU) range."""
    if tokens.dim() != 2 or tokens.is_floating_point():
        raise ValueError(f"{name} must be integer token ids of shape (B, T); got {tokens.dtype} {tuple(tokens.shape)}")
    # On a GPU this check would stall the pipeline, and torch's embedding reports it anyway.
    if tokens.device.type == "cpu" and tokens.numel() and not 0 <= int(tokens.min()) <= int(tokens.max()) < vocab_size:
        raise ValueError(f"{name} holds ids outside [0, {vocab_size}); check the tokenizer matches the model")


@dataclass(frozen=True)
class TransformerConfig:
    """The sizes of a ``Transformer`` (the paper's base model by default): ``Transformer(V_src, V_tgt, **asdict(config))``."""

    d_model: int = 512
    n_heads: int = 8
    n_layers: int = 6  # encoder layers, and as many decoder layers
    d_ff: int = 2048
    dropout: float = 0.1
    max_len: int = 5000
    norm_first: bool = False
    share_embeddings: bool = False  # one matrix for both embeddings and the output projection (section 3.4)


class Transformer(nn.Module):
    r"""Encoder-decoder Transformer: embeddings, positional encoding, N encoder and N decoder layers,
    and a linear projection to target-vocabulary logits.

    Embeddings are multiplied by sqrt(d_model), as in the paper (section 3.4). They are initialised
    from N(0, 1/d_model), so that after that multiplication each component has standard deviation
    1, on the scale of the sinusoids in [-1, 1]. With ``nn.Embedding``'s default N(0, 1), the scaled
    embedding would have standard deviation sqrt(d_model) (about 22.6 for d_model = 512) and drown
    the positional signal. Every other matrix gets Xavier-uniform initialisation, as in ``nn.Transformer``,
    except the output projection: it starts near zero (standard deviation 0.02, as in GPT-2), so that
    an untrained model gives every token about the same probability and its first loss is about ln V.

    ``share_embeddings=True`` (section 3.4) ties the source embedding, the target embedding and the output
    projection to one matrix, which needs one vocabulary for both languages. Its N(0, 1/d_model) start then
    gives logits of standard deviation about 1, since the decoder's output is layer-normalised.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        n_heads: int = 8,
        n_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        max_len: int = 5000,
        norm_first: bool = False,
        share_embeddings: bool = False,
    ) -> None:
        super().__init__()
        require_sizes(
            "Transformer", src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, n_layers=n_layers, d_ff=d_ff,
            max_len=max_len,
        )  # fmt: skip
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(
                f"share_embeddings needs one vocabulary for both languages; got src_vocab_size={src_vocab_size} "
                f"and tgt_vocab_size={tgt_vocab_size}"
            )
        self.config = TransformerConfig(
            d_model, n_heads, n_layers, d_ff, dropout, max_len, norm_first, share_embeddings
        )
        self.d_model = d_model
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        self.positional = PositionalEncoding(d_model, dropout, max_len)
        self.encoder, self.decoder = self.build_stacks(d_model, n_heads, n_layers, d_ff, dropout, norm_first)
        self.generator = nn.Linear(d_model, tgt_vocab_size)  # the pre-softmax projection
        if share_embeddings:  # section 3.4: the same (V, d_model) matrix embeds both languages and projects back
            self.tgt_embed.weight = self.src_embed.weight
            self.generator.weight = self.src_embed.weight
        self.reset_parameters()

    def build_stacks(
        self, d_model: int, n_heads: int, n_layers: int, d_ff: int, dropout: float, norm_first: bool
    ) -> tuple[nn.Module, nn.Module]:
        """The encoder and decoder stacks (``TorchTransformer`` builds PyTorch's instead)."""
        return (
            Encoder(d_model, n_heads, d_ff, n_layers, dropout, norm_first),
            Decoder(d_model, n_heads, d_ff, n_layers, dropout, norm_first),
        )

    def reset_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        for embedding in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embedding.weight, mean=0.0, std=self.d_model**-0.5)
        if not self.config.share_embeddings:
            nn.init.normal_(self.generator.weight, mean=0.0, std=0.02)
        nn.init.zeros_(self.generator.bias)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """Source ids ``(B, S)`` -> memory ``(B, S, d_model)``."""
        validate_tokens(src, self.src_vocab_size, "src")
        x = self.positional(self.src_embed(src) * math.sqrt(self.d_model))  # (B, S, d_model)
        out: Tensor = self.encoder(x, src_mask)
        return out

    def decode(
        self,
        tgt: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        caches: list[DecoderCache] | None = None,
    ) -> Tensor:
        """Target ids ``(B, T)`` and memory ``(B, S, d_model)`` -> logits ``(B, T, V_tgt)``.

        Incremental decoding: with ``caches`` (from ``new_caches()``) ``tgt`` holds only the new
        positions, which follow the ``len(caches[0])`` already decoded; their keys and values are kept, so a
        decoding step costs one position instead of all of them. The logits are the same either way.
        """
        validate_tokens(tgt, self.tgt_vocab_size, "tgt")
        if caches is not None and not isinstance(self.decoder, Decoder):
            raise ValueError("incremental decoding (caches) needs the course's Decoder")
        offset = len(caches[0]) if caches else 0  # positions decoded before tgt
        y = self.positional(self.tgt_embed(tgt) * math.sqrt(self.d_model), offset)  # (B, T, d_model)
        hidden = (
            self.decoder(y, memory, src_mask, tgt_mask)
            if caches is None
            else self.decoder(y, memory, src_mask, tgt_mask, caches)
        )
        out: Tensor = self.generator(hidden)
        return out  # (B, T, V_tgt)

    def new_caches(self) -> list[DecoderCache]:
        """Empty caches for incremental decoding (``decode(..., caches=...)``), one per decoder layer."""
        if not isinstance(self.decoder, Decoder):
            raise ValueError("incremental decoding (caches) needs the course's Decoder")
        return self.decoder.new_caches()

    def forward(
        self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None
    ) -> Tensor:
        return self.decode(tgt, self.encode(src, src_mask), src_mask, tgt_mask)
