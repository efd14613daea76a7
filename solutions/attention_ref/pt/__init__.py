"""PyTorch reference: the same names as attention_ref.np, device-agnostic.

``pick_device()`` chooses cuda > mps > cpu once; each function runs where its inputs live.
"""

from .device import available_devices, pick_device
from .retrieval import (
    dot_scores,
    kernel_regression,
    normalize_weights,
    soft_lookup,
    softmax,
    weighted_sum,
)

__all__ = [
    "available_devices",
    "pick_device",
    "dot_scores",
    "kernel_regression",
    "normalize_weights",
    "soft_lookup",
    "softmax",
    "weighted_sum",
]
