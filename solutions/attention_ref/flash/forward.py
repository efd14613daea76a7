"""FlashAttention's forward pass as Triton kernels (lesson 11): the reference kernels, the
launchers every kernel of the lesson runs through, and the test helpers of its forward exercises.

Every launch goes through attention_ref.flash.checker, which, where kernels are interpreted,
refuses loads and stores outside the tensors and races between programs, and notes what each
launch specialized (attention_ref.flash.launches); :func:`expect_compiles` then compiles a kernel
as the tests launched it, for four GPUs, with Triton's own compiler, which needs no GPU
(attention_ref.flash.compiler).
"""

from __future__ import annotations

import math
import types

import torch

from attention_ref.flash.runtime import INTERPRETED, UNAVAILABLE, _jit, kernel_device, tl, triton

if UNAVAILABLE is None:
    from attention_ref.flash import checker, compiler, launches
else:
    checker = compiler = launches = None

HEAD_DIMS = (16, 32, 64, 128)  # tl.arange needs a power of two; tl.dot at least 16


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
    # in int64: past 2**31 elements (8 x 32 heads x 64k tokens x 128, say) head * n_q * D wraps
    # around in int32, as Triton's fused-attention tutorial notes
    head = head.to(tl.int64)
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


def launch(kernel, grid: tuple, args: tuple, constants: dict) -> None:
    """``kernel[grid](*args, **constants)`` as the course's launchers run every kernel: where
    kernels are interpreted, each load and store checked (attention_ref.flash.checker: outside the
    tensors, or a race between programs: an AssertionError that says where); its
    specialization noted for :func:`expect_compiles`."""
    if UNAVAILABLE:
        raise RuntimeError(UNAVAILABLE)
    checker.launch(kernel, grid, args, constants)


def softmax(x, kernel):
    """Run ``kernel`` (a row softmax, :func:`softmax_kernel`'s signature) over the last axis of
    ``x``: one program per row, each holding its whole row in one block of the next power of
    two."""
    if UNAVAILABLE:
        raise RuntimeError(UNAVAILABLE)
    rows = x.reshape(-1, x.shape[-1]).contiguous()
    out = torch.empty_like(rows)
    block = triton.next_power_of_2(rows.shape[-1])
    launch(kernel, (rows.shape[0],), (rows, out, rows.shape[-1]), {"BLOCK": block})
    return out.reshape(x.shape)


def attention(q, k, v, kernel, *, block_q: int = 16, block_k: int = 16, **constants):
    """Run ``kernel`` (:func:`attention_kernel`'s signature) on queries (..., n_q, d), keys and
    values (..., n_k, d), or with fewer key/value heads (grouped-query attention:
    :func:`heads_and_group`): one program per block of ``block_q`` queries of each (batch,
    head). ``constants`` go to the kernel as more ``tl.constexpr`` arguments, or as launch
    options (``num_warps``, ``num_stages``). Returns the output (..., n_q, d) in the inputs' dtype
    and the log-sum-exp of each query's scores (..., n_q), float32; rows the kernel did not write
    hold NaN."""
    heads, group = heads_and_group(q, k, v)
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    q3 = q.reshape(heads, n_q, d).contiguous()
    k3, v3 = (x.reshape(heads // group, n_k, d).contiguous() for x in (k, v))
    out = torch.empty_like(q3)
    lse = torch.full((heads, n_q), float("nan"), dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(n_q, block_q), heads)
    scale = 1.0 / math.sqrt(d)
    args = (q3, k3, v3, out, lse, n_q, n_k, group, scale)
    launch(kernel, grid, args, dict(D=d, BLOCK_Q=block_q, BLOCK_K=block_k, **constants))
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
    args = (q, k, v, acc, stats, n_q, k.shape[0], lo, hi, offset, 1.0 / math.sqrt(d))
    constants = dict(D=d, BLOCK_Q=block_q, BLOCK_K=block_k, CAUSAL=causal, HELPER=helper)
    launch(_attend_probe, (1,), args, constants)
    return acc, stats[1, :n_q], stats[0, :n_q]


def key_blocks_read(kernel, n_q: int, n_k: int, *, block_q: int = 16, block_k: int = 16, d=16):
    """Which key blocks each query block reads: a (query blocks, key blocks) boolean tensor, from
    one run of ``kernel`` on one head.

    Where kernels are interpreted, from the record of that launch (attention_ref.flash.checker):
    a query block's program read a key block if it loaded any key or any value of it. On a GPU,
    one run per key block with that block's values made NaN: every query block whose output
    turns NaN read it (a value read, even with weight 0, gives 0 * NaN = NaN); that sees V only
    (a NaN key's score is masked away by a kernel that masks)."""
    device = kernel_device()
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, n, d, generator=g).to(device) for n in (n_q, n_k, n_k))
    n_blocks_q, n_blocks_k = triton.cdiv(n_q, block_q), triton.cdiv(n_k, block_k)
    read = torch.zeros(n_blocks_q, n_blocks_k, dtype=torch.bool)
    if INTERPRETED:
        attention(q, k, v, kernel, block_q=block_q, block_k=block_k)
        for program, key in checker.rows_read(checker.last_record(), {1: d, 2: d}):
            read[program[0], key // block_k] = True
        return read
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
        for name in compiler._names(current.__code__):
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


# The launches a GPU timing run makes (lesson 11's last section, make bench): float16, 8 heads of
# d = 64 at n = 8192 (a multiple of 16, as every n of the run), blocks of 64 queries and 64 keys for
# the forward kernels, 64 queries and 32 keys for the backward one, Triton's default warps and
# stages unless asked.
GPU_RUN = {"heads": 8, "n": 8192, "d": 64, "forward": (64, 64), "backward": (64, 32)}


def gpu_run_launch(kind: str = "forward", *, dtype=torch.float16, d=None, blocks=None, **options):
    """The attention_ref.flash.launches.Launch of a GPU timing run's ``kind`` ("forward",
    "backward") launch (:data:`GPU_RUN`), or of one like it with another ``dtype``, head dimension
    ``d`` or ``blocks`` (block_q, block_k): what :func:`expect_compiles` builds for it.
    ``options``: the launch options num_warps, num_stages."""
    data, single = launches.Pointer(dtype), launches.Pointer(torch.float32)
    n, d = GPU_RUN["n"], d or GPU_RUN["d"]
    block_q, block_k = blocks or GPU_RUN[kind]
    constants = dict(D=d, BLOCK_Q=block_q, BLOCK_K=block_k, **options)
    if kind == "forward":  # q, k, v, out; lse; n_q, n_k, group, scale
        args = (data,) * 4 + (single, n, n, 1, 0.125)
    else:  # q, k, v, dout; lse, delta, dq; dk, dv; n_q, n_k, scale
        args = (data,) * 4 + (single,) * 3 + (data,) * 2 + (n, n, 0.125)
        constants["CAUSAL"] = False
    return launches.launch_of(args, constants)


def compile_kernel(kernel, types_: tuple, constants: tuple, arch: str = "sm_90"):
    """Compile ``kernel`` for ``arch`` with Triton's own compiler: a Build (registers, spills,
    shared memory), or the compiler's error (attention_ref.flash.compiler.compile_kernel)."""
    if UNAVAILABLE:
        raise RuntimeError(UNAVAILABLE)
    return compiler.compile_kernel(kernel, types_, constants, arch)


def expect_compiles(kernel, name: str, *, gpu_run=None, show=True, cache=None, archs=None):
    """A test: ``kernel`` compiles for an A100, an H100, a B200 and an RTX 5090 (sm_80, sm_90,
    sm_100, sm_120) as every launch of the tests specialized it (the compiler's front end), and
    is built to machine code within each GPU's shared memory as a GPU timing run launches it,
    with ``gpu_run`` ("forward", "backward": :func:`gpu_run_launch`), or else as the largest of
    the tests' launches (attention_ref.flash.compiler.expect_compiles). A notebook helper whose
    own test the compiler failed (:func:`expect_helper_compiles`) is replaced by the course's
    own here: that test has charged for it.
    Returns the builds; ``cache``: the folder that keeps them across processes (default:
    attention_ref.flash.compiler.CACHE)."""
    if UNAVAILABLE:
        raise RuntimeError(UNAVAILABLE)
    extra = [gpu_run_launch(gpu_run)] if gpu_run else []
    return compiler.expect_compiles(
        kernel, name, extra=extra, archs=tuple(archs or compiler.ARCHS), show=show,
        cache=cache or compiler.CACHE, stand_ins={"attend_blocks": attend_blocks},
    )  # fmt: skip


def expect_helper_compiles(helper, name: str, *, show=True):
    """A test: the helper ``helper`` (:func:`attend_blocks`'s signature) compiles inside the
    kernel :func:`attend_blocks_probe` launched it in, as each of those launches specialized
    it, for the four GPUs of :func:`expect_compiles`."""
    if UNAVAILABLE:
        raise RuntimeError(UNAVAILABLE)
    probed = [
        launch
        for launch in launches.launches_of(_attend_probe)
        if dict(launch.constants).get("HELPER") is helper
    ]
    try:
        return compiler.expect_compiles(
            _attend_probe, name, launches=probed, show=show, helpers=(helper,)
        )
    except AssertionError:
        compiler.note_refused(helper)  # the kernels that call it are not charged again
        raise


if UNAVAILABLE is None:
    # the checker and the launchers as they are now are what the tests rely on (tamper.py)
    from attention_ref.testing import tamper

    tamper.remember_library()
