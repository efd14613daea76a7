"""Measuring attention (lesson 9 and ``make bench``): the peak memory and the time of one call.

NumPy arrays' memory is traced with the standard library's ``tracemalloc`` (NumPy reports its
allocations to it); CUDA tensors' memory with ``torch.cuda.max_memory_allocated``. The memory of
PyTorch tensors on the CPU is not traced by either, so it is refused rather than reported as 0.
Depends on numpy and torch only, like the rest of the library.
"""

from __future__ import annotations

import time
import tracemalloc

import torch


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
        device = next(x.device for x in (*args, *kwargs.values()) if isinstance(x, torch.Tensor)
                      and x.device.type == "cuda")
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        result = fn(*args, **kwargs)
        torch.cuda.synchronize(device)
        return result, torch.cuda.max_memory_allocated(device) - before
    if devices:
        raise ValueError(f"peak_memory traces NumPy arrays and CUDA tensors; got tensors on {sorted(devices)}: "
                         "pass NumPy arrays (tensor.numpy()) to measure on the CPU")
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


def best_time(fn, *args, repeat: int = 3, warmup: int = 1, **kwargs) -> float:
    """The fastest of ``repeat`` wall times of ``fn(*args, **kwargs)``, in seconds, after ``warmup``
    untimed calls; CUDA work is waited for (synchronized) before the clock stops."""
    cuda = "cuda" in _devices(args, kwargs)

    def once() -> float:
        start = time.perf_counter()
        fn(*args, **kwargs)
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter() - start

    for _ in range(warmup):
        once()
    return min(once() for _ in range(max(1, repeat)))
