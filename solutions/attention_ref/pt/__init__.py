"""PyTorch reference: the same names as attention_ref.np, device-agnostic.

``pick_device()`` chooses cuda > mps > cpu once; each function runs where its inputs live. Each
lesson's functions live in their own module, imported here with the lesson named on the import
itself (``# lesson N``), where sorting the imports cannot separate the label from its line. PyTorch
only: lesson 8's trainable model (attention_ref.pt.model), lesson 9's cached decoder
(attention_ref.pt.decoding), lesson 10's language models (attention_ref.pt.lm) and lesson 15's
attention-only model (attention_ref.pt.induction).
"""

from .additive import additive_attention, additive_scores  # lesson 2
from .checkpoint_names import (  # lesson 14
    checkpoint_shapes,
    params_from_checkpoint,
    random_checkpoint,
    tiny_config,
)
from .circuits import (  # lesson 15
    ablate_head,
    copying_score,
    direct_logit_attribution,
    find_induction_circuit,
    first_token_score,
    induction_score,
    k_composition_scores,
    ov_circuit,
    previous_token_score,
    qk_circuit,
)
from .decoding import cached_self_attention  # lesson 9
from .delta import (  # lesson 13
    gated_delta_rule_batched_chunks,
    gated_delta_rule_chunked,
    gated_delta_rule_recurrent,
    kimi_delta_rule_recurrent,
    ut_transform,
)
from .device import available_devices, pick_device  # every lesson: cuda > mps > cpu
from .efficient import (  # lesson 9
    merge_attention,
    online_softmax,
    online_softmax_stats,
    tiled_attention,
)
from .feedforward import (  # lesson 6
    ffn_parameter_count,
    ffn_params_from_torch,
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
from .hub_checkpoints import PUBLISHED, TINY, hub_config, hub_tensors  # lesson 14
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
    params_from_torch,
    split_heads,
)
from .mxfp4 import FP4_VALUES, dequantize_mxfp4, quantize_mxfp4  # lesson 14
from .norms import rms_norm  # lesson 14
from .open_blocks import attention_block, gpt_oss_moe, swiglu  # lesson 14
from .open_model import (  # lesson 14
    ModelSpec,
    cache_bytes,
    first_difference,
    generate_batch,
    greedy_generate,
    left_pad,
    model_forward,
    new_caches,
    open_layer,
    spec_from_config,
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
from .rope_layouts import (  # lesson 14
    apply_rope,
    pairing_permutation,
    rope_frequencies,
    rope_via_lesson10,
)
from .rotary import rotary_embedding  # lesson 10 (optional section)
from .sampling import decode_stream, sample_top_p, stream_reply, top_p_distribution  # lesson 14
from .sdpa import (  # lesson 2 (the mask of lesson 3 included)
    attention_weights,
    scaled_dot_product_attention,
)
from .sinks import sink_attention  # lesson 14
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
from .training import dropout, label_smoothed_cross_entropy, lrate  # lesson 8
from .transformer import (  # lesson 8
    add_and_norm,
    decoder,
    decoder_layer,
    decoder_layer_params_from_torch,
    encoder,
    encoder_layer,
    encoder_layer_params_from_torch,
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
    "available_devices",
    "pick_device",
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
    "params_from_torch",
    "combine_masks",
    "decoder_self_attention",
    "encoder_decoder_attention",
    "encoder_self_attention",
    "transformer_masks",
    "ffn_parameter_count",
    "init_ffn_params",
    "layer_parameter_counts",
    "position_wise_ffn",
    "ffn_params_from_torch",
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
    "encoder_layer_params_from_torch",
    "decoder_layer_params_from_torch",
    "label_smoothed_cross_entropy",
    "lrate",
    "dropout",
    "merge_attention",
    "online_softmax",
    "online_softmax_stats",
    "tiled_attention",
    "cached_self_attention",
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
    "rms_norm",
    "pairing_permutation",
    "rope_via_lesson10",
    "apply_rope",
    "rope_frequencies",
    "sink_attention",
    "swiglu",
    "gpt_oss_moe",
    "attention_block",
    "ModelSpec",
    "spec_from_config",
    "open_layer",
    "model_forward",
    "new_caches",
    "greedy_generate",
    "left_pad",
    "generate_batch",
    "first_difference",
    "cache_bytes",
    "checkpoint_shapes",
    "params_from_checkpoint",
    "tiny_config",
    "random_checkpoint",
    "PUBLISHED",
    "TINY",
    "hub_config",
    "hub_tensors",
    "FP4_VALUES",
    "dequantize_mxfp4",
    "quantize_mxfp4",
    "top_p_distribution",
    "sample_top_p",
    "stream_reply",
    "decode_stream",
    "elu_feature_map",
    "linear_attention",
    "linear_attention_recurrent",
    "gated_delta_rule_recurrent",
    "ut_transform",
    "gated_delta_rule_batched_chunks",
    "gated_delta_rule_chunked",
    "kimi_delta_rule_recurrent",
    "linear_state_bytes",
    "short_conv_state_bytes",
    "stack_cache_bytes",
    "indexer_scores",
    "top_k_indices",
    "top_k_mask",
    "sparse_attention",
    "sigmoid",
    "gated_attention",
    "previous_token_score",
    "first_token_score",
    "induction_score",
    "ablate_head",
    "qk_circuit",
    "ov_circuit",
    "copying_score",
    "k_composition_scores",
    "direct_logit_attribution",
    "find_induction_circuit",
]
