"""Lesson 5, The three uses of attention: planted mistakes and the test cells that must catch them.

The decoder's self-attention and transformer_masks build on the learner's combine_masks, so masks
combined with OR also cost those two cells: that cascade is declared here, as a learner would see it.
"""

from . import mistake

MISTAKES = [
    mistake("lesson05", "masks-combined-with-or", "combine_masks",
            "out = out & m", "out = out | m",
            {"test_combine_masks", "test_decoder_self_attention", "test_transformer_masks"},
            "OR lets a key through when either mask allows it: the future and the padding leak"),
    mistake("lesson05", "encoder-with-causal-mask", "encoder_self_attention",
            "return multi_head_attention(x, x, x, params, num_heads, src_mask, return_weights=return_weights)",
            "mask = combine_masks(causal_mask(x.shape[-2]), src_mask)\n"
            "    return multi_head_attention(x, x, x, params, num_heads, mask, return_weights=return_weights)",
            {"test_encoder_self_attention"}, "a causal mask out of habit: the encoder may see the whole source"),
    mistake("lesson05", "decoder-without-causal-mask", "decoder_self_attention",
            "mask = combine_masks(causal_mask(y.shape[-2]), tgt_mask)", "mask = tgt_mask",
            {"test_decoder_self_attention"}, "the padding mask replaces the causal mask instead of joining it"),
    mistake("lesson05", "cross-queries-and-memory-swapped", "encoder_decoder_attention",
            "return multi_head_attention(y, memory, memory, params, num_heads, memory_mask,",
            "return multi_head_attention(memory, y, y, params, num_heads, memory_mask,",
            {"test_encoder_decoder_attention"}, "queries from the encoder, keys and values from the decoder"),
    mistake("lesson05", "padding-queries-masked", "predicted_masks",
            "               [1, 1, 1, 1, 0, 0],  # padding queries: the real tokens before them, never padding\n"
            "               [1, 1, 1, 1, 0, 0]]",
            "               [0, 0, 0, 0, 0, 0],  # padding queries: the real tokens before them, never padding\n"
            "               [0, 0, 0, 0, 0, 0]]",
            {"test_predicted_masks"}, "padding hides keys, not queries: the padding rows still attend"),
    mistake("lesson05", "memory-mask-from-target-padding", "transformer_masks",
            "memory_mask = np.broadcast_to(src_keys, (batch, n_tgt, n_src))",
            "memory_mask = np.broadcast_to(tgt_keys.transpose(0, 2, 1), (batch, n_tgt, n_src))",
            {"test_transformer_masks"}, "the target's padding applied to the cross-attention instead of the source's"),
    mistake("lesson05", "reach-transposed", "reach",
            "result[i, j] = not np.allclose(after[i], before[i])",
            "result[j, i] = not np.allclose(after[i], before[i])",
            {"test_reach"}, "rows and columns swapped: R[j, i] instead of R[i, j]"),
    mistake("lesson05", "torch-padding-not-inverted", "decoder_attentions_torch",
            "src_ignore = to_key_padding_mask(ref_pt.padding_mask(src_lengths, n_src))",
            "src_ignore = ref_pt.padding_mask(src_lengths, n_src)[:, 0]",
            {"test_decoder_attentions_torch"}, "this course's True = may attend given to key_padding_mask (True = ignore)"),
]

# Graded by every `make test`; the others by `make test-mistakes` (COURSE_MISTAKES=all).
EVERYDAY = [
    "masks-combined-with-or",
    "decoder-without-causal-mask",
    "cross-queries-and-memory-swapped",
]
