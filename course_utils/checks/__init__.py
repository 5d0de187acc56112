"""Exercise checkers: each runs a student's function against the reference and says what differs.

Every ``check_*`` prints one verdict and returns a ``Verdict``, true when the answer is correct and
shown as nothing in a notebook: a wrong or unfinished answer never stops the notebook. Where a mistake
is a classic one (a missing sqrt(d_k), 2i applied twice, unbiased variance), the message names it.
"""

from ._core import Verdict
from .attention import (
    check_cross_attention,
    check_merge_heads,
    check_mha_parameter_count,
    check_scaled_dot_product_attention,
    check_split_heads,
)
from .generation import check_next_token_targets, check_temperature, check_top_k
from .layers import check_feed_forward, check_layer_norm, check_pre_norm_layer
from .masks import check_causal_mask, check_padding_mask, check_target_mask
from .positional import check_position_shift, check_sinusoidal_encoding
from .training import check_label_smoothing, check_noam_lr, check_shift_right

__all__ = [
    "Verdict",
    "check_causal_mask",
    "check_cross_attention",
    "check_feed_forward",
    "check_label_smoothing",
    "check_layer_norm",
    "check_merge_heads",
    "check_mha_parameter_count",
    "check_next_token_targets",
    "check_noam_lr",
    "check_padding_mask",
    "check_position_shift",
    "check_pre_norm_layer",
    "check_scaled_dot_product_attention",
    "check_shift_right",
    "check_sinusoidal_encoding",
    "check_split_heads",
    "check_target_mask",
    "check_temperature",
    "check_top_k",
]
