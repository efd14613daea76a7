"""Measuring attention (lesson 9 and ``make bench``): the peak memory, the time and the
multiply-adds of one call.

NumPy arrays' memory is traced with the standard library's ``tracemalloc`` (NumPy reports its
allocations to it); CUDA tensors' memory with ``torch.cuda.max_memory_allocated``. The memory of
PyTorch tensors on the CPU is not traced by either, so it is refused rather than reported as 0.
Depends on numpy and torch only, like the rest of the library.
"""

from __future__ import annotations

import statistics
import time
import tracemalloc

import torch
from torch.overrides import TorchFunctionMode


def _devices(args, kwargs) -> set[str]:
    return {x.device.type for x in (*args, *kwargs.values()) if isinstance(x, torch.Tensor)}


def peak_memory(fn, *args, **kwargs):
    """Run ``fn(*args, **kwargs)``; return ``(result, peak_bytes)``.

    ``peak_bytes`` is the most memory the call held at once beyond what was allocated before it
    (its inputs are not counted, its result is). NumPy inputs: traced with tracemalloc. CUDA
    tensors: ``torch.cuda.max_memory_allocated`` on their device. CPU tensors: ValueError.
    """
    devices = _devices(args, kwargs)
    if "cuda" in devices:
        device = next(
            x.device
            for x in (*args, *kwargs.values())
            if isinstance(x, torch.Tensor) and x.device.type == "cuda"
        )
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        result = fn(*args, **kwargs)
        torch.cuda.synchronize(device)
        return result, torch.cuda.max_memory_allocated(device) - before
    if devices:
        raise ValueError(
            f"peak_memory traces NumPy arrays and CUDA tensors; got tensors on {sorted(devices)}: "
            "pass NumPy arrays (tensor.numpy()) to measure on the CPU"
        )
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    try:
        result = fn(*args, **kwargs)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return result, peak


def _wall_times(fn, args, kwargs, repeat: int, warmup: int) -> list[float]:
    """``repeat`` wall times of ``fn(*args, **kwargs)`` after ``warmup`` untimed calls; CUDA work
    is waited for (synchronized) before the clock stops."""
    cuda = "cuda" in _devices(args, kwargs)

    def once() -> float:
        start = time.perf_counter()
        fn(*args, **kwargs)
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start

    for _ in range(warmup):
        once()
    return [once() for _ in range(max(1, repeat))]


def best_time(fn, *args, repeat: int = 3, warmup: int = 1, **kwargs) -> float:
    """The fastest of ``repeat`` wall times of ``fn(*args, **kwargs)``, in seconds, after ``warmup``
    untimed calls; CUDA work is waited for (synchronized) before the clock stops."""
    return min(_wall_times(fn, args, kwargs, repeat, warmup))


def median_time(fn, *args, repeat: int = 5, warmup: int = 1, **kwargs) -> float:
    """The median of ``repeat`` wall times of ``fn(*args, **kwargs)``, in seconds, after ``warmup``
    untimed calls (the first calls allocate, pick kernels and fill caches); CUDA work is waited for
    before the clock stops. A timing a lesson shows is one of these: a single run says more about
    what else the machine was doing than about ``fn``."""
    return statistics.median(_wall_times(fn, args, kwargs, repeat, warmup))


class _MultiplyAdds(TorchFunctionMode):
    """Adds up the multiply-adds of PyTorch's matrix products (``@``, ``matmul``, ``mm``, ``bmm``,
    ``F.linear``) as they run, from their operands' shapes."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        if name in ("matmul", "__matmul__", "mm", "bmm") and isinstance(out, torch.Tensor):
            # each output number: one row times one column
            self.count += out.numel() * args[0].shape[-1]
        elif name == "__rmatmul__" and isinstance(out, torch.Tensor):
            self.count += out.numel() * args[1].shape[-1]
        elif name == "linear":
            x, weight = args[0], args[1] if len(args) > 1 else kwargs["weight"]
            self.count += (x.numel() // x.shape[-1]) * weight.shape[0] * weight.shape[1]
        return out


def count_multiply_adds(fn, *args, **kwargs):
    """Run ``fn(*args, **kwargs)``; return ``(result, multiply_adds)`` of the PyTorch matrix
    products it ran (``@``, ``matmul``, ``mm``, ``bmm``, ``F.linear``; fused kernels such as
    ``F.scaled_dot_product_attention`` are not seen). Counted at the Python level as the products
    run, so it costs nothing to start (``torch.utils.flop_counter.FlopCounterMode`` counts the same
    products, as FLOPs = 2 x multiply-adds, but its first use takes seconds)."""
    with _MultiplyAdds() as counter:
        result = fn(*args, **kwargs)
    return result, counter.count
