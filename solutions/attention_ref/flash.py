"""FlashAttention's forward pass as one Triton kernel (lesson 11).

The one module of the library that needs Triton besides numpy and torch, and the one nothing else
in the library imports (autograde_tests/test_layers.py checks both): the library itself still runs
with numpy and torch alone.

Where no CUDA GPU is present, importing this module sets ``TRITON_INTERPRET=1`` (unless it is set
already) before it imports Triton (attention_ref._triton_mode says why it must come first): every
``@triton.jit`` kernel, here or in a notebook, then runs in Triton's interpreter, on the CPU, on CPU
tensors, with NumPy doing the arithmetic of each block. On a CUDA machine the same kernels are
compiled for the GPU. Where Triton is not installed (it has wheels for Linux only), the module
still imports: :data:`UNAVAILABLE` says why, ``triton`` and ``tl`` are stand-ins that let a
notebook define its kernels, and launching any kernel raises with that reason.

softmax(x, kernel=...)                       launch a row-softmax kernel, one program per row
attention(q, k, v, kernel=..., block_q=16)  launch a kernel over (block of queries, batch x head)
softmax_kernel, attention_kernel, causal_attention_kernel   the reference kernels
key_blocks_read(kernel, ...)                              which key blocks each query block reads
expect_own_kernel(kernel, name)                           a test helper: the notebook's own kernel
"""

from __future__ import annotations

import math
import os
import platform
import sys
import types

import torch

from attention_ref._triton_mode import VARIABLE, choose_interpreter

_TOO_LATE = "triton" in sys.modules and VARIABLE not in os.environ
INTERPRETED = choose_interpreter()  # before Triton is imported: see the docstring


class _Missing:
    """Stands in for ``triton`` and ``triton.language`` where Triton is not installed: a notebook
    can still define its kernels (``@triton.jit``, ``tl.constexpr``), and launching one raises."""

    def __init__(self, fn=None):
        self.fn = fn

    def __getattr__(self, name):
        return _Missing()

    def __getitem__(self, grid):
        return self

    def __call__(self, *args, **kwargs):
        if self.fn is None and len(args) == 1 and callable(args[0]) and not kwargs:
            return _Missing(args[0])  # triton.jit(fn)
        raise RuntimeError(UNAVAILABLE)


try:
    import triton
    import triton.language as tl
except ImportError as _missing:
    triton = tl = _Missing()
    UNAVAILABLE = (
        f"Triton is not installed here ({platform.system()}, {_missing}): it publishes wheels "
        "for Linux only, so lesson 11's kernels cannot run on this machine; use a Linux machine "
        "(or WSL2, or the class hub) for this lesson"
    )
else:
    UNAVAILABLE = None
if INTERPRETED and _TOO_LATE and UNAVAILABLE is None:
    UNAVAILABLE = (
        f"Triton was imported before {VARIABLE}=1 was set, so its kernels cannot run in the "
        "interpreter in this process: restart the kernel (or Python) and import "
        "attention_ref.flash before anything that imports triton"
    )

HEAD_DIMS = (16, 32, 64, 128)  # tl.arange needs a power of two; tl.dot at least 16


def describe() -> str:
    """One line: where this machine runs Triton kernels."""
    if UNAVAILABLE:
        return UNAVAILABLE
    if INTERPRETED:
        return (
            f"Triton {triton.__version__}: kernels run in its interpreter on the CPU "
            "(TRITON_INTERPRET=1), each program one after the other, in NumPy"
        )
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
    return f"Triton {triton.__version__}: kernels are compiled for the GPU ({name})"


def _jit(fn):
    return fn if UNAVAILABLE else triton.jit(fn)


def kernel_device() -> torch.device:
    """Where a kernel's tensors must live: the GPU when compiled, the CPU when interpreted."""
    return torch.device("cpu" if INTERPRETED or not torch.cuda.is_available() else "cuda")


# ---- the reference kernels ------------------------------------------------------------------
# Every kernel here and in the lesson has one signature. The launcher lays each (batch, head) out
# as a contiguous (n, D) matrix, so row r of head h starts at h * n * D + r * D. Program (i, h)
# computes the rows i * BLOCK_Q ... of head h; lse_ptr receives log sum_j exp(s_j), one per row.


@_jit
def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    """The softmax of one row of a contiguous (rows, n_cols) matrix: program i takes row i."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)  # BLOCK >= n_cols, a power of two: the padding is masked
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))
    x = x.to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(out_ptr + row * n_cols + cols, e / tl.sum(e, 0), mask=cols < n_cols)


@_jit
def _forward(
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    lse_ptr,
    n_q,
    n_k,
    scale,
    D: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    block, head = tl.program_id(0), tl.program_id(1)
    rows = block * BLOCK_Q + tl.arange(0, BLOCK_Q)
    cols = tl.arange(0, D)
    q_at = head * n_q * D + rows[:, None] * D + cols[None, :]
    q = tl.load(q_ptr + q_at, mask=rows[:, None] < n_q, other=0.0)
    m_i = tl.full((BLOCK_Q,), float("-inf"), tl.float32)  # running maximum of each row
    l_i = tl.zeros((BLOCK_Q,), tl.float32)  # running sum
    acc = tl.zeros((BLOCK_Q, D), tl.float32)  # running weighted sum of the values
    if CAUSAL:
        stop = tl.minimum((block + 1) * BLOCK_Q, n_k)  # no key block above the diagonal
    else:
        stop = n_k
    for start in range(0, stop, BLOCK_K):
        keys = start + tl.arange(0, BLOCK_K)
        kv_at = head * n_k * D + keys[:, None] * D + cols[None, :]
        k = tl.load(k_ptr + kv_at, mask=keys[:, None] < n_k, other=0.0)
        v = tl.load(v_ptr + kv_at, mask=keys[:, None] < n_k, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        allowed = keys[None, :] < n_k  # the padding past the last key gets no weight
        if CAUSAL:
            allowed = allowed & (keys[None, :] <= rows[:, None])
        s = tl.where(allowed, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)  # rescales what was accumulated under the old maximum
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = (acc / l_i[:, None]).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + q_at, out, mask=rows[:, None] < n_q)
    tl.store(lse_ptr + head * n_q + rows, m_i + tl.log(l_i), mask=rows < n_q)


@_jit
def attention_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    lse_ptr,
    n_q,
    n_k,
    scale,
    D: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """softmax(Q K^T * scale) V for one block of queries of one head, and their log-sum-exp."""
    _forward(q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, n_q, n_k, scale, D, BLOCK_Q, BLOCK_K, False)


@_jit
def causal_attention_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    out_ptr,
    lse_ptr,
    n_q,
    n_k,
    scale,
    D: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """The same with query i attending to keys j <= i; blocks above the diagonal are not read."""
    _forward(q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, n_q, n_k, scale, D, BLOCK_Q, BLOCK_K, True)


# ---- launching a kernel ---------------------------------------------------------------------


def _check_inputs(q, k, v) -> None:
    if UNAVAILABLE:
        raise RuntimeError(UNAVAILABLE)
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        raise ValueError(
            f"queries {tuple(q.shape)}, keys {tuple(k.shape)} and values {tuple(v.shape)} need "
            "the same number of dimensions, (..., n, d)"
        )
    if k.shape != v.shape or q.shape[:-2] != k.shape[:-2] or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"queries {tuple(q.shape)}, keys {tuple(k.shape)} and values {tuple(v.shape)} do not "
            "fit: the kernels take (..., n_q, d), (..., n_k, d), (..., n_k, d) with the same batch"
        )
    if q.shape[-1] not in HEAD_DIMS:
        raise ValueError(f"head dimension {q.shape[-1]}: the kernels take d in {HEAD_DIMS}")
    if q.shape[-2] == 0 or k.shape[-2] == 0:
        raise ValueError(f"no queries or no keys: queries {tuple(q.shape)}, keys {tuple(k.shape)}")


def softmax(x, kernel=None):
    """Run ``kernel`` (default: :func:`softmax_kernel`) over the last axis of ``x``: one program
    per row, each holding its whole row in one block of the next power of two."""
    if UNAVAILABLE:
        raise RuntimeError(UNAVAILABLE)
    kernel = softmax_kernel if kernel is None else kernel
    rows = x.reshape(-1, x.shape[-1]).contiguous()
    out = torch.empty_like(rows)
    block = triton.next_power_of_2(rows.shape[-1])
    kernel[(rows.shape[0],)](rows, out, rows.shape[-1], BLOCK=block)
    return out.reshape(x.shape)


def attention(q, k, v, kernel=None, *, block_q: int = 16, block_k: int = 16):
    """Run ``kernel`` (default: :func:`attention_kernel`) on queries (..., n_q, d), keys and values
    (..., n_k, d): one program per block of ``block_q`` queries of each (batch, head). Returns the
    output (..., n_q, d) in the inputs' dtype and the log-sum-exp of each query's scores
    (..., n_q), float32; rows the kernel did not write hold NaN."""
    _check_inputs(q, k, v)
    kernel = attention_kernel if kernel is None else kernel
    *batch, n_q, d = q.shape
    n_k = k.shape[-2]
    heads = math.prod(batch)
    q3, k3, v3 = (x.reshape(heads, -1, d).contiguous() for x in (q, k, v))
    out = torch.empty_like(q3)
    lse = torch.full((heads, n_q), float("nan"), dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(n_q, block_q), heads)
    scale = 1.0 / math.sqrt(d)
    kernel[grid](q3, k3, v3, out, lse, n_q, n_k, scale, D=d, BLOCK_Q=block_q, BLOCK_K=block_k)
    return out.reshape(*batch, n_q, d), lse.reshape(*batch, n_q)


def key_blocks_read(kernel, n_q: int, n_k: int, *, block_q: int = 16, block_k: int = 16, d=16):
    """Which key blocks each query block reads: a (query blocks, key blocks) boolean tensor.

    An instrumented run that needs nothing from the kernel but its output: for each key block in
    turn, its values are made NaN, and every query block whose output turns NaN read that block
    (a value read, even with weight 0, gives 0 * NaN = NaN in the product with the weights)."""
    device = kernel_device()
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, n, d, generator=g).to(device) for n in (n_q, n_k, n_k))
    n_blocks_q, n_blocks_k = triton.cdiv(n_q, block_q), triton.cdiv(n_k, block_k)
    read = torch.zeros(n_blocks_q, n_blocks_k, dtype=torch.bool)
    for c in range(n_blocks_k):
        poisoned = v.clone()
        poisoned[:, c * block_k : (c + 1) * block_k] = float("nan")
        out, _ = attention(q, k, poisoned, kernel, block_q=block_q, block_k=block_k)
        rows = out[0].isnan().any(dim=-1).cpu()
        for b in range(n_blocks_q):
            read[b, c] = bool(rows[b * block_q : (b + 1) * block_q].any())
    return read


# ---- a test helper ----------------------------------------------------------------------------


def expect_own_kernel(kernel, name: str) -> None:
    """``kernel`` is a Triton kernel (``@triton.jit``) written in the notebook, which uses nothing
    of the reference library (a kernel has no business calling it)."""
    from attention_ref.testing import _from_library, expect_own_function

    if UNAVAILABLE:
        raise RuntimeError(UNAVAILABLE)
    fn = getattr(kernel, "fn", None)
    if not type(kernel).__module__.startswith("triton") or not isinstance(fn, types.FunctionType):
        raise AssertionError(
            f"{name} should be a Triton kernel: a function decorated with @triton.jit in this "
            f"notebook, got {type(kernel).__name__}"
        )
    expect_own_function(fn, name)
    used = [n for n in fn.__code__.co_names if _from_library(fn.__globals__.get(n))]
    if used:
        raise AssertionError(
            f"{name} uses {', '.join(used)} from the reference library: write the kernel yourself"
        )
