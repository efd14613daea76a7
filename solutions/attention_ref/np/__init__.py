"""NumPy reference: every function the lessons build, importable by name.

``from attention_ref.np import softmax`` -- the same names exist in ``attention_ref.pt``.
Each lesson's functions live in their own module; add a lesson's exports in its own block.
"""

# lesson 1 -- retrieval as attention
from .additive import additive_attention, additive_scores

# lesson 9 -- efficient attention (its KV cache runs lesson 8's PyTorch model: attention_ref.pt
# only)
from .efficient import merge_attention, online_softmax, online_softmax_stats, tiled_attention

# lesson 6 -- the position-wise feed-forward network
from .feedforward import (
    ffn_parameter_count,
    init_ffn_params,
    layer_parameter_counts,
    position_wise_ffn,
)

# lesson 10 -- generating text: temperature, top-k, beam search
from .generation import beam_search, length_penalty, next_token_distribution, sample_next

# lesson 12 -- attention as today's open models run it: grouped-query attention ...
from .gqa import (
    grouped_query_attention,
    kv_cache_bytes_per_token,
    mean_pool_kv_heads,
    repeat_kv_heads,
)

# lesson 12 -- ... multi-head latent attention ...
from .latent import (
    absorb_mla_params,
    init_mla_params,
    mla_attention,
    mla_cache_bytes_per_token,
    mla_decode_step,
)

# lesson 3 -- masking
from .masking import causal_mask, masked_softmax, padding_mask, to_key_padding_mask

# lesson 4 -- multi-head attention
from .multihead import (
    init_params,
    merge_heads,
    multi_head_attention,
    multiply_adds,
    parameter_count,
    split_heads,
)

# lesson 12 -- ... the paged KV cache ...
from .paged import PagedKVCache, paged_attention

# lesson 7 -- positional encoding
from .positional import add_positional_encoding, frequencies, positional_encoding, shift_matrix

# lesson 10 -- the two pre-training objectives and BERT's size
from .pretraining import bert_parameter_counts, mask_tokens, masked_lm_loss, next_token_loss
from .retrieval import (
    dot_scores,
    kernel_regression,
    normalize_weights,
    soft_lookup,
    softmax,
    weighted_sum,
)

# lesson 10 (optional section) -- rotary position embedding
from .rotary import rotary_embedding

# lesson 2 -- scaled dot-product attention (the mask of lesson 3 included)
from .sdpa import attention_weights, scaled_dot_product_attention

# lesson 5 -- the three uses of attention
from .three_uses import (
    combine_masks,
    decoder_self_attention,
    encoder_decoder_attention,
    encoder_self_attention,
    transformer_masks,
)

# lesson 8 -- the Transformer assembled
from .transformer import (
    add_and_norm,
    decoder,
    decoder_layer,
    encoder,
    encoder_layer,
    init_decoder_layer_params,
    init_encoder_layer_params,
    layer_norm,
)

# lesson 12 -- ... sliding windows, the rolling KV cache and attention sinks
from .window import (
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
]
