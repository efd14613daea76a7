"""FlashAttention's backward pass as a Triton kernel (lesson 11), and the autograd Function that
joins it to the forward kernels of attention_ref.flash.

FlashAttention-2 (Dao, 2023, Algorithm 2) never stores the n x n weights: the forward pass keeps
the log-sum-exp L of each query's scores, and the backward pass recomputes each block of weights
as P = exp(S - L). With D = rowsum(dO * O), one number per query, the gradients are

    dV = P^T dO        dP = dO V^T        dS = P * (dP - D)        dQ = dS K * scale
    dK = dS^T Q * scale

One program per block of keys of each head holds its dK and dV on the chip and loops over the
blocks of queries (from the diagonal on, when causal). dQ gathers a term from every block of keys,
that is from every program: each adds its term into a float32 dQ in memory with an atomic add, as
FlashAttention-2 does. (Triton's tutorial has no atomics: a program that has finished its block
of keys then computes dQ of one block of queries, recomputing P, and sums it in a fixed order.)

attention_backward(q, k, v, dout, lse, delta, kernel, causal=...)   launch a backward kernel
FlashAttention / flash_attention(q, k, v, causal)                  autograd with the kernels
query_blocks_read(kernel, ...)      which query blocks each key block's program reads
sdpa_gradients, kernel_gradients, saved_tensor_shapes, train_steps     what the tests compare
expect_function_runs_kernels(apply, forward, backward, ...)        what an autograd Function ran
"""

from __future__ import annotations

import math

import torch

from attention_ref import flash
from attention_ref.flash.runtime import _jit, tl, triton


@_jit
def attention_backward_kernel(
    q_ptr, k_ptr, v_ptr, dout_ptr, lse_ptr, delta_ptr, dq_ptr, dk_ptr, dv_ptr, n_q, n_k, scale,
    D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr,
):  # fmt: skip
    """dK and dV of one block of keys of one head; its share of dQ, added atomically."""
    block, head = tl.program_id(0), tl.program_id(1)
    head = head.to(tl.int64)  # offsets past 2**31 elements need 64 bits
    keys = block * BLOCK_K + tl.arange(0, BLOCK_K)
    cols = tl.arange(0, D)
    kv_at = head * n_k * D + keys[:, None] * D + cols[None, :]
    k = tl.load(k_ptr + kv_at, mask=keys[:, None] < n_k, other=0.0)
    v = tl.load(v_ptr + kv_at, mask=keys[:, None] < n_k, other=0.0)
    dk = tl.zeros((BLOCK_K, D), tl.float32)
    dv = tl.zeros((BLOCK_K, D), tl.float32)
    lo = 0
    if CAUSAL:  # the queries before this block's first key see none of its keys
        lo = block * BLOCK_K // BLOCK_Q * BLOCK_Q
    for start in range(lo, n_q, BLOCK_Q):
        rows = start + tl.arange(0, BLOCK_Q)
        q_at = head * n_q * D + rows[:, None] * D + cols[None, :]
        q = tl.load(q_ptr + q_at, mask=rows[:, None] < n_q, other=0.0)
        dout = tl.load(dout_ptr + q_at, mask=rows[:, None] < n_q, other=0.0)
        lse = tl.load(lse_ptr + head * n_q + rows, mask=rows < n_q, other=0.0)
        delta = tl.load(delta_ptr + head * n_q + rows, mask=rows < n_q, other=0.0)
        allowed = (rows[:, None] < n_q) & (keys[None, :] < n_k)
        if CAUSAL:
            allowed = allowed & (keys[None, :] <= rows[:, None])
        s = tl.dot(q, tl.trans(k)) * scale
        p = tl.where(allowed, tl.exp(s - lse[:, None]), 0.0)  # the weights, recomputed from L
        dv += tl.dot(tl.trans(p).to(dout.dtype), dout)
        dp = tl.dot(dout, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds).to(q.dtype), q)
        dq = tl.dot(ds.to(k.dtype), k) * scale
        tl.atomic_add(dq_ptr + q_at, dq, mask=rows[:, None] < n_q)  # other programs add theirs
    tl.store(dk_ptr + kv_at, (dk * scale).to(dk_ptr.dtype.element_ty), mask=keys[:, None] < n_k)
    tl.store(dv_ptr + kv_at, dv.to(dv_ptr.dtype.element_ty), mask=keys[:, None] < n_k)


def _check_backward(q, k, v, dout, lse, delta) -> tuple[int, int]:
    heads, group = flash.heads_and_group(q, k, v)
    shapes = {"dout": (dout, q.shape), "lse": (lse, q.shape[:-1]), "delta": (delta, q.shape[:-1])}
    for name, (x, shape) in shapes.items():
        if tuple(x.shape) != tuple(shape):
            raise ValueError(
                f"{name} has shape {tuple(x.shape)}; queries {tuple(q.shape)} need {tuple(shape)}"
            )
    return heads, group


def attention_backward(
    q, k, v, dout, lse, delta, kernel, *, causal=False, block_q: int = 16, block_k: int = 16,
    **options,
):  # fmt: skip
    """The gradients (dq, dk, dv) of attention's output with respect to q, k, v, given the
    gradient ``dout`` of the output, the forward's log-sum-exp ``lse`` (..., n_q) and ``delta`` =
    rowsum(dout * out) (..., n_q): one program of ``kernel`` (:func:`attention_backward_kernel`'s
    signature) per block of ``block_k`` keys of each head. With grouped heads, keys and values
    are repeated to the queries' heads and their gradients summed back. ``options``: launch
    options (num_warps, num_stages)."""
    heads, group = _check_backward(q, k, v, dout, lse, delta)
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    if group > 1:  # one key/value head per query head: each gets its own dK, dV, summed below
        k, v = (x.repeat_interleave(group, dim=-3) for x in (k, v))
    q3, dout3 = (x.reshape(heads, n_q, d).contiguous() for x in (q, dout))
    k3, v3 = (x.reshape(heads, n_k, d).contiguous() for x in (k, v))
    lse2, delta2 = (x.reshape(heads, n_q).float().contiguous() for x in (lse, delta))
    dq = torch.zeros(heads, n_q, d, dtype=torch.float32, device=q.device)  # atomics add here
    dk, dv = torch.empty_like(k3), torch.empty_like(v3)
    grid = (triton.cdiv(n_k, block_k), heads)
    args = (q3, k3, v3, dout3, lse2, delta2, dq, dk, dv, n_q, n_k, 1.0 / math.sqrt(d))
    constants = dict(D=d, BLOCK_Q=block_q, BLOCK_K=block_k, CAUSAL=causal, **options)
    flash.launch(kernel, grid, args, constants)
    dk, dv = (x.reshape(k.shape) for x in (dk, dv))
    if group > 1:
        dk, dv = (x.unflatten(-3, (-1, group)).sum(-3) for x in (dk, dv))
    return dq.to(q.dtype).reshape(q.shape), dk, dv


class FlashAttention(torch.autograd.Function):
    """Attention whose forward and backward passes are Triton kernels: what the forward keeps for
    the backward is q, k, v, the output and the log-sum-exp, never the weights."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        kernel = flash.causal_attention_kernel if causal else flash.attention_kernel
        out, lse = flash.attention(q, k, v, kernel)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        delta = (dout.float() * out.float()).sum(-1)  # D = rowsum(dO * O)
        dq, dk, dv = attention_backward(
            q, k, v, dout, lse, delta, attention_backward_kernel, causal=ctx.causal
        )
        return dq, dk, dv, None


def flash_attention(q, k, v, causal: bool = False):
    """softmax(q k^T / sqrt(d)) v through :class:`FlashAttention` (differentiable)."""
    return FlashAttention.apply(q, k, v, causal)


def query_blocks_read(kernel, n_q: int, n_k: int, *, causal=True, block_q=16, block_k=16, d=16):
    """Which query blocks each key block's program reads: a (key blocks, query blocks) boolean
    tensor. Where kernels are interpreted, from the record of one launch
    (attention_ref.flash.checker): a program read a query block if it touched any of its queries,
    output gradients, log-sum-exps, D or dQ. On a GPU, as attention_ref.flash.key_blocks_read
    does there: the gradient of the output made NaN one query block at a time, and every key
    block whose dV turns NaN read it (a weight of 0 times NaN is still NaN)."""
    device = flash.kernel_device()
    g = torch.Generator().manual_seed(0)
    q, dout = (torch.randn(1, n_q, d, generator=g).to(device) for _ in range(2))
    k, v = (torch.randn(1, n_k, d, generator=g).to(device) for _ in range(2))
    lse = torch.zeros(1, n_q, device=device)  # any finite values: only what is read matters
    delta = torch.zeros_like(lse)
    n_blocks_q, n_blocks_k = triton.cdiv(n_q, block_q), triton.cdiv(n_k, block_k)
    read = torch.zeros(n_blocks_k, n_blocks_q, dtype=torch.bool)
    blocks = dict(causal=causal, block_q=block_q, block_k=block_k)
    if flash.INTERPRETED:
        attention_backward(q, k, v, dout, lse, delta, kernel, **blocks)
        rows = {0: d, 3: d, 4: 1, 5: 1, 6: d}  # q, dout, lse, delta, dq
        for program, row in flash.checker.rows_read(flash.checker.last_record(), rows):
            read[program[0], row // block_q] = True
        return read
    for r in range(n_blocks_q):
        poisoned = dout.clone()
        poisoned[:, r * block_q : (r + 1) * block_q] = float("nan")
        _, _, dv = attention_backward(q, k, v, poisoned, lse, delta, kernel, **blocks)
        keys = dv[0].isnan().any(dim=-1).cpu()
        for c in range(n_blocks_k):
            read[c, r] = bool(keys[c * block_k : (c + 1) * block_k].any())
    return read


# ---- what lesson 11's tests compare with ------------------------------------------------------


def sdpa_gradients(q, k, v, dout, causal: bool = False):
    """(dq, dk, dv) by torch.autograd through F.scaled_dot_product_attention (grouped heads
    allowed), for the gradient ``dout`` of its output."""
    import torch.nn.functional as F

    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, is_causal=causal, enable_gqa=True)
    # the gradients of sum(out * dout): dout flows into out, to the bit. (grad(out, leaves, dout)
    # says the same but checks dout's shape with sympy, half a second to import per notebook)
    return torch.autograd.grad((out * dout).sum(), leaves)


def forward_by_torch(q, k, v, causal: bool = False):
    """Attention's output and the log-sum-exp of each query's scores, computed by PyTorch: what a
    forward kernel hands the backward pass."""
    import torch.nn.functional as F

    group = q.shape[-3] // k.shape[-3] if q.dim() > 2 else 1
    keys = k.repeat_interleave(group, -3) if group > 1 else k
    scores = (q @ keys.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, -torch.inf)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return out, torch.logsumexp(scores, -1)


def kernel_gradients(kernel, q, k, v, dout, causal=False, block_q=16, block_k=16):
    """(dq, dk, dv) from a backward ``kernel``, given PyTorch's forward pass (so that only the
    backward kernel is tested) and D = rowsum(dO * O)."""
    out, lse = forward_by_torch(q, k, v, causal)
    delta = (dout * out).sum(-1)
    return attention_backward(
        q, k, v, dout, lse, delta, kernel, causal=causal, block_q=block_q, block_k=block_k
    )


def saved_tensor_shapes(fn, *args) -> list[tuple]:
    """The shapes of the tensors autograd keeps for the backward pass of ``fn(*args)``."""
    shapes = []

    def keep(tensor):
        shapes.append(tuple(tensor.shape))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
        fn(*args)
    return shapes


def train_steps(attend, steps: int = 3, seed: int = 0, device=None):
    """Losses and final weights of a few SGD steps of a tiny model: a projection of 16 tokens of
    32 features to queries, keys and values in 2 heads of 16, ``attend(q, k, v)``, a linear
    read-out trained towards a running sum of the input (which needs the past)."""
    import torch.nn.functional as F

    device = flash.kernel_device() if device is None else device
    torch.manual_seed(seed)
    proj, head = torch.nn.Linear(32, 96).to(device), torch.nn.Linear(32, 1).to(device)
    params = [*proj.parameters(), *head.parameters()]
    x = torch.randn(2, 16, 32, device=device)
    y = x.sum(-1, keepdim=True).cumsum(1) / 16
    losses = []
    for _ in range(steps):
        q, k, v = (t.unflatten(-1, (2, 16)).transpose(1, 2) for t in proj(x).chunk(3, -1))
        loss = F.mse_loss(head(attend(q, k, v).transpose(1, 2).flatten(-2)), y)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():  # plain SGD, lr 0.5: torch.optim would import torch._dynamo (1.5 s)
            for p, grad in zip(params, grads):
                p -= 0.5 * grad
        losses.append(loss.item())
    return losses, [p.detach() for p in params]


def _kernel_names(kernels: list) -> str:
    """'the course's flash.attention_kernel', 'your attention_kernel', ... of launched kernels."""
    names = []
    for kernel in kernels:
        fn = getattr(kernel, "fn", kernel)
        module = getattr(fn, "__module__", "")
        mine = module == "__main__" or not module.startswith("attention_ref")
        names.append(f"{'your' if mine else 'the course’s'} {getattr(fn, '__name__', kernel)}")
    return ", ".join(names) or "no kernel"


def _expect_ran(what: str, ran: list, wanted, calls) -> None:
    from attention_ref.testing import fail

    if calls.get("scaled_dot_product_attention"):
        fail(what, "it calls F.scaled_dot_product_attention, which computes attention for it",
             "compute it with your kernels, through flash.attention and "
             "flash_bwd.attention_backward")  # fmt: skip
    if ran != [wanted]:
        fail(what, f"it launched {_kernel_names(ran)}",
             f"it should launch {_kernel_names([wanted])} (the one this notebook defines), once, "
             "through the course's launcher: pass it as the kernel argument")  # fmt: skip


def expect_function_runs_kernels(apply, q, k, v, dout, causal, forward, backward):
    """A test: ``apply(q, k, v, causal)`` (an autograd Function's apply) launches the kernel
    ``forward`` in its forward pass and ``backward`` in its backward pass (the notebook's own),
    through the course's launchers, and never F.scaled_dot_product_attention. The backward pass
    is run as autograd runs it, by the Function's node (``out.grad_fn``), in this thread, where
    the record of PyTorch's calls sees it. Returns the output and (dq, dk, dv)."""
    from attention_ref.testing import fail, record_torch

    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    with flash.checker.launched() as ran:
        out, record = record_torch(apply, *leaves, causal)
    _expect_ran("the forward pass of FlashAttention", ran, forward, record.calls)
    if getattr(out, "grad_fn", None) is None:
        fail("FlashAttention's output", "it has no gradient function",
             "return your forward pass's output from FlashAttention.forward")  # fmt: skip
    with flash.checker.launched() as ran:
        grads, record = record_torch(out.grad_fn.apply, dout)
    _expect_ran("the backward pass of FlashAttention", ran, backward, record.calls)
    return out, tuple(grads[:3])


if flash.UNAVAILABLE is None:
    # the checker and the launchers as they are now are what the tests rely on (tamper.py)
    from attention_ref.testing import tamper

    tamper.remember_library()
