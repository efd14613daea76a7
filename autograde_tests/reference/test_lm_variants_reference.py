"""Lesson 10's language model run lesson 12's ways (attention_ref.pt.lm_variants): the whole text
with a window's mask equals decoding it token by token with the rolling cache or the sink cache;
the full-cache policy equals the model as trained; a model mean-pooled to as many key/value heads
as it has heads is the model itself, and a grouped one trains; the bytes a policy keeps are
counted. On every device the tests use; a freshly initialized model (the caches change how much is
kept, not what a model computes, so trained weights are not needed)."""

from __future__ import annotations

import collections
import re
import types

import numpy as np
import pytest
import torch

import attention_ref.pt as rpt
from attention_ref.pt.lm import TransformerLM, lm_batch, train_lm
from attention_ref.pt.lm_variants import (
    GroupedQueryLM,
    cache_bytes,
    decode_with_policy,
    full_cache_policy,
    lm_logits,
)


def _model(device, heads=4):
    gen = torch.Generator().manual_seed(0)
    model = TransformerLM(20, d_model=16, num_heads=heads, d_ff=32, num_layers=2, generator=gen)
    return model.to(device, torch.float64).eval()


def _texts(device):
    return torch.randint(2, 20, (3, 12), generator=torch.Generator().manual_seed(1)).to(device)


def test_full_cache_and_no_mask_are_the_model_as_trained(device):
    model, texts = _model(device), _texts(device)
    with torch.no_grad():
        want = model(texts)
        torch.testing.assert_close(lm_logits(model, texts), want)
    logits, peak = decode_with_policy(model, texts, full_cache_policy)
    torch.testing.assert_close(logits, want)
    assert peak == 12 * 2 * 2 * 16 * 8  # positions x layers x (k, v) x d_model x float64


def _rolling(window):
    def policy(q, k, v, cache, position):
        if not cache:
            cache.update(
                rpt.empty_rolling_cache(
                    q.shape[0],
                    k.shape[1],
                    window,
                    k.shape[-1],
                    v.shape[-1],
                    dtype=q.dtype,
                    device=q.device,
                )
            )
        return rpt.rolling_cache_attention(q, k, v, cache, position)

    return policy


def test_decoding_with_a_window_equals_the_windowed_mask(device):
    model, texts = _model(device), _texts(device)
    for window, sinks in ((1, 0), (4, 0), (3, 2), (5, 1)):
        mask = rpt.sliding_window_mask(12, window, sinks, device=device)
        with torch.no_grad():
            want = lm_logits(model, texts, mask)
        policy = (
            _rolling(window)
            if not sinks
            else (
                lambda q, k, v, c, p, s=sinks, w=window: rpt.sink_cache_attention(q, k, v, c, s, w)
            )
        )
        logits, peak = decode_with_policy(model, texts, policy)
        torch.testing.assert_close(logits, want)
        assert peak == (sinks + window) * 2 * 2 * 16 * 8


def test_grouped_model_with_one_head_per_group_is_the_model(device):
    model, texts = _model(device), _texts(device)
    same = GroupedQueryLM(model, 4)
    with torch.no_grad():
        torch.testing.assert_close(same(texts), model(texts))
    grouped = GroupedQueryLM(model, 2)
    assert grouped.layers[0]["self_attn"]["w_k"].shape == (16, 8)
    assert model.layers[0]["self_attn"]["w_k"].shape == (16, 16)  # the original is untouched
    with torch.no_grad():
        step = grouped.step(texts, [{} for _ in grouped.layers], 0)
        torch.testing.assert_close(step, grouped(texts))
    _, peak = decode_with_policy(grouped, texts, full_cache_policy)
    assert peak == 12 * 2 * 2 * 8 * 8  # half the key/value heads, half the cache


def test_a_grouped_model_trains(device):
    model = _model(device).float()
    grouped = GroupedQueryLM(model, 1)
    data = torch.randint(2, 20, (200,), generator=torch.Generator().manual_seed(2))
    losses = train_lm(
        grouped,
        data.to(device),
        steps=12,
        batch_size=8,
        context=10,
        lr=1e-2,
        warmup=2,
        rng=torch.Generator().manual_seed(3),
    )
    assert losses[-1] < losses[0]
    assert lm_batch(data, 2, 10, torch.Generator().manual_seed(4)).shape == (2, 10)


def test_cache_bytes_counts_every_tensor_kept():
    cache = [{"k": torch.zeros(2, 3, dtype=torch.float16), "extra": [torch.zeros(4)]}, {}]
    assert cache_bytes(cache) == 2 * 3 * 2 + 4 * 4
    assert cache_bytes({"n": 3, "name": "a", "none": None, "pair": (1.5, True)}) == 0


def test_cache_bytes_counts_storage_not_views():
    """A small view keeps its whole tensor alive; two views of one tensor hold it once."""
    big = torch.zeros(100, 8)
    assert cache_bytes({"k": big[:2]}) == 100 * 8 * 4
    assert cache_bytes({"k": big[:2], "v": big[50:]}) == 100 * 8 * 4
    assert cache_bytes({"k": big[:2].clone()}) == 2 * 8 * 4
    on_meta = torch.empty(3, 4, device="meta")
    assert cache_bytes([on_meta, on_meta[:1]]) == 2 * 3 * 4 * 4


@pytest.mark.parametrize(
    "kept, name",
    [
        (collections.deque([torch.zeros(4)], maxlen=2), "collections.deque"),
        (np.zeros(4), "numpy.ndarray"),
        ({1, 2}, "builtins.set"),
        (types.SimpleNamespace(k=torch.zeros(4)), "types.SimpleNamespace"),
    ],
)
def test_cache_bytes_refuses_what_it_cannot_count(kept, name):
    with pytest.raises(TypeError, match=re.escape(name)):
        cache_bytes({"k": kept})
