"""Tiled PyTorch attention against F.scaled_dot_product_attention on a GPU, and lesson 11's
Triton kernels: forward and backward against FlashAttention's (coursekit.bench.triton_kernels).

Runs on any device (the smoke test runs it on the CPU with toy sizes); peak memory is only
measured on CUDA. Where CUDA is missing, :func:`bench_gpu` says so in a one-row table, and adds
what needs no GPU: lesson 11's kernels compiled for an A100 and an H100.
"""

from __future__ import annotations

from dataclasses import dataclass

from coursekit.bench.attention import sdpa_backends, sdpa_with
from coursekit.bench.report import Config, Table, fmt_bytes, interleaved_best, progress, verdict
from coursekit.bench.triton_kernels import backward_rows, bench_compiled

BUILT_IN = "F.sdpa (its own choice)"
FLASH = "F.sdpa [flash_attention]"
TRITON = "Triton kernel (lesson 11)"


@dataclass
class _Setting:
    """Where and how the GPU section measures."""

    cfg: Config
    device: object  # torch.device
    dtype: object  # torch.dtype: float16 on CUDA, float32 elsewhere
    generator: object  # torch.Generator on the device

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def sync(self):
        import torch

        return torch.cuda.synchronize if self.cuda else None

    def inputs(self, n: int):
        import torch

        b, h, d = self.cfg.gpu_shape
        return tuple(
            torch.randn(b, h, n, d, generator=self.generator, device=self.device, dtype=self.dtype)
            for _ in range(3)
        )

    def tiled(self, block: int, half_products: bool | None = None):
        import attention_ref.pt as rpt

        half = self.cuda if half_products is None else half_products
        return lambda q, k, v: rpt.tiled_attention(q, k, v, block_size=block, half_products=half)


def _no_gpu() -> list[Table]:
    return [
        Table(
            "GPU: tiled PyTorch attention vs F.scaled_dot_product_attention, n = 1k ... 16k",
            ["status"],
            rows=[["no GPU on this machine (torch.cuda.is_available() is False)"]],
        )
    ]


def _best_block(s: _Setting) -> tuple[int, dict]:
    """The tiled attention's block size: the fastest of a few at the throughput size."""
    import torch

    q, k, v = s.inputs(s.cfg.gpu_throughput_n)
    tiled = {bs: s.tiled(bs) for bs in s.cfg.gpu_block_sizes}
    candidates = {bs: (lambda bs=bs: tiled[bs](q, k, v)) for bs in tiled}
    with torch.inference_mode():
        times = interleaved_best(candidates, s.cfg.gpu_repeat, s.sync, show=False)
    return min(times, key=times.get), times


def _implementations(s: _Setting, block: int) -> dict:
    import torch.nn.functional as F

    from attention_ref.pt import sdpa_tuned

    found = {BUILT_IN: F.scaled_dot_product_attention}
    for label, backend in sdpa_backends():
        found[f"F.sdpa [{label}]"] = sdpa_with(backend)
    found[f"tiled PyTorch (block {block})"] = s.tiled(block)
    if s.cuda:  # the exact variant: every product in float32 from float32 copies of the inputs
        found[f"tiled PyTorch (block {block}), float32 products"] = s.tiled(
            block, half_products=False
        )
    found["reference PyTorch (lesson 2)"] = sdpa_tuned.scaled_dot_product_attention
    triton_kernel = _triton_attention(s)
    if triton_kernel is not None:
        found[TRITON] = triton_kernel
    return found


def _triton_attention(s: _Setting):
    """Lesson 11's reference kernel where Triton compiles it for this GPU; None elsewhere (in the
    interpreter it would time Python, not a kernel)."""
    if not s.cuda:
        return None
    import attention_ref.flash as flash

    if flash.UNAVAILABLE or flash.INTERPRETED or s.cfg.gpu_shape[2] not in flash.HEAD_DIMS:
        return None
    kernel = flash.attention_kernel
    return lambda q, k, v: flash.attention(q, k, v, kernel, block_q=64, block_k=64)[0]


def _runnable_at(s: _Setting, implementations: dict, q, k, v, times: dict, n: int) -> dict:
    """The implementations that run and agree with the built-in on these inputs, as zero-argument
    functions; the others get a reason in ``times``."""
    import torch
    import torch.nn.functional as F

    want = F.scaled_dot_product_attention(q, k, v)
    runnable = {}
    for label, fn in implementations.items():
        try:
            with torch.inference_mode():
                got = fn(q, k, v)
            torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)
            runnable[label] = lambda fn=fn: fn(q, k, v)
        except torch.cuda.OutOfMemoryError:
            times[label][n] = "out of memory"
        except AssertionError:
            times[label][n] = "wrong result"
        except RuntimeError as error:  # e.g. a backend that does not support these inputs
            times[label][n] = f"n/a: {str(error).splitlines()[0][:30]}"
        finally:
            if s.cuda:
                torch.cuda.empty_cache()
    return runnable


def _time_sizes(s: _Setting, implementations: dict) -> dict[str, dict[int, float | str]]:
    """{label: {n: seconds, or why it did not run}} over the configured sizes."""
    import torch

    times: dict[str, dict] = {label: {} for label in implementations}
    for n in progress(s.cfg.gpu_sizes, "GPU sizes"):
        q, k, v = s.inputs(n)
        runnable = _runnable_at(s, implementations, q, k, v, times, n)
        with torch.inference_mode():
            for label, seconds in interleaved_best(
                runnable, s.cfg.gpu_repeat, s.sync, show=False
            ).items():
                times[label][n] = seconds
        del q, k, v
    return times


def _timing_table(s: _Setting, times: dict, block_times: dict) -> Table:
    import torch

    b, h, d = s.cfg.gpu_shape
    name = torch.cuda.get_device_name(s.device) if s.cuda else str(s.device)
    table = Table(
        f"GPU: {name}, torch {torch.__version__}, {str(s.dtype)[6:]}, B={b} h={h} d={d} "
        f"(ms, best of {s.cfg.gpu_repeat})",
        ["implementation"] + [f"n={n:,}" for n in s.cfg.gpu_sizes],
    )
    for label, by_n in times.items():
        table.rows.append(
            [label]
            + [
                f"{by_n[n] * 1e3:.2f}" if isinstance(by_n.get(n), float) else str(by_n.get(n, ""))
                for n in s.cfg.gpu_sizes
            ]
        )
    if s.cuda:
        table.notes.append(
            "tiled PyTorch runs its two products in float16 (tensor cores: half_products=True), "
            "its softmax statistics in float32"
        )
    table.notes.append(
        f"block sizes tried for the tiled attention (ms at n = {s.cfg.gpu_throughput_n:,}): "
        + ", ".join(f"{bs}: {t * 1e3:.2f}" for bs, t in block_times.items())
    )
    return table


def _throughput_table(s: _Setting, times: dict, block: int) -> Table:
    n = s.cfg.gpu_throughput_n
    b, h, d = s.cfg.gpu_shape
    ours, theirs = times[f"tiled PyTorch (block {block})"].get(n), times[BUILT_IN].get(n)
    table = Table(
        f"GPU throughput at n = {n:,}: tiled PyTorch against F.scaled_dot_product_attention",
        ["measure", "value", "target", ""],
    )
    if not (isinstance(ours, float) and isinstance(theirs, float)):
        table.rows.append(
            ["tiled throughput / built-in throughput", f"n/a ({ours}, {theirs})", "", ""]
        )
        return table
    ratio = theirs / ours
    flops = 4 * b * h * n * n * d  # two matrix products of 2 n^2 d FLOPs per head
    table.rows.append(
        [
            "tiled throughput / built-in throughput",
            f"{ratio:.2f}",
            ">= 0.5x (moonshot)",
            verdict(ratio >= 0.5),
        ]
    )
    table.rows.append(["tiled TFLOP/s", f"{flops / ours / 1e12:.1f}", "", ""])
    table.rows.append(["built-in TFLOP/s", f"{flops / theirs / 1e12:.1f}", "", ""])
    _triton_rows(table, times, n, flops)
    table.rows += backward_rows(s, n)  # lesson 11's backward kernel against flash's
    return table


def _triton_rows(table: Table, times: dict, n: int, flops: float) -> None:
    """Lesson 11's Triton kernel against FlashAttention (the issue's moonshot: half its speed)."""
    kernel = times.get(TRITON, {}).get(n)
    flash = times.get(FLASH, {}).get(n, times[BUILT_IN].get(n))
    if TRITON not in times:
        table.rows.append([TRITON, "not run (needs CUDA and triton)", "", ""])
    elif not (isinstance(kernel, float) and isinstance(flash, float)):
        table.rows.append([f"{TRITON} / flash throughput", f"n/a ({kernel}, {flash})", "", ""])
    else:
        ratio = flash / kernel
        table.rows.append(
            [
                f"{TRITON} / flash throughput",
                f"{ratio:.2f}",
                ">= 0.5x (moonshot)",
                verdict(ratio >= 0.5),
            ]
        )
        table.rows.append([f"{TRITON} TFLOP/s", f"{flops / kernel / 1e12:.1f}", "", ""])


def _peak(fn, q, k, v) -> str:
    import torch

    from attention_ref.profiling import peak_memory

    try:
        with torch.inference_mode():
            out, peak = peak_memory(fn, q, k, v)
        del out
        return fmt_bytes(peak)
    except torch.cuda.OutOfMemoryError:
        return "out of memory"
    finally:
        torch.cuda.empty_cache()


def _memory_table(s: _Setting, block: int) -> Table:
    import torch.nn.functional as F

    from attention_ref.pt import sdpa_tuned

    b, h, d = s.cfg.gpu_shape
    table = Table(
        f"GPU peak memory (torch.cuda.max_memory_allocated, MiB), {str(s.dtype)[6:]}, B={b} h={h} "
        f"d={d}",
        ["n", "inputs", "reference (lesson 2)", f"tiled (block {block})", "F.sdpa"],
    )
    for n in progress(s.cfg.gpu_memory_sizes, "GPU memory"):
        q, k, v = s.inputs(n)
        row = [f"{n:,}", fmt_bytes(3 * q.numel() * q.element_size())]
        for fn in (
            sdpa_tuned.scaled_dot_product_attention,
            s.tiled(block),
            F.scaled_dot_product_attention,
        ):
            row.append(_peak(fn, q, k, v) if s.cuda else "n/a (not CUDA)")
        table.rows.append(row)
        del q, k, v
    return table


def bench_gpu(cfg: Config, device=None) -> list[Table]:
    """Tiled PyTorch attention against F.scaled_dot_product_attention on ``device`` (default: cuda):
    times at every size, throughput at one, peak memory (CUDA only)."""
    import torch

    if device is None:
        if not torch.cuda.is_available():
            return [*_no_gpu(), bench_compiled(cfg)]  # compiling for a GPU needs none
        device = "cuda"
    device = torch.device(device)
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    s = _Setting(cfg, device, dtype, torch.Generator(device=device).manual_seed(0))
    block, block_times = _best_block(s)
    times = _time_sizes(s, _implementations(s, block))
    return [
        _timing_table(s, times, block_times),
        _throughput_table(s, times, block),
        _memory_table(s, block),
        bench_compiled(cfg),
    ]
