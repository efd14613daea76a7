"""What every benchmark section shares: its sizes, the table it prints, timing in turns,
progress."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

MiB = 2**20


@dataclass
class Config:
    repeat: int = 1  # executions of each lesson (the best counts)
    floor_runs: int = 2  # executions of the floor notebook (the best counts)
    lessons: bool = True  # False: the floor notebook only
    lesson_names: tuple[str, ...] = ()  # only these lessons ("lesson12", ...); empty: every lesson
    attention_shape: tuple[int, int, int, int] = (8, 8, 512, 64)  # B, h, n, d
    attention_repeat: int = 9
    memory_sizes: tuple[int, ...] = (4096, 8192, 16384)
    memory_d: int = 64
    block_size: int = (
        64  # NumPy tiled attention (d = 64: a block of scores is the size of one input)
    )
    cpu_block_size: int = 128  # for the CPU timing
    gpu_sizes: tuple[int, ...] = (1024, 2048, 4096, 8192, 16384)
    gpu_throughput_n: int = 8192
    gpu_memory_sizes: tuple[int, ...] = (4096, 8192, 16384)
    gpu_shape: tuple[int, int, int] = (1, 8, 64)  # B, h, d
    gpu_block_sizes: tuple[int, ...] = (256, 1024, 4096)  # the best one is used
    gpu_repeat: int = 5
    grading: bool = True


TINY = Config(
    floor_runs=1,
    lessons=False,
    attention_shape=(1, 2, 32, 8),
    attention_repeat=2,
    memory_sizes=(64, 128),
    memory_d=8,
    block_size=16,
    cpu_block_size=16,
    gpu_sizes=(32, 64),
    gpu_throughput_n=64,
    gpu_memory_sizes=(64,),
    gpu_shape=(1, 2, 8),
    gpu_block_sizes=(16, 32),
    gpu_repeat=2,
    grading=False,
)


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        cells = [self.headers] + self.rows
        widths = [
            max(len(row[i]) for row in cells if i < len(row)) for i in range(len(self.headers))
        ]

        def line(row):
            first, *rest = row
            return (
                "  "
                + first.ljust(widths[0])
                + "".join("  " + c.rjust(w) for c, w in zip(rest, widths[1:]))
            )

        out = [self.title, line(self.headers), "  " + "-" * (sum(widths) + 2 * (len(widths) - 1))]
        out += [line(row + [""] * (len(self.headers) - len(row))) for row in self.rows]
        out += [f"  {note}" for note in self.notes]
        return "\n".join(out)


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def fmt_bytes(n: float) -> str:
    """Bytes in MiB, with enough digits to tell small sizes apart."""
    mib = n / MiB
    return f"{mib:,.0f}" if mib >= 100 else f"{mib:.1f}" if mib >= 1 else f"{mib:.3f}"


def progress(iterable, desc: str, total: int | None = None, show: bool = True):
    """A progress bar on stderr (tqdm), or the bare iterable where tqdm is missing (a bare GPU
    machine has numpy and torch, not the course's tools)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, desc=desc, total=total, leave=False, file=sys.stderr, disable=not show)


def interleaved_best(
    candidates: dict, repeat: int, sync=None, show: bool = True
) -> dict[str, float]:
    """Best wall time of each candidate (label -> zero-argument function), the candidates taking
    turns in every round so that a busy moment of the machine hits them all alike."""
    best = {label: float("inf") for label in candidates}
    for fn in candidates.values():  # warm-up: first calls allocate and pick kernels
        fn()
    if sync:
        sync()
    for _ in progress(range(repeat), "timing rounds", show=show):
        for label, fn in candidates.items():
            start = time.perf_counter()
            fn()
            if sync:
                sync()
            best[label] = min(best[label], time.perf_counter() - start)
    return best


def machine_line() -> str:
    import torch

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (
        f"Machine: {os.cpu_count()} CPU cores, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), "
        f"{gpu}; load average {load:.1f} when the benchmark started"
    )
