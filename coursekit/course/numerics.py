"""The same numbers from the lessons on every x86-64 machine.

PyTorch picks its CPU kernels by what the processor offers, and its AVX-512 kernels add up in
another order than its AVX2 ones: lesson 12's tiny model, trained the same way, ended at a loss
of 0.647 for a window of 8 on an AVX-512 machine and 0.632 on an AVX2 one (MKL not yet pinned).
The text of lessons 8, 10 and 12 quotes such numbers (coursekit.course.quoted holds it to the
printed output), so the processes that run lessons use the AVX2 kernels on every x86-64
machine: the book's run, the tests', a learner's `make lab`. The Makefile exports the same;
elsewhere (Arm) the variables mean nothing and are left unset.

The matrix products are MKL's (and oneDNN's), which choose their own code path by processor too:
on an Intel machine with AVX-512 MKL's own choice trained lesson 8's ablations to other ends than
on an AMD one (a CI machine of each kind, 2026-11-28), so MKL is held to its AVX2 path
(MKL_CBWR, its "conditional numerical reproducibility") and oneDNN to AVX2 as well: both
processors run that path alike. Small models trained from a seed are chaotic enough that even the
number of threads changes where they end (lesson 8's one-head ablation without scaling, seed 8:
63 % exactly reversed with one thread, 75 % with two), so the book runs its lessons with one
thread (BOOK_THREADS), as a test worker does on two cores.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
BOOK_THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def pin_cpu_kernels(environ=os.environ) -> None:
    """Set PINNED in ``environ`` where not set already, on x86-64 (before torch is imported: it
    reads them once)."""
    if platform.machine().lower() in ("x86_64", "amd64"):
        for name, value in PINNED.items():
            environ.setdefault(name, value)


def book_environment(environ=os.environ) -> dict[str, str]:
    """The environment the book's build runs its lessons in: ``environ`` with the kernels pinned
    and one thread each, whatever the caller set (the text quotes what this prints)."""
    chosen = dict(environ)
    pin_cpu_kernels(chosen)
    return chosen | BOOK_THREADS


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@dataclass(frozen=True, order=True)
class Condition:
    """One way a learner's machine may run a lesson: the CPU kernels pinned (PINNED) or the
    machine's own, and the threads of each pool. The experiments' record
    (coursekit.course.experiments) holds every claim over all of CONDITIONS."""

    pinned: bool
    threads: int

    @property
    def label(self) -> str:
        kernels = "pinned" if self.pinned else "unpinned"
        return f"{kernels}, {self.threads} thread{'s' * (self.threads != 1)}"

    def environment(self, environ=os.environ) -> dict[str, str]:
        """``environ`` as a process running under this condition needs it (before torch is
        imported: torch reads these once)."""
        chosen = {k: v for k, v in environ.items() if k not in PINNED}
        if self.pinned:
            pin_cpu_kernels(chosen)
        return chosen | {name: str(self.threads) for name in THREAD_VARIABLES}


CONDITIONS = tuple(Condition(pinned, threads) for pinned in (True, False) for threads in (1, 2))


def parse_condition(text: str) -> Condition:
    """``pinned-1``, ``unpinned-2``, ... as a Condition (a clear error for anything else)."""
    kernels, _, threads = text.partition("-")
    if kernels not in ("pinned", "unpinned") or not threads.isdigit() or int(threads) < 1:
        raise ValueError(f"a condition is pinned-N or unpinned-N (N threads), not {text!r}")
    return Condition(kernels == "pinned", int(threads))
