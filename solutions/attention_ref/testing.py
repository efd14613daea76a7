"""Checks used by the lessons' test cells, written so that a failure says what is wrong.

Every ``expect_*`` raises AssertionError with a message that names the property that failed
(and, where one helps, a hint about why), so a learner reads the message, not the test code.
NumPy only; torch tensors are accepted and moved to the CPU for comparison.
"""

from __future__ import annotations

import types

import numpy as np


def to_numpy(x) -> np.ndarray:
    """A NumPy view of an array, a tensor (any device, with or without grad) or a number."""
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":  # NumPy has no bfloat16
            x = x.float()
        x = x.numpy()
    return np.asarray(x)


def _num(x) -> str:
    """A number as a person writes it (not ``np.float32(0.5)``)."""
    try:
        return f"{float(x):.6g}"
    except (TypeError, ValueError):
        return repr(x)


def _fail(what: str, problem: str, hint: str | None) -> None:
    message = f"{what}: {problem}"
    if hint:
        message += f"\n  Hint: {hint}"
    raise AssertionError(message)


def expect_shape(actual, shape: tuple, what: str, hint: str | None = None) -> None:
    """The result has exactly ``shape``."""
    got = tuple(getattr(actual, "shape", np.shape(actual)))
    if got != tuple(shape):
        _fail(what, f"expected shape {tuple(shape)}, got {got}", hint)


def expect_close(actual, expected, what: str, hint: str | None = None,
                 rtol: float = 1e-6, atol: float = 1e-8) -> None:
    """Same shape, no NaN/inf where none is expected, equal within tolerances."""
    if actual is None:
        _fail(what, "got None: did the function forget to `return` its result?", hint)
    got, want = to_numpy(actual), to_numpy(expected)
    expect_shape(got, want.shape, what, hint)
    bad = ~np.isfinite(got) & np.isfinite(want)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        _fail(what, f"got {_num(got[index])} at index {index} where {_num(want[index])} was expected "
                    "(NaN or inf: an overflow?)", hint)
    if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        diff = np.where(np.isnan(diff), np.inf, diff)
        index = tuple(int(i) for i in np.unravel_index(np.argmax(diff), diff.shape))
        _fail(what, f"values differ by up to {diff[index]:.3g}: at index {index} got "
                    f"{_num(got[index])}, expected {_num(want[index])}", hint)


def expect_raises(error: type[BaseException], call, what: str, hint: str | None = None) -> None:
    """``call()`` raises ``error``."""
    try:
        call()
    except error:
        return
    except Exception as other:  # noqa: BLE001 -- report what was raised instead
        _fail(what, f"expected {error.__name__}, got {type(other).__name__}: {other}", hint)
    _fail(what, f"expected {error.__name__}, but nothing was raised", hint)


def _referenced_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _referenced_names(const)
    return names


def expect_own_function(fn, name: str) -> None:
    """``fn`` is a function defined in this notebook, not the reference library's answer.

    Graded exercises must be written in the notebook. A function imported from
    ``attention_ref`` (or one that just calls the library's function of the same name)
    earns nothing; using the library for what *earlier* lessons built is fine.
    """
    if not isinstance(fn, types.FunctionType):
        raise AssertionError(f"{name} should be a function defined with `def {name}(...)` in "
                             f"this notebook, got {type(fn).__name__}")
    if fn.__module__ != "__main__":
        raise AssertionError(f"{name} comes from {fn.__module__}, not from this notebook: write "
                             f"it here (importing the answer earns no points)")
    names = _referenced_names(fn.__code__)
    for ref in names:
        target = fn.__globals__.get(ref)
        module = getattr(target, "__name__", "") if isinstance(target, types.ModuleType) else \
            getattr(target, "__module__", "") or ""
        if not module.startswith("attention_ref"):
            continue
        if isinstance(target, types.ModuleType):
            if name in names:
                raise AssertionError(f"{name} calls {module}.{name}: write it yourself "
                                     f"(calling the reference earns no points)")
        elif getattr(target, "__name__", None) == name:
            raise AssertionError(f"{name} calls the reference {module}.{name}: write it yourself "
                                 f"(calling the reference earns no points)")
