"""NumPy reference: every function the lessons build, importable by name.

``from attention_ref.np import softmax`` -- the same names exist in ``attention_ref.pt``.
"""

from .retrieval import (
    dot_scores,
    kernel_regression,
    normalize_weights,
    soft_lookup,
    softmax,
    weighted_sum,
)

__all__ = [
    "dot_scores",
    "kernel_regression",
    "normalize_weights",
    "soft_lookup",
    "softmax",
    "weighted_sum",
]
