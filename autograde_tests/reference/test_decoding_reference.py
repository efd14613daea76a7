"""The KV cache (lesson 9) against what it must reproduce: lesson 5's masked decoder self-attention
fed the whole sequence, and lesson 8's greedy decoding, token for token, on every device."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import attention_ref.pt as rpt
from attention_ref.profiling import count_multiply_adds
from attention_ref.pt.decoding import CachedDecoder, cached_self_attention, greedy_decode_cached
from attention_ref.pt.model import BOS, EOS, VOCAB_SIZE, Transformer, greedy_decode, make_batch


def _dtypes(device):
    # MPS has no float64
    return [torch.float32] if device.type == "mps" else [torch.float64, torch.float32]


def test_step_by_step_equals_decoder_self_attention(device):
    for dtype in _dtypes(device):
        params = {
            k: v.to(device, dtype) + 0.1
            for k, v in rpt.init_params(16, 4, torch.Generator().manual_seed(1)).items()
        }
        y = torch.randn(3, 7, 16, generator=torch.Generator().manual_seed(2), dtype=dtype).to(
            device
        )
        want = rpt.decoder_self_attention(y, params, 4)
        cache = {}
        steps = [cached_self_attention(y[:, t : t + 1], params, 4, cache) for t in range(7)]
        tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else {}
        torch.testing.assert_close(torch.cat(steps, dim=1), want, **tol)
        assert cache["k"].shape == cache["v"].shape == (3, 4, 7, 4), (
            "one key and one value per position, once"
        )
        cache = {}  # a prompt of 4 positions at once, then 3 more one at a time
        parts = [cached_self_attention(y[:, :4], params, 4, cache)]
        parts += [cached_self_attention(y[:, t : t + 1], params, 4, cache) for t in range(4, 7)]
        torch.testing.assert_close(torch.cat(parts, dim=1), want, **tol)


def test_the_cache_refuses_a_foreign_batch():
    params = rpt.init_params(8, 2, torch.Generator().manual_seed(0))
    cache = {}
    cached_self_attention(torch.randn(2, 1, 8), params, 2, cache)
    with pytest.raises(ValueError, match="cache"):
        cached_self_attention(torch.randn(3, 1, 8), params, 2, cache)


def _model(device, dtype, layers=2):
    model = Transformer(
        VOCAB_SIZE,
        VOCAB_SIZE,
        d_model=32,
        num_heads=4,
        d_ff=64,
        num_encoder_layers=layers,
        num_decoder_layers=layers,
        generator=torch.Generator().manual_seed(3),
    )
    return model.to(device, dtype).eval()


def test_greedy_decoding_with_the_cache_gives_the_same_tokens(device):
    gen = torch.Generator().manual_seed(4)
    src, _, _ = make_batch("reverse", 16, 3, 8, generator=gen)  # lengths 3..8: padded sources
    src = src.to(device)
    for dtype in _dtypes(device):
        model = _model(device, dtype)
        want = greedy_decode(model, src, 12, BOS, EOS)
        got = greedy_decode_cached(model, src, 12, BOS, EOS)
        assert got.device == src.device and torch.equal(got, want), dtype
    # an end symbol that is never produced: every step runs, and still the same tokens
    model = _model(device, _dtypes(device)[0], layers=1)
    torch.testing.assert_close(
        greedy_decode_cached(model, src, 9, BOS, VOCAB_SIZE + 5),
        greedy_decode(model, src, 9, BOS, VOCAB_SIZE + 5),
    )


def test_a_cached_step_costs_the_same_at_every_step_and_an_uncached_one_grows():
    model = _model("cpu", torch.float32)
    src, _, _ = make_batch("reverse", 4, 6, 6, generator=torch.Generator().manual_seed(5))
    decoder = CachedDecoder(model, src)
    mask = decoder.src_mask
    ys = torch.full((4, 1), BOS)
    cached, uncached = [], []
    for _ in range(12):
        with FlopCounterMode(display=False) as counter:
            logits = decoder.step(ys[:, -1:])
        cached.append(counter.get_total_flops())
        decoder.caches = [{k: v[..., :-1, :] for k, v in cache.items()} for cache in decoder.caches]
        decoder.position -= 1  # the same step again, counted the light way: the same count
        assert 2 * count_multiply_adds(decoder.step, ys[:, -1:])[1] == cached[-1]
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            full = model.decode(ys, decoder.memory, mask)
        uncached.append(counter.get_total_flops())
        with torch.no_grad():
            assert (
                2 * count_multiply_adds(model.decode, ys, decoder.memory, mask)[1] == uncached[-1]
            )
        torch.testing.assert_close(logits[:, -1], full[:, -1], rtol=1e-5, atol=1e-5)
        ys = torch.cat([ys, full[:, -1].argmax(-1, keepdim=True)], dim=1)
    grow_uncached = [b - a for a, b in zip(uncached, uncached[1:])]
    grow_cached = [b - a for a, b in zip(cached, cached[1:])]
    # the whole prefix, every step
    assert min(grow_uncached) > 0 and uncached[-1] > 5 * uncached[0], uncached
    # one new position: only its attention grows
    assert max(grow_cached) < min(grow_uncached) / 10, cached
    # the memory's keys and values projected only once
    assert cached[-1] < uncached[0], (
        cached,
        uncached,
    )
    # k and v, 2 layers, batch 4, 12 positions, d_model 32
    assert decoder.cache_bytes() == 2 * 2 * 4 * 12 * 32 * 4
