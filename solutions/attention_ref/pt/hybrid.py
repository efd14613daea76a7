"""Lesson 13, the bytes a hybrid stack keeps per sequence -- the same integers as
``attention_ref.np.hybrid`` (whose docstring explains them), under the PyTorch library's names."""

from __future__ import annotations

from ..np.hybrid import linear_state_bytes, short_conv_state_bytes, stack_cache_bytes

__all__ = ["linear_state_bytes", "short_conv_state_bytes", "stack_cache_bytes"]
