"""Lesson 3, Masking: planted mistakes and the test cells that must catch them."""

from . import mistake

MISTAKES = [
    mistake("lesson03", "causal-diagonal-excluded", "causal_mask",
            "np.tril(np.ones((n_q, n_k), dtype=bool))", "np.tril(np.ones((n_q, n_k), dtype=bool), k=-1)",
            {"test_causal_mask"}, "off by one: a position may not attend to itself"),
    mistake("lesson03", "causal-transposed", "causal_mask",
            "np.tril(", "np.triu(", {"test_causal_mask"}, "the upper triangle lets every position see its future"),
    mistake("lesson03", "padding-off-by-one", "padding_mask",
            "np.arange(n_k)[None, :] < lengths[:, None]", "np.arange(n_k)[None, :] <= lengths[:, None]",
            {"test_padding_mask"}),
    mistake("lesson03", "mask-after-softmax", "masked_softmax",
            "    scores = np.where(mask, scores, -np.inf)\n"
            "    peak = np.max(scores, axis=-1, keepdims=True)\n"
            "    peak = np.where(np.isfinite(peak), peak, 0.0)  # a fully masked row: its maximum is -inf\n"
            "    exps = np.exp(scores - peak)\n"
            "    total = np.sum(exps, axis=-1, keepdims=True)\n"
            "    return exps / np.where(total == 0, 1.0, total)",
            "    exps = np.exp(scores - np.max(scores, axis=-1, keepdims=True))\n"
            "    return exps / np.sum(exps, axis=-1, keepdims=True) * mask",
            {"test_masked_softmax", "test_masked_attention"},
            "weights of the unmasked softmax multiplied by the mask: rows no longer sum to 1"),
    mistake("lesson03", "inverted-convention", "masked_softmax",
            "scores = np.where(mask, scores, -np.inf)", "scores = np.where(mask, -np.inf, scores)",
            {"test_masked_softmax", "test_masked_attention"}, "True taken to mean ignore (nn.MultiheadAttention's)"),
    mistake("lesson03", "fully-masked-rows-nan", "masked_softmax",
            "    peak = np.where(np.isfinite(peak), peak, 0.0)  # a fully masked row: its maximum is -inf\n", "",
            {"test_masked_softmax"}, "NaN for a query with no key; no other test has such a row"),
    mistake("lesson03", "torch-mask-ignored", "masked_attention_torch",
            "    scores = scores.masked_fill(~mask, float(\"-inf\"))\n", "",
            {"test_masked_attention_torch"}),
    mistake("lesson03", "leak-test-includes-t", "leaks_future",
            "if not np.allclose(after[:t], before[:t]):", "if not np.allclose(after[:t + 1], before[:t + 1]):",
            {"test_leaks_future"}, "comparing output t too: every function then seems to leak"),
]

# Graded by every `make test`; the others by `make test-mistakes` (COURSE_MISTAKES=all).
EVERYDAY = [
    "causal-diagonal-excluded",
    "mask-after-softmax",
    "fully-masked-rows-nan",
]
