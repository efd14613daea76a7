"""Lesson 12, Multi-head latent attention (MLA; DeepSeek-V2, section 2.1) -- PyTorch reference:
the same functions as ``attention_ref.np.latent`` (whose docstring explains them), on the device
of their inputs."""

from __future__ import annotations

import math

import torch

from .. import _checks
from .masking import causal_mask
from .multihead import merge_heads, split_heads
from .retrieval import as_float_tensor, softmax
from .rotary import rotary_embedding
from .sdpa import scaled_dot_product_attention

__all__ = [
    "init_mla_params",
    "mla_attention",
    "absorb_mla_params",
    "mla_decode_step",
    "mla_cache_bytes_per_token",
]


def init_mla_params(
    d_model: int, num_heads: int, head_dim: int, latent_dim: int, rope_dim: int,
    rng: torch.Generator | None = None, *, device=None, dtype=torch.float32,
) -> dict:  # fmt: skip
    """Random MLA weights (normal, scaled by 1/sqrt(fan_in)), drawn on the CPU from ``rng``."""
    shapes = {
        "w_dkv": (d_model, latent_dim),
        "w_uk": (latent_dim, num_heads * head_dim),
        "w_uv": (latent_dim, num_heads * head_dim),
        "w_q": (d_model, num_heads * head_dim),
        "w_qr": (d_model, num_heads * rope_dim),
        "w_kr": (d_model, rope_dim),
        "w_o": (num_heads * head_dim, d_model),
    }
    return {
        name: (torch.randn(shape, generator=rng, dtype=dtype) / math.sqrt(shape[0])).to(device)
        for name, shape in shapes.items()
    }


def _mla_input(x, params, num_heads: int):
    x = as_float_tensor("x", x)
    params = {n: as_float_tensor(n, params[n]) for n in _checks.MLA_PARAM_NAMES if n in params}
    sizes = _checks.mla_params(params, num_heads)
    _checks.require_ndim("x", x, 2, "(..., n, d_model)")
    _checks.require_same_size("d_model", "x", x, -1, "w_dkv", params["w_dkv"], 0)
    return x, params, sizes


def mla_attention(x, params: dict, num_heads: int) -> torch.Tensor:
    """Causal multi-head latent self-attention as defined: ``(..., n, d_model) -> (..., n,
    d_model)``; see the NumPy twin."""
    x, p, _ = _mla_input(x, params, num_heads)
    n = x.shape[-2]
    positions = torch.arange(n)  # on the CPU, where rotary_embedding computes its angles
    latent = x @ p["w_dkv"]
    q_rope = rotary_embedding(split_heads(x @ p["w_qr"], num_heads), positions)
    q = torch.cat([split_heads(x @ p["w_q"], num_heads), q_rope], dim=-1)
    rope_key = rotary_embedding((x @ p["w_kr"]).unsqueeze(-3), positions)  # (..., 1, n, d_r)
    keys = split_heads(latent @ p["w_uk"], num_heads)
    keys = torch.cat([keys, rope_key.expand(*keys.shape[:-1], rope_key.shape[-1])], dim=-1)
    values = split_heads(latent @ p["w_uv"], num_heads)
    heads = scaled_dot_product_attention(q, keys, values, causal_mask(n, device=x.device))
    return merge_heads(heads) @ p["w_o"]


def absorb_mla_params(params: dict, num_heads: int) -> dict:
    """``"w_uk_t"`` ``(h, d_h, d_c)``, head ``i``'s ``W_UK,i^T``, and ``"w_uv"`` ``(h, d_c,
    d_h)``, head ``i``'s ``W_UV,i``: views of ``params``, laid out once before decoding; see the
    NumPy twin."""
    p = {n: as_float_tensor(n, params[n]) for n in _checks.MLA_PARAM_NAMES if n in params}
    _, d_c, d_h, _ = _checks.mla_params(p, num_heads)
    return {
        "w_uk_t": p["w_uk"].unflatten(1, (num_heads, d_h)).permute(1, 2, 0),  # (h, d_h, d_c)
        "w_uv": p["w_uv"].unflatten(1, (num_heads, d_h)).transpose(0, 1),  # (h, d_c, d_h)
    }


def mla_decode_step(
    x_new, params: dict, num_heads: int, cache: dict, position: int, absorbed: dict | None = None
) -> torch.Tensor:
    """One MLA decoding step in the latent space, caching ``cache["latent"]`` ``(..., t, d_c)`` and
    ``cache["rope_key"]`` ``(..., t, d_r)`` only, with the absorbed factors: ``(..., 1,
    d_model)``; see the NumPy twin."""
    x_new, p, (_, _, d_h, d_r) = _mla_input(x_new, params, num_heads)
    here = torch.tensor([_checks.position(position)])  # on the CPU, as rotary_embedding wants
    absorbed = absorb_mla_params(p, num_heads) if absorbed is None else absorbed
    new = {"latent": x_new @ p["w_dkv"], "rope_key": rotary_embedding(x_new @ p["w_kr"], here)}
    for name, value in new.items():
        cache[name] = value if name not in cache else torch.cat([cache[name], value], dim=-2)
    q_latent = split_heads(x_new @ p["w_q"], num_heads) @ absorbed["w_uk_t"]  # (..., h, 1, d_c)
    q_rope = rotary_embedding(split_heads(x_new @ p["w_qr"], num_heads), here)  # (..., h, 1, d_r)
    latent, rope_key = cache["latent"].unsqueeze(-3), cache["rope_key"].unsqueeze(-3)
    scores = q_latent @ latent.transpose(-1, -2) + q_rope @ rope_key.transpose(-1, -2)
    heads = (softmax(scores / math.sqrt(d_h + d_r)) @ latent) @ absorbed["w_uv"]  # (..., h, 1, d_h)
    return merge_heads(heads) @ p["w_o"]


def mla_cache_bytes_per_token(
    num_layers: int, latent_dim: int, rope_dim: int, bytes_per_value: int = 2
) -> int:
    """``num_layers * (latent_dim + rope_dim) * bytes_per_value``; see the NumPy twin."""
    from ..np.latent import mla_cache_bytes_per_token as count

    return count(num_layers, latent_dim, rope_dim, bytes_per_value)
