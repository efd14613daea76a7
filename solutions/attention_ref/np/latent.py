"""Lesson 12, Multi-head latent attention (MLA; DeepSeek-V2, DeepSeek-AI, 2024, section 2.1) --
NumPy reference.

MLA caches one small **latent** vector per token instead of keys and values. In the course's row
layout (``x @ W``), for the input ``x_t`` of position ``t``:

    c_t = x_t W_DKV                          (d_c)       the latent: all the cache keeps ...
    k_t,i = c_t W_UK,i,   v_t,i = c_t W_UV,i  (d_h each)  ... keys and values up-projected per head
    q_t,i = x_t W_Q,i                        (d_h)

plus a **decoupled rotary** part (section 2.1.3): rotary position embedding cannot sit on the
up-projected keys (see below), so each head's query gets ``d_r`` more features
``RoPE(x_t W_QR,i)`` and every head shares one rotary key ``k^R_t = RoPE(x_t W_KR)`` of ``d_r``
features, which the cache keeps beside ``c_t``. Head ``i`` scores ``[q_t,i ; q^R_t,i] .
[k_j,i ; k^R_j] / sqrt(d_h + d_r)``, causally; the heads' outputs are merged and projected by
``W_O``. (DeepSeek-V2 also compresses the queries through a latent of their own, which saves
activations, not cache; left out here.)

**Absorbed projections** (section 2.1.2), by associativity: ``q_t,i . k_j,i = ((x_t W_Q,i)
W_UK,i^T) . c_j``, so each head's query is multiplied by ``W_UK,i^T`` (d_h x d_c) at each step and
scored against the cached latents themselves; likewise ``sum_j p_j (c_j W_UV,i) = (sum_j p_j c_j)
W_UV,i`` after attention. No key or value is ever computed: ``absorb_mla_params`` lays the
per-head factors out once, before decoding, and ``mla_decode_step`` applies them. The paper writes
the merged matrices ``W_Q,i W_UK,i^T`` (d_model x d_c); applying those costs ``d_model d_c`` per
token and head against ``d_model d_h + d_h d_c`` for the two factors in turn, so merging pays only
when ``d_c < d_h`` (DeepSeek-V2: 512 > 128), and DeepSeek's and vLLM's inference code keep the
factors, as here. (The latent form is for decoding; for a prompt, servers up-project the latents
and attend as usual: scoring in the latent space costs ``d_c + d_r`` per query-key pair and head
against ``d_h + d_r``.) The rotation of RoPE depends on the positions of both the query and the
key, so ``W_UK`` could not be moved to the query if the rotation sat between them: hence the
separate rotary part. (DeepSeek's released models also normalize the latent with an RMSNorm
before the up-projections; left out here, as in section 2.1 of the paper.)

Cache per token and layer: ``d_c + d_r`` numbers (DeepSeek-V2: 512 + 64), against ``2 h d_h`` for
multi-head attention (2 x 128 x 128).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _checks
from .masking import causal_mask
from .multihead import merge_heads, split_heads
from .retrieval import as_float_array, softmax
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
    d_model: int, num_heads: int, head_dim: int, latent_dim: int, rope_dim: int, rng=None
) -> dict:
    """Random MLA weights (normal, scaled by 1/sqrt(fan_in)); see the module docstring."""
    rng = np.random.default_rng() if rng is None else rng
    shapes = {
        "w_dkv": (d_model, latent_dim),
        "w_uk": (latent_dim, num_heads * head_dim),
        "w_uv": (latent_dim, num_heads * head_dim),
        "w_q": (d_model, num_heads * head_dim),
        "w_qr": (d_model, num_heads * rope_dim),
        "w_kr": (d_model, rope_dim),
        "w_o": (num_heads * head_dim, d_model),
    }
    return {name: rng.normal(size=shape) / math.sqrt(shape[0]) for name, shape in shapes.items()}


def _mla_input(x, params, num_heads: int):
    x = as_float_array("x", x)
    params = {n: as_float_array(n, params[n]) for n in _checks.MLA_PARAM_NAMES if n in params}
    sizes = _checks.mla_params(params, num_heads)
    _checks.require_ndim("x", x, 2, "(..., n, d_model)")
    _checks.require_same_size("d_model", "x", x, -1, "w_dkv", params["w_dkv"], 0)
    return x, params, sizes


def mla_attention(x, params: dict, num_heads: int) -> np.ndarray:
    """Causal multi-head latent self-attention over positions ``0 .. n - 1``, as defined (keys and
    values up-projected from the latents): ``x (..., n, d_model) -> (..., n, d_model)``."""
    x, p, _ = _mla_input(x, params, num_heads)
    n = x.shape[-2]
    latent = x @ p["w_dkv"]  # (..., n, d_c)
    q = np.concatenate(
        [
            split_heads(x @ p["w_q"], num_heads),
            rotary_embedding(split_heads(x @ p["w_qr"], num_heads)),
        ],
        axis=-1,
    )  # (..., h, n, d_h + d_r)
    rope_key = rotary_embedding((x @ p["w_kr"])[..., None, :, :])  # (..., 1, n, d_r): every head's
    keys = split_heads(latent @ p["w_uk"], num_heads)
    keys = np.concatenate(
        [keys, np.broadcast_to(rope_key, keys.shape[:-1] + rope_key.shape[-1:])], axis=-1
    )
    values = split_heads(latent @ p["w_uv"], num_heads)
    heads = scaled_dot_product_attention(q, keys, values, causal_mask(n))
    return merge_heads(heads) @ p["w_o"]


def absorb_mla_params(params: dict, num_heads: int) -> dict:
    """The per-head factors a decoding step absorbs, laid out once before decoding:
    ``"w_uk_t"`` ``(h, d_h, d_c)``, head ``i``'s ``W_UK,i^T`` (takes its query into the latent
    space), and ``"w_uv"`` ``(h, d_c, d_h)``, head ``i``'s ``W_UV,i`` (takes its weighted sum of
    latents to its output). Views of ``params`` where NumPy can make them."""
    p = {
        name: as_float_array(name, params[name])
        for name in _checks.MLA_PARAM_NAMES
        if name in params
    }
    _, d_c, d_h, _ = _checks.mla_params(p, num_heads)
    return {
        "w_uk_t": p["w_uk"].reshape(d_c, num_heads, d_h).transpose(1, 2, 0),  # (h, d_h, d_c)
        "w_uv": p["w_uv"].reshape(d_c, num_heads, d_h).transpose(1, 0, 2),  # (h, d_c, d_h)
    }


def mla_decode_step(
    x_new, params: dict, num_heads: int, cache: dict, position: int, absorbed: dict | None = None
) -> np.ndarray:
    """One decoding step of MLA in the latent space, with the absorbed factors.

    ``x_new`` ``(..., 1, d_model)`` is the input at ``position``; ``cache`` (empty at the first
    step) keeps ``cache["latent"]`` ``(..., t, d_c)`` and ``cache["rope_key"]`` ``(..., t, d_r)``
    for the ``t`` positions so far, and nothing else. Each head's query is taken into the latent
    space by ``W_UK,i^T``, scored against the cached latents, and its weighted sum of latents taken
    to its output by ``W_UV,i`` (``absorbed``: ``absorb_mla_params(params, num_heads)``, computed
    once before decoding; here when None). Returns ``(..., 1, d_model)``: what ``mla_attention``
    gives at that position.
    """
    x_new, p, (_, _, d_h, d_r) = _mla_input(x_new, params, num_heads)
    _checks.position(position)
    absorbed = absorb_mla_params(p, num_heads) if absorbed is None else absorbed
    here = np.array([position])
    new = {"latent": x_new @ p["w_dkv"], "rope_key": rotary_embedding(x_new @ p["w_kr"], here)}
    for name, value in new.items():
        cache[name] = value if name not in cache else np.concatenate([cache[name], value], axis=-2)
    q_latent = split_heads(x_new @ p["w_q"], num_heads) @ absorbed["w_uk_t"]  # (..., h, 1, d_c)
    q_rope = rotary_embedding(split_heads(x_new @ p["w_qr"], num_heads), here)  # (..., h, 1, d_r)
    latent, rope_key = cache["latent"][..., None, :, :], cache["rope_key"][..., None, :, :]
    scores = q_latent @ np.swapaxes(latent, -1, -2) + q_rope @ np.swapaxes(rope_key, -1, -2)
    weights = softmax(scores / math.sqrt(d_h + d_r))  # the scale of the full query width
    heads = (weights @ latent) @ absorbed["w_uv"]  # (..., h, 1, d_h): W_UV applied after attention
    return merge_heads(heads) @ p["w_o"]


def mla_cache_bytes_per_token(
    num_layers: int, latent_dim: int, rope_dim: int, bytes_per_value: int = 2
) -> int:
    """What MLA caches for one more token: a latent of ``latent_dim`` and a rotary key of
    ``rope_dim`` numbers per layer: ``num_layers * (latent_dim + rope_dim) * bytes_per_value``."""
    layers = _checks.positive_int("num_layers", num_layers)
    width = _checks.positive_int("latent_dim", latent_dim) + _checks.positive_int(
        "rope_dim", rope_dim
    )
    return layers * width * _checks.positive_int("bytes_per_value", bytes_per_value)
