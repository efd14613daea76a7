"""FlashAttention's forward pass as Triton kernels (lesson 11); the backward pass is in
attention_ref.flash_backward, the compile check in attention_ref.flash_compile.

The modules of the library that need Triton besides numpy and torch, and the ones nothing else
in the library imports (autograde_tests/test_layers.py checks both): the library itself still runs
with numpy and torch alone.

Where no CUDA GPU is present, importing this module sets ``TRITON_INTERPRET=1`` (unless it is set
already) before it imports Triton (attention_ref._triton_mode says why it must come first): every
``@triton.jit`` kernel, here or in a notebook, then runs in Triton's interpreter, on the CPU, on CPU
tensors, with NumPy doing the arithmetic of each block. On a CUDA machine the same kernels are
compiled for the GPU. Either way :func:`expect_compiles` compiles a kernel for an A100 and an H100
with Triton's own compiler, which needs no GPU. Where Triton is not installed (it has wheels for
Linux only), the module still imports: :data:`UNAVAILABLE` says why, ``triton`` and ``tl`` are
stand-ins that let a notebook define its kernels, and launching any kernel raises with that reason.

softmax(x, kernel=...)                       launch a row-softmax kernel, one program per row
attention(q, k, v, kernel=..., block_q=16)  launch a kernel over (block of queries, batch x head),
                                             grouped-query attention when k, v have fewer heads
attend_blocks                                the inner loop over key blocks, written once
softmax_kernel, attention_kernel, causal_attention_kernel, cached_causal_attention_kernel
key_blocks_read(kernel, ...)                 which key blocks each query block reads
expect_own_kernel(kernel, name)              a test helper: the notebook's own kernel
compile_kernel(kernel, types, constants, arch)  Triton's compiler, for a GPU, on any machine
expect_compiles(kernel, name, kind)          a test helper: it compiles for sm_80 and sm_90
attend_blocks_probe(helper, q, k, v, lo, hi)  a helper like attend_blocks, run on its own
"""

from __future__ import annotations

import math
import os
import platform
import sys
import types

import torch

from attention_ref._triton_mode import PRECISION, VARIABLE, choose_interpreter

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
if UNAVAILABLE is None:
    # flash_compile first: it notes triton.language as it is before any kernel runs
    from attention_ref import flash_compile, flash_interpreter

    if INTERPRETED:
        flash_interpreter.install()  # triton.language swapped once per launch, and put back
else:
    flash_compile = None
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
    return (
        f"Triton {triton.__version__}: kernels are compiled for the GPU ({name}); tl.dot of "
        f"float32 blocks in {os.environ.get(PRECISION, 'tf32').upper()} ({PRECISION})"
    )


def _jit(fn):
    return fn if UNAVAILABLE else triton.jit(fn)


def kernel_device() -> torch.device:
    """Where a kernel's tensors must live: the GPU when compiled, the CPU when interpreted."""
    return torch.device("cpu" if INTERPRETED or not torch.cuda.is_available() else "cuda")


# ---- the reference kernels ------------------------------------------------------------------
# Every attention kernel here and in the lesson has one signature. The launcher lays each (batch,
# head) out as a contiguous (n, D) matrix, so row r of head h starts at h * n * D + r * D. Program
# (i, h) computes the rows i * BLOCK_Q ... of query head h, which reads key/value head h // group
# (grouped-query attention: group query heads share one key/value head; group = 1 is ordinary
# multi-head attention); lse_ptr receives log sum_j exp(s_j), one per row.


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
def attend_blocks(
    acc,
    l_i,
    m_i,
    q,
    k_ptr,
    v_ptr,
    rows,
    lo,
    hi,
    n_k,
    scale,
    D: tl.constexpr,
    BLOCK_K: tl.constexpr,
    CAUSAL: tl.constexpr,
):
    """Lesson 9's loop over the key blocks that start at lo, lo + BLOCK_K, ... below hi: the
    running maximum m_i, sum l_i and accumulator acc of the block of queries q, updated and
    returned. k_ptr, v_ptr point at the first key and value of the head. With CAUSAL, a key
    after a query's position (rows) gets no weight."""
    cols = tl.arange(0, D)
    for start in range(lo, hi, BLOCK_K):
        keys = start + tl.arange(0, BLOCK_K)
        at = keys[:, None] * D + cols[None, :]
        k = tl.load(k_ptr + at, mask=keys[:, None] < n_k, other=0.0)
        v = tl.load(v_ptr + at, mask=keys[:, None] < n_k, other=0.0)
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
    return acc, l_i, m_i


@_jit
def _forward(
    q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, n_q, n_k, group, scale,
    D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr,
    CACHED: tl.constexpr,
):  # fmt: skip
    block, head = tl.program_id(0), tl.program_id(1)
    rows = block * BLOCK_Q + tl.arange(0, BLOCK_Q)
    cols = tl.arange(0, D)
    q_at = head * n_q * D + rows[:, None] * D + cols[None, :]
    q = tl.load(q_ptr + q_at, mask=rows[:, None] < n_q, other=0.0)
    kv = (head // group) * n_k * D  # the key/value head of this query head
    m_i = tl.full((BLOCK_Q,), float("-inf"), tl.float32)  # running maximum of each row
    l_i = tl.zeros((BLOCK_Q,), tl.float32)  # running sum
    acc = tl.zeros((BLOCK_Q, D), tl.float32)  # running weighted sum of the values
    if CAUSAL:
        # query i sits at position i, or after the n_k - n_q cached keys (CACHED)
        first = block * BLOCK_Q + (n_k - n_q if CACHED else 0)
        diagonal = tl.minimum(first // BLOCK_K * BLOCK_K, n_k)  # key blocks before: unmasked
        stop = tl.minimum(first + BLOCK_Q, n_k)  # no key block above the diagonal
        positions = rows + (n_k - n_q if CACHED else 0)
        acc, l_i, m_i = attend_blocks(acc, l_i, m_i, q, k_ptr + kv, v_ptr + kv, positions,
                                      0, diagonal, n_k, scale, D, BLOCK_K, False)  # fmt: skip
        acc, l_i, m_i = attend_blocks(acc, l_i, m_i, q, k_ptr + kv, v_ptr + kv, positions,
                                      diagonal, stop, n_k, scale, D, BLOCK_K, True)  # fmt: skip
    else:
        acc, l_i, m_i = attend_blocks(acc, l_i, m_i, q, k_ptr + kv, v_ptr + kv, rows,
                                      0, n_k, n_k, scale, D, BLOCK_K, False)  # fmt: skip
    out = (acc / l_i[:, None]).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + q_at, out, mask=rows[:, None] < n_q)
    tl.store(lse_ptr + head * n_q + rows, m_i + tl.log(l_i), mask=rows < n_q)


@_jit
def attention_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, n_q, n_k, group, scale,
    D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """softmax(Q K^T * scale) V for one block of queries of one head, and their log-sum-exp."""
    _forward(q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, n_q, n_k, group, scale,
             D, BLOCK_Q, BLOCK_K, False, False)  # fmt: skip


@_jit
def causal_attention_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, n_q, n_k, group, scale,
    D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """The same with query i attending to keys j <= i; blocks above the diagonal are not read,
    only the blocks the diagonal crosses are masked."""
    _forward(q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, n_q, n_k, group, scale,
             D, BLOCK_Q, BLOCK_K, True, False)  # fmt: skip


@_jit
def cached_causal_attention_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, n_q, n_k, group, scale,
    D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    """Causal attention of n_q new queries that follow n_k - n_q cached keys (a KV cache, lesson
    9): query i sits at position n_k - n_q + i and attends to keys j <= n_k - n_q + i (the
    causal mask aligned to the bottom right, as FlashAttention 2.1 and later align it)."""
    _forward(q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, n_q, n_k, group, scale,
             D, BLOCK_Q, BLOCK_K, True, True)  # fmt: skip


# ---- launching a kernel ---------------------------------------------------------------------


def heads_and_group(q, k, v) -> tuple[int, int]:
    """(query heads in all, query heads per key/value head) of queries (..., n_q, d) and keys and
    values (..., n_k, d); keys and values may have fewer heads than the queries, (..., H_q, n, d)
    against (..., H_kv, n, d) with H_q a multiple of H_kv, as ``F.scaled_dot_product_attention(
    ..., enable_gqa=True)`` takes them. A clear ValueError for anything else."""
    if UNAVAILABLE:
        raise RuntimeError(UNAVAILABLE)
    shapes = f"queries {tuple(q.shape)}, keys {tuple(k.shape)} and values {tuple(v.shape)}"
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        raise ValueError(f"{shapes} need the same number of dimensions, (..., n, d)")
    if k.shape != v.shape or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"{shapes} do not fit: the kernels take (..., n_q, d), (..., n_k, d)")
    if q.shape[-1] not in HEAD_DIMS:
        raise ValueError(f"head dimension {q.shape[-1]}: the kernels take d in {HEAD_DIMS}")
    if q.shape[-2] == 0 or k.shape[-2] == 0:
        raise ValueError(f"no queries or no keys: {shapes}")
    heads = math.prod(q.shape[:-2])
    if q.shape[:-2] == k.shape[:-2]:
        return heads, 1
    if q.dim() < 3 or q.shape[:-3] != k.shape[:-3] or q.shape[-3] % k.shape[-3]:
        raise ValueError(
            f"{shapes} do not fit: the same batch, and as many heads of keys and values as of "
            "queries, or a divisor of it (grouped-query attention, (..., H_q, n, d) against "
            "(..., H_kv, n, d))"
        )
    return heads, q.shape[-3] // k.shape[-3]


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


def attention(q, k, v, kernel=None, *, block_q: int = 16, block_k: int = 16, **constants):
    """Run ``kernel`` (default: :func:`attention_kernel`) on queries (..., n_q, d), keys and values
    (..., n_k, d), or with fewer key/value heads (grouped-query attention: :func:`heads_and_group`):
    one program per block of ``block_q`` queries of each (batch, head). ``constants`` go to the
    kernel as more ``tl.constexpr`` arguments. Returns the output (..., n_q, d) in the inputs'
    dtype and the log-sum-exp of each query's scores (..., n_q), float32; rows the kernel did not
    write hold NaN."""
    heads, group = heads_and_group(q, k, v)
    kernel = attention_kernel if kernel is None else kernel
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    q3 = q.reshape(heads, n_q, d).contiguous()
    k3, v3 = (x.reshape(heads // group, n_k, d).contiguous() for x in (k, v))
    out = torch.empty_like(q3)
    lse = torch.full((heads, n_q), float("nan"), dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(n_q, block_q), heads)
    scale = 1.0 / math.sqrt(d)
    kernel[grid](
        q3, k3, v3, out, lse, n_q, n_k, group, scale,
        D=d, BLOCK_Q=block_q, BLOCK_K=block_k, **constants,
    )  # fmt: skip
    return out.reshape(q.shape), lse.reshape(q.shape[:-1])


@_jit
def _attend_probe(
    q_ptr, k_ptr, v_ptr, out_ptr, stats_ptr, n_q, n_k, lo, hi, offset, scale,
    D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr,
    HELPER: tl.constexpr,
):  # fmt: skip
    rows = tl.arange(0, BLOCK_Q)
    cols = tl.arange(0, D)
    q = tl.load(q_ptr + rows[:, None] * D + cols[None, :], mask=rows[:, None] < n_q, other=0.0)
    acc, l_i, m_i = HELPER(
        tl.zeros((BLOCK_Q, D), tl.float32), tl.zeros((BLOCK_Q,), tl.float32),
        tl.full((BLOCK_Q,), float("-inf"), tl.float32), q, k_ptr, v_ptr, rows + offset,
        lo, hi, n_k, scale, D, BLOCK_K, CAUSAL,
    )  # fmt: skip
    tl.store(out_ptr + rows[:, None] * D + cols[None, :], acc, mask=rows[:, None] < n_q)
    tl.store(stats_ptr + rows, m_i, mask=rows < n_q)
    tl.store(stats_ptr + BLOCK_Q + rows, l_i, mask=rows < n_q)


def attend_blocks_probe(helper, q, k, v, lo, hi, *, causal=False, offset=0, block_k=16):
    """Run ``helper`` (a loop over key blocks with :func:`attend_blocks`'s signature) for one
    block of queries q (n_q, d) against keys and values (n_k, d), from fresh statistics, over the
    key blocks from ``lo`` to ``hi``; query i at position i + ``offset``. Returns what it returns,
    (acc, l, m), as tensors: (n_q, d), (n_q,), (n_q,)."""
    if UNAVAILABLE:
        raise RuntimeError(UNAVAILABLE)
    n_q, d = q.shape
    block_q = max(16, triton.next_power_of_2(n_q))
    acc = torch.empty(n_q, d, dtype=torch.float32, device=q.device)
    stats = torch.empty(2, block_q, dtype=torch.float32, device=q.device)
    q, k, v = (x.contiguous() for x in (q, k, v))
    _attend_probe[(1,)](
        q, k, v, acc, stats, n_q, k.shape[0], lo, hi, offset, 1.0 / math.sqrt(d),
        D=d, BLOCK_Q=block_q, BLOCK_K=block_k, CAUSAL=causal, HELPER=helper,
    )  # fmt: skip
    return acc, stats[1, :n_q], stats[0, :n_q]


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


# ---- test helpers ------------------------------------------------------------------------------


def _library_names(fn) -> list[str]:
    """Names ``fn`` and the notebook's kernels and helpers it calls take from the library."""
    from attention_ref.testing import _from_library

    used, seen, todo = [], set(), [fn]
    while todo:
        current = todo.pop()
        if current.__code__ in seen:
            continue
        seen.add(current.__code__)
        for name in flash_compile._names(current.__code__):
            value = current.__globals__.get(name)
            inner = getattr(value, "fn", None)  # a Triton kernel or helper: its Python function
            if _from_library(value) or (inner is not None and _from_library(inner)):
                used.append(name)
            elif isinstance(inner, types.FunctionType) and inner.__module__ == "__main__":
                todo.append(inner)
    return used


def expect_own_kernel(kernel, name: str) -> None:
    """``kernel`` is a Triton kernel (``@triton.jit``) written in the notebook, which uses nothing
    of the reference library, directly or through the notebook's helpers (a kernel has no
    business calling it)."""
    from attention_ref.testing import expect_own_function

    if UNAVAILABLE:
        raise RuntimeError(UNAVAILABLE)
    fn = getattr(kernel, "fn", None)
    if not type(kernel).__module__.startswith("triton") or not isinstance(fn, types.FunctionType):
        raise AssertionError(
            f"{name} should be a Triton kernel: a function decorated with @triton.jit in this "
            f"notebook, got {type(kernel).__name__}"
        )
    expect_own_function(fn, name)
    used = _library_names(fn)
    if used:
        raise AssertionError(
            f"{name} uses {', '.join(sorted(set(used)))} from the reference library: write the "
            "kernel and its helpers yourself"
        )


# What each kind of kernel is compiled as when a test checks it: the Triton types of its first
# parameters (float16 inputs, as on a GPU; float32 statistics) and the values of its tl.constexpr
# ones: the tests' own sizes (a head dimension of 16, blocks of 16), the cheapest to compile (about
# half the time of 64 and 64). Above tl.dot's minimum (an inner dimension of 16 for float16 blocks),
# whether a kernel compiles does not depend on them; its registers, spills and shared memory do:
# GPU_SIZES are a GPU run's (lesson 11's last section, make bench).
COMPILE_HEAD_DIM, COMPILE_BLOCK = 16, 16
GPU_SIZES = {"D": 64, "BLOCK": 64}
FORWARD_TYPES = ("*fp16",) * 4 + ("*fp32", "i32", "i32", "i32", "fp32")
# q, k, v, dout; lse, delta, dq (float32: atomics add into it); dk, dv; n_q, n_k, scale
BACKWARD_TYPES = ("*fp16",) * 4 + ("*fp32",) * 3 + ("*fp16",) * 2 + ("i32", "i32", "fp32")
COMPILED_AS = {
    "softmax": (("*fp16", "*fp16", "i32"), (1024,)),
    "forward": (FORWARD_TYPES, (COMPILE_HEAD_DIM, COMPILE_BLOCK, COMPILE_BLOCK)),
    # its tl.constexpr switch CAUSAL off for the A100, on for the H100: both branches compiled
    "backward": (
        BACKWARD_TYPES,
        {
            "sm_80": (COMPILE_HEAD_DIM, COMPILE_BLOCK, COMPILE_BLOCK, False),
            "sm_90": (COMPILE_HEAD_DIM, COMPILE_BLOCK, COMPILE_BLOCK, True),
        },
    ),
}


def compile_kernel(kernel, types_: tuple, constants: tuple, arch: str = "sm_90"):
    """Compile ``kernel`` for ``arch`` with Triton's own compiler: a Build (registers, spills,
    shared memory), or the compiler's error (attention_ref.flash_compile.compile_kernel)."""
    if UNAVAILABLE:
        raise RuntimeError(UNAVAILABLE)
    return flash_compile.compile_kernel(kernel, types_, constants, arch)


def compiled_as(kind: str, gpu_sizes: bool = False) -> tuple:
    """(types, constants) a kernel of ``kind`` is compiled with: :data:`COMPILED_AS`, or with
    ``gpu_sizes`` the head dimension and blocks of :data:`GPU_SIZES`."""
    types_, constants = COMPILED_AS[kind]
    if not gpu_sizes or kind == "softmax":
        return types_, constants

    def resized(values: tuple) -> tuple:
        return (GPU_SIZES["D"], GPU_SIZES["BLOCK"], GPU_SIZES["BLOCK"], *values[3:])

    if isinstance(constants, dict):
        return types_, {arch: resized(values) for arch, values in constants.items()}
    return types_, resized(constants)


def expect_compiles(
    kernel, name: str, kind: str = "forward", *, show=True, cache=None, gpu_sizes=False, archs=None
):
    """A test: ``kernel`` compiles for an A100 (sm_80) and an H100 (sm_90) with Triton's own
    compiler, as :data:`COMPILED_AS` ``[kind]`` says (``gpu_sizes``: at :data:`GPU_SIZES`);
    prints registers, spills and shared memory. Fails with the compiler's message and the line it
    refused. Returns the builds; ``cache``: a folder that keeps them across processes
    (attention_ref.flash_compile.compile_kernel)."""
    if UNAVAILABLE:
        raise RuntimeError(UNAVAILABLE)
    types_, constants = compiled_as(kind, gpu_sizes)
    archs = tuple(flash_compile.ARCHS) if archs is None else archs
    return flash_compile.expect_compiles(
        kernel, name, types_, constants, archs=archs, show=show, cache=cache
    )
