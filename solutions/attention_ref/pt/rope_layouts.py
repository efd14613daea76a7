"""Lesson 14, Rotary position embedding as checkpoints store it -- PyTorch reference.

Lesson 10's ``rotary_embedding`` pairs features ``(2i, 2i + 1)`` and turns each pair by the angle
``-pos * w_i`` (lesson 7's row-vector rotation ``M_pos``), ``w_i = base**(-2i / d)``. The
checkpoints of the Llama family (Qwen3, gpt-oss, Mistral, ...) were trained with another layout:

* feature ``i`` is paired with feature ``i + d/2`` (the first half of each head with its second
  half: Hugging Face's ``rotate_half``), and
* each pair turns by ``+pos * w_i``: ``(a, b) -> (a cos - b sin, b cos + a sin)``.

The two differ by a permutation of the features and the sign of the angle, so lesson 10's function
computes the checkpoint's rotation once both are undone (``rope_via_lesson10``): gather the
features so that pair ``(i, i + d/2)`` sits at ``(2i, 2i + 1)`` (``pairing_permutation``), turn by
``-(-pos) * w_i``, and scatter them back. Forgetting the permutation pairs the wrong features;
forgetting the sign mirrors every offset, the score of a query ``m - n`` positions after a key
becoming the checkpoint's score of ``n - m``.

GLM-4 keeps lesson 10's pairing ``(2i, 2i + 1)`` with the ``+`` sign (``layout="interleaved"``),
and turns only the first half of each head (partial rotary): the rest passes unturned. Qwen3.5
and Gemma 4 turn a fraction of each head too. ``apply_rope`` covers all of them: the rotary width
is ``2 * len(inv_freq)``, the first that many features turn, in either layout, and ``scale``
multiplies the cosines and sines (YaRN's attention factor; ``rope_frequencies``).

``rope_frequencies(rope, rotary_dim)`` reads a config's ``rope_parameters``: the default
frequencies ``theta**(-2i / r)``, or YaRN's (Peng et al., 2023, section 3.2): the high
frequencies (many turns within the context the model was trained on) kept, the low ones divided
by ``factor`` (interpolated), a linear ramp between, and the attention factor
``0.1 ln(factor) + 1`` (section 3.4), Hugging Face's ``_compute_yarn_parameters`` step by step.
"""

from __future__ import annotations

import math

import torch

from .retrieval import as_float_tensor
from .rotary import rotary_embedding

__all__ = ["pairing_permutation", "rope_via_lesson10", "apply_rope", "rope_frequencies"]

LAYOUTS = ("half", "interleaved")


def pairing_permutation(rotary_dim: int, *, device=None) -> torch.Tensor:
    """The index ``p`` (a LongTensor ``(rotary_dim,)``) with ``x[..., p]`` holding feature ``i``
    at ``2i`` and feature ``i + rotary_dim/2`` at ``2i + 1``: ``[0, r/2, 1, r/2 + 1, ...]``."""
    if type(rotary_dim).__name__ == "bool" or not hasattr(rotary_dim, "__index__"):
        raise ValueError(f"rotary_dim must be a positive even integer, got {rotary_dim!r}")
    if rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(f"rotary_dim must be a positive even integer, got {rotary_dim!r}")
    return torch.arange(rotary_dim, device=device).view(2, rotary_dim // 2).T.flatten()


def _positions(positions, n: int) -> torch.Tensor:
    if positions is None:
        return torch.arange(n)
    positions = torch.as_tensor(positions)
    if tuple(positions.shape) != (n,):
        raise ValueError(
            f"positions must have shape ({n},), one per row of x, got {tuple(positions.shape)}"
        )
    return positions


def _broadcast_positions(positions, x) -> torch.Tensor:
    """``positions`` ``(n,)``, or any shape that broadcasts to ``x.shape[:-1]`` (one position per
    row of each sequence of a batch: ``(batch, 1, n)`` for ``x`` ``(batch, heads, n, d)``)."""
    if positions is None:
        return torch.arange(x.shape[-2])
    positions = torch.as_tensor(positions)
    try:
        fits = torch.broadcast_shapes(positions.shape, x.shape[:-1]) == x.shape[:-1]
    except RuntimeError:
        fits = False
    if not fits or positions.ndim < 1 or positions.shape[-1] != x.shape[-2]:
        raise ValueError(
            f"positions must broadcast to x's shape without its last axis, {tuple(x.shape[:-1])}, "
            f"one per row: got {tuple(positions.shape)}"
        )
    return positions


def rope_via_lesson10(x, positions=None, base: float = 10000.0) -> torch.Tensor:
    """The checkpoints' rotary embedding (pairs ``(i, i + d/2)``, turned by ``+pos * w_i``) of
    ``x`` ``(..., n, d)``, computed by lesson 10's ``rotary_embedding``: the features permuted
    into its pairs, the positions negated, the features permuted back."""
    x = as_float_tensor("x", x)
    perm = pairing_permutation(x.shape[-1], device=x.device)
    positions = _positions(positions, x.shape[-2])
    turned = rotary_embedding(x[..., perm], -positions.to(torch.float64), base)
    return turned[..., torch.argsort(perm)]


def _check_rope_inputs(x, inv_freq, layout: str) -> int:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., n, d), got {tuple(x.shape)}")
    if inv_freq.ndim != 1 or not 0 < 2 * inv_freq.shape[0] <= x.shape[-1]:
        raise ValueError(
            f"inv_freq must have shape (r/2,) with 0 < r <= d: x has d = {x.shape[-1]} features, "
            f"inv_freq has shape {tuple(inv_freq.shape)}"
        )
    return 2 * inv_freq.shape[0]


def apply_rope(x, positions, inv_freq, layout: str = "half", scale: float = 1.0) -> torch.Tensor:
    """Row ``j`` of ``x`` ``(..., n, d)`` turned as checkpoints turn it: pair ``i`` of the first
    ``r = 2 * len(inv_freq)`` features by ``+positions[..., j] * inv_freq[i]``, the pair ``(i, i +
    r/2)`` (``layout="half"``) or ``(2i, 2i + 1)`` (``"interleaved"``); features ``r ..`` unturned;
    the cosines and sines multiplied by ``scale``. ``positions``: ``(n,)``, or broadcasting to
    ``x.shape[:-1]`` (a position per row of each sequence). Angles in float64 where the device has
    it (MPS has not: float32 there), on ``x``'s device."""
    x, inv_freq = as_float_tensor("x", x), torch.as_tensor(inv_freq)
    rotary = _check_rope_inputs(x, inv_freq, layout)
    positions = _broadcast_positions(positions, x)
    exact = torch.float32 if x.device.type == "mps" else torch.float64
    angles = positions.to(x.device, exact)[..., None] * inv_freq.to(x.device, exact)
    cos, sin = (scale * f(angles) for f in (torch.cos, torch.sin))
    cos, sin = cos.to(x.device, x.dtype), sin.to(x.device, x.dtype)
    turned, rest = x[..., :rotary], x[..., rotary:]
    if layout == "half":
        a, b = turned[..., : rotary // 2], turned[..., rotary // 2 :]
        turned = torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
    else:
        a, b = turned[..., 0::2], turned[..., 1::2]
        turned = torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)
    return torch.cat((turned, rest), dim=-1)


def _yarn_ramp(rope: dict, rotary_dim: int, theta: float) -> torch.Tensor:
    """0 for the pairs YaRN keeps (more than ``beta_fast`` turns over the original context), 1
    for those it interpolates (fewer than ``beta_slow``), linear between (by pair index)."""
    context = rope["original_max_position_embeddings"]

    def pair_of(turns):  # the pair index whose wavelength fits `turns` times into the context
        return rotary_dim * math.log(context / (turns * 2 * math.pi)) / (2 * math.log(theta))

    low, high = pair_of(rope.get("beta_fast") or 32), pair_of(rope.get("beta_slow") or 1)
    if rope.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rotary_dim - 1)
    if low == high:
        high += 0.001  # a ramp of zero width: a step
    pairs = torch.arange(rotary_dim // 2, dtype=torch.float64)
    return ((pairs - low) / (high - low)).clamp(0, 1)


def _yarn_attention_factor(rope: dict, factor: float) -> float:
    if rope.get("attention_factor") is not None:
        return float(rope["attention_factor"])

    def mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    if rope.get("mscale") and rope.get("mscale_all_dim"):  # DeepSeek's variant
        return mscale(factor, rope["mscale"]) / mscale(factor, rope["mscale_all_dim"])
    return mscale(factor)


def rope_frequencies(rope: dict, rotary_dim: int) -> tuple[torch.Tensor, float]:
    """``(inv_freq, attention_factor)`` for a config's ``rope_parameters``: ``inv_freq``
    ``(rotary_dim/2,)`` float64 on the CPU; ``rope_type`` "default" (``theta**(-2i/r)``, factor 1)
    or "yarn" (see the module's docstring)."""
    kind = rope.get("rope_type", "default")
    if kind not in ("default", "yarn"):
        raise ValueError(f"rope_type {kind!r} is not supported here: 'default' or 'yarn'")
    pairing_permutation(rotary_dim)  # a positive even width, or a ValueError saying so
    theta = float(rope["rope_theta"])
    base = theta ** -(torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    if kind == "default":
        return base, 1.0
    factor = float(rope["factor"])
    ramp = _yarn_ramp(rope, rotary_dim, theta)
    return base / factor * ramp + base * (1 - ramp), _yarn_attention_factor(rope, factor)
