"""Where Triton kernels run, decided before Triton is imported (lesson 11).

Triton's interpreter (``TRITON_INTERPRET=1``) runs a kernel on the CPU with NumPy. Triton reads the
variable when it is imported (its own library of ``@triton.jit`` functions, ``tl.zeros`` among
them, is built then) and again when each kernel is defined, so it must be set before the first
``import triton`` anywhere in the process. This module imports nothing of Triton, so the reference
tests' conftest can call it before anything else does.
"""

from __future__ import annotations

import os

import torch

VARIABLE = "TRITON_INTERPRET"


def interpreted() -> bool:
    """Whether kernels defined now run in the interpreter."""
    return os.environ.get(VARIABLE, "0").strip().lower() not in ("", "0", "false", "off", "no")


def choose_interpreter() -> bool:
    """Set ``TRITON_INTERPRET=1`` where no CUDA GPU is present, unless the variable is set already
    (a choice made outside wins); return whether kernels will be interpreted."""
    if VARIABLE not in os.environ and not torch.cuda.is_available():
        os.environ[VARIABLE] = "1"
    return interpreted()
