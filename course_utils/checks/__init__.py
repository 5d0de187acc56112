"""Exercise checkers: each runs a student's function against the reference and says what differs.

Every ``check_*`` prints one verdict and returns a ``Verdict``, true when the answer is correct and
shown as nothing in a notebook: a wrong or unfinished answer never stops the notebook. Where a mistake
is a classic one (a missing sqrt(d_k), 2i applied twice, unbiased variance), the message names it.

One module per topic, in the order the chapters meet them:

- ``attention`` (01-02), ``masks`` (01), ``positional`` (03), ``layers`` (04), ``seq2seq`` (05-06),
  ``training`` (02, 06), ``generation`` and ``sampling`` (07), ``translation`` (08), ``bug_lab`` (09),
  ``modern`` (10), ``distributed`` (11), ``adapt`` (12)
- ``predictions``: the "predict, then run" questions of every chapter (``check_prediction``)
- ``_core``: what every checker shares: ``call`` (runs the student's function, turning its errors into
  verdicts), ``same``/``differs``/``name_mistake`` (compare with the reference), ``verdict`` (prints and records)

A new checker is a function ``check_x(fn)`` in its topic's module that defines ``run() -> str`` (raise ``NotYet``
with the message that names the mistake; return the success message) and returns ``verdict(run)``; export it
below and test it in its module's ``tests/test_checks_<module>.py`` with right, unfinished and classically wrong answers.
"""

from ._core import Verdict
from .adapt import (
    check_byte_table,
    check_lora_forward,
    check_merge_tree,
    check_multi_turn_mask,
    check_prompt_mask,
    check_stream_decode,
)
from .attention import (
    check_attention_with_bias,
    check_fused_head_projections,
    check_grouped_query_attention,
    check_merge_heads,
    check_scaled_dot_product_attention,
    check_split_heads,
)
from .bug_lab import check_diagnosis, check_future_leak
from .distributed import check_average_gradients, check_bytes_per_rank, check_shard_indices
from .generation import check_gpt_block, check_kv_cache_step
from .layers import (
    check_encoder_layer,
    check_layer_norm,
    check_pre_norm_layer,
    check_rms_norm,
)
from .masks import (
    check_causal_mask,
    check_masked_mean,
    check_padding_mask,
    check_sliding_window_mask,
)
from .modern import check_expand_kv, check_gpt2_block_weights, check_rotary_halves
from .positional import check_alibi_bias, check_rotary_embedding, check_sinusoidal_encoding
from .predictions import check_prediction
from .sampling import check_sampling_step, check_top_p
from .seq2seq import check_decoder_layer, check_greedy_decode, check_prefix_lm_mask, check_teacher_forcing_batch
from .training import (
    check_label_smoothing,
    check_sequence_accuracy,
    check_weight_tying,
)
from .translation import check_beam_step, check_bpe_segment, check_ngram_matches

__all__ = [
    "Verdict",
    "check_alibi_bias",
    "check_attention_with_bias",
    "check_average_gradients",
    "check_beam_step",
    "check_bpe_segment",
    "check_byte_table",
    "check_bytes_per_rank",
    "check_causal_mask",
    "check_decoder_layer",
    "check_diagnosis",
    "check_encoder_layer",
    "check_expand_kv",
    "check_fused_head_projections",
    "check_future_leak",
    "check_gpt2_block_weights",
    "check_gpt_block",
    "check_greedy_decode",
    "check_grouped_query_attention",
    "check_kv_cache_step",
    "check_label_smoothing",
    "check_layer_norm",
    "check_lora_forward",
    "check_masked_mean",
    "check_merge_heads",
    "check_merge_tree",
    "check_multi_turn_mask",
    "check_ngram_matches",
    "check_padding_mask",
    "check_pre_norm_layer",
    "check_prediction",
    "check_prefix_lm_mask",
    "check_prompt_mask",
    "check_rms_norm",
    "check_rotary_embedding",
    "check_rotary_halves",
    "check_sampling_step",
    "check_scaled_dot_product_attention",
    "check_sequence_accuracy",
    "check_shard_indices",
    "check_sinusoidal_encoding",
    "check_sliding_window_mask",
    "check_split_heads",
    "check_stream_decode",
    "check_teacher_forcing_batch",
    "check_top_p",
    "check_weight_tying",
]
