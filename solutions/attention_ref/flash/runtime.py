"""Where lesson 11's Triton kernels run, decided before Triton is imported; then Triton itself.

Triton's interpreter (``TRITON_INTERPRET=1``) runs a kernel on the CPU with NumPy. Triton reads the
variable when it is imported (its own library of ``@triton.jit`` functions, ``tl.zeros`` among
them, is built then) and again when each kernel is defined, so it must be set before the first
``import triton`` anywhere in the process. This module decides (:func:`choose_interpreter`)
before it imports Triton, and the package imports it first: importing ``attention_ref.flash`` (the
reference tests' conftest does, before anything else) is what decides.

Where kernels are compiled for a GPU, ``tl.dot`` of two float32 blocks runs by default on the tensor
cores in TF32, which keeps 10 bits of each operand's mantissa (about 3 decimal digits): scores of a
few hundred come out a tenth off, and a test's verdict would depend on the machine. So where the
kernels are compiled this module also sets ``TRITON_F32_DEFAULT=ieee`` (unless it is set already):
float32 blocks are multiplied in IEEE float32, as ``F.scaled_dot_product_attention`` does in
float32, and the interpreter does too. float16 blocks use the tensor cores either way.

Where Triton is not installed (it has wheels for Linux only), or is older than the course's
checks need (:data:`MINIMUM`), the package still imports: :data:`UNAVAILABLE` says why,
``triton`` and ``tl`` are stand-ins that let a notebook define its kernels, and launching any
kernel raises with that reason.
"""

from __future__ import annotations

import os
import platform
import sys

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


_TOO_LATE = "triton" in sys.modules and VARIABLE not in os.environ
INTERPRETED = choose_interpreter()  # before Triton is imported: see the docstring


class _Missing:
    """Stands in for ``triton`` and ``triton.language`` where Triton is not installed: a notebook
    can still define its kernels (``@triton.jit``, ``tl.constexpr``), and launching one raises."""

    def __init__(self, fn=None):
        self.fn = fn

    def __getattr__(self, name):
        return _Missing()

    def __getitem__(self, grid):
        return self

    def __call__(self, *args, **kwargs):
        if self.fn is None and len(args) == 1 and callable(args[0]) and not kwargs:
            return _Missing(args[0])  # triton.jit(fn)
        raise RuntimeError(UNAVAILABLE)


# The course's checks hook Triton's interpreter, whose internals 3.8 lays out otherwise (its
# masked loads and stores take other arguments): pyproject.toml asks for this version or newer.
MINIMUM = (3, 9)


def _too_old(version: str) -> str | None:
    """Why Triton ``version`` cannot run the course's kernels, or None."""
    found = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if found >= MINIMUM:
        return None
    wanted = ".".join(map(str, MINIMUM))
    return (
        f"Triton {version} is installed here, and lesson 11's checks need Triton {wanted} or "
        f"newer. PyPI's PyTorch brings its own Triton (torch 2.14: Triton 3.8; torch 2.15: "
        f"3.9): `pip install -U torch` and restart the kernel (with PyTorch's CPU build, "
        f"`pip install -U 'triton>={wanted}'`)"
    )


try:
    import triton
    import triton.language as tl
except ImportError as _missing:
    triton = tl = _Missing()
    UNAVAILABLE = (
        f"Triton is not installed here ({platform.system()}, {_missing}): it publishes wheels "
        "for Linux only, so lesson 11's kernels cannot run on this machine; use a Linux machine "
        "(or WSL2, or the class hub) for this lesson"
    )
else:
    UNAVAILABLE = _too_old(triton.__version__)
    if UNAVAILABLE:
        triton = tl = _Missing()  # every launch raises UNAVAILABLE, as without Triton
if UNAVAILABLE is None:
    # before interpreter.install(): the compiler notes triton.language as it is before any
    # kernel runs
    from attention_ref.flash import checker, compiler, interpreter  # noqa: F401

    if INTERPRETED:
        interpreter.install()  # triton.language swapped once per launch, and put back
        checker.install()  # every load and store of a launch recorded and checked
if INTERPRETED and _TOO_LATE and UNAVAILABLE is None:
    UNAVAILABLE = (
        f"Triton was imported before {VARIABLE}=1 was set, so its kernels cannot run in the "
        "interpreter in this process: restart the kernel (or Python) and import "
        "attention_ref.flash before anything that imports triton"
    )


def describe() -> str:
    """One line: where this machine runs Triton kernels."""
    if UNAVAILABLE:
        return UNAVAILABLE
    if INTERPRETED:
        return (
            f"Triton {triton.__version__}: kernels run in its interpreter on the CPU "
            "(TRITON_INTERPRET=1), each program one after the other, in NumPy"
        )
    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
    return (
        f"Triton {triton.__version__}: kernels are compiled for the GPU ({name}); tl.dot of "
        f"float32 blocks in {os.environ.get(PRECISION, 'tf32').upper()} ({PRECISION})"
    )


def _jit(fn):
    return fn if UNAVAILABLE else triton.jit(fn)


def kernel_device() -> torch.device:
    """Where a kernel's tensors must live: the GPU when compiled, the CPU when interpreted."""
    return torch.device("cpu" if INTERPRETED or not torch.cuda.is_available() else "cuda")
