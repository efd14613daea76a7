"""Lesson 2, Scaled dot-product attention: planted mistakes and the test cells that must catch them."""

from . import mistake

MISTAKES = [
    mistake("lesson02", "scale-by-d_k", "attention_weights",
            "/ np.sqrt(d_k)", "/ d_k",
            {"test_attention_weights", "test_scaled_dot_product_attention"},
            "dividing by d_k instead of sqrt(d_k); the attention built on the weights is wrong too"),
    mistake("lesson02", "softmax-over-queries", "attention_weights",
            "softmax(dot_scores(queries, keys) / np.sqrt(d_k), axis=-1)",
            "softmax(dot_scores(queries, keys) / np.sqrt(d_k), axis=-2)",
            {"test_attention_weights", "test_scaled_dot_product_attention"},
            "normalizing over the queries: rows no longer sum to 1"),
    mistake("lesson02", "torch-unscaled", "scaled_dot_product_attention_torch",
            "scale = 1.0 / queries.shape[-1] ** 0.5", "scale = 1.0",
            {"test_scaled_dot_product_attention_torch"},
            "the PyTorch port forgets the default 1/sqrt(d_k); only its own test can see it"),
    mistake("lesson02", "relu-instead-of-tanh", "additive_attention",
            "hidden = np.tanh(", "hidden = np.maximum(0.0, ",
            {"test_additive_attention"}),
    mistake("lesson02", "variance-of-scaled-scores", "dot_product_variance",
            "return np.var(np.sum(q * k, axis=-1))", "return np.var(np.sum(q * k, axis=-1) / np.sqrt(d_k))",
            {"test_dot_product_variance"}, "measuring the scaled scores gives 1, not d_k"),
]

# Graded by every `make test`; the others by `make test-mistakes` (COURSE_MISTAKES=all).
EVERYDAY = [
    "scale-by-d_k",
    "torch-unscaled",
    "relu-instead-of-tanh",
]
