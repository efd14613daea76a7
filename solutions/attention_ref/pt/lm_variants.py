"""Lesson 12: lesson 10's decoder-only language model (``attention_ref.pt.lm.TransformerLM``) run
the ways today's models run attention (PyTorch only).

``lm_logits(model, tokens, mask)``: the whole text at once, every layer's self-attention limited
    to ``mask`` (e.g. lesson 12's sliding window, with or without sinks) besides the causal mask.
``GroupedQueryLM(lm, num_kv_heads)``: a copy of ``lm`` whose key and value projections are
    mean-pooled into ``num_kv_heads`` heads per layer (Ainslie et al., 2023, section 2.1); it
    trains with ``train_lm`` like the model it came from ("uptraining").
``decode_with_policy(model, tokens, policy)``: the text fed one token at a time, each layer's
    attention done by ``policy(q, k_new, v_new, cache, position)`` with a cache of its own (a
    dict): a full cache, a rolling window, sinks and a window, ... Returns the logits and the
    most bytes the caches held at once, per sequence (``cache_bytes``).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from .feedforward import position_wise_ffn
from .gqa import grouped_query_attention, mean_pool_kv_heads
from .lm import TransformerLM
from .multihead import merge_heads, split_heads
from .transformer import add_and_norm

__all__ = ["lm_logits", "GroupedQueryLM", "full_cache_policy", "decode_with_policy", "cache_bytes"]


def _project(x, params, name: str) -> torch.Tensor:
    out = x @ params[f"w_{name}"]
    return out + params[f"b_{name}"] if f"b_{name}" in params else out


def _qkv(model, params, y):
    """Queries ``(batch, h, n, d_k)`` and keys, values ``(batch, g, n, d)`` of one layer; ``g``
    read from the key projection's width (``h`` for lesson 10's model)."""
    d_k = params["w_q"].shape[1] // model.num_heads
    q = split_heads(_project(y, params, "q"), model.num_heads)
    k = split_heads(_project(y, params, "k"), params["w_k"].shape[1] // d_k)
    v = split_heads(_project(y, params, "v"), params["w_v"].shape[1] // d_k)
    return q, k, v


def _layer(model, layer, y, attend) -> torch.Tensor:
    """Lesson 8's encoder layer (post-norm) with the self-attention's heads computed by
    ``attend(q, k, v)``."""

    def self_attention(y):
        params = layer["self_attn"]
        heads = attend(*_qkv(model, params, y))
        return _project(merge_heads(heads), params, "o")

    y = add_and_norm(y, self_attention, layer["norm_1"])
    return add_and_norm(y, lambda y: position_wise_ffn(y, layer["ffn"]), layer["norm_2"])


def lm_logits(model: TransformerLM, tokens: torch.Tensor, mask=None) -> torch.Tensor:
    """Logits ``(batch, n, vocab)`` of ``model`` for ``tokens`` ``(batch, n)``, every layer's
    self-attention limited to ``mask`` ``(n, n)`` (True = may attend) besides the model's own
    (padding and causal); ``mask=None``: the model as trained."""
    allowed = model.attention_mask(tokens)  # (batch, n, n)
    if mask is not None:
        allowed = allowed & mask
    y = model.embed(tokens)
    for layer in model.layers:
        y = _layer(
            model, layer, y, lambda q, k, v: grouped_query_attention(q, k, v, allowed[:, None])
        )
    return model.out(y)


class GroupedQueryLM(TransformerLM):
    """A copy of lesson 10's ``TransformerLM`` with ``num_kv_heads`` key/value heads per layer,
    made by ``pool`` (default ``mean_pool_kv_heads``) from the multi-head model's projections. Its
    queries, output projections, FFNs, norms and embeddings are the original's (copies)."""

    def __init__(self, lm: TransformerLM, num_kv_heads: int, pool=mean_pool_kv_heads):
        nn.Module.__init__(self)
        self.vocab_size, self.d_model, self.num_heads = lm.vocab_size, lm.d_model, lm.num_heads
        self.causal, self.pad, self.mask_id = lm.causal, lm.pad, lm.mask_id
        self.num_kv_heads = num_kv_heads
        self.embed_tokens, self.out = copy.deepcopy(lm.embed_tokens), copy.deepcopy(lm.out)
        self.layers = copy.deepcopy(lm.layers)
        with torch.no_grad():
            for layer in self.layers:
                attn = layer["self_attn"]
                for name in ("k", "v"):
                    bias = attn[f"b_{name}"] if f"b_{name}" in attn else None
                    w, b = pool(attn[f"w_{name}"], bias, self.num_heads, num_kv_heads)
                    attn[f"w_{name}"] = nn.Parameter(w.detach().clone())
                    if b is not None:
                        attn[f"b_{name}"] = nn.Parameter(b.detach().clone())

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return lm_logits(self, tokens)

    @torch.no_grad()
    def step(self, tokens: torch.Tensor, caches: list, position: int) -> torch.Tensor:
        """The newest token(s) with one full KV cache per layer, as ``TransformerLM.step``."""
        logits = []
        for offset in range(tokens.shape[1]):
            logits.append(_decode_step(self, tokens[:, offset : offset + 1], caches,
                                       position + offset, full_cache_policy))  # fmt: skip
        return torch.cat(logits, dim=1)


def full_cache_policy(q, k_new, v_new, cache: dict, position: int) -> torch.Tensor:
    """Keep every key and value (lesson 9's KV cache), attend over all of them."""
    for name, new in (("k", k_new), ("v", v_new)):
        cache[name] = new if name not in cache else torch.cat([cache[name], new], dim=-2)
    return grouped_query_attention(q, cache["k"], cache["v"])


def _storages(cache, seen: dict) -> None:
    """Add to ``seen`` the storage behind every tensor in ``cache``: key -> bytes."""
    if isinstance(cache, torch.Tensor):
        storage = cache.untyped_storage()
        # a view keeps its whole storage alive; two views of one storage hold it once (a meta
        # tensor has no address: each counts on its own)
        key = id(cache) if cache.device.type == "meta" else (cache.device, storage.data_ptr())
        seen[key] = storage.nbytes()
    elif isinstance(cache, dict):
        for item in cache.values():
            _storages(item, seen)
    elif isinstance(cache, (list, tuple)):
        for item in cache:
            _storages(item, seen)
    elif not (cache is None or isinstance(cache, (bool, int, float, complex, str))):
        raise TypeError(
            f"a cache may hold tensors, in dicts, lists and tuples, and numbers, strings or "
            f"None, not {type(cache).__module__}.{type(cache).__qualname__}: its bytes could "
            "not be counted"
        )


def cache_bytes(cache) -> int:
    """The bytes of the storage behind every tensor in ``cache`` (a dict, list or tuple, nested or
    not): a view counts the whole tensor it keeps alive, and one storage counts once. Numbers,
    strings and None count 0; anything else (a ``collections.deque``, a NumPy array, an object of
    one's own) raises a TypeError that names its type, since its bytes could not be counted."""
    seen: dict = {}
    _storages(cache, seen)
    return sum(seen.values())


def _decode_step(model, token, caches: list, position: int, policy) -> torch.Tensor:
    y = model.embed(token, offset=position)
    for layer, cache in zip(model.layers, caches):
        y = _layer(model, layer, y, lambda q, k, v, cache=cache: policy(q, k, v, cache, position))
    return model.out(y)


@torch.no_grad()
def decode_with_policy(
    model: TransformerLM, tokens: torch.Tensor, policy
) -> tuple[torch.Tensor, float]:
    """Feed ``tokens`` ``(batch, n)`` one position at a time; every layer's attention is
    ``policy(q, k_new, v_new, cache, position)`` with that layer's ``cache`` (a dict, empty at the
    start; q ``(batch, h, 1, d_k)``, k_new and v_new ``(batch, g, 1, d)``; it returns the heads
    ``(batch, h, 1, d_v)``). Returns the logits ``(batch, n, vocab)`` and the most bytes all the
    layers' caches held at once after a step, per sequence (divided by ``batch``)."""
    caches = [{} for _ in model.layers]
    logits, peak = [], 0
    for position in range(tokens.shape[1]):
        logits.append(
            _decode_step(model, tokens[:, position : position + 1], caches, position, policy)
        )
        peak = max(peak, cache_bytes(caches))
    return torch.cat(logits, dim=1), peak / tokens.shape[0]
