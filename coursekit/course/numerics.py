"""The same numbers from the lessons on every x86-64 machine.

PyTorch picks its CPU kernels by what the processor offers, and its AVX-512 kernels add up in
another order than its AVX2 ones: lesson 12's tiny model, trained the same way, ends at a loss of
0.647 for a window of 8 on an AVX-512 machine and 0.632 on an AVX2 one. The text of lessons 8, 10
and 12 quotes such numbers (coursekit.course.quoted holds it to the printed output), so the
processes that run lessons use the AVX2 kernels on every x86-64 machine: the book's run, the
tests', a learner's `make lab`. The Makefile exports the same; elsewhere (Arm) the variable means
nothing and is left unset.

MKL is left to choose its own code path: forcing its AVX2 path (MKL_CBWR=AVX2) on an AMD machine
changed lesson 8's ablations, whose text matches MKL's own choice there. Whether an Intel machine
with AVX-512, where MKL may pick other kernels, prints the same was not checked.
"""

from __future__ import annotations

import os
import platform

PINNED = {"ATEN_CPU_CAPABILITY": "avx2"}


def pin_cpu_kernels(environ=os.environ) -> None:
    """Set PINNED in ``environ`` where not set already, on x86-64 (before torch is imported: it
    reads them once)."""
    if platform.machine().lower() in ("x86_64", "amd64"):
        for name, value in PINNED.items():
            environ.setdefault(name, value)
