"""Lesson 12, the paged KV cache (vLLM's PagedAttention; Kwon et al., 2023, section 4) -- NumPy
reference.

A server decodes many sequences at once, each with a KV cache that grows by one position per step
to a length nobody knows in advance. Reserving one contiguous array per sequence for the longest
it may become wastes most of the memory on positions never written (section 3 of the paper).
**Paging** cuts the memory into fixed-size **blocks** of ``block_size`` positions, kept in one
pool for every sequence: a sequence takes a block from the **free list** when its last block is
full, so it holds at most one partly empty block, and returns its blocks to the list when it ends.
Its **block table** maps its logical blocks (positions ``0 .. B - 1``, ``B .. 2B - 1``, ...) to
the physical blocks of the pool, which may lie anywhere: position ``p`` lives in block
``table[p // B]`` at offset ``p % B``.

Attention then gathers each sequence's keys and values through its block table
(``paged_attention``), and computes exactly what it computes over a contiguous cache.

Layout: ``k_pool`` ``(num_blocks, block_size, g, d_k)``, ``v_pool`` ``(num_blocks, block_size,
g, d_v)``; block tables ``(batch, max_blocks)`` integers, lengths ``(batch,)``.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .gqa import grouped_query_attention
from .retrieval import as_float_array

__all__ = ["PagedKVCache", "paged_attention"]


class PagedKVCache:
    """Key and value pools of ``num_blocks`` blocks of ``block_size`` positions, a free list and a
    block table per sequence.

    ``append(seq, k, v)`` stores the next position of sequence ``seq`` (any hashable id; ``k``
    ``(g, d_k)``, ``v`` ``(g, d_v)``), taking a block from the free list when its last block is
    full or it has none (MemoryError when the list is empty); ``free(seq)`` returns its blocks.
    ``gather(seq)`` copies its keys and values out in order, ``(g, t, d)`` each: what a contiguous
    cache would hold.
    """

    def __init__(self, num_blocks: int, block_size: int, num_heads: int, d_k: int,
                 d_v: int | None = None, dtype=np.float64):  # fmt: skip
        self.block_size = _checks.positive_int("block_size", block_size)
        shape = (_checks.positive_int("num_blocks", num_blocks), block_size, num_heads)
        self.k_pool = np.zeros(shape + (d_k,), dtype)
        self.v_pool = np.zeros(shape + (d_k if d_v is None else d_v,), dtype)
        self.free_blocks = list(range(num_blocks))[::-1]  # popped from the end: block 0 first
        self.block_tables: dict = {}
        self.lengths: dict = {}

    def append(self, seq, k, v) -> None:
        n = self.lengths.get(seq, 0)
        table = self.block_tables.setdefault(seq, [])
        if n % self.block_size == 0:  # the last block is full (or there is none yet)
            if not self.free_blocks:
                raise MemoryError(f"no free block left for sequence {seq!r} ({n} positions)")
            table.append(self.free_blocks.pop())
        block, offset = table[n // self.block_size], n % self.block_size
        self.k_pool[block, offset] = k
        self.v_pool[block, offset] = v
        self.lengths[seq] = n + 1

    def free(self, seq) -> None:
        self.free_blocks.extend(reversed(self.block_tables.pop(seq)))
        del self.lengths[seq]

    def gather(self, seq) -> tuple[np.ndarray, np.ndarray]:
        n, table = self.lengths[seq], self.block_tables[seq]
        keys = self.k_pool[table].reshape(-1, *self.k_pool.shape[2:])[:n]  # (t, g, d_k)
        values = self.v_pool[table].reshape(-1, *self.v_pool.shape[2:])[:n]
        return keys.swapaxes(0, 1), values.swapaxes(0, 1)

    def tables(self, seqs) -> tuple[np.ndarray, np.ndarray]:
        """The block tables of ``seqs`` as one integer array ``(len(seqs), max_blocks)`` (short
        tables padded with 0: positions past a sequence's length are masked anyway) and their
        lengths ``(len(seqs),)``: the arguments of ``paged_attention``."""
        widest = max(len(self.block_tables[s]) for s in seqs)
        out = np.zeros((len(seqs), widest), dtype=np.int64)
        for row, seq in enumerate(seqs):
            out[row, : len(self.block_tables[seq])] = self.block_tables[seq]
        return out, np.array([self.lengths[s] for s in seqs], dtype=np.int64)


def paged_attention(q, k_pool, v_pool, block_tables, lengths) -> np.ndarray:
    """One decoding step for a batch of sequences whose keys and values live in a paged pool.

    q ``(batch, h, 1, d_k)``: each sequence's new query; ``k_pool`` ``(num_blocks, block_size, g,
    d_k)``, ``v_pool`` ``(num_blocks, block_size, g, d_v)``; ``block_tables`` ``(batch,
    max_blocks)`` integers, ``lengths`` ``(batch,)``. Sequence ``b``'s position ``p < lengths[b]``
    is read from block ``block_tables[b, p // block_size]`` at offset ``p % block_size``. Returns
    ``(batch, h, 1, d_v)``: attention over each sequence's own positions, as over a contiguous
    cache.
    """
    q = as_float_array("q", q)
    k_pool, v_pool = as_float_array("k_pool", k_pool), as_float_array("v_pool", v_pool)
    block_tables, lengths = _checks.paged_inputs(
        q, k_pool, v_pool, block_tables, lengths, np.asarray
    )
    block_size = k_pool.shape[1]
    positions = np.arange(block_tables.shape[1] * block_size)
    slots = block_tables[:, positions // block_size] * block_size + positions % block_size
    keys = k_pool.reshape(-1, *k_pool.shape[2:])[slots]  # (batch, P, g, d_k)
    values = v_pool.reshape(-1, *v_pool.shape[2:])[slots]
    valid = positions[None, :] < lengths[:, None]  # (batch, P): the rest of the last block is empty
    return grouped_query_attention(
        q, keys.swapaxes(1, 2), values.swapaxes(1, 2), valid[:, None, None, :]
    )
