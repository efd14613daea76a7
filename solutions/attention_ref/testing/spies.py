"""How: where an exercise's point is the method, watch the method (which PyTorch functions ran,
how much memory they made, which of an object's methods were called)."""

from __future__ import annotations

from .checks import fail
from .tamper import require_untampered


class TorchRecord:
    """What PyTorch ran during one call (see :func:`record_torch`)."""

    def __init__(self):
        self.calls: dict[str, int] = {}  # function name -> how many times it ran
        self.largest_bytes = 0  # the largest storage behind a tensor any function returned
        # the same, leaving out the storages of the call's arguments (a view of a weight passed
        # in makes nothing new): what the call itself allocated
        self.largest_new_bytes = 0

    def count(self, *fragments: str) -> int:
        """How many calls had a name containing one of ``fragments`` ("conv", "matmul", ...)."""
        return sum(n for name, n in self.calls.items() if any(f in name for f in fragments))


def _argument_storages(values) -> set:
    """The addresses of the storages behind every tensor in ``values`` (dicts, lists and tuples
    followed)."""
    import torch

    found, todo = set(), [values]
    while todo:
        value = todo.pop()
        if isinstance(value, torch.Tensor) and value.device.type != "meta":
            found.add((value.device, value.untyped_storage().data_ptr()))
        elif isinstance(value, dict):
            todo.extend(value.values())
        elif isinstance(value, (list, tuple)):
            todo.extend(value)
    return found


def record_torch(fn, *args, **kwargs):
    """Run ``fn(*args, **kwargs)``; return ``(result, record)``: each PyTorch function it ran
    (``record.calls``, by name: ``conv1d``, ``matmul``, ``softmax``, ...) and the largest block of
    memory behind any tensor those functions returned (``record.largest_bytes``; without the
    arguments' own storages, which views of them share: ``record.largest_new_bytes``)."""
    require_untampered()
    import torch
    from torch.overrides import TorchFunctionMode

    record = TorchRecord()
    given = _argument_storages((args, kwargs))

    class Recording(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = getattr(func, "__name__", str(func))
            record.calls[name] = record.calls.get(name, 0) + 1
            for tensor in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(tensor, torch.Tensor) and tensor.device.type != "meta":
                    storage = tensor.untyped_storage()
                    record.largest_bytes = max(record.largest_bytes, storage.nbytes())
                    if (tensor.device, storage.data_ptr()) not in given:
                        record.largest_new_bytes = max(record.largest_new_bytes, storage.nbytes())
            return out

    with Recording():
        result = fn(*args, **kwargs)
    return result, record


def expect_does_not_call(fn, *args, name: str, what: str, hint: str | None = None, **kwargs):
    """``fn(*args, **kwargs)`` never runs the PyTorch function ``name`` (e.g.
    ``"scaled_dot_product_attention"``, where the exercise is to write what it computes).
    Returns ``fn``'s result."""
    result, record = record_torch(fn, *args, **kwargs)
    if record.calls.get(name):
        fail(
            what,
            f"it calls PyTorch's {name}, which computes the answer for it",
            hint
            or "the exercise is to write this computation yourself with elementary torch "
            "operations; the tests compare your result with the built-in",
        )
    return result


def spy(obj, *names: str):
    """A shallow copy of ``obj`` whose methods ``names`` record every call, then run as before.

    Returns ``(copy, calls)``; ``calls`` is a list of ``(name, grad_enabled)``: the method's name
    and whether PyTorch was tracking gradients (``torch.is_grad_enabled()``) when it was called.
    """
    require_untampered()
    import copy

    import torch

    calls: list[tuple[str, bool]] = []
    twin = copy.copy(obj)

    def recorder(name, method):
        def call(*args, **kwargs):
            calls.append((name, torch.is_grad_enabled()))
            return method(*args, **kwargs)

        return call

    for name in names:
        setattr(twin, name, recorder(name, getattr(obj, name)))
    return twin, calls
