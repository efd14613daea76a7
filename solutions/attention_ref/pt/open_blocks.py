"""Lesson 14, The attention block of today's open models and their feed-forward layers -- PyTorch
reference.

``attention_block(x, p, spec, layer, start, cache)`` is one layer's attention sub-layer as
Qwen3, gpt-oss and GLM-4 compute it (``spec`` is an ``attention_ref.pt.open_model.ModelSpec``,
``p`` the layer's parameters in the course's layout, ``x @ W``):

1. the projections, with biases where the checkpoint has them, split into ``h`` query heads and
   ``g`` key/value heads (lesson 12's grouped-query attention);
2. QK-norm (Qwen3; OLMo 2 and Gemma 3 too): each head's query and key RMS-normalised with a
   learned weight of ``head_dim`` numbers, *before* the rotation: the norm sees the projection's
   features, as in training;
3. the rotary embedding in the checkpoint's layout (``apply_rope``), at the absolute positions of
   the new tokens, from the frequencies of the config (``rope_frequencies``: YaRN's included);
4. the cache: the new keys and values appended; a sliding-window layer keeps only its last
   ``window`` positions, a full layer all of them (one cache per layer: gpt-oss alternates the
   two kinds, Gemma 3 runs five local layers per global one);
5. attention over the cache with the causal mask offset by the cached positions, the window on
   sliding layers only, and the learned sink logits (gpt-oss) in the softmax's denominator;
6. the heads merged and the output projection.

``swiglu`` is the gated feed-forward layer of Shazeer (2020), ``silu(x W_gate) * (x W_up)``
projected down; ``gpt_oss_moe`` is gpt-oss's mixture of experts: a router picks ``top_k`` experts
per token, softmax-weighted, each a SwiGLU with gpt-oss's clamped gate, ``alpha`` and ``up + 1``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .norms import rms_norm
from .rope_layouts import apply_rope, rope_frequencies
from .sinks import sink_attention

__all__ = ["swiglu", "gpt_oss_moe", "attention_block"]


def swiglu(x, w_gate, w_up, w_down) -> torch.Tensor:
    """``(silu(x @ w_gate) * (x @ w_up)) @ w_down``: x ``(..., d)``, w_gate and w_up ``(d,
    d_ff)``, w_down ``(d_ff, d)``."""
    for name, w in (("w_gate", w_gate), ("w_up", w_up), ("w_down", w_down)):
        if w.ndim != 2:
            raise ValueError(f"{name} must be a matrix, got shape {tuple(w.shape)}")
    if (
        w_gate.shape != w_up.shape
        or w_gate.shape[0] != x.shape[-1]
        or w_down.shape[0] != w_up.shape[1]
    ):
        raise ValueError(
            f"x {tuple(x.shape)}, w_gate {tuple(w_gate.shape)}, w_up {tuple(w_up.shape)} and "
            f"w_down {tuple(w_down.shape)} do not fit: (d,), (d, d_ff), (d, d_ff), (d_ff, d)"
        )
    return (F.silu(x @ w_gate) * (x @ w_up)) @ w_down


def gpt_oss_moe(x, p: dict, spec) -> torch.Tensor:
    """gpt-oss's feed-forward layer of ``x`` ``(..., d)``: the router's ``top_k`` experts per
    token, weighted by a softmax over their router logits; every expert computed (small models)."""
    logits = x @ p["router_w"] + p["router_b"]
    top, chosen = logits.topk(spec.top_k, dim=-1)
    weights = torch.zeros_like(logits).scatter(-1, chosen, torch.softmax(top, dim=-1))
    gate = torch.einsum("...d,edf->...ef", x, p["expert_gate"]) + p["expert_gate_b"]
    up = torch.einsum("...d,edf->...ef", x, p["expert_up"]) + p["expert_up_b"]
    gate = gate.clamp(max=spec.swiglu_limit)
    up = up.clamp(min=-spec.swiglu_limit, max=spec.swiglu_limit)
    hidden = (up + 1) * gate * torch.sigmoid(spec.swiglu_alpha * gate)
    out = torch.einsum("...ef,efd->...ed", hidden, p["expert_down"]) + p["expert_down_b"]
    return (weights[..., None] * out).sum(dim=-2)


def _project(x, p: dict, name: str, heads: int, head_dim: int) -> torch.Tensor:
    """``x`` ``(batch, n, d)`` through ``p["w_" + name]`` (and its bias) into ``(batch, heads, n,
    head_dim)``."""
    y = x @ p["w_" + name]
    if "b_" + name in p:
        y = y + p["b_" + name]
    return y.unflatten(-1, (heads, head_dim)).transpose(-3, -2)


def _cached(cache, k, v, window):
    """The keys and values to attend over: the cache's and the new ones; the cache then keeps the
    last ``window`` of them (all of them without a window)."""
    if cache is None:
        return k, v
    if "k" in cache:
        k, v = torch.cat((cache["k"], k), dim=-2), torch.cat((cache["v"], v), dim=-2)
    if window is None or k.shape[-2] <= window:
        cache["k"], cache["v"] = k, v
    else:  # copies: a view of the last `window` would keep every position's storage alive
        cache["k"], cache["v"] = k[..., -window:, :].clone(), v[..., -window:, :].clone()
    return k, v


def _allowed(start: int, n: int, num_keys: int, window, device, pad=None) -> torch.Tensor:
    """``(n, num_keys)``: the queries at ``start .. start + n - 1``, the keys the last ``num_keys``
    positions up to the newest query; query ``i`` may read key ``j`` at or before it, and within
    the window where there is one (the causal mask offset by the cached positions). With ``pad``
    ``(batch,)``: ``(batch, 1, 1, n, num_keys)``, the first ``pad[b]`` tokens of row ``b`` (left
    padding) read by no query."""
    queries = torch.arange(start, start + n, device=device)
    keys = torch.arange(start + n - num_keys, start + n, device=device)
    offset = queries[:, None] - keys[None, :]
    allowed = offset >= 0
    if window is not None:
        allowed = allowed & (offset < window)
    if pad is None:
        return allowed
    real = keys[None, :] >= pad.to(device)[:, None]  # (batch, num_keys): not a pad
    return (allowed & real[:, None, :])[:, None, None]


def attention_block(
    x, p: dict, spec, layer: int, start: int = 0, cache=None, attend=None, pad=None
):
    """Layer ``layer``'s attention sub-layer (after its input norm, before the residual) for the
    new tokens ``x`` ``(batch, n, d_model)`` at indices ``start .. start + n - 1``; ``cache``: a
    dict, empty before the first step, updated in place (None: no cache, the whole text at once).
    ``pad`` ``(batch,)``: the number of pad tokens at the start of each row (left padding): row
    ``b``'s token at index ``i`` is at position ``i - pad[b]``, and no query reads a pad.
    ``attend(q, k, v, cache, start, window, sinks)``, when given, replaces steps 4 and 5 (the cache
    and the attention over it) for the rotated ``q`` ``(batch, h, n, d)``, ``k`` and ``v``
    ``(batch, g, n, d)``: a policy of its own for what the cache keeps."""
    h, g, d = spec.num_heads, spec.num_kv_heads, spec.head_dim
    n = x.shape[-2]
    positions = torch.arange(start, start + n, device=x.device)
    if pad is not None:  # (batch, 1, n): the positions skip each row's pads
        positions = (positions[None, :] - pad.to(x.device)[:, None])[:, None]
    q, k, v = _project(x, p, "q", h, d), _project(x, p, "k", g, d), _project(x, p, "v", g, d)
    if spec.qk_norm:  # on each head's features, before the rotation
        rounding = spec.norm_round_first
        q, k = (
            rms_norm(q, p["q_norm"], spec.eps, rounding),
            rms_norm(k, p["k_norm"], spec.eps, rounding),
        )
    inv_freq, scale = rope_frequencies(spec.rope, spec.rotary_dim)
    q = apply_rope(q, positions, inv_freq, spec.rope_layout, scale)
    k = apply_rope(k, positions, inv_freq, spec.rope_layout, scale)
    window = spec.window if spec.layer_types[layer] == "sliding_attention" else None
    if attend is not None:
        out = attend(q, k, v, cache, start, window, p["sinks"] if spec.sinks else None)
    else:
        k, v = _cached(cache, k, v, window)
        allowed = _allowed(start, n, k.shape[-2], window, x.device, pad)
        sinks = p["sinks"].view(g, h // g, 1) if spec.sinks else None
        out = sink_attention(
            q.unflatten(1, (g, h // g)), k.unsqueeze(2), v.unsqueeze(2), sinks, allowed
        )
        out = out.flatten(1, 2)
    out = out.transpose(1, 2).flatten(-2) @ p["w_o"]
    return out + p["b_o"] if "b_o" in p else out
