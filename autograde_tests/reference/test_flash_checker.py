"""The memory checker of lesson 11's interpreted launches (attention_ref.flash.checker): a race
between programs is refused with the line and both program ids; a load or store outside the
tensors is refused before it happens; the record says which blocks each program read; the
checker cannot be switched off by putting Triton's own methods back; and which kernels an
autograd Function ran. Interpreted launches only (a CUDA machine compiles its kernels)."""

from __future__ import annotations

import linecache

import pytest
import torch
import torch.nn.functional as F

import attention_ref.flash as flash
import attention_ref.flash.backward as backward

pytestmark = [
    pytest.mark.skipif(flash.UNAVAILABLE is not None, reason=str(flash.UNAVAILABLE)),
    pytest.mark.skipif(not flash.INTERPRETED, reason="kernels are compiled here, not interpreted"),
]


def _cell(source: str) -> dict:
    """Run ``source`` as a notebook cell (its lines where Triton and the checker read them)."""
    name = f"/tmp/ipykernel_0/{len(linecache.cache)}.py"
    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    namespace = {"__name__": "__main__", "tl": flash.tl, "triton": flash.triton, "flash": flash}
    exec(compile(source, name, "exec"), namespace)
    return namespace


TOTALS = _cell(
    "@triton.jit\n"
    "def racy(x_ptr, total_ptr, n, BLOCK: tl.constexpr):\n"
    "    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    block_sum = tl.sum(tl.load(x_ptr + offsets, mask=offsets < n, other=0.0), 0)\n"
    "    old = tl.load(total_ptr)\n"
    "    tl.store(total_ptr, old + block_sum)\n"
    "\n"
    "@triton.jit\n"
    "def atomic(x_ptr, total_ptr, n, BLOCK: tl.constexpr):\n"
    "    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    block_sum = tl.sum(tl.load(x_ptr + offsets, mask=offsets < n, other=0.0), 0)\n"
    "    tl.atomic_add(total_ptr, block_sum)\n"
    "\n"
    "@triton.jit\n"
    "def unmasked(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
    "    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * 2)\n"
    "\n"
    "@triton.jit\n"
    "def no_other(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
    "    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    x = tl.load(x_ptr + offsets, mask=offsets < n)\n"
    "    tl.store(out_ptr + offsets, x)\n"
    "\n"
    "@triton.jit\n"
    "def stores_past_the_end(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
    "    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)\n"
    "    tl.store(out_ptr + offsets, x)\n"
)


def test_a_load_add_store_race_is_refused_with_the_line_and_both_programs():
    x, total = torch.arange(19.0), torch.zeros(1)
    with pytest.raises(AssertionError) as race:
        flash.launch(TOTALS["racy"], (3,), (x, total, 19), {"BLOCK": 8})
    message = str(race.value)
    assert "A race in racy" in message and "line 6 of its cell (racy)" in message
    assert "program 0 stores to total_ptr[0" in message and "program 1 loads" in message
    assert "tl.atomic_add" in message


def test_atomic_additions_are_no_race():
    x, total = torch.arange(19.0), torch.zeros(1)
    flash.launch(TOTALS["atomic"], (3,), (x, total, 19), {"BLOCK": 8})
    assert total.item() == 171.0


@pytest.mark.parametrize("kernel", ["unmasked", "stores_past_the_end"])
def test_a_load_or_store_past_the_end_is_stopped_before_it_happens(kernel):
    """19 numbers in blocks of 8: the last program's lanes 19 to 23 are outside. Nothing is read
    or written there (the output's bytes after it are untouched), and the process goes on."""
    x, out = torch.arange(19.0), torch.full((24,), -1.0)
    view = out[:19]  # the output the kernel is given: 19 numbers, then 5 that are not its own
    with pytest.raises(AssertionError) as stopped:
        flash.launch(TOTALS[kernel], (3,), (x, view, 19), {"BLOCK": 8})
    message = str(stopped.value)
    assert f"of its cell ({kernel}): program 2 would" in message
    assert "outside" in message and "the first at element 19, past its last element" in message
    assert "Mask the" in message
    assert torch.equal(out[19:], torch.full((5,), -1.0))


def test_a_masked_off_lane_without_other_is_nan_not_zero():
    """On a GPU such a lane holds nothing defined; the interpreter gives 0, the checked launch
    NaN, so that a kernel relying on it shows."""
    x, out = torch.arange(16.0) + 1, torch.zeros(16)
    flash.launch(TOTALS["no_other"], (2,), (x, out, 12), {"BLOCK": 8})
    assert torch.equal(out[:12], x[:12]) and out[12:].isnan().all(), out


def test_the_causal_record_sees_keys_read_above_the_diagonal():
    """A causal kernel that reads every key block (to find each row's maximum first) but the
    values of the diagonal and below only: the record sees the keys, where NaN in the values
    would not."""
    two_pass = _cell(
        "@triton.jit\n"
        "def two_pass(q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, n_q, n_k, group, scale,\n"
        "             D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr):\n"
        "    cols = tl.arange(0, D)\n"
        "    for start in range(0, n_k, BLOCK_K):\n"
        "        keys = start + tl.arange(0, BLOCK_K)\n"
        "        k = tl.load(k_ptr + keys[:, None] * D + cols[None, :], mask=keys[:, None] < n_k)\n"
        "    flash.forward._forward(q_ptr, k_ptr, v_ptr, out_ptr, lse_ptr, n_q, n_k, group,\n"
        "                           scale, D, BLOCK_Q, BLOCK_K, True, False)\n"
    )["two_pass"]
    read = flash.key_blocks_read(two_pass, 48, 48)
    assert read.all(), read
    assert torch.equal(
        flash.key_blocks_read(flash.causal_attention_kernel, 48, 48),
        torch.ones(3, 3, dtype=torch.bool).tril(),
    )


def test_putting_triton_s_methods_back_switches_nothing_off():
    """A notebook that restores the interpreter's own load and store: the next launch puts the
    checker back first, and the race is still refused."""
    from triton.runtime import interpreter

    from attention_ref.flash import checker as flash_checker

    for name, original in flash_checker._STATE["originals"].items():
        setattr(interpreter.InterpreterBuilder, name, original)
    interpreter.interpreter_builder.create_masked_store = lambda *a: flash_checker._STATE[
        "originals"
    ]["create_masked_store"](interpreter.interpreter_builder, *a)
    with pytest.raises(AssertionError, match="A race in racy"):
        flash.launch(TOTALS["racy"], (3,), (torch.arange(19.0), torch.zeros(1), 19), {"BLOCK": 8})
    assert "create_masked_store" not in vars(interpreter.interpreter_builder)


def test_arguments_that_share_memory_stay_shared():
    """The same tensor passed twice is one tensor in the checked copy too."""
    x = torch.arange(16.0)
    flash.launch(TOTALS["unmasked"], (2,), (x, x, 16), {"BLOCK": 8})
    assert torch.equal(x, torch.arange(16.0) * 2)


def test_the_autograd_function_s_kernels_are_the_ones_it_ran():
    g = torch.Generator().manual_seed(3)
    q, k, v, dout = (torch.randn(1, 2, 20, 16, generator=g) for _ in range(4))
    out, grads = backward.expect_function_runs_kernels(
        backward.FlashAttention.apply, q, k, v, dout, True,
        flash.causal_attention_kernel, backward.attention_backward_kernel,
    )  # fmt: skip
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    for mine, want in zip(grads, backward.sdpa_gradients(q, k, v, dout, True), strict=True):
        torch.testing.assert_close(mine, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(AssertionError, match="launched the course’s causal_attention_kernel"):
        backward.expect_function_runs_kernels(
            backward.FlashAttention.apply, q, k, v, dout, True,
            TOTALS["atomic"], backward.attention_backward_kernel,
        )  # fmt: skip


class _ThroughSDPA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        ctx.save_for_backward(q, k, v)
        ctx.causal = causal
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    @staticmethod
    def backward(ctx, dout):
        leaves = [x.detach().requires_grad_() for x in ctx.saved_tensors]
        with torch.enable_grad():
            out = F.scaled_dot_product_attention(*leaves, is_causal=ctx.causal)
        return (*torch.autograd.grad(out, leaves, dout), None)


def test_an_autograd_function_through_pytorch_s_attention_is_refused():
    q, k, v, dout = (torch.randn(1, 20, 16) for _ in range(4))
    with pytest.raises(AssertionError, match="calls F.scaled_dot_product_attention"):
        backward.expect_function_runs_kernels(
            _ThroughSDPA.apply, q, k, v, dout, False,
            flash.attention_kernel, backward.attention_backward_kernel,
        )  # fmt: skip
