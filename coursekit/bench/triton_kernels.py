"""Lesson 11's Triton kernels in ``make bench``: what the compiler makes of them (any machine), and
their speed against FlashAttention, forward and backward (a CUDA GPU).

Compiling needs no GPU (attention_ref.flash.compiler): every reference kernel is compiled as a GPU
timing run launches it (float16, d = 64, n = 8192: the launch's tt.divisibility attributes
included, attention_ref.flash.launches) for sm_80, sm_90, sm_100 and sm_120, and the table shows
registers per thread, spills, shared memory against each GPU's limit, warps, pipeline stages and
asynchronous copies; then the forward kernel with other num_warps and num_stages, and one launch
too large for some GPUs' shared memory. The builds are kept in the Python environment's cache
(keyed by the kernels' source, the launch, the GPU and Triton's version), so a second run compiles
nothing. Timing needs CUDA: in the interpreter a kernel's time is Python's, not the GPU's.
"""

from __future__ import annotations

from coursekit.bench.report import Config, Table, interleaved_best, progress

KERNELS = (  # (kind of launch, module, name): every reference kernel of lesson 11
    ("softmax", "attention_ref.flash", "softmax_kernel"),
    ("forward", "attention_ref.flash", "attention_kernel"),
    ("forward", "attention_ref.flash", "causal_attention_kernel"),
    ("forward", "attention_ref.flash", "cached_causal_attention_kernel"),
    ("backward", "attention_ref.flash.backward", "attention_backward_kernel"),
)
OPTIONS = ((4, 1), (4, 2), (4, 4), (8, 3))  # (num_warps, num_stages) beside the default (4, 3)


def _flash():
    """attention_ref.flash, or None where Triton is not installed (with the reason)."""
    import attention_ref.flash as flash

    return (None, flash.UNAVAILABLE) if flash.UNAVAILABLE else (flash, None)


def _launch(flash, kind: str, **options):
    """A GPU run's launch of a kernel of ``kind``: the softmax of rows of 1024 float16 numbers, or
    the attention kernels as attention_ref.flash.gpu_run_launch says."""
    import torch

    if kind == "softmax":
        half = flash.launches.Pointer(torch.float16)
        return flash.launches.launch_of((half, half, 1024), {"BLOCK": 1024, **options})
    return flash.gpu_run_launch(kind, **options)


def bench_compiled(cfg: Config) -> Table:
    """Registers, spills and shared memory of the reference kernels as a GPU run launches them,
    for four GPUs; launch options; a launch that does not fit."""
    import importlib
    import os

    os.environ.setdefault("ATTENTION_REF_KEEP_BUILDS", "1")  # kept for the next run
    table = Table(
        "Lesson 11's reference kernels as a GPU run launches them, compiled for an A100 (sm_80), "
        "an H100 (sm_90), a B200 (sm_100) and an RTX 5090 (sm_120), no GPU needed",
        ["kernel", "GPU", "settings", "registers", "spills (B)", "shared (B)", "of limit",
         "warps", "stages", "cp.async", "CPU-s"],
    )  # fmt: skip
    flash, why = _flash()
    if flash is None:
        table.rows.append(["n/a", why or ""])
        return table
    archs = tuple(flash.compiler.ARCHS) if cfg.lessons else ("sm_90",)  # --tiny: one GPU
    kernels = KERNELS if cfg.lessons else KERNELS[1:2]
    for kind, module, name in progress(kernels, "compiling lesson 11's kernels"):
        kernel = getattr(importlib.import_module(module), name)
        table.rows += [
            _row(flash.compiler.compile_launch(kernel, _launch(flash, kind), a)) for a in archs
        ]
    if cfg.lessons:
        table.rows += _option_rows(flash)
        table.rows += _limit_rows(flash)
    _notes(table, flash)
    return table


def _option_rows(flash) -> list[list[str]]:
    """The forward kernel at a GPU run's sizes with other warps and stages, on sm_80 and sm_90."""
    rows = []
    for arch in ("sm_80", "sm_90"):
        for warps, stages in OPTIONS:
            launch = flash.gpu_run_launch("forward", num_warps=warps, num_stages=stages)
            rows.append(_row(flash.compiler.compile_launch(flash.attention_kernel, launch, arch)))
    return rows


def _limit_rows(flash) -> list[list[str]]:
    """float32, d = 128, blocks of 64 and 64: more shared memory than some GPUs give a program."""
    import torch

    big = flash.gpu_run_launch("forward", dtype=torch.float32, d=128, blocks=(64, 64))
    builds = [
        flash.compiler.compile_launch(flash.attention_kernel, big, a) for a in flash.compiler.ARCHS
    ]
    rows = [_row(build) for build in builds]
    for row, build in zip(rows, builds):
        row[6] += "" if build.fits else " over"  # more than the GPU gives: no launch
    return rows


def _notes(table: Table, flash) -> None:
    limits = ", ".join(f"{arch} {limit:,}" for arch, limit in flash.compiler.SHARED_LIMITS.items())
    table.notes += [
        "settings: the launch's dtype and tl.constexpr values (group=1: an integer of 1, which a "
        "launch makes a constant), and num_warps/num_stages where not Triton's 4 and 3; every "
        "pointer and n of the run is 16-byte aligned or divisible by 16 (tt.divisibility=16)",
        "spills: bytes per thread parked in local memory (GPU main memory) because registers ran "
        f"out; shared: bytes of shared memory per program, of each GPU's limit ({limits}): "
        "'over' cannot be launched there (Triton's OutOfResources)",
        "cp.async: asynchronous copies in the PTX, loads into shared memory that overlap the "
        "arithmetic (software pipelining, num_stages deep)",
        "CPU-s: what the compile took when it was made (the compiler in this process and ptxas); "
        f"builds are kept in {flash.compiler.CACHE} and found again by the next run",
    ]


def _row(build) -> list[str]:
    return [
        build.kernel,
        build.arch,
        build.settings,
        str(build.registers),
        str(build.spills),
        f"{build.shared:,}",
        f"{build.shared / build.shared_limit:.0%}",
        str(build.num_warps),
        str(build.num_stages),
        str(build.async_copies),
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

    import attention_ref.flash.backward as backward

    q, k, v, dout, lse, delta = backward_inputs(setting, n)
    leaves = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = F.scaled_dot_product_attention(*leaves)

    def theirs():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            torch.autograd.grad(out, leaves, dout, retain_graph=True)

    def ours():
        backward.attention_backward(
            q, k, v, dout, lse, delta, backward.attention_backward_kernel, block_q=64, block_k=32
        )

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
