"""``python -m coursekit.bench.gpu_check``: what only a GPU can show, measured in a minute.

Run by ``coursekit/bench/gpu_check.sh`` on a machine with an NVIDIA GPU (with its other steps:
the reference tests on CUDA, ``make bench``'s GPU section). Elsewhere it runs on the CPU with
small sizes, so that its code is checked where it is written.

* A race that lesson 11's checker refuses, run where it is real: every program of
  ``total_by_load_add_store`` reads the one total, adds its block's sum and stores it back.
  Triton's interpreter runs the programs one after the other and gets the exact total (which is
  why the course's checker refuses the kernel from its record of accesses, whatever the total
  says); a GPU runs thousands at once, and updates are lost. ``tl.atomic_add`` loses none.
* Lesson 13's gated delta rule, recurrent (one position at a time) against chunked (a chunk of
  positions in matrix products): the chunked form is what makes it fast where there are many
  cores to keep busy.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import torch

BLOCK = 256


def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def total_by_load_add_store(x_ptr, total_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        block_sum = tl.sum(tl.load(x_ptr + offsets, mask=offsets < n, other=0.0), 0)
        tl.store(total_ptr, tl.load(total_ptr) + block_sum)  # every program: the one total

    @triton.jit
    def total_by_atomic_add(x_ptr, total_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        block_sum = tl.sum(tl.load(x_ptr + offsets, mask=offsets < n, other=0.0), 0)
        tl.atomic_add(total_ptr, block_sum)

    return total_by_load_add_store, total_by_atomic_add


def race_on_device(device: torch.device, n: int) -> list[str]:
    """Both adders launched directly (compiled on a GPU, interpreted elsewhere), ``n`` ones."""
    import triton

    lines = []
    ones = torch.ones(n, device=device)
    for kernel in _kernels():
        totals = []
        for _ in range(5):
            total = torch.zeros(1, device=device)
            kernel[(triton.cdiv(n, BLOCK),)](ones, total, n, BLOCK=BLOCK)
            totals.append(int(total.item()))
        lost = [n - t for t in totals]
        lines.append(
            f"{kernel.fn.__name__} on {device.type}, {triton.cdiv(n, BLOCK):,} programs: totals "
            f"{totals} of {n:,} (updates lost: {min(lost):,} to {max(lost):,})"
        )
    return lines


CHECKED = """
import torch
from attention_ref import flash  # first: it decides where kernels run, then imports Triton
from coursekit.bench.gpu_check import _kernels, BLOCK
racy, atomic = _kernels()
for kernel in (racy, atomic):
    total = torch.zeros(1)
    try:
        flash.launch(kernel, (4,), (torch.ones(4 * BLOCK), total, 4 * BLOCK), {"BLOCK": BLOCK})
        print(f"the checker passes {kernel.fn.__name__}: total {total.item():.0f}")
    except AssertionError as race:
        print(f"the checker refuses {kernel.fn.__name__}: {str(race)[:160]}...")
"""


def race_checked() -> str:
    """The same kernels through the course's launcher in Triton's interpreter (a process of their
    own: the interpreter is chosen before Triton is first imported)."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", CHECKED], capture_output=True, text=True, env=env, timeout=300
    )
    return (done.stdout + done.stderr[-2000:] * (done.returncode != 0)).strip()


def _best_seconds(fn, sync, rounds: int = 3) -> float:
    fn()
    sync()
    best = float("inf")
    for _ in range(rounds):
        began = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - began)
    return best


def delta_rule_timing(device: torch.device, sizes: tuple[int, ...]) -> list[str]:
    """Recurrent against chunked gated delta rule, 8 heads of d = 64, float32."""
    from attention_ref.pt import delta

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    lines = []
    for n in sizes:
        gen = torch.Generator(device=device).manual_seed(n)
        q, k, v = (torch.randn(1, 8, n, 64, device=device, generator=gen) for _ in range(3))
        k = torch.nn.functional.normalize(k, dim=-1)
        beta = torch.rand(1, 8, n, device=device, generator=gen)
        g = -torch.rand(1, 8, n, device=device, generator=gen) * 0.1
        rec = _best_seconds(lambda: delta.gated_delta_rule_recurrent(q, k, v, beta, g), sync)
        chunk = _best_seconds(lambda: delta.gated_delta_rule_chunked(q, k, v, beta, g, 64), sync)
        lines.append(
            f"gated delta rule on {device.type}, n = {n:,}: recurrent {rec * 1e3:,.1f} ms, "
            f"chunked (64) {chunk * 1e3:,.1f} ms: {rec / chunk:.1f}x"
        )
    return lines


def main() -> int:
    # first: it decides where kernels run (compiled on a GPU, interpreted elsewhere), then
    # imports Triton
    import attention_ref.flash as flash

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    print(f"device: {torch.cuda.get_device_name() if cuda else 'CPU (no CUDA)'}", flush=True)
    if flash.UNAVAILABLE:
        print(f"the race is not run: {flash.UNAVAILABLE}", flush=True)
    else:
        for line in race_on_device(device, n=1 << 22 if cuda else 4 * BLOCK):
            print(line, flush=True)
        print(race_checked(), flush=True)
    for line in delta_rule_timing(device, (1024, 4096, 16384) if cuda else (64, 256)):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
