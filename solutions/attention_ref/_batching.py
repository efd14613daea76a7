"""Eq. (1) for a large batch, a few heads at a time -- shared by the NumPy and PyTorch references.

Eq. (1) as written holds the n x n scores of every head of the batch at once: 64 MiB for 8
sequences x 8 heads at n = 512 in float32, written by the first product, read and rewritten by
the softmax, read by the second product, each time from main memory. Computed for a group of heads
at a time in one scratch array of about 1 MiB, the same scores stay in the core's own (L2) cache
from the first product to the second, and the scratch memory is touched once instead of a fresh
64 MiB per call: the same numbers, two to three times sooner on two cores (`make bench` measured
1 MiB groups 15-25 % faster than 4 MiB ones on a 2-core machine). One head's scores are
never split (that is Eq. (1) as written, which lesson 9 measures), so a single head, or a batch
whose scores fit in the budget, is computed in one piece.

Only shapes are used here, so the same code serves arrays and tensors.
"""

from __future__ import annotations

import math

import numpy as np

# A batch whose scores would exceed this many entries (1 MiB of float32) is computed in groups.
CHUNK_ENTRIES = 1 << 18


def output_batch(queries, keys, values, mask, mask_fits) -> tuple[int, ...] | None:
    """The batch shape of Eq. (1)'s output, or None where the inputs do not fit together (then the
    computation in one piece raises the error that names the shapes). ``mask_fits(mask,
    scores_shape)`` raises where the mask does not fit the scores."""
    if min(len(queries.shape), len(keys.shape), len(values.shape)) < 2:
        return None
    try:
        scores = tuple(np.broadcast_shapes(tuple(queries.shape[:-2]), tuple(keys.shape[:-2])))
        if mask is not None:  # the mask must fit the scores, not merely the output
            mask_fits(mask, scores + (queries.shape[-2], keys.shape[-2]))
        return tuple(np.broadcast_shapes(scores, tuple(values.shape[:-2])))
    except ValueError:
        return None


def worth_splitting(batch: tuple[int, ...] | None, queries, keys) -> bool:
    """Whether the scores of the whole batch exceed CHUNK_ENTRIES (``batch`` from output_batch)."""
    return bool(batch) and math.prod(batch) * queries.shape[-2] * keys.shape[-2] > CHUNK_ENTRIES


def groups(batch: tuple[int, ...], per_head: int):
    """Index tuples (one slice per batch axis), each covering about CHUNK_ENTRIES score entries
    and at least one head, together the whole batch."""
    inner = math.prod(batch[1:]) * per_head
    if inner >= CHUNK_ENTRIES and len(batch) > 1:  # one step of the first axis is already enough
        for i in range(batch[0]):
            for rest in groups(batch[1:], per_head):
                yield (slice(i, i + 1), *rest)
        return
    step = max(1, CHUNK_ENTRIES // inner)
    for start in range(0, batch[0], step):
        yield (slice(start, start + step),) + (slice(None),) * (len(batch) - 1)


def part(x, index: tuple, core: int = 2):
    """The part of ``x`` (batch axes, then ``core`` axes of its own) that the batch ``index``
    selects; batch axes of size 1 broadcast and are kept whole, missing ones too."""
    if x is None or len(x.shape) <= core:
        return x
    own = tuple(
        x.shape[: len(x.shape) - core]
    )  # right-aligned with the batch, as broadcasting does
    picked = index[len(index) - len(own) :]
    return x[tuple(slice(None) if size == 1 else i for size, i in zip(own, picked))]


def product_shape(a, b) -> tuple[int, ...]:
    """The shape of ``a @ b``: broadcast batch axes, then ``(a.shape[-2], b.shape[-1])``."""
    batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    return tuple(batch) + (a.shape[-2], b.shape[-1])
