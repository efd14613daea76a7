"""The cost of a graded call, as one record: how many multiply-adds its matrix products did, how
many other numbers it wrote, how many bytes it allocated, held at its peak and kept, and how many
lines of the notebook's own code it ran (:func:`cost_profile`).

How each is measured (exact where it says so; docs/contributing.md lists the traps):

* PyTorch: a ``TorchDispatchMode`` sees every ATen operation the call runs, after PyTorch has
  broken ``matmul``, ``einsum`` and ``linear`` down into ``mm``/``bmm``/``addmm``. Multiply-adds
  come from each product's operand shapes (``mm``, ``bmm``, ``addmm``, ``baddbmm``, ``mv``,
  ``dot``, convolutions, fused attention kernels). Every output that is not a view and lives in
  a storage not seen before is a new allocation, exact in bytes (``untyped_storage().nbytes()``),
  and a ``weakref.finalize`` on its storage tells when it is freed: so the live bytes are known
  after every operation, and their peak exactly. (Scratch memory *inside* one ATen kernel is not
  seen; the operations' results are. A call with tensor arguments is measured in tensors only.)
* NumPy: the array arguments (also inside lists, tuples and dicts) are handed in as a subclass
  that logs each operation of every array computed from them (as ``blocks.py`` watches them):
  ``@``, ``np.matmul``, ``np.einsum``, ``np.dot``, ``.dot()``, ``np.tensordot`` give
  multiply-adds, every other operation the numbers it writes. An array copied into a plain one
  (``np.asarray``) is no longer watched: ``Cost.seen`` tells whether anything was. Memory is
  traced by ``tracemalloc`` (NumPy reports its buffers to it; Python objects too), which cannot
  be hidden: the peak exactly, and the bytes allocated as the sum, over the lines of the
  notebook's code the call runs, of how far each line took the traced memory above where it
  started (temporaries inside one line count at their peak).
* Steps: lines of the notebook's own code (functions whose globals are the graded function's)
  the call ran, counted by ``sys.settrace``; the library's and PyTorch's code is not traced line
  by line. A loop over positions, heads or blocks shows here.
"""

from __future__ import annotations

import math
import sys
import tracemalloc
import weakref
from dataclasses import dataclass, field

import numpy as np

from .holdings import _buffer
from .tamper import require_untampered


@dataclass
class Cost:
    """What one call cost (see :func:`cost_profile`)."""

    multiply_adds: int = 0  # of its matrix products (matmul, einsum, dot, linear, conv, bmm, ...)
    elements: int = 0  # numbers written by every other operation (elementwise, reductions, copies)
    allocated_bytes: int = 0  # new memory allocated over the whole call, freed or not
    peak_bytes: int = 0  # the most new memory held at once (the result included)
    kept_bytes: int = 0  # new memory still held when the call returned (result and anything kept)
    result_bytes: int = 0  # memory of arrays and tensors the result holds, beyond the inputs'
    largest_bytes: int = 0  # the largest single new tensor (PyTorch) or array (NumPy) seen
    steps: int = 0  # lines of the notebook's own code run
    calls: dict[str, int] = field(default_factory=dict)  # operation name -> times it ran
    seen: bool = False  # whether any operation on the inputs was seen
    result: object = field(default=None, repr=False)

    def count(self, *fragments: str) -> int:
        """How many operations had a name containing one of ``fragments`` ("mm", "exp", ...)."""
        return sum(n for name, n in self.calls.items() if any(f in name for f in fragments))

    def note(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        self.seen = True


# ---- PyTorch: every ATen operation, through a dispatch mode -----------------------------------


def _fused_attention(args, out) -> int:
    """Multiply-adds of a fused attention kernel: every query times every key, twice (q.k, w.v)."""
    q, k, v = args[:3]
    return (q.numel() // q.shape[-1]) * k.shape[-2] * (q.shape[-1] + v.shape[-1])


def _convolution(args, out) -> int:
    """Each output (each input, transposed) times a filter of in/groups x kernel entries."""
    x, weight, transposed = args[0], args[1], args[6] if len(args) > 6 else False
    return (x if transposed else out).numel() * (weight.numel() // weight.shape[0])


def _convolution_backward(args, out) -> int:
    grad, weight, mask = args[0], args[2], args[-1]
    return sum(mask[:2]) * grad.numel() * (weight.numel() // weight.shape[0])


def _by_rows(args, out) -> int:  # mm, bmm: each output number is a row times a column
    return out.numel() * args[0].shape[-1]


def _by_rows_after_bias(args, out) -> int:  # addmm, baddbmm (bias, a, b)
    return out.numel() * args[1].shape[-1]


# ATen's matrix products, as multiply-adds from their operands and result (written here rather
# than taken from torch.utils.flop_counter, whose import brings in Triton: half a second)
_PRODUCTS = {
    "mm": _by_rows,
    "bmm": _by_rows,
    "addmm": _by_rows_after_bias,
    "baddbmm": _by_rows_after_bias,
    "addbmm": lambda args, out: args[1].shape[0] * out.numel() * args[1].shape[-1],
    "mv": lambda args, out: args[0].numel(),
    "addmv": lambda args, out: args[1].numel(),
    "dot": lambda args, out: args[0].numel(),
    "vdot": lambda args, out: args[0].numel(),
    "convolution": _convolution,
    "_convolution": _convolution,
    "convolution_overrideable": _convolution,
    "convolution_backward": _convolution_backward,
}
_FUSED_ATTENTION = ("_scaled_dot_product_", "_flash_attention", "_efficient_attention")


def _torch_multiply_adds(name: str, args, out) -> int | None:
    """Multiply-adds of an ATen operation (None: it is no matrix product)."""
    if name in _PRODUCTS:
        return _PRODUCTS[name](args, out)
    if name.startswith(_FUSED_ATTENTION):
        return _fused_attention(args, out) * (2 if name.endswith("backward") else 1)
    return None


class _Storages:
    """New storages and when they die: live bytes after every operation, and their peak."""

    def __init__(self, known: set):
        self.known, self.live, self.finalizers = known, {}, []
        self.live_bytes = self.peak = self.allocated = self.largest = 0

    def add(self, tensor) -> None:
        if tensor.device.type == "meta":
            return
        key, nbytes = _buffer(tensor)
        if key in self.known or key in self.live or not key[-1]:
            return
        self.live[key] = nbytes
        self.live_bytes += nbytes
        self.allocated += nbytes
        self.peak = max(self.peak, self.live_bytes)
        self.largest = max(self.largest, nbytes)
        finalizer = weakref.finalize(tensor.untyped_storage(), self.free, key)
        finalizer.atexit = False
        self.finalizers.append(finalizer)

    def free(self, key) -> None:
        self.live_bytes -= self.live.pop(key, 0)

    def close(self) -> int:
        """Stop watching; the bytes still live."""
        for finalizer in self.finalizers:
            finalizer.detach()
        return self.live_bytes


def _note_torch(cost: Cost, storages: _Storages, func, args, out) -> None:
    import torch

    name = func.overloadpacket.__name__
    cost.note(name)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    products = _torch_multiply_adds(name, args, outs[0])
    cost.multiply_adds += products or 0
    returns = func._schema.returns
    for i, tensor in enumerate(outs):
        if not isinstance(tensor, torch.Tensor):
            continue
        alias = returns[i].alias_info if i < len(returns) else None
        if products is None and (alias is None or alias.is_write):
            cost.elements += tensor.numel()
        if alias is None or name == "lift_fresh":  # a new tensor (lift_fresh: torch.tensor(...))
            storages.add(tensor)


def _torch_mode(cost: Cost, storages: _Storages):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counting(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False  # else PyTorch wraps the method in a guard that imports its compiler

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            _note_torch(cost, storages, func, args, out)
            return out

    return Counting()


# ---- NumPy: the arrays computed from the inputs, watched --------------------------------------


def _einsum_multiply_adds(args) -> int:
    """Every index's size multiplied together: the multiply-adds of einsum's plain loop."""
    if not isinstance(args[0], str):
        return 0
    inputs = args[0].replace(" ", "").split("->")[0].split(",")
    sizes, ellipses = {}, []
    for subscripts, operand in zip(inputs, args[1:]):
        shape = np.shape(operand)
        if "..." in subscripts:
            before, after = subscripts.split("...")
            cut = len(shape) - len(after)
            ellipses.append(shape[len(before) : cut])
            subscripts, shape = before + after, shape[: len(before)] + shape[cut:]
        for letter, size in zip(subscripts, shape):
            sizes[letter] = max(sizes.get(letter, 1), size)
    broadcast = np.broadcast_shapes(*ellipses) if ellipses else ()
    return math.prod(sizes.values()) * math.prod(broadcast)


def _numpy_multiply_adds(name: str, args, out) -> int | None:
    """Multiply-adds of a NumPy product from its operands and result (None: not a product)."""
    size = int(np.size(out))
    if name in ("matmul", "inner"):
        return size * np.shape(args[0])[-1] if np.ndim(args[0]) else size
    if name == "dot":
        a, b = args[0], args[1]
        if np.ndim(a) == 0 or np.ndim(b) == 0:
            return size
        return size * np.shape(a)[-1]
    if name == "vdot":
        return int(np.size(args[0]))
    if name in ("outer", "kron"):
        return size
    if name == "einsum":
        return _einsum_multiply_adds(args)
    if name == "tensordot":
        a, b = np.size(args[0]), np.size(args[1])
        return size * round(math.sqrt(a * b / size)) if size else 0
    if name == "multi_dot":
        arrays, total = list(args[0]), 0
        for a, b in zip(arrays, arrays[1:]):
            total += math.prod(np.shape(a)[:-1] or (1,)) * math.prod(np.shape(b) or (1,))
        return total
    return None


def _plain(value):
    if isinstance(value, _Counted):
        return value.view(np.ndarray)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


class _Counted(np.ndarray):
    """An array whose operations, and those of every array computed from it, go to a Cost."""

    _cost = None

    def __array_finalize__(self, obj):
        self._cost = getattr(obj, "_cost", None)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        cost = next(x._cost for x in inputs if isinstance(x, _Counted))
        if "out" in kwargs:
            kwargs["out"] = tuple(_plain(x) for x in kwargs["out"])
        plain = [_plain(x) for x in inputs]
        result = getattr(ufunc, method)(*plain, **kwargs)
        name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
        _note_numpy(cost, name, plain, result)
        return _count(result, cost)

    def __array_function__(self, func, types, args, kwargs):
        plain_args = _plain(args)
        result = func(*plain_args, **{k: _plain(v) for k, v in kwargs.items()})
        _note_numpy(self._cost, func.__name__, plain_args, result)
        return _count(result, self._cost)

    def dot(self, b, out=None):  # ndarray.dot is no ufunc and no array function
        return np.dot(self, b, out=out)


def _note_numpy(cost: Cost, name: str, args, result) -> None:
    cost.note(name)
    products = _numpy_multiply_adds(name, args, result)
    if products is not None:
        cost.multiply_adds += products
    else:
        cost.elements += sum(int(r.size) for r in _ndarrays(result))
    for r in _ndarrays(result):
        if r.flags.owndata:
            cost.largest_bytes = max(cost.largest_bytes, r.nbytes)


def _ndarrays(value) -> list:
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in _ndarrays(v)]
    return [value] if isinstance(value, np.ndarray) else []


def _count(result, cost):
    if isinstance(result, (list, tuple)):
        return type(result)(_count(r, cost) for r in result)
    if isinstance(result, np.ndarray) and not isinstance(result, _Counted):
        result = result.view(_Counted)
        result._cost = cost
    return result


def _watched(value, cost: Cost):
    """``value`` with its NumPy arrays (also in lists, tuples and dicts) counted."""
    if isinstance(value, np.ndarray) and not isinstance(value, _Counted) and value.dtype != object:
        return _count(value, cost)
    if isinstance(value, (list, tuple)):
        return type(value)(_watched(v, cost) for v in value)
    if isinstance(value, dict):
        return {k: _watched(v, cost) for k, v in value.items()}
    return value


def _unwatched(value):
    if isinstance(value, _Counted):
        return value.view(np.ndarray)
    if isinstance(value, (list, tuple)):
        return type(value)(_unwatched(v) for v in value)
    return value


# ---- the notebook's lines, and the memory each takes ------------------------------------------


class _Lines:
    """Counts the lines run in frames of ``namespace``; where ``traced``, also how far each line
    took tracemalloc's traced memory above where it started (its allocations), the peak over the
    call and what is still held at its end."""

    def __init__(self, namespace: dict, cost: Cost, traced: bool):
        self.namespace, self.cost, self.traced = namespace, cost, traced
        if traced:
            tracemalloc.reset_peak()
            self.base = self.start = tracemalloc.get_traced_memory()[0]

    def global_trace(self, frame, event, arg):
        if frame.f_globals is self.namespace:
            return self.local_trace
        return None

    def local_trace(self, frame, event, arg):
        if event == "line":
            self.cost.steps += 1
            if self.traced:
                self.end_line()
        return self.local_trace

    def end_line(self) -> None:
        current, peak = tracemalloc.get_traced_memory()
        self.cost.allocated_bytes += max(0, peak - self.start)
        self.cost.peak_bytes = max(self.cost.peak_bytes, peak - self.base)
        self.start = current
        tracemalloc.reset_peak()

    def close(self) -> None:
        if self.traced:
            self.end_line()
            self.cost.kept_bytes = tracemalloc.get_traced_memory()[0] - self.base


def _run(fn, args, kwargs, cost: Cost, storages: _Storages, memory: bool = True):
    """``fn(*args, **kwargs)`` under the watchers: PyTorch's operations when a tensor is among
    the arguments, else NumPy's memory through tracemalloc (where ``memory``); the notebook's
    lines either way."""
    namespace = getattr(_innermost(fn), "__globals__", None)
    tensors = any(_is_tensor(a) for a in _leaves((args, kwargs)))
    traced = memory and not tensors
    tracing = traced and not tracemalloc.is_tracing()
    if tracing:
        tracemalloc.start()
    lines, previous = _Lines(namespace, cost, traced=traced), sys.gettrace()
    if namespace is not None:
        sys.settrace(lines.global_trace)
    try:
        if tensors:
            with _torch_mode(cost, storages):
                result = fn(*args, **kwargs)
        else:
            result = fn(*args, **kwargs)
    finally:
        sys.settrace(previous)
        lines.close()
        if tracing:
            tracemalloc.stop()
    return result


def _innermost(fn):
    """The Python function behind partials, bound methods and decorators (whose globals are the
    notebook's)."""
    for _ in range(8):
        inner = getattr(fn, "func", None) or getattr(fn, "__func__", None)
        inner = inner or getattr(fn, "__wrapped__", None)
        if inner is None:
            return fn
        fn = inner
    return fn


def _is_tensor(value) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _leaves(value) -> list:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _leaves(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    return [value]


def _buffers(value, skip: set) -> dict:
    """{buffer key: bytes} of the arrays and tensors reachable from ``value``."""
    found = {}
    for leaf in _leaves(value):
        if isinstance(leaf, np.ndarray) or _is_tensor(leaf):
            key, nbytes = _buffer(leaf)
            if key not in skip:
                found[key] = nbytes
    return found


def cost_profile(fn, *args, **kwargs) -> Cost:
    """Run ``fn(*args, **kwargs)`` once and return what it cost, as a :class:`Cost` (its result
    in ``.result``): multiply-adds of its matrix products, the numbers its other operations
    wrote, the bytes it allocated in all, held at its peak and kept, the bytes its result holds,
    and the lines of the notebook's own code it ran. See the module's docstring for how."""
    return profile_call(fn, args, kwargs)


def profile_call(fn, args, kwargs, memory: bool = True) -> Cost:
    """:func:`cost_profile` of ``fn(*args, **kwargs)``; ``memory=False`` leaves NumPy's memory
    untraced (its bytes stay 0): tracemalloc makes every allocation several times slower, and a
    law on operations or steps does not need it."""
    require_untampered()
    cost = Cost()
    inputs = _buffers((args, kwargs), set())
    storages = _Storages(set(inputs))
    watched_args = _watched(args, cost)
    watched_kwargs = _watched(kwargs, cost)
    result = _run(fn, watched_args, watched_kwargs, cost, storages, memory)
    torch_kept = storages.close()
    cost.allocated_bytes += storages.allocated
    cost.peak_bytes += storages.peak
    cost.kept_bytes += torch_kept
    cost.largest_bytes = max(cost.largest_bytes, storages.largest)
    cost.result = _unwatched(result)
    cost.result_bytes = sum(_buffers(cost.result, set(inputs)).values())
    return cost
