"""NumPy reference: every function the lessons build, importable by name.

``from attention_ref.np import softmax`` -- the same names exist in ``attention_ref.pt``. Each
lesson's functions live in their own module, imported here with the lesson named on the import
itself (``# lesson N``), where sorting the imports cannot separate the label from its line. Lesson
9's KV cache runs lesson 8's PyTorch model: attention_ref.pt only.
"""

from .additive import additive_attention, additive_scores  # lesson 2
from .delta import (  # lesson 13
    gated_delta_rule_chunked,
    gated_delta_rule_recurrent,
    ut_transform,
)
from .efficient import (  # lesson 9
    merge_attention,
    online_softmax,
    online_softmax_stats,
    tiled_attention,
)
from .feedforward import (  # lesson 6
    ffn_parameter_count,
    init_ffn_params,
    layer_parameter_counts,
    position_wise_ffn,
)
from .gated import gated_attention, sigmoid  # lesson 13
from .generation import (  # lesson 10
    beam_search,
    length_penalty,
    next_token_distribution,
    sample_next,
)
from .gqa import (  # lesson 12
    grouped_query_attention,
    kv_cache_bytes_per_token,
    mean_pool_kv_heads,
    repeat_kv_heads,
)
from .hybrid import linear_state_bytes, short_conv_state_bytes, stack_cache_bytes  # lesson 13
from .latent import (  # lesson 12
    absorb_mla_params,
    init_mla_params,
    mla_attention,
    mla_cache_bytes_per_token,
    mla_decode_step,
)
from .linear import (  # lesson 13
    elu_feature_map,
    linear_attention,
    linear_attention_recurrent,
)
from .masking import causal_mask, masked_softmax, padding_mask, to_key_padding_mask  # lesson 3
from .multihead import (  # lesson 4
    init_params,
    merge_heads,
    multi_head_attention,
    multiply_adds,
    parameter_count,
    split_heads,
)
from .paged import PagedKVCache, paged_attention  # lesson 12
from .positional import (  # lesson 7
    add_positional_encoding,
    frequencies,
    positional_encoding,
    shift_matrix,
)
from .pretraining import (  # lesson 10
    bert_parameter_counts,
    mask_tokens,
    masked_lm_loss,
    next_token_loss,
)
from .retrieval import (  # lesson 1
    dot_scores,
    kernel_regression,
    normalize_weights,
    plain_softmax,
    soft_lookup,
    softmax,
    weighted_sum,
)
from .rotary import rotary_embedding  # lesson 10 (optional section)
from .sdpa import (  # lesson 2 (the mask of lesson 3 included)
    attention_weights,
    scaled_dot_product_attention,
)
from .sparse import (  # lesson 13
    indexer_scores,
    sparse_attention,
    top_k_indices,
    top_k_mask,
)
from .three_uses import (  # lesson 5
    combine_masks,
    decoder_self_attention,
    encoder_decoder_attention,
    encoder_self_attention,
    transformer_masks,
)
from .transformer import (  # lesson 8
    add_and_norm,
    decoder,
    decoder_layer,
    encoder,
    encoder_layer,
    init_decoder_layer_params,
    init_encoder_layer_params,
    layer_norm,
)
from .window import (  # lesson 12
    empty_rolling_cache,
    rolling_cache_attention,
    sink_cache_attention,
    sliding_window_mask,
    window_reach,
)

__all__ = [
    "dot_scores",
    "kernel_regression",
    "normalize_weights",
    "plain_softmax",
    "soft_lookup",
    "softmax",
    "weighted_sum",
    "attention_weights",
    "scaled_dot_product_attention",
    "additive_attention",
    "additive_scores",
    "causal_mask",
    "masked_softmax",
    "padding_mask",
    "to_key_padding_mask",
    "init_params",
    "merge_heads",
    "multi_head_attention",
    "multiply_adds",
    "parameter_count",
    "split_heads",
    "combine_masks",
    "decoder_self_attention",
    "encoder_decoder_attention",
    "encoder_self_attention",
    "transformer_masks",
    "ffn_parameter_count",
    "init_ffn_params",
    "layer_parameter_counts",
    "position_wise_ffn",
    "add_positional_encoding",
    "frequencies",
    "positional_encoding",
    "shift_matrix",
    "add_and_norm",
    "decoder",
    "decoder_layer",
    "encoder",
    "encoder_layer",
    "init_decoder_layer_params",
    "init_encoder_layer_params",
    "layer_norm",
    "merge_attention",
    "online_softmax",
    "online_softmax_stats",
    "tiled_attention",
    "bert_parameter_counts",
    "mask_tokens",
    "masked_lm_loss",
    "next_token_loss",
    "beam_search",
    "length_penalty",
    "next_token_distribution",
    "sample_next",
    "rotary_embedding",
    "repeat_kv_heads",
    "grouped_query_attention",
    "kv_cache_bytes_per_token",
    "mean_pool_kv_heads",
    "sliding_window_mask",
    "window_reach",
    "empty_rolling_cache",
    "rolling_cache_attention",
    "sink_cache_attention",
    "init_mla_params",
    "mla_attention",
    "absorb_mla_params",
    "mla_decode_step",
    "mla_cache_bytes_per_token",
    "PagedKVCache",
    "paged_attention",
    "elu_feature_map",
    "linear_attention",
    "linear_attention_recurrent",
    "gated_delta_rule_recurrent",
    "ut_transform",
    "gated_delta_rule_chunked",
    "linear_state_bytes",
    "short_conv_state_bytes",
    "stack_cache_bytes",
    "indexer_scores",
    "top_k_indices",
    "top_k_mask",
    "sparse_attention",
    "sigmoid",
    "gated_attention",
]
