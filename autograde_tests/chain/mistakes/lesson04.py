"""Lesson 4, Multi-head attention: planted mistakes and the test cells that must catch them.

Exercise 3 builds on the learner's split_heads and merge_heads, so a bug in either also costs
Exercise 3's points: that cascade is declared here, and it is what a learner would see.
"""

from . import mistake

MISTAKES = [
    mistake("lesson04", "split-without-swap", "split_heads",
            "return np.swapaxes(x.reshape(*batch, n, num_heads, width // num_heads), -2, -3)",
            "return x.reshape(*batch, num_heads, n, width // num_heads)",
            {"test_split_heads", "test_multi_head_attention"},
            "a bare reshape to (h, n, d) cuts the rows, not the columns, into heads"),
    mistake("lesson04", "merge-wrong-order", "merge_heads",
            "return np.swapaxes(x, -2, -3).reshape(*batch, n, h * d)", "return x.reshape(*batch, n, h * d)",
            {"test_merge_heads", "test_multi_head_attention"},
            "heads merged without swapping back: tokens of different heads interleave"),
    mistake("lesson04", "no-output-projection", "multi_head_attention",
            'return merge_heads(heads) @ params["w_o"] + params["b_o"]', "return merge_heads(heads)",
            {"test_multi_head_attention"}, "Concat(head_1..head_h) without W^O"),
    mistake("lesson04", "mask-without-head-axis", "multi_head_attention",
            "mask = np.asarray(mask)[..., None, :, :]", "mask = np.asarray(mask)",
            {"test_multi_head_attention"}, "a (batch, 1, n_k) padding mask aligned with the heads instead of the batch"),
    mistake("lesson04", "parameters-without-biases", "count_parameters",
            "    return weights + biases", "    return weights",
            {"test_count_parameters"}),
    mistake("lesson04", "full-width-attention-per-head", "count_multiply_adds",
            "attention = num_heads * (n_q * d_k * n_k + n_q * n_k * d_v)",
            "attention = num_heads * (n_q * d_model * n_k + n_q * n_k * d_model)",
            {"test_count_multiply_adds"}, "every head charged for the full width: h times too many"),
    mistake("lesson04", "torch-weights-not-transposed", "params_from_torch",
            'return {"w_q": w_q.T, "w_k": w_k.T, "w_v": w_v.T, "w_o": mha.out_proj.weight.detach().T,',
            'return {"w_q": w_q, "w_k": w_k, "w_v": w_v, "w_o": mha.out_proj.weight.detach(),',
            {"test_params_from_torch"}, "PyTorch computes x W^T + b: its weights must be transposed"),
    mistake("lesson04", "torch-mask-inverted", "multi_head_attention_torch",
            "attn_mask=None if mask is None else mask.unsqueeze(-3)",
            "attn_mask=None if mask is None else ~mask.unsqueeze(-3)",
            {"test_multi_head_attention_torch"}, "nn.MultiheadAttention's convention (True = ignore) used with SDPA"),
]

# Graded by every `make test`; the others by `make test-mistakes` (COURSE_MISTAKES=all).
EVERYDAY = [
    "split-without-swap",
    "no-output-projection",
    "torch-mask-inverted",
]
