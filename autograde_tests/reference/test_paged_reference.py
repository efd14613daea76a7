"""The paged KV cache (lesson 12; Kwon et al., 2023, section 4) against PyTorch: sequences grown
side by side in one pool read back through their block tables as a contiguous cache would hold
them, blocks taken only when needed and returned when freed; ``paged_attention`` against
``F.scaled_dot_product_attention`` over each sequence's contiguous keys (dtypes x devices, grouped
heads included, NumPy and PyTorch, on PyTorch's meta device)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import attention_ref.np as rnp
import attention_ref.pt as rpt
from attention_ref.testing import expect_device_agnostic

from .tolerances import TOLERANCES


def _fill(cache, lengths, heads, widths, gen, like):
    """Grow the sequences 0, 1, ... to ``lengths`` one position per step, side by side; returns
    what each was given, as contiguous keys and values ``(g, t, d)``."""
    written = {s: ([], []) for s in range(len(lengths))}
    for t in range(max(lengths)):
        for s, length in enumerate(lengths):
            if t < length:
                k, v = (torch.randn(heads, w, generator=gen, dtype=like.dtype) for w in widths)
                k, v = k.to(like.device), v.to(like.device)
                cache.append(
                    s,
                    k if isinstance(like, torch.Tensor) else k.numpy(),
                    v if isinstance(like, torch.Tensor) else v.numpy(),
                )
                written[s][0].append(k)
                written[s][1].append(v)
    return {s: (torch.stack(k, 1), torch.stack(v, 1)) for s, (k, v) in written.items()}


@pytest.mark.parametrize(
    "block_size, lengths", [(1, [3, 1]), (4, [11, 6, 3, 4]), (16, [40, 1, 17])]
)
def test_paged_cache_holds_what_a_contiguous_one_would(device, block_size, lengths):
    blocks = sum(-(-n // block_size) for n in lengths)
    cache = rpt.PagedKVCache(blocks, block_size, 2, 4, 3, device=device)
    written = _fill(cache, lengths, 2, (4, 3), torch.Generator().manual_seed(1), cache.k_pool)
    assert not cache.free_blocks  # exactly the blocks the lengths need
    for s, n in enumerate(lengths):
        assert len(cache.block_tables[s]) == -(-n // block_size) and cache.lengths[s] == n
        keys, values = cache.gather(s)
        torch.testing.assert_close(keys, written[s][0])
        torch.testing.assert_close(values, written[s][1])
    used = [b for table in cache.block_tables.values() for b in table]
    assert sorted(used) == list(range(blocks))  # no block shared
    with pytest.raises(MemoryError):
        cache.append(len(lengths), torch.ones(2, 4, device=device), torch.ones(2, 3, device=device))


def test_freed_blocks_are_reused_and_others_untouched():
    cache = rnp.PagedKVCache(6, 2, 1, 2)
    _fill(
        cache,
        [4, 3],
        1,
        (2, 2),
        torch.Generator().manual_seed(2),
        torch.zeros(0, dtype=torch.float64),
    )
    kept = [x.copy() for x in cache.gather(1)]
    freed = set(cache.block_tables[0])
    cache.free(0)
    assert (
        0 not in cache.block_tables and 0 not in cache.lengths and freed <= set(cache.free_blocks)
    )
    for _ in range(6):
        cache.append("new", np.ones((1, 2)), np.ones((1, 2)))
    assert set(cache.block_tables["new"]) >= freed
    for got, want in zip(cache.gather(1), kept):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("heads", [(2, 2), (4, 2), (3, 1)], ids=["mha", "gqa", "mqa"])
def test_paged_attention_equals_attention_over_contiguous_caches(device, dtype, heads):
    h, g = heads
    gen = torch.Generator().manual_seed(3)
    cache = rpt.PagedKVCache(30, 4, g, 8, 5, dtype=dtype, device=device)
    lengths = [13, 1, 6, 8]
    written = _fill(cache, lengths, g, (8, 5), gen, cache.k_pool)
    tables, lens = cache.tables(list(range(4)))
    q = torch.randn(4, h, 1, 8, generator=gen, dtype=dtype).to(device)
    got = rpt.paged_attention(q, cache.k_pool, cache.v_pool, tables, lens)
    assert got.shape == (4, h, 1, 5) and got.dtype == dtype and got.device == q.device
    for s in range(4):
        k, v = written[s]
        want = F.scaled_dot_product_attention(q[s], k, v, enable_gqa=True)
        torch.testing.assert_close(got[s], want, **TOLERANCES[dtype])
    np_got = rnp.paged_attention(
        q.cpu().numpy(),
        cache.k_pool.cpu().numpy(),
        cache.v_pool.cpu().numpy(),
        tables.cpu().numpy(),
        lens.cpu().numpy(),
    )
    np.testing.assert_allclose(np_got, got.cpu().numpy(), **TOLERANCES[dtype])


def test_paged_attention_is_device_agnostic(device):
    cache = rpt.PagedKVCache(8, 4, 2, 8, device=device)
    _fill(cache, [5, 2], 2, (8, 8), torch.Generator().manual_seed(4), cache.k_pool)
    tables, lengths = cache.tables([0, 1])
    q = torch.randn(2, 2, 1, 8, device=device)
    out = expect_device_agnostic(
        rpt.paged_attention, q, cache.k_pool, cache.v_pool, tables, lengths, what="paged_attention"
    )
    assert out is not None and out.shape == (2, 2, 1, 8)


def test_lengths_beyond_the_tables_are_refused():
    pool = np.zeros((4, 2, 1, 3))
    with pytest.raises(ValueError, match="does not fit"):
        rnp.paged_attention(np.ones((1, 1, 1, 3)), pool, pool, np.array([[0, 1]]), np.array([5]))
    with pytest.raises(ValueError, match="block_tables"):
        rnp.paged_attention(np.ones((2, 1, 1, 3)), pool, pool, np.array([[0, 1]]), np.array([3]))
