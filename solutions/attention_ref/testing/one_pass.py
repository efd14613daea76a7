"""The one-pass check: an ndarray subclass that counts how often a function reads a row."""

from __future__ import annotations

import numpy as np

from .checks import fail
from .ownership import names_used
from .tamper import require_untampered

_WHOLE_ROW_REDUCTIONS = {"maximum", "fmax", "add", "logaddexp", "logaddexp2"}


class _ReadLog:
    def __init__(self, size: int):
        self.size, self.reads, self.reductions = size, 0, []


class _WatchedRow(np.ndarray):
    """A 1-D array that counts the reads of its entries and the max/sum reductions over all of
    them, its own and those of arrays computed from it (see :func:`expect_one_pass`)."""

    _log = None

    def __array_finalize__(self, obj):
        self._log = getattr(obj, "_log", None)

    def __iter__(self):
        for item in self.view(np.ndarray):
            if self._log is not None:
                self._log.reads += 1
            yield item

    def __getitem__(self, index):
        out = super().__getitem__(index)
        if not isinstance(out, np.ndarray) and self._log is not None:
            self._log.reads += 1  # one entry read
        return out

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        log = next((x._log for x in inputs if isinstance(x, _WatchedRow) and x._log), None)
        plain = [x.view(np.ndarray) if isinstance(x, _WatchedRow) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(
                x.view(np.ndarray) if isinstance(x, _WatchedRow) else x for x in kwargs["out"]
            )
        whole = log is not None and np.size(plain[0]) == log.size
        if method == "reduce" and ufunc.__name__ in _WHOLE_ROW_REDUCTIONS and whole:
            log.reductions.append(ufunc.__name__)
        result = getattr(ufunc, method)(*plain, **kwargs)
        if method == "__call__" and log is not None and isinstance(result, np.ndarray):
            result = result.view(_WatchedRow)  # computed from the row: still watched
            result._log = log
        return result


def expect_one_pass(fn, row, what: str, hint: str | None = None):
    """``fn(row)`` makes a single pass over the 1-D ``row``: it reads each entry once (one loop)
    and computes no maximum or sum over the whole row, neither of the row nor of an array computed
    from it (``np.max(row)``, ``np.exp(row - m).sum()``: passes of their own), and it calls no
    ready-made softmax. Elementwise arithmetic on the whole row (``np.exp(row - m) / l``) is
    fine. Returns ``fn``'s result as a plain array."""
    require_untampered()
    hint = hint or (
        "one loop over the entries updates the running maximum m and the running sum l together; "
        "after it, exp(row - m) / l on the whole row is the softmax"
    )
    for banned in ("softmax", "log_softmax", "logsumexp"):
        if banned in names_used(fn):
            fail(what, f"{fn.__name__} calls {banned}, which makes passes of its own", hint)
    log = _ReadLog(len(row))
    watched = np.array(row).view(_WatchedRow)
    watched._log = log
    result = fn(watched)
    if log.reductions:
        done = ", ".join(sorted(set(log.reductions)))
        fail(
            what,
            f"it reduced the whole row at once ({done}: np.max or np.sum of the row or "
            "of an array computed from it), a pass of its own besides the loop",
            hint,
        )
    if log.reads > log.size:
        fail(
            what,
            f"it read the row's {log.size} entries {log.reads} times in all: more than one pass",
            hint,
        )
    return None if result is None else np.asarray(result).view(np.ndarray)
