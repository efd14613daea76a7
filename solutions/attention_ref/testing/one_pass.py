"""The one-pass check: an ndarray subclass that counts how often a function reads a row, and
logs every other pass over it (a reduction, an accumulation, np.argmax, np.sort, np.dot, .max(),
.sum(), ...), its own and those of arrays computed from it. A row copied into a plain array
(np.asarray, .tolist()) cannot be watched: then the function's code is read for such passes."""

from __future__ import annotations

import dis
import types

import numpy as np

from .checks import fail
from .ownership import names_used
from .tamper import require_untampered

# ---- the online softmax: one pass --------------------------------------------------------------

_BANNED_CALLS = ("softmax", "log_softmax", "logsumexp")
# ndarray methods that read every entry of the array they are called on (a pass of their own)
_PASS_METHODS = (
    "max", "min", "argmax", "argmin", "sum", "prod", "mean", "std", "var", "ptp", "cumsum",
    "cumprod", "sort", "argsort", "partition", "argpartition", "dot",
)  # fmt: skip
# NumPy functions that only look at an array entry by entry (or at its shape): not a pass
_ELEMENTWISE = {
    "where", "zeros_like", "ones_like", "empty_like", "full_like", "copy", "isneginf", "isposinf",
    "nan_to_num", "clip", "shape", "ndim", "size", "result_type", "broadcast_to", "can_cast",
    "round", "around", "atleast_1d", "reshape", "ravel", "squeeze", "expand_dims", "real",
}  # fmt: skip
# what a hidden (converted) row can still be seen doing: attribute names of whole-array passes
# (row.max(), np.sum(...), np.maximum.accumulate) and built-ins that iterate (sum(...), sorted())
_PASS_ATTRIBUTES = set(_PASS_METHODS) | {
    "amax", "amin", "nanmax", "nanmin", "nansum", "nancumsum", "vdot", "inner", "einsum",
    "matmul", "accumulate", "reduce", "reduceat", "logsumexp", "fsum",
}  # fmt: skip
_PASS_BUILTINS = {"sum", "sorted"}
# "is every entry masked?" reads the row too, but computes neither statistic: allowed
_LOGICAL = {"logical_and", "logical_or", "all", "any"}


class _RowLog:
    def __init__(self, size: int):
        self.size, self.reads, self.passes, self.copied = size, 0, [], False


class _Row(np.ndarray):
    """A 1-D array that counts the reads of its entries and logs every whole-row pass: its own and
    those of arrays computed from it (ufunc reductions and accumulations, NumPy functions such as
    np.argmax, np.sort, np.dot, and methods such as .max(), .argmax(), .tolist())."""

    _log = None

    def __array_finalize__(self, obj):
        self._log = getattr(obj, "_log", None)

    def _whole(self) -> bool:
        return self._log is not None and self.size == self._log.size

    def __iter__(self):
        for item in self.view(np.ndarray):
            if self._log is not None:
                self._log.reads += 1
            yield item

    def tolist(self):
        if self._whole():
            self._log.copied = (
                True  # a plain copy: what is done with it can only be read in the code
            )
        return self.view(np.ndarray).tolist()

    def __getitem__(self, index):
        out = super().__getitem__(index)
        if not isinstance(out, np.ndarray) and self._log is not None:
            self._log.reads += 1  # one entry read
        return out

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        log = next((x._log for x in inputs if isinstance(x, _Row) and x._log), None)
        whole = any(isinstance(x, _Row) and x._whole() for x in inputs)
        if method != "__call__" and whole and ufunc.__name__ not in _LOGICAL:
            log.passes.append(f"np.{ufunc.__name__}.{method}")
        plain = [x.view(np.ndarray) if isinstance(x, _Row) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(
                x.view(np.ndarray) if isinstance(x, _Row) else x for x in kwargs["out"]
            )
        return _watch_row(getattr(ufunc, method)(*plain, **kwargs), log, method == "__call__")

    def __array_function__(self, func, types, args, kwargs):
        rows = [x for x in (*args, *kwargs.values()) if isinstance(x, _Row)]
        allowed = _ELEMENTWISE | _LOGICAL
        if func.__name__ not in allowed and any(x._whole() for x in rows):
            self._log.passes.append(f"np.{func.__name__}")
        plain = [x.view(np.ndarray) if isinstance(x, _Row) else x for x in args]
        return _watch_row(func(*plain, **kwargs), self._log, func.__name__ in _ELEMENTWISE)


def _method_pass(name):
    def method(self, *args, **kwargs):
        if self._whole():
            self._log.passes.append(f".{name}()")
        return getattr(self.view(np.ndarray), name)(*args, **kwargs)

    method.__name__ = name
    return method


for _name in _PASS_METHODS:
    setattr(_Row, _name, _method_pass(_name))


def _watch_row(result, log, keep):
    """An array computed entry by entry from the row stays watched (its own passes count)."""
    if keep and isinstance(result, np.ndarray) and not isinstance(result, _Row):
        result = result.view(_Row)
        result._log = log
    return result


def _attribute_passes(fn) -> set[str]:
    """Whole-array passes ``fn`` (or a notebook function it calls) names in its code."""
    found, seen, todo = set(), set(), [fn]
    while todo:
        current = todo.pop()
        if current.__code__ in seen:
            continue
        seen.add(current.__code__)
        for code in _codes(current.__code__):
            for ins in dis.get_instructions(code):
                name = ins.argval if isinstance(ins.argval, str) else None
                if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and name in _PASS_ATTRIBUTES:
                    found.add(f".{name}")
                elif ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and name in _PASS_BUILTINS:
                    found.add(f"{name}()")
        for ref in current.__code__.co_names:
            target = current.__globals__.get(ref)
            if isinstance(target, types.FunctionType) and target.__globals__ is fn.__globals__:
                todo.append(target)
    return found


def _codes(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def expect_one_pass(fn, row, what: str, hint: str | None = None):
    """``fn(row)`` makes a single pass over the 1-D ``row``: it reads each entry once (one loop)
    and makes no other pass over it, nor over an array computed from it: no maximum, sum, sort,
    argmax, dot product or accumulation of the whole row (``np.max(row)``, ``row.argmax()``,
    ``np.exp(row - m).sum()``, ``np.cumsum``), and no ready-made softmax. Elementwise arithmetic
    on the whole row (``np.exp(row - m) / l``) is fine. A row turned into a plain array
    (``np.asarray(row)``) can no longer be watched: then the function's code must name no
    whole-array pass (``.max``, ``.sum``, ``np.sort``, ``sum(...)``, ...). Returns ``fn``'s
    result as a plain array."""
    require_untampered()
    hint = hint or (
        "one loop over the entries updates the running maximum m and the running sum l together; "
        "after it, exp(row - m) / l on the whole row is the softmax"
    )
    for banned in _BANNED_CALLS:
        if banned in names_used(fn):
            fail(what, f"{fn.__name__} calls {banned}, which makes passes of its own", hint)
    log = _RowLog(len(row))
    watched = np.array(row).view(_Row)
    watched._log = log
    result = fn(watched)
    if log.passes:
        done = ", ".join(dict.fromkeys(log.passes))
        fail(
            what,
            f"it reduced the whole row at once ({done}), a pass of its own besides the loop",
            hint,
        )
    if log.reads > log.size:
        fail(
            what,
            f"it read the row's {log.size} entries {log.reads} times in all: more than one pass",
            hint,
        )
    named = _attribute_passes(fn) if log.copied or log.reads < log.size else set()
    if named:
        fail(
            what,
            f"it reads a copy of the row (np.asarray, .tolist()) and names whole-array passes "
            f"({', '.join(sorted(named))}): the loop should be the only pass",
            hint,
        )
    return None if result is None else np.asarray(result).view(np.ndarray)
