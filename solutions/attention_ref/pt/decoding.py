"""Lesson 9, the KV cache: greedy decoding of lesson 8's Transformer without recomputing the past.

``greedy_decode`` (lesson 8) feeds the whole prefix ``ys`` through the decoder at every step: at
step t every layer projects t positions to queries, keys and values and attends t x t, although
only the last position is new and the keys and values of the earlier ones are the same as at the
step before (the causal mask keeps every position from seeing the ones after it, so nothing about
an earlier position changes when a token is appended). A **KV cache** keeps, for every decoder
layer, the keys and values of the positions decoded so far; a step then projects only the new
token and attends from its one query over the cache. The keys and values of the encoder-decoder
attention come from the encoder's output, which does not change at all: they are computed once.

PyTorch only (it runs ``attention_ref.pt.model.Transformer``); the result is the same tokens as
``greedy_decode``.
"""

from __future__ import annotations

import torch

from .feedforward import position_wise_ffn
from .multihead import merge_heads, split_heads
from .retrieval import as_float_tensor, weighted_sum
from .sdpa import attention_weights
from .transformer import add_and_norm


def _project(x, params, name: str) -> torch.Tensor:
    out = x @ params[f"w_{name}"]
    return out + params[f"b_{name}"] if f"b_{name}" in params else out


def cached_self_attention(x_new, params, num_heads: int, cache: dict) -> torch.Tensor:
    """The decoder's masked multi-head self-attention for the newest position(s), with a KV cache.

    ``x_new`` ``(batch, n_new, d_model)`` holds the sub-layer's input at the positions appended at
    this step (usually one); ``params`` is the layer's ``self_attn`` dict (``w_q``, ``w_k``,
    ``w_v``, ``w_o`` and optional biases); ``cache`` is a dict that this function owns: empty at the
    first step, then ``cache["k"]``, ``cache["v"]`` ``(batch, h, t, d_k)`` hold the keys and values
    of all ``t`` positions so far. The new positions' keys and values are appended (once), and their
    queries attend over the whole cache: every cached position is in their past, so no mask is
    needed for one new position; several new positions (a prompt fed at once) attend causally among
    themselves. Returns ``(batch, n_new, d_model)``, what ``decoder_self_attention`` returns at
    those positions for the whole sequence.
    """
    x_new = as_float_tensor("x_new", x_new)
    if x_new.ndim < 2:
        raise ValueError(f"x_new must have shape (..., n_new, d_model), got {tuple(x_new.shape)}")
    q = split_heads(_project(x_new, params, "q"), num_heads)
    k = split_heads(_project(x_new, params, "k"), num_heads)
    v = split_heads(_project(x_new, params, "v"), num_heads)
    if "k" in cache:
        if cache["k"].shape[:-2] != k.shape[:-2] or cache["k"].shape[-1] != k.shape[-1]:
            raise ValueError(
                f"the cache holds keys of shape {tuple(cache['k'].shape)}, the new keys have shape "
                f"{tuple(k.shape)}: one cache per layer and per batch"
            )
        k = torch.cat([cache["k"], k], dim=-2)
        v = torch.cat([cache["v"], v], dim=-2)
    cache["k"], cache["v"] = k, v
    n_new, t = q.shape[-2], k.shape[-2]
    mask = None
    # new position i (of n_new) is position t - n_new + i: it sees the keys up to there
    if n_new > 1:
        mask = torch.ones(n_new, t, dtype=torch.bool, device=q.device).tril(diagonal=t - n_new)
    return _project(merge_heads(weighted_sum(attention_weights(q, k, mask), v)), params, "o")


def _cross_attention(y, params, keys, values, mask, num_heads: int) -> torch.Tensor:
    """Encoder-decoder attention with the memory's keys and values already projected."""
    q = split_heads(_project(y, params, "q"), num_heads)
    return _project(
        merge_heads(weighted_sum(attention_weights(q, keys, mask), values)), params, "o"
    )


class CachedDecoder:
    """The decoder of a ``Transformer`` (lesson 8) run one step at a time with KV caches.

    ``CachedDecoder(model, src)`` encodes ``src`` once and projects the encoder's output to every
    layer's cross-attention keys and values once. ``step(tokens)`` feeds the next token(s)
    ``(batch, n_new)`` (positions ``position .. position + n_new - 1``) and returns their logits
    ``(batch, n_new, vocab)``. ``self_attention`` replaces :func:`cached_self_attention` (same
    signature), e.g. with a learner's own.
    """

    def __init__(self, model, src: torch.Tensor, self_attention=None):
        if not getattr(model, "residual", True) or getattr(model, "scale", None) is not None:
            raise ValueError(
                "CachedDecoder runs the paper's decoder layers: build the model without the "
                "ablations residual=False or scale=..."
            )
        self.model = model
        self.num_heads = model.num_heads
        self.self_attention = cached_self_attention if self_attention is None else self_attention
        with torch.no_grad():
            self.src_mask = model.source_mask(src)
            self.memory = model.encode(src, self.src_mask)
            self.cross = [
                (
                    split_heads(_project(self.memory, layer["cross_attn"], "k"), self.num_heads),
                    split_heads(_project(self.memory, layer["cross_attn"], "v"), self.num_heads),
                )
                for layer in model.decoder_layers
            ]
        self.caches = [{} for _ in model.decoder_layers]
        self.position = 0

    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        y = self.model.embed_tgt(tokens, offset=self.position)
        memory_mask = self.src_mask.unsqueeze(-3)  # (batch, 1, 1, n_src): the same for every head
        for layer, (keys, values), cache in zip(self.model.decoder_layers, self.cross, self.caches):
            y = add_and_norm(
                y,
                lambda y: self.self_attention(y, layer["self_attn"], self.num_heads, cache),
                layer["norm_1"],
            )
            y = add_and_norm(
                y,
                lambda y: _cross_attention(
                    y, layer["cross_attn"], keys, values, memory_mask, self.num_heads
                ),
                layer["norm_2"],
            )
            y = add_and_norm(y, lambda y: position_wise_ffn(y, layer["ffn"]), layer["norm_3"])
        self.position += tokens.shape[-1]
        return self.model.out(y)

    def cache_bytes(self) -> int:
        """Memory held by the self-attention caches (2 x layers x batch x t x d_model numbers)."""
        return sum(t.numel() * t.element_size() for cache in self.caches for t in cache.values())


@torch.no_grad()
def greedy_decode_cached(
    model, src: torch.Tensor, max_len: int, bos: int, eos: int
) -> torch.Tensor:
    """``greedy_decode`` (lesson 8) with KV caches: the same tokens, ``(batch, n_steps)`` without
    ``bos``, each row ending with ``eos`` (if it got there) and then ``model.pad``."""
    decoder = CachedDecoder(model, src)
    token = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    out = []
    for _ in range(max_len):
        next_token = decoder.step(token)[:, -1].argmax(-1).masked_fill(finished, model.pad)
        out.append(next_token)
        finished |= next_token == eos
        token = next_token[:, None]
        if finished.all():
            break
    return torch.stack(out, dim=1) if out else token[:, :0]
