"""Supervised instruction tuning: a pretrained language model trained further on (prompt, response) pairs, so that
it answers instead of merely continuing text.

- **A chat template** turns a pair into one text, marking who speaks with special tokens the tokenizer must know as
  single ids (text typed by a user can never forge them):
  ``<|user|>Reverse: abc<|assistant|>cba<|end|>``. At inference the model gets everything up to
  ``<|assistant|>`` and writes until it produces ``<|end|>``.
- **The loss is masked on the prompt**: only the response's tokens (and ``<|end|>``) are predicted; the prompt's
  targets are ``IGNORE`` (-100, ``F.cross_entropy``'s ``ignore_index``), so their logits get exactly zero gradient.
  The model is taught to answer, not to write instructions.
- **Batches are padded on the right.** In a causal model a position sees only those before it, so padding after
  an example changes none of its logits; the padded positions' targets are ``IGNORE`` too.

Shape letters: B batch, T longest example in the batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from torch import Tensor

from .seq2seq import pad_batch

__all__ = ["IGNORE", "ChatTemplate", "encode_example", "mask_prompt", "pad_examples"]

IGNORE = -100  # a target that adds nothing to the loss: F.cross_entropy's default ignore_index


class SpecialTokenizer(Protocol):
    """What the template needs: special tokens by name, and an ``encode`` that may read them as their ids."""

    special_tokens: Mapping[str, int]

    def encode(self, text: str, *, disallowed_special: Sequence[str] = ()) -> list[int]: ...


@dataclass(frozen=True)
class ChatTemplate:
    """How a (prompt, response) pair becomes one text: ``{user}{prompt}{assistant}{response}{end}``."""

    user: str = "<|user|>"
    assistant: str = "<|assistant|>"
    end: str = "<|end|>"

    @property
    def special_tokens(self) -> tuple[str, str, str]:
        return (self.user, self.assistant, self.end)

    def render(self, prompt: str, response: str | None = None) -> str:
        """The text of a pair; without ``response``, the prompt a model answers at inference."""
        text = f"{self.user}{prompt}{self.assistant}"
        return text if response is None else f"{text}{response}{self.end}"

    def check(self, tokenizer: SpecialTokenizer) -> None:
        """An error naming the fix if ``tokenizer`` lacks one of the template's special tokens."""
        known = getattr(tokenizer, "special_tokens", None) or {}
        missing = [t for t in self.special_tokens if t not in known]
        if missing:
            raise ValueError(
                f"the tokenizer has no special token {missing[0]!r}, which the chat template needs as one id (its "
                f"special tokens: {list(known)}): train it with train_byte_bpe(..., special_tokens="
                f"{list(self.special_tokens)!r}), or add them with tokenizer.with_special_tokens(...) and give the "
                "model as many new embedding rows"
            )

    def encode(self, tokenizer: SpecialTokenizer, prompt: str, response: str) -> tuple[list[int], list[int]]:
        """The ids of the prompt (from ``user`` to ``assistant``) and of the response (with ``end``): the ids of the
        rendered text, except that a special token's string *inside* the prompt or response stays text, so that a
        user who types ``<|end|>`` cannot end the turn."""
        self.check(tokenizer)
        special = tokenizer.special_tokens
        prompt_ids = [special[self.user], *tokenizer.encode(prompt, disallowed_special=()), special[self.assistant]]
        return prompt_ids, [*tokenizer.encode(response, disallowed_special=()), special[self.end]]


def mask_prompt(prompt_ids: Sequence[int], response_ids: Sequence[int]) -> tuple[list[int], list[int]]:
    """``(inputs, targets)`` of one example from its ids, each of length T: the inputs are the ids but the last, the
    targets the ids shifted by one, with ``IGNORE`` wherever the next token still belongs to the prompt."""
    if len(prompt_ids) == 0 or len(response_ids) == 0:
        raise ValueError(
            f"an example needs a prompt and a response of at least one id each (the response ends with its end "
            f"token); got {len(prompt_ids)} and {len(response_ids)} ids"
        )
    ids = [*prompt_ids, *response_ids]
    return ids[:-1], [IGNORE] * (len(prompt_ids) - 1) + list(response_ids)  # position t predicts ids[t + 1]


def encode_example(
    tokenizer: SpecialTokenizer, template: ChatTemplate, prompt: str, response: str
) -> tuple[list[int], list[int]]:
    """``(inputs, targets)`` of one pair in ``template``: its ids, the loss masked on the prompt (``mask_prompt``)."""
    return mask_prompt(*template.encode(tokenizer, prompt, response))


def pad_examples(examples: Sequence[tuple[list[int], list[int]]], pad_id: int) -> tuple[Tensor, Tensor]:
    """Examples of different lengths as one batch, padded on the right: inputs ``(B, T)`` (``pad_id`` after each
    example) and targets ``(B, T)`` (``IGNORE`` there). A causal model gives each example the logits it would give
    it alone."""
    if not examples:
        raise ValueError("no examples to pad")
    for row, (x, y) in enumerate(examples):
        if len(x) != len(y):
            raise ValueError(f"example {row}: {len(x)} inputs but {len(y)} targets; use encode_example")
    inputs = pad_batch([x for x, _ in examples], pad_id)  # (B, T)
    return inputs, pad_batch([y for _, y in examples], IGNORE)  # (B, T)
