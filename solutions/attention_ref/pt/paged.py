"""Lesson 12, the paged KV cache (vLLM's PagedAttention; Kwon et al., 2023, section 4) -- PyTorch
reference: the same class and function as ``attention_ref.np.paged`` (whose docstring explains
them), on the device of their inputs."""

from __future__ import annotations

import torch

from .. import _checks
from .gqa import grouped_query_attention
from .retrieval import as_float_tensor

__all__ = ["PagedKVCache", "paged_attention"]


class PagedKVCache:
    """Key and value pools ``(num_blocks, block_size, g, d)`` on ``device``, a free list and a
    block table per sequence; see the NumPy twin."""

    def __init__(
        self, num_blocks: int, block_size: int, num_heads: int, d_k: int, d_v: int | None = None,
        *, dtype=torch.float32, device=None,
    ):  # fmt: skip
        self.block_size = _checks.positive_int("block_size", block_size)
        shape = (_checks.positive_int("num_blocks", num_blocks), block_size, num_heads)
        self.k_pool = torch.zeros(shape + (d_k,), dtype=dtype, device=device)
        self.v_pool = torch.zeros(
            shape + (d_k if d_v is None else d_v,), dtype=dtype, device=device
        )
        self.free_blocks = list(range(num_blocks))[::-1]  # popped from the end: block 0 first
        self.block_tables: dict = {}
        self.lengths: dict = {}

    def append(self, seq, k, v) -> None:
        """Store sequence ``seq``'s next key ``(g, d_k)`` and value ``(g, d_v)``."""
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
        """Return sequence ``seq``'s blocks to the free list."""
        self.free_blocks.extend(reversed(self.block_tables.pop(seq)))
        del self.lengths[seq]

    def gather(self, seq) -> tuple[torch.Tensor, torch.Tensor]:
        """Sequence ``seq``'s keys and values in order, ``(g, t, d)`` each."""
        n, table = self.lengths[seq], self.block_tables[seq]
        keys = self.k_pool[table].flatten(0, 1)[:n]
        values = self.v_pool[table].flatten(0, 1)[:n]
        return keys.transpose(0, 1), values.transpose(0, 1)

    def tables(self, seqs) -> tuple[torch.Tensor, torch.Tensor]:
        """The block tables of ``seqs``, ``(len(seqs), max_blocks)`` padded with 0, and their
        lengths ``(len(seqs),)``, on the pools' device: the arguments of ``paged_attention``."""
        widest = max(len(self.block_tables[s]) for s in seqs)
        rows = [self.block_tables[s] + [0] * (widest - len(self.block_tables[s])) for s in seqs]
        lengths = [self.lengths[s] for s in seqs]
        device = self.k_pool.device
        return torch.tensor(rows, device=device), torch.tensor(lengths, device=device)


def paged_attention(q, k_pool, v_pool, block_tables, lengths) -> torch.Tensor:
    """One decoding step over a paged pool: ``q (batch, h, 1, d_k) -> (batch, h, 1, d_v)``,
    sequence ``b``'s position ``p`` read from block ``block_tables[b, p // block_size]`` at offset
    ``p % block_size``; see the NumPy twin."""
    q = as_float_tensor("q", q)
    k_pool, v_pool = as_float_tensor("k_pool", k_pool), as_float_tensor("v_pool", v_pool)
    block_tables, lengths = _checks.paged_inputs(
        q, k_pool, v_pool, block_tables, lengths, torch.as_tensor
    )
    block_size = k_pool.shape[1]
    positions = torch.arange(block_tables.shape[1] * block_size, device=q.device)
    slots = block_tables[:, positions // block_size] * block_size + positions % block_size
    keys = k_pool.flatten(0, 1)[slots]  # (batch, P, g, d_k)
    values = v_pool.flatten(0, 1)[slots]
    valid = positions[None, :] < lengths[:, None]  # (batch, P)
    return grouped_query_attention(
        q, keys.transpose(1, 2), values.transpose(1, 2), valid[:, None, None, :]
    )
