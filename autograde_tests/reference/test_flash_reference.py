"""Lesson 11's Triton kernels (attention_ref.flash, attention_ref.flash.backward) against
F.scaled_dot_product_attention, torch.logsumexp and torch.autograd: shapes x block sizes x dtypes,
causal and not, grouped heads, lengths that no block size divides; every kernel compiled as a GPU
launches it, for sm_80, sm_90, sm_100 and sm_120, by Triton's own compiler (no GPU needed:
attention_ref.flash.compiler), next to kernels that break each rule of the compiled subset and are
refused, and one too large for a GPU's shared memory. The memory checker of the interpreted
launches (attention_ref.flash.checker) is in test_flash_checker.py.

On a machine without a CUDA GPU the kernels run in Triton's interpreter on the CPU (the module sets
TRITON_INTERPRET=1 before it imports Triton); on a GPU machine they are compiled and run there.
Where Triton is not installed (it has wheels for Linux only) every test here is skipped, with the
module's reason. Inputs stay small: the interpreter runs each program one after the other."""

from __future__ import annotations

import linecache
import math
import re
import tempfile

import pytest
import torch
import torch.nn.functional as F

import attention_ref.flash as flash
import attention_ref.flash.backward as backward

pytestmark = pytest.mark.skipif(flash.UNAVAILABLE is not None, reason=str(flash.UNAVAILABLE))
KERNEL = backward.attention_backward_kernel

DEVICE = flash.kernel_device()
# Compiled kernels multiply float32 blocks in IEEE float32, not TF32 (attention_ref.flash.runtime),
# but with fused multiply-adds, a fast exp and atomic additions in any order: on an H200 their
# largest errors against float64 were 7e-7 for scores of a few units and 9e-6 for scores of +-30,
# the size of F.scaled_dot_product_attention's own in float32; one gradient (d = 64) missed 1e-5.
FLOAT32 = dict(rtol=1e-4, atol=1e-4) if DEVICE.type == "cuda" else dict(rtol=1e-5, atol=1e-5)
TOL = {torch.float32: FLOAT32, torch.float16: dict(rtol=2e-3, atol=2e-3)}
SHAPES = [  # (batch, n_q, n_k, d)
    ((1,), 16, 16, 16),
    ((2, 3), 37, 37, 32),  # no block size divides n
    ((2,), 5, 50, 16),  # fewer queries than keys
    ((1, 2), 64, 24, 64),
]


def _inputs(batch, n_q, n_k, d, dtype=torch.float32, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch, n_q, d, generator=g) * scale
    k, v = (torch.randn(*batch, n_k, d, generator=g) for _ in range(2))
    return tuple(x.to(DEVICE, dtype) for x in (q, k, v))


def _lse(q, k, causal=False):
    scores = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        allowed = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~allowed, -torch.inf)
    return torch.logsumexp(scores, dim=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("cols", [1, 5, 64, 300])
def test_softmax_kernel_matches_torch_softmax(dtype, cols):
    g = torch.Generator().manual_seed(cols)
    x = (torch.randn(3, 4, cols, generator=g) * 20).to(DEVICE, dtype)
    x[0, 0, 0] = 1e4 if dtype == torch.float32 else 6e4  # no overflow
    got = flash.softmax(x, flash.softmax_kernel)
    assert got.shape == x.shape and got.dtype == dtype and got.device == x.device
    torch.testing.assert_close(got, torch.softmax(x.float(), dim=-1).to(dtype), **TOL[dtype])


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("blocks", [(16, 16), (16, 32), (32, 16)], ids=str)
def test_kernel_matches_sdpa_and_logsumexp(shape, causal, blocks):
    q, k, v = _inputs(*shape, scale=3.0)  # scores of a few units: the running maximum moves
    kernel = flash.causal_attention_kernel if causal else flash.attention_kernel
    out, lse = flash.attention(q, k, v, kernel, block_q=blocks[0], block_k=blocks[1])
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert out.shape == want.shape and out.dtype == q.dtype and out.device == q.device
    torch.testing.assert_close(out, want, **TOL[torch.float32])
    assert lse.shape == q.shape[:-1] and lse.dtype == torch.float32
    torch.testing.assert_close(lse.double(), _lse(q, k, causal), **TOL[torch.float32])


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_float16_inputs_give_float16_outputs(causal):
    q, k, v = _inputs((2,), 40, 40, 32, dtype=torch.float16, seed=1)
    kernel = flash.causal_attention_kernel if causal else flash.attention_kernel
    out, _ = flash.attention(q, k, v, kernel)
    assert out.dtype == torch.float16
    want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    torch.testing.assert_close(out.float(), want, **TOL[torch.float16])


def test_huge_scores_do_not_overflow():
    q, k, v = _inputs((1,), 32, 48, 16, seed=2, scale=300.0)  # scores in the thousands
    out, lse = flash.attention(q, k, v, flash.attention_kernel)
    # a float32 score of 3000 is only good to 2e-4, so are the weights: against float64, the
    # kernel was 1e-4 off on an H200 and F.scaled_dot_product_attention in float32 2e-4
    want = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    torch.testing.assert_close(out.double(), want, rtol=1e-3, atol=1e-3)
    assert torch.isfinite(lse).all()
    torch.testing.assert_close(lse.double(), _lse(q, k), rtol=1e-5, atol=1e-3)


def test_causal_kernel_skips_the_blocks_above_the_diagonal():
    read = flash.key_blocks_read(flash.causal_attention_kernel, 64, 64)
    assert torch.equal(read, torch.ones(4, 4, dtype=torch.bool).tril()), read
    assert flash.key_blocks_read(flash.attention_kernel, 64, 64).all()
    wide = flash.key_blocks_read(flash.causal_attention_kernel, 64, 64, block_q=32, block_k=16)
    assert wide.tolist() == [[True, True, False, False], [True, True, True, True]]


def test_bad_inputs_name_their_shapes():
    q, k, v = _inputs((2,), 8, 8, 16)
    with pytest.raises(ValueError, match=r"\(2, 8, 16\)"):
        flash.attention(q, k, v[:, :4], flash.attention_kernel)
    with pytest.raises(ValueError, match="head dimension 12"):
        flash.attention(q[..., :12], k[..., :12], v[..., :12], flash.attention_kernel)


def test_the_module_says_where_kernels_run():
    assert flash.describe().startswith(f"Triton {flash.triton.__version__}")
    assert flash.INTERPRETED == (DEVICE.type == "cpu")


# ---- grouped heads, the causal mask after a cache ----------------------------------------------


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("heads", [(4, 2), (4, 1), (6, 3)], ids=str)
def test_grouped_query_heads_read_their_key_value_head(heads, causal):
    g = torch.Generator().manual_seed(sum(heads))
    q = torch.randn(2, heads[0], 37, 16, generator=g).to(DEVICE)
    k, v = (torch.randn(2, heads[1], 37, 16, generator=g).to(DEVICE) for _ in range(2))
    kernel = flash.causal_attention_kernel if causal else flash.attention_kernel
    out, _ = flash.attention(q, k, v, kernel)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    torch.testing.assert_close(out, want, **TOL[torch.float32])


@pytest.mark.parametrize("sizes", [(16, 64), (37, 50), (64, 64), (5, 40)], ids=str)
def test_cached_causal_kernel_aligns_the_mask_to_the_bottom_right(sizes):
    n_q, n_k = sizes
    q, k, v = _inputs((2,), n_q, n_k, 32, seed=n_q, scale=3.0)
    out, lse = flash.attention(q, k, v, flash.cached_causal_attention_kernel)
    allowed = torch.ones(n_q, n_k, dtype=torch.bool, device=DEVICE).tril(diagonal=n_k - n_q)
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, attn_mask=allowed), **TOL[torch.float32]
    )
    read = flash.key_blocks_read(flash.cached_causal_attention_kernel, 16, 64)
    assert read.tolist() == [[True, True, True, True]], read
    read = flash.key_blocks_read(flash.cached_causal_attention_kernel, 32, 64)
    assert read.tolist() == [[True, True, True, False], [True, True, True, True]], read


def test_bad_grouped_heads_name_their_shapes():
    q, k, v = _inputs((2, 4), 8, 8, 16)
    with pytest.raises(ValueError, match=r"\(2, 4, 8, 16\).*\(2, 3, 8, 16\)"):
        flash.attention(q, k[:, :3], v[:, :3], flash.attention_kernel)


# ---- the backward pass --------------------------------------------------------------------------


def _grads(q, k, v, dout, causal):
    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    out = F.scaled_dot_product_attention(*leaves, is_causal=causal, enable_gqa=True)
    return torch.autograd.grad(out, leaves, dout)


@pytest.mark.parametrize(
    "shape",
    [((1, 1), 16, 16, 16, (16, 16), True), ((2, 2), 37, 37, 32, (16, 16), False),
     ((2, 2), 37, 37, 32, (16, 16), True), ((2, 3), 20, 50, 16, (16, 32), False),
     ((1, 2), 64, 64, 64, (32, 16), True), ((2, 4, 2), 45, 45, 16, (16, 16), False),
     ((2, 4, 2), 33, 33, 16, (16, 32), True)],
    ids=str,
)  # fmt: skip
def test_backward_kernel_matches_autograd(shape):
    """(batch, query heads[, key/value heads]), n_q, n_k, d, (block_q, block_k), causal."""
    heads, n_q, n_k, d, (block_q, block_k), causal = shape
    g = torch.Generator().manual_seed(n_q + d)
    q = torch.randn(*heads[:2], n_q, d, generator=g).to(DEVICE) * 2
    kv_heads = (*heads[:1], heads[-1])
    k, v = (torch.randn(*kv_heads, n_k, d, generator=g).to(DEVICE) for _ in range(2))
    dout = torch.randn(*q.shape, generator=g).to(DEVICE)
    kernel = flash.causal_attention_kernel if causal else flash.attention_kernel
    out, lse = flash.attention(q, k, v, kernel)
    delta = (dout * out).sum(-1)
    got = backward.attention_backward(
        q, k, v, dout, lse, delta, backward.attention_backward_kernel, causal=causal,
        block_q=block_q, block_k=block_k,
    )  # fmt: skip
    for name, mine, want in zip("qkv", got, _grads(q, k, v, dout, causal), strict=True):
        assert mine.shape == want.shape and mine.dtype == want.dtype, name
        torch.testing.assert_close(mine, want, **TOL[torch.float32], msg=f"d{name}")


def test_backward_kernel_in_float16():
    q, k, v = _inputs((2,), 40, 40, 32, dtype=torch.float16, seed=3)
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(4)).to(DEVICE, q.dtype)
    out, lse = flash.attention(q, k, v, flash.attention_kernel)
    delta = (dout.float() * out.float()).sum(-1)
    got = backward.attention_backward(q, k, v, dout, lse, delta, backward.attention_backward_kernel)
    want = _grads(q.float(), k.float(), v.float(), dout.float(), False)
    for mine, ref in zip(got, want, strict=True):
        assert mine.dtype == torch.float16
        torch.testing.assert_close(mine.float(), ref, rtol=1e-2, atol=1e-2)


def test_causal_backward_skips_the_blocks_above_the_diagonal():
    read = backward.query_blocks_read(backward.attention_backward_kernel, 64, 64)
    assert torch.equal(read, torch.ones(4, 4, dtype=torch.bool).triu()), read
    assert backward.query_blocks_read(
        backward.attention_backward_kernel, 64, 64, causal=False
    ).all()


def test_bad_backward_inputs_name_their_shapes():
    q, k, v = _inputs((2,), 8, 8, 16)
    with pytest.raises(ValueError, match=r"delta has shape \(2, 16\)"):
        backward.attention_backward(
            q, k, v, q, q[..., 0], q[:, 0], backward.attention_backward_kernel
        )


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_autograd_function_gives_autograd_s_gradients(causal):
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 4, 24, 16, generator=g).to(DEVICE).requires_grad_()
    k, v = (torch.randn(2, 2, 24, 16, generator=g).to(DEVICE).requires_grad_() for _ in range(2))
    out = backward.flash_attention(q, k, v, causal)
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True),
        **TOL[torch.float32],
    )  # fmt: skip
    dout = torch.randn(out.shape, generator=g).to(DEVICE)
    got = torch.autograd.grad(out, (q, k, v), dout)
    for mine, want in zip(got, _grads(q, k, v, dout, causal), strict=True):
        torch.testing.assert_close(mine, want, **TOL[torch.float32])


def test_training_steps_with_the_kernels_match_pytorch_s_attention():
    """A few SGD steps of a small self-attention model, once through the kernels and once through
    F.scaled_dot_product_attention: the same losses and the same weights after."""
    mine = backward.train_steps(lambda q, k, v: backward.flash_attention(q, k, v, True), 2)
    want = backward.train_steps(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), 2
    )
    assert mine[0] == pytest.approx(want[0], rel=1e-4)
    for a, b in zip(mine[1], want[1], strict=True):
        torch.testing.assert_close(a, b, **TOL[torch.float32])


def test_the_autograd_function_keeps_nothing_of_n_by_n():
    q, k, v = (x.requires_grad_() for x in _inputs((1, 2), 24, 24, 16))
    shapes = backward.saved_tensor_shapes(backward.flash_attention, q, k, v, True)
    assert shapes and not [s for s in shapes if s[-2:] == (24, 24)], shapes
    eager = backward.saved_tensor_shapes(
        lambda *a: torch.softmax(a[0] @ a[1].transpose(-1, -2), -1) @ a[2], q, k, v
    )
    assert (1, 2, 24, 24) in eager  # what the check is there to catch


# ---- compiled for a GPU, on any machine ---------------------------------------------------------

REFERENCE_KERNELS = [
    ("softmax_kernel", flash, None),
    ("attention_kernel", flash, "forward"),
    ("causal_attention_kernel", flash, "forward"),
    ("cached_causal_attention_kernel", flash, "forward"),
    ("attention_backward_kernel", backward, "backward"),
]


def _launch_once(name: str) -> None:
    """One small launch of a reference kernel, so that the compile check has a launch to build."""
    q, k, v = _inputs((2,), 40, 40, 16)
    if name == "softmax_kernel":
        flash.softmax(q, flash.softmax_kernel)
    elif name == "attention_backward_kernel":
        out, lse = flash.attention(q, k, v, flash.attention_kernel)
        backward.attention_backward(
            q, k, v, q, lse, (q * out).sum(-1), backward.attention_backward_kernel
        )
    else:
        flash.attention(q, k, v, getattr(flash, name))


@pytest.mark.parametrize(("name", "module", "run"), REFERENCE_KERNELS, ids=lambda x: str(x))
def test_reference_kernels_compile_as_launched_for_four_gpus(name, module, run):
    """As the launch above specialized it and, for the timed kernels, as a GPU run launches them
    (float16, d = 64, blocks of 64): built for sm_80, sm_90, sm_100 and sm_120, each within its
    GPU's shared memory, with the launch's 16-byte divisibility noted and its loads pipelined."""
    _launch_once(name)
    builds = flash.expect_compiles(getattr(module, name), name, gpu_run=run, show=False)
    archs = ["sm_80", "sm_90", "sm_100", "sm_120"]
    assert [b.arch for b in builds] == archs
    for build in builds:
        assert build.registers > 0 and build.ptx_lines > 100 and build.fits, build
        assert "Used" in build.ptxas and build.divisibility > 0, build
    if run:  # the GPU run: every pointer and n aligned, and the loop's loads pipelined
        assert all(b.async_copies > 0 and b.num_stages == 3 for b in builds), builds
        assert all(b.settings.startswith("fp16") and "D=64" in b.settings for b in builds)


def test_launch_specializations_are_what_triton_s_jit_computes():
    """A launch notes dtypes, constants and what Triton specializes: an integer of 1 becomes a
    constant, a multiple of 16 and a 16-byte aligned pointer get tt.divisibility=16."""
    from attention_ref.flash import launches as flash_launches

    x = torch.zeros(64)
    launch = flash_launches.launch_of((x, x[1:], 1, 32, 33, 0.5), {"BLOCK": 16})
    jit_args = launch.args
    assert jit_args[0] == flash_launches.Pointer(torch.float32, True)
    assert jit_args[1] == flash_launches.Pointer(torch.float32, False)  # 4 bytes in
    assert jit_args[2:5] == (1, 16, 17) and jit_args[5] == 1.5
    with flash.compiler._compiler_view():
        jit = flash.compiler._Converter()(_spec_kernel(flash.tl, flash.triton))
        signature, constexprs, attrs, options = flash_launches.specialize(jit, launch, 90)
    assert signature["a_ptr"] == "*fp32" and signature["one"] == "constexpr"
    noted = [
        jit.arg_names[i] for (i,), values in attrs.items() if ["tt.divisibility", 16] in values
    ]
    assert noted == ["a_ptr", "n"]
    assert options.num_warps == 4 and constexprs[(2,)] == 1 and constexprs[(6,)] == 16


def _spec_kernel(tl, triton):
    @triton.jit
    def spec(a_ptr, b_ptr, one, n, m, scale, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        tl.store(a_ptr + i, tl.load(b_ptr + i * one, mask=i < n + m) * scale)

    return spec


@pytest.mark.parametrize("name", ["attention_kernel", "causal_attention_kernel"])
def test_the_front_end_of_sm_100_and_sm_120_is_sm_90_s(name):
    """The compile check runs the front end once for the three (FRONT_END_OF): the IR it makes
    for each is the same, to the character."""
    compiler = flash.compiler
    launch = flash.gpu_run_launch("forward")
    converter = compiler._Converter()
    with compiler._compiler_view():
        jit = converter(getattr(flash, name))
        irs = {
            arch: compiler._ttir(jit, launch, arch, converter)
            for arch in ("sm_90", "sm_100", "sm_120")
        }
    assert irs["sm_90"] == irs["sm_100"] == irs["sm_120"]
    assert {compiler.FRONT_END_OF[arch] for arch in compiler.ARCHS} == {"sm_80", "sm_90"}


def test_a_kernel_too_large_for_a_gpu_s_shared_memory_does_not_pass():
    """float32, d = 128, blocks of 64 and 64, three stages: it compiles for an A100 and needs
    more shared memory than a program may have there, so the check fails; one stage fits."""
    big = flash.gpu_run_launch("forward", dtype=torch.float32, d=128, blocks=(64, 64))
    build = flash.compiler.compile_launch(flash.attention_kernel, big, "sm_80")
    assert build.shared > flash.compiler.SHARED_LIMITS["sm_80"] == 166_912 and not build.fits
    with pytest.raises(AssertionError, match=r"more than the 166,912 .*could not be launched"):
        flash.compiler.expect_compiles(
            flash.attention_kernel, "attention_kernel", launches=[big], archs=("sm_80",), show=False
        )
    small = flash.gpu_run_launch(
        "forward", dtype=torch.float32, d=128, blocks=(64, 64), num_stages=1
    )
    assert flash.compiler.compile_launch(flash.attention_kernel, small, "sm_80").fits


def test_more_stages_take_more_shared_memory_and_pipeline_more_loads():
    builds = [
        flash.compiler.compile_launch(
            flash.attention_kernel, flash.gpu_run_launch("forward", num_stages=stages), "sm_90"
        )
        for stages in (1, 2, 3)
    ]
    assert builds[0].async_copies == 0 < builds[1].async_copies < builds[2].async_copies
    assert builds[0].shared < builds[1].shared < builds[2].shared


def _rule_breakers(tl, triton):
    """Kernels that each break one rule of the compiled subset, and what the compiler says."""
    import numpy as np

    @triton.jit
    def uses_break(x_ptr, n, BLOCK: tl.constexpr):
        for start in range(0, n, BLOCK):
            if start > 16:
                break
            tl.store(x_ptr + start + tl.arange(0, BLOCK), 1.0)

    @triton.jit
    def uses_continue(x_ptr, n, BLOCK: tl.constexpr):
        for start in range(0, n, BLOCK):
            if start > 16:
                continue
            tl.store(x_ptr + start + tl.arange(0, BLOCK), 1.0)

    @triton.jit
    def uses_raise(x_ptr, n, BLOCK: tl.constexpr):
        if n > 1000:
            raise ValueError("too long")
        tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)

    @triton.jit
    def calls_numpy(x_ptr, n, BLOCK: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, BLOCK))
        tl.store(x_ptr + tl.arange(0, BLOCK), np.exp(x))

    @triton.jit
    def uses_print(x_ptr, n, BLOCK: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, BLOCK))
        print(x)
        tl.store(x_ptr + tl.arange(0, BLOCK), x)

    return {
        "break": (uses_break, "unsupported AST node type: Break"),
        "continue": (uses_continue, "unsupported AST node type: Continue"),
        "raise": (uses_raise, "unsupported AST node type: Raise"),
        "numpy on a block": (calls_numpy, "Unsupported function referenced"),
        "print": (uses_print, "is not string"),
    }


@pytest.mark.parametrize("rule", ["break", "continue", "raise", "numpy on a block", "print"])
def test_the_compiler_refuses_what_the_interpreter_runs(rule):
    """Each rule the lesson states is the compiler's: a kernel that breaks it runs in the
    interpreter (where kernels are interpreted) and the compiler refuses it, saying where."""
    kernel, says = _rule_breakers(flash.tl, flash.triton)[rule]
    if flash.INTERPRETED:
        x = torch.ones(64, device=DEVICE)
        kernel[(1,)](x, 64, BLOCK=16)
    launch = flash.launches.launch_of((torch.ones(64), 64), {"BLOCK": 16})
    with pytest.raises(AssertionError) as refused:
        flash.compiler.expect_compiles(kernel, kernel.fn.__name__, launches=[launch])
    assert says in str(refused.value)
    assert "sm_80 (A100)" in str(refused.value)
    if rule not in ("numpy on a block",):  # no line: refused while resolving names
        assert re.search(r"at line \d+ of \S+ \(" + kernel.fn.__name__, str(refused.value))


def test_device_print_is_the_compiled_print(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    @flash.triton.jit
    def prints(x_ptr, n, BLOCK: flash.tl.constexpr):
        x = flash.tl.load(x_ptr + flash.tl.arange(0, BLOCK))
        flash.tl.device_print("x", x)

    launch = flash.launches.launch_of((torch.ones(16), 16), {"BLOCK": 16})
    (build,) = flash.compiler.expect_compiles(
        prints, "prints", launches=[launch], archs=("sm_90",), show=False, cache=None
    )
    assert build.registers > 0
    assert list(tmp_path.iterdir()) == [], "the compiler's folder is removed after the compile"


def test_compiling_leaves_the_interpreter_as_it_was():
    """The compile check swaps triton.language to its compiled form and back."""
    before = flash.softmax(torch.arange(6.0, device=DEVICE).reshape(2, 3), flash.softmax_kernel)
    flash.expect_compiles(flash.softmax_kernel, "softmax_kernel", show=False)
    after = flash.softmax(torch.arange(6.0, device=DEVICE).reshape(2, 3), flash.softmax_kernel)
    torch.testing.assert_close(before, after)


PROBES = [(0, 50, False, 0), (16, 48, False, 0), (0, 50, True, 20), (0, 1, True, 0)]


@pytest.mark.parametrize(("lo", "hi", "causal", "offset"), PROBES)
def test_attend_blocks_probe_runs_a_helper_on_its_own(lo, hi, causal, offset):
    g = torch.Generator().manual_seed(lo + hi)
    q = torch.randn(10, 16, generator=g).to(DEVICE) * 3
    k, v = (torch.randn(50, 16, generator=g).to(DEVICE) for _ in range(2))
    acc, l_i, m_i = flash.attend_blocks_probe(
        flash.attend_blocks, q, k, v, lo, hi, causal=causal, offset=offset
    )
    keys = torch.arange(50, device=DEVICE)[None, :]
    allowed = (keys >= lo) & (keys < -(-hi // 16) * 16)  # whole blocks of 16, from lo below hi
    if causal:
        allowed = allowed & (keys <= torch.arange(10, device=DEVICE)[:, None] + offset)
    scores = ((q @ k.T) / 4).masked_fill(~allowed, -torch.inf)
    torch.testing.assert_close(m_i, scores.max(-1).values, **TOL[torch.float32])
    torch.testing.assert_close(
        acc / l_i[:, None], torch.softmax(scores, -1) @ v, **TOL[torch.float32]
    )


def test_a_gpu_run_launch_is_the_timing_cell_s():
    forward, back = flash.gpu_run_launch("forward"), flash.gpu_run_launch("backward")
    assert dict(forward.constants) == {"D": 64, "BLOCK_Q": 64, "BLOCK_K": 64}
    assert dict(back.constants) == {"D": 64, "BLOCK_Q": 64, "BLOCK_K": 32, "CAUSAL": False}
    assert forward.args[:4] == (flash.launches.Pointer(torch.float16),) * 4
    assert forward.args[5:8] == (16, 16, 1)  # n = 8192, a multiple of 16; one key/value head each


def _run_as_a_notebook_cell(source: str, namespace: dict) -> None:
    """Run ``source`` as IPython runs a cell: its lines kept in linecache under the cell's name,
    where a compiling ``@triton.jit`` reads a kernel's source (the interpreter needs none)."""
    name = f"<notebook cell {len(linecache.cache)}>"
    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    exec(compile(source, name, "exec"), namespace)


def test_a_helper_taken_from_the_library_is_not_the_notebook_s_own():
    namespace = {"__name__": "__main__", "flash": flash, "tl": flash.tl, "triton": flash.triton}
    _run_as_a_notebook_cell(
        "@triton.jit\n"
        "def kernel(x_ptr, BLOCK: tl.constexpr):\n"
        "    flash.attend_blocks(0, 0, 0, 0, x_ptr, x_ptr, 0, 0, 0, 0, 1.0, BLOCK, BLOCK, False)\n",
        namespace,
    )
    with pytest.raises(AssertionError, match="from the reference library"):
        flash.expect_own_kernel(namespace["kernel"], "kernel")


@pytest.mark.skipif(not flash.INTERPRETED, reason="kernels are compiled here, not interpreted")
def test_the_interpreter_swaps_the_language_once_a_launch_and_puts_it_back():
    """attention_ref.flash.interpreter: the same numbers to the bit as Triton's own interpreter
    (which also checks integer overflow, for an assertion it then drops), and after a launch
    triton.language and the interpreter's options are as they were before."""
    from triton.runtime import interpreter

    from attention_ref.flash import compiler as flash_compile
    from attention_ref.flash import interpreter as flash_interpreter

    q, k, v = _inputs((2,), 37, 37, 16, seed=8, scale=3.0)
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(9))

    def run():
        out, lse = flash.attention(q, k, v, flash.causal_attention_kernel)
        grads = backward.attention_backward(
            q,
            k,
            v,
            dout,
            lse,
            (dout * out).sum(-1),
            backward.attention_backward_kernel,
            causal=True,
        )
        return out, lse, *grads

    assert flash_interpreter._STATE["installed"]
    options = interpreter.interpreter_builder.options
    patched = run()
    assert interpreter.interpreter_builder.options is options
    changed = [
        key
        for key, value in flash_compile._PRISTINE.items()
        if vars(key[0]).get(key[1], flash_compile._ABSENT) is not value
    ]
    assert not changed, f"left swapped after a launch: {changed[:5]}"
    flash_interpreter.uninstall()
    try:
        as_triton_runs_them = run()
    finally:
        flash_interpreter._restore_language()
        flash_interpreter.install()
    for mine, theirs in zip(patched, as_triton_runs_them, strict=True):
        assert torch.equal(mine, theirs)
