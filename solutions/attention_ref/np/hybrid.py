"""Lesson 13, What a stack of full-attention and linear-attention layers keeps per sequence --
NumPy reference (integers, shared by ``attention_ref.pt.hybrid``).

A full-attention layer caches a key and a value per key/value head for every token (lesson 12's
``kv_cache_bytes_per_token``, per layer): its cache grows with the context. A linear-attention
layer (Gated DeltaNet, Kimi Delta Attention, ...) keeps one ``d_k x d_v`` state per head, whatever
the context. A hybrid stack lists its layers' kinds, as Hugging Face configs do in
``layer_types``: Qwen3-Next-80B-A3B has 48 layers, three Gated DeltaNet layers to each gated
full-attention layer; Kimi Linear 48B-A3B 27 layers, 20 of Kimi Delta Attention and 7 of MLA.

The short causal convolution these models run over q, k and v before a linear layer's recurrence
keeps state too: the last inputs of each of its channels. A convolution of width ``kernel`` needs
the ``kernel - 1`` positions before the new one (what the causal-conv1d kernels keep);
``transformers``' cache keeps ``kernel`` (``update_conv_state``). Qwen3-Next: 8,192 channels
(q and k of 16 heads of 128, v of 32 heads of 128) x 4 positions x 2 bytes = 64 KiB per layer,
about 3 % of the layer's 2 MiB float32 state (``short_conv_state_bytes``; add it to
``state_bytes``).
"""

from __future__ import annotations

from .._checks import positive_int

__all__ = ["linear_state_bytes", "short_conv_state_bytes", "stack_cache_bytes"]

KINDS = ("full_attention", "linear_attention")


def linear_state_bytes(num_heads: int, d_k: int, d_v: int, bytes_per_value: int = 2) -> int:
    """One linear-attention layer's state: a ``d_k x d_v`` matrix per head, whatever the
    context."""
    for name, value in (("num_heads", num_heads), ("d_k", d_k), ("d_v", d_v)):
        positive_int(name, value)
    return num_heads * d_k * d_v * positive_int("bytes_per_value", bytes_per_value)


def short_conv_state_bytes(channels: int, positions: int = 4, bytes_per_value: int = 2) -> int:
    """A short convolution's decode state: the last ``positions`` inputs of each of its
    ``channels`` (``kernel`` in ``transformers``' cache, ``kernel - 1`` in the causal-conv1d
    kernels), whatever the context."""
    for name, value in (("channels", channels), ("positions", positions)):
        positive_int(name, value)
    return channels * positions * positive_int("bytes_per_value", bytes_per_value)


def stack_cache_bytes(
    layer_types, context_length: int, kv_bytes_per_token: int, state_bytes: int
) -> int:
    """The bytes a stack keeps for one sequence of ``context_length`` tokens: each
    ``"full_attention"`` layer ``context_length * kv_bytes_per_token``, each ``"linear_attention"``
    layer ``state_bytes``."""
    layer_types = list(layer_types)
    unknown = sorted({kind for kind in layer_types if kind not in KINDS})
    if unknown:
        raise ValueError(f"layer_types may hold {KINDS}, got {unknown}")
    if (
        type(context_length).__name__ == "bool"
        or not hasattr(context_length, "__index__")
        or context_length < 0
    ):
        raise ValueError(f"context_length must be a non-negative integer, got {context_length!r}")
    full = layer_types.count("full_attention")
    return full * int(context_length) * int(kv_bytes_per_token) + (len(layer_types) - full) * int(
        state_bytes
    )
