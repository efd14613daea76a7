"""What each launch of a kernel specialized (lesson 11): the compile check builds exactly these.

When a GPU launches ``kernel[grid](*args, **constants)``, Triton's JIT compiles the kernel for that
launch's *specialization*: the types of its arguments (``*fp32``: a pointer to float32), the
values of its ``tl.constexpr`` parameters, and what it notes about the others: a pointer whose
address is a multiple of 16 bytes, or an integer that is a multiple of 16, gets the attribute
``tt.divisibility=16`` (the compiler may then load 16 bytes at a time and pipeline its loads), and
an integer equal to 1 becomes a constant. Two launches at other sizes may build two different
kernels, so a check that compiles one guessed specialization says little about the others.

attention_ref.flash.checker notes every launch the course's launchers make (:func:`note_launch`):
each argument reduced to what the specialization depends on (a pointer's dtype and alignment, an
integer's divisibility), so launches that specialize alike are noted once. :func:`specialize`
hands them to Triton's own binder (the code a launch runs) for a target GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from triton.compiler.compiler import make_backend
from triton.runtime.jit import create_function_from_signature

# Mutated in place, never rebound: {id(kernel): (kernel, {Launch: None})} (a dict keeps order)
_LAUNCHES: dict[int, tuple] = {}


@dataclass(frozen=True)
class Pointer:
    """A tensor argument as a launch's specialization sees it: its dtype, 16-byte alignment."""

    dtype: torch.dtype
    aligned: bool = True

    def data_ptr(self) -> int:  # what Triton's binder asks of a tensor
        return 0 if self.aligned else 8


@dataclass(frozen=True)
class Launch:
    """One launch, reduced to what its specialization depends on."""

    args: tuple  # the runtime arguments in order: Pointer, an int standing for its kind, a float
    constants: tuple  # ((name, value), ...): tl.constexpr values and launch options (num_warps)

    def describe(self) -> str:
        """'fp32, D=16, BLOCK_Q=32, BLOCK_K=16': the first tensor's dtype and the constants."""
        dtype = next(
            (str(a.dtype).removeprefix("torch.") for a in self.args if isinstance(a, Pointer)), ""
        )
        values = ", ".join(f"{k}={getattr(v, '__name__', v)}" for k, v in self.constants)
        return ", ".join(x for x in (dtype, values) if x)


def _stand_in(value):
    """What a launch's specialization depends on, and nothing else."""
    if isinstance(value, torch.Tensor):
        return Pointer(value.dtype, value.data_ptr() % 16 == 0)
    if isinstance(value, bool) or not isinstance(value, int):
        return value if isinstance(value, (bool, Pointer)) else 1.5  # floats are not specialized
    wide = 0 if -(2**31) <= value < 2**31 else 2**32
    return value if value in (0, 1) else wide + (16 if value % 16 == 0 else 17)


def launch_of(args: tuple, constants: dict) -> Launch:
    """The :class:`Launch` of ``kernel[grid](*args, **constants)``."""
    return Launch(tuple(_stand_in(a) for a in args), tuple(sorted(constants.items())))


def note_launch(kernel, args: tuple, constants: dict) -> None:
    """Note a launch of ``kernel`` (attention_ref.flash.checker.launch calls this)."""
    _, seen = _LAUNCHES.setdefault(id(kernel), (kernel, {}))
    seen[launch_of(args, constants)] = None


def launches_of(kernel) -> list[Launch]:
    """Every distinct launch of ``kernel`` noted so far, in the order of their first launch."""
    entry = _LAUNCHES.get(id(kernel))
    return list(entry[1]) if entry is not None and entry[0] is kernel else []


def specialize(jit, launch: Launch, capability: int, convert=lambda v: v) -> tuple:
    """(signature, constexprs, attrs, options) of ``launch`` of the JITFunction ``jit`` for a GPU
    of ``capability``: what Triton's own binder computes when a GPU launches it. ``convert``
    maps tl.constexpr values (a helper passed as a constant) to what the compiler takes."""
    from triton.backends.compiler import GPUTarget

    backend = make_backend(GPUTarget("cuda", capability, 32))
    binder = create_function_from_signature(jit.signature, jit.params, backend)
    kwargs = {name: convert(value) for name, value in launch.constants}
    kwargs.setdefault("enable_fp_fusion", True)  # Triton 3.9's default for a launch, said aloud
    bound, specialization, options = binder(*launch.args, **kwargs)
    options, signature, constexprs, attrs = jit._pack_args(
        backend, kwargs, bound, specialization, options
    )
    return signature, constexprs, attrs, options


def forget(kernel) -> None:
    """Drop the launches noted of ``kernel`` (a test that wants only its own)."""
    _LAUNCHES.pop(id(kernel), None)
