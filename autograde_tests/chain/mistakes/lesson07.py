"""Lesson 7, Positional encoding: planted mistakes and the test cells that must catch them.

Each graded function is tested on its own: the shift-matrix test builds its encodings with the
course library, so a wrong positional_encoding costs only its own cell. embed_tokens calls the
learner's positional_encoding_torch, but its tests use float32 and float64 tables of a few
positions, where a table computed in the requested dtype is still right: no cascade.
"""

from . import mistake

MISTAKES = [
    mistake("lesson07", "invariance-instead-of-equivariance", "is_permutation_equivariant",
            "f(x)[..., perm, :]", "f(x)",
            {"test_is_permutation_equivariant"},
            "f(x[perm]) compared with f(x): asks for invariance, which self-attention does not have"),
    mistake("lesson07", "permutes-the-batch-axis", "is_permutation_equivariant",
            "np.allclose(f(x[..., perm, :]), f(x)[..., perm, :])", "np.allclose(f(x[perm]), f(x)[perm])",
            {"test_is_permutation_equivariant"},
            "x[perm] reorders the first axis: the tokens only when there is no batch axis"),
    mistake("lesson07", "sines-then-cosines", "positional_encoding",
            "pe[:, 0::2] = np.sin(angles)\n    pe[:, 1::2] = np.cos(angles)",
            "pe[:, :d_model // 2] = np.sin(angles)\n    pe[:, d_model // 2:] = np.cos(angles)",
            {"test_positional_encoding"},
            "all the sines, then all the cosines, instead of interleaving them pair by pair"),
    mistake("lesson07", "exponent-i-instead-of-2i", "positional_encoding",
            "two_i = np.arange(0, d_model, 2)[None, :]", "two_i = np.arange(d_model // 2)[None, :]",
            {"test_positional_encoding"},
            "10000^(i / d_model): the wavelengths stop at 100 * 2 pi instead of 10000 * 2 pi"),
    mistake("lesson07", "positions-from-1", "positional_encoding",
            "pos = np.arange(n_positions)[:, None]", "pos = np.arange(1, n_positions + 1)[:, None]",
            {"test_positional_encoding"}, "the first token encoded as position 1"),
    mistake("lesson07", "rotation-transposed", "shift_matrix",
            "m[even, odd] = -np.sin(angles)\n    m[odd, even] = np.sin(angles)",
            "m[even, odd] = np.sin(angles)\n    m[odd, even] = -np.sin(angles)",
            {"test_shift_matrix"}, "the transposed rotation, for column vectors: it shifts by -k"),
    mistake("lesson07", "torch-angles-in-half-precision", "positional_encoding_torch",
            "dtype=torch.float64", "dtype=dtype",
            {"test_positional_encoding_torch"},
            "the table computed in the requested dtype: float16 angles are off by up to 0.125 rad at pos 500"),
    mistake("lesson07", "embeddings-not-scaled", "embed_tokens",
            "table[tokens] * math.sqrt(d_model) + pe", "table[tokens] + pe",
            {"test_embed_tokens"}, "the paper multiplies the embedding weights by sqrt(d_model)"),
]

# Graded by every `make test`; the others by `make test-mistakes` (COURSE_MISTAKES=all).
EVERYDAY = [
    "sines-then-cosines",
    "exponent-i-instead-of-2i",
    "embeddings-not-scaled",
]
