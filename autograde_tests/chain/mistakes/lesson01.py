"""Lesson 1, Retrieval as attention: planted mistakes and the test cells that must catch them."""

from . import mistake

MISTAKES = [
    mistake("lesson01", "softmax-overflow", "softmax",
        "shifted = x - np.max(x, axis=axis, keepdims=True)", "shifted = x",
        {"test_softmax_stable"},
        "exp(1000) overflows: only the stability tests may catch it; ordinary scores are fine"),
    mistake("lesson01", "softmax-wrong-axis", "softmax",
        "np.sum(exps, axis=axis, keepdims=True)", "np.sum(exps, axis=0, keepdims=True)",
        {"test_softmax", "test_softmax_stable", "test_soft_lookup", "test_kernel_regression"},
        "normalizing over the wrong axis breaks softmax and everything built on it"),
    mistake("lesson01", "weights-not-normalized", "soft_lookup",
        "weights = softmax(dot_scores(queries, keys) / temperature, axis=-1)",
        "weights = np.exp(dot_scores(queries, keys) / temperature)",
        {"test_soft_lookup"}),
    mistake("lesson01", "temperature-multiplied", "soft_lookup",
        "dot_scores(queries, keys) / temperature", "dot_scores(queries, keys) * temperature",
        {"test_soft_lookup"}, "only a test at a temperature other than 1 can see it"),
    mistake("lesson01", "normalize-by-global-sum", "normalize_weights",
        "total = similarities.sum(axis=axis, keepdims=True)", "total = similarities.sum()",
        {"test_normalize_weights"}),
    mistake("lesson01", "keys-T-in-batch", "dot_scores",
        "queries @ np.swapaxes(keys, -1, -2)", "queries @ keys.T",
        {"test_dot_scores", "test_soft_lookup"}, "keys.T reverses the batch axes too"),
    mistake("lesson01", "torch-ignores-temperature", "soft_lookup_torch",
        "queries @ keys.transpose(-1, -2) / temperature", "queries @ keys.transpose(-1, -2)",
        {"test_soft_lookup_torch"}),
]

# Graded by every `make test`; the others by `make test-mistakes` (COURSE_MISTAKES=all).
EVERYDAY = [
    "softmax-overflow",
    "softmax-wrong-axis",
    "weights-not-normalized",
]
