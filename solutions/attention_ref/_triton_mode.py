"""Where Triton kernels run, decided before Triton is imported (lesson 11).

Triton's interpreter (``TRITON_INTERPRET=1``) runs a kernel on the CPU with NumPy. Triton reads the
variable when it is imported (its own library of ``@triton.jit`` functions, ``tl.zeros`` among
them, is built then) and again when each kernel is defined, so it must be set before the first
``import triton`` anywhere in the process. This module imports nothing of Triton, so the reference
tests' conftest can call it before anything else does.

Where kernels are compiled for a GPU, ``tl.dot`` of two float32 blocks runs by default on the tensor
cores in TF32, which keeps 10 bits of each operand's mantissa (about 3 decimal digits): scores of a
few hundred come out a tenth off, and a test's verdict would depend on the machine. So where the
kernels are compiled this module also sets ``TRITON_F32_DEFAULT=ieee`` (unless it is set already):
float32 blocks are multiplied in IEEE float32, as ``F.scaled_dot_product_attention`` does in
float32, and the interpreter does too. float16 blocks use the tensor cores either way.
"""

from __future__ import annotations

import os

import torch

VARIABLE = "TRITON_INTERPRET"
PRECISION = "TRITON_F32_DEFAULT"  # read each time Triton compiles a tl.dot


def interpreted() -> bool:
    """Whether kernels defined now run in the interpreter."""
    return os.environ.get(VARIABLE, "0").strip().lower() not in ("", "0", "false", "off", "no")


def choose_interpreter() -> bool:
    """Set ``TRITON_INTERPRET=1`` where no CUDA GPU is present, and float32 products in IEEE
    float32 where kernels are compiled, unless a variable is set already (a choice made outside
    wins); return whether kernels will be interpreted."""
    if VARIABLE not in os.environ and not torch.cuda.is_available():
        os.environ[VARIABLE] = "1"
    if not interpreted():
        os.environ.setdefault(PRECISION, "ieee")
    return interpreted()
