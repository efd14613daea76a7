"""Lesson 11's Triton kernels in ``make bench``: what the compiler makes of them (any machine), and
their speed against FlashAttention, forward and backward (a CUDA GPU).

Compiling needs no GPU (attention_ref.flash_compile): every reference kernel is compiled for an
A100 (sm_80) and an H100 (sm_90) at the sizes a GPU run uses and at the tests' sizes, and the table
shows registers per thread, spills and shared memory. The builds are kept in build/triton-builds/
(keyed by the kernels' source, the settings and Triton's version), so a second run compiles
nothing. Timing needs CUDA: in the interpreter a kernel's time is Python's, not the GPU's.
"""

from __future__ import annotations

from coursekit.bench.report import Config, Table, interleaved_best, progress
from coursekit.course.lessons import ROOT

BUILDS = ROOT / "build" / "triton-builds"
KERNELS = (  # (kind, module, name): every reference kernel of lesson 11
    ("softmax", "attention_ref.flash", "softmax_kernel"),
    ("forward", "attention_ref.flash", "attention_kernel"),
    ("forward", "attention_ref.flash", "causal_attention_kernel"),
    ("forward", "attention_ref.flash", "cached_causal_attention_kernel"),
    ("backward", "attention_ref.flash_backward", "attention_backward_kernel"),
)


def _flash():
    """attention_ref.flash, or None where Triton is not installed (with the reason)."""
    import attention_ref.flash as flash

    return (None, flash.UNAVAILABLE) if flash.UNAVAILABLE else (flash, None)


def bench_compiled(cfg: Config) -> Table:
    """Registers, spills and shared memory of the reference kernels for sm_80 and sm_90."""
    import importlib

    table = Table(
        "Lesson 11's reference kernels compiled for an A100 (sm_80) and an H100 (sm_90), no GPU "
        "needed",
        ["kernel", "GPU", "settings", "registers", "spills (B)", "shared (B)", "warps", "CPU-s"],
    )
    flash, why = _flash()
    if flash is None:
        table.rows.append(["n/a", why or ""])
        return table
    kernels = KERNELS if cfg.lessons else KERNELS[:2]  # --tiny: two kernels, the tests' sizes
    sizes = (True, False) if cfg.lessons else (False,)
    for kind, module, name in progress(kernels, "compiling lesson 11's kernels"):
        kernel = getattr(importlib.import_module(module), name)
        for gpu_sizes in sizes if kind != "softmax" else (False,):  # one size: its row
            builds = flash.expect_compiles(
                kernel, name, kind, show=False, cache=BUILDS, gpu_sizes=gpu_sizes
            )
            table.rows += [_row(b) for b in builds]
    table.notes.append(
        "CPU-s: what the compile took when it was made (the compiler in this process and ptxas); "
        f"builds are kept in {BUILDS.relative_to(ROOT)}/ and found again by the next run"
    )
    table.notes.append(
        "spills: bytes per thread parked in local memory (GPU main memory) because registers ran "
        "out; shared: bytes of on-chip shared memory per program (A100: up to 163 KiB, H100: 227)"
    )
    return table


def _row(build) -> list[str]:
    return [
        build.kernel,
        build.arch,
        build.settings,
        str(build.registers),
        str(build.spills),
        f"{build.shared:,}",
        str(build.num_warps),
        f"{build.seconds:.2f}",
    ]


def backward_inputs(setting, n: int):
    """q, k, v, the output's gradient, the forward's log-sum-exp and D = rowsum(dO * O)."""
    import torch

    flash, _ = _flash()
    q, k, v = setting.inputs(n)
    dout = torch.randn_like(q)
    out, lse = flash.attention(q, k, v, flash.attention_kernel, block_q=64, block_k=64)
    return q, k, v, dout, lse, (dout.float() * out.float()).sum(-1)


def backward_times(setting, n: int) -> dict[str, float]:
    """Seconds of one backward pass at size n: lesson 11's kernel against F.sdpa's FlashAttention
    (autograd through its flash backend). CUDA only."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import attention_ref.flash_backward as backward

    q, k, v, dout, lse, delta = backward_inputs(setting, n)
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = F.scaled_dot_product_attention(*leaves)

    def theirs():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            torch.autograd.grad(out, leaves, dout, retain_graph=True)

    def ours():
        backward.attention_backward(q, k, v, dout, lse, delta, block_q=64, block_k=32)

    return interleaved_best(
        {"flash backward": theirs, "Triton backward (lesson 11)": ours},
        setting.cfg.gpu_repeat,
        setting.sync,
        show=False,
    )


def backward_rows(setting, n: int) -> list[list[str]]:
    """Rows for the GPU throughput table: the backward kernel against flash's (TFLOP/s), beside
    the forward row; a row saying why not where the kernels cannot be compiled for this GPU."""
    flash, why = _flash()
    b, h, d = setting.cfg.gpu_shape
    if not setting.cuda or flash is None or flash.INTERPRETED or d not in flash.HEAD_DIMS:
        reason = why or (
            f"head dimension {d}: the kernels take {flash.HEAD_DIMS}"
            if setting.cuda and not flash.INTERPRETED
            else "needs CUDA: interpreted kernels time Python, not a GPU"
        )
        return [["Triton backward (lesson 11)", f"not run ({reason})", "", ""]]
    flops = 10 * b * h * n * n * d  # five matrix products of 2 n^2 d FLOPs per head
    times = backward_times(setting, n)
    ours, theirs = times["Triton backward (lesson 11)"], times["flash backward"]
    return [
        ["Triton backward / flash backward throughput", f"{theirs / ours:.2f}", "", ""],
        ["Triton backward TFLOP/s", f"{flops / ours / 1e12:.1f}", "", ""],
        ["flash backward TFLOP/s", f"{flops / theirs / 1e12:.1f}", "", ""],
    ]
