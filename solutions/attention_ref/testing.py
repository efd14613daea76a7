"""Checks used by the lessons' test cells, written so that a failure says what is wrong.

Every ``expect_*`` raises AssertionError with a message that names the property that failed
(and, where one helps, a hint about why), so a learner reads the message, not the test code.
NumPy only; torch tensors are accepted and moved to the CPU for comparison.

The checks cannot be fooled by replacing what they rely on: each first verifies that the functions
the tests use (``np.allclose``, ``np.testing.*``, ``torch.allclose``,
``torch.testing.assert_close``, builtins such as ``isinstance``, the reference library and these
helpers themselves) are still the objects that were there when this module was imported, and fails
with a message that says what was replaced. (While grading, coursekit.grading.guard also puts the
originals back; this check is what protects a plain nbgrader run.)
"""

from __future__ import annotations

import sys
import types

import numpy as np

# ---- what the tests rely on, as it was when this module was imported ----------------------

_WATCHED = {
    "builtins": (
        "isinstance",
        "issubclass",
        "getattr",
        "hasattr",
        "len",
        "abs",
        "all",
        "any",
        "float",
        "int",
        "tuple",
        "type",
        "repr",
        "print",
        "range",
        "zip",
        "AssertionError",
        "Exception",
        "__import__",
        "super",
        "object",
    ),
    "numpy": (
        "allclose",
        "isclose",
        "isfinite",
        "isnan",
        "asarray",
        "array_equal",
        "abs",
        "argmax",
        "argwhere",
        "where",
        "unravel_index",
        "shape",
        "errstate",
        "testing",
        "random",
    ),
    "numpy.testing": (
        "assert_allclose",
        "assert_array_equal",
        "assert_array_almost_equal",
        "assert_equal",
    ),
    "numpy.random": ("default_rng", "Generator", "normal", "rand", "randn", "seed"),
    "torch": (
        "allclose",
        "isclose",
        "equal",
        "isfinite",
        "is_tensor",
        "Tensor",
        "from_numpy",
        "tensor",
        "as_tensor",
        "randn",
        "rand",
        "manual_seed",
        "Generator",
        "testing",
        "softmax",
    ),
    "torch.testing": ("assert_close",),
    "torch.nn.functional": ("scaled_dot_product_attention", "softmax"),
    "types": ("FunctionType", "ModuleType", "CodeType", "MethodType"),
}


def _snapshot() -> dict:
    """{(module, name): (object, code)} for every watched name and every public function of the
    reference library (whose ``__code__`` a submission could swap, too)."""
    found = {}
    for module_name, names in _WATCHED.items():
        module = sys.modules.get(module_name)
        for name in names if module is not None else ():
            if hasattr(module, name):
                value = getattr(module, name)
                found[module_name, name] = (value, getattr(value, "__code__", None))
    return found


def _snapshot_library() -> None:
    for module_name in sorted(n for n in sys.modules if n.startswith("attention_ref")):
        module = sys.modules[module_name]
        for name, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType) and not name.startswith("__"):
                _ORIGINALS.setdefault((module_name, name), (value, value.__code__))


_ORIGINALS: dict = {}


def library_wrapper(new, old) -> bool:
    """Whether ``new`` is the library's own wrapper around ``old`` (torch._dynamo wraps
    torch.manual_seed when it is first imported, say): its ``__wrapped__`` chain reaches ``old``
    and its code lives in the same package's files, not in a notebook. (The grader's guard,
    coursekit/grading/guard.py, makes the same judgement with this function.)"""
    root = (getattr(old, "__module__", None) or "").split(".")[0]
    package = getattr(sys.modules.get(root), "__file__", None)
    code = getattr(new, "__code__", None)
    if (
        not package
        or code is None
        or not code.co_filename.startswith(package.rsplit("/", 1)[0] + "/")
    ):
        return False
    for _ in range(8):
        new = getattr(new, "__wrapped__", None)
        if new is old:
            return True
        if new is None:
            return False
    return False


def _tampered() -> list[str]:
    """What the tests rely on that is no longer what it was."""
    for key, value in _snapshot().items():  # modules imported since (torch, say)
        _ORIGINALS.setdefault(key, value)
    _snapshot_library()
    changed = []
    for (module_name, name), (value, code) in list(_ORIGINALS.items()):
        module = sys.modules.get(module_name)
        now = getattr(module, name, None) if module is not None else None
        if now is not value and library_wrapper(now, value):
            _ORIGINALS[module_name, name] = (now, getattr(now, "__code__", None))
        elif now is not value:
            changed.append(f"{module_name}.{name} was replaced")
        elif code is not None and getattr(now, "__code__", None) is not code:
            changed.append(f"the code of {module_name}.{name} was replaced")
    return changed


def _require_untampered() -> None:
    changed = _tampered()
    if changed:
        raise AssertionError(
            "the tests cannot be trusted: "
            + "; ".join(changed[:4])
            + ("; ..." if len(changed) > 4 else "")
            + ". Put the originals back (restart the kernel) and run the tests again."
        )


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
    _require_untampered()
    got = tuple(getattr(actual, "shape", np.shape(actual)))
    if got != tuple(shape):
        _fail(what, f"expected shape {tuple(shape)}, got {got}", hint)


def expect_close(
    actual, expected, what: str, hint: str | None = None, rtol: float = 1e-6, atol: float = 1e-8
) -> None:
    """Same shape, no NaN/inf where none is expected, equal within tolerances."""
    _require_untampered()
    if actual is None:
        _fail(what, "got None: did the function forget to `return` its result?", hint)
    got, want = to_numpy(actual), to_numpy(expected)
    expect_shape(got, want.shape, what, hint)
    bad = ~np.isfinite(got) & np.isfinite(want)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        _fail(
            what,
            f"got {_num(got[index])} at index {index} where {_num(want[index])} was expected "
            "(NaN or inf: an overflow?)",
            hint,
        )
    if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        diff = np.where(np.isnan(diff), np.inf, diff)
        index = tuple(int(i) for i in np.unravel_index(np.argmax(diff), diff.shape))
        _fail(
            what,
            f"values differ by up to {diff[index]:.3g}: at index {index} got "
            f"{_num(got[index])}, expected {_num(want[index])}",
            hint,
        )


def expect_raises(error: type[BaseException], call, what: str, hint: str | None = None) -> None:
    """``call()`` raises ``error``."""
    _require_untampered()
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


def _from_library(value) -> str | None:
    """The attention_ref module ``value`` is, or comes from (None when it is not the library's)."""
    value = getattr(value, "func", value)  # functools.partial(reference, ...)
    if isinstance(value, types.ModuleType):
        module = value.__name__
    else:
        module = getattr(value, "__module__", "") or ""
    return module if module.startswith("attention_ref") else None


def expect_own_function(fn, name: str) -> None:
    """``fn`` is a function defined in this notebook, not the reference library's answer.

    Graded exercises must be written in the notebook. A function imported from
    ``attention_ref`` (or one that calls the library's function of the same name, directly,
    through a helper of the notebook or an import inside the function) earns nothing; using
    the library for what *earlier* lessons built is fine.
    """
    _require_untampered()
    if not isinstance(fn, types.FunctionType):
        raise AssertionError(
            f"{name} should be a function defined with `def {name}(...)` in "
            f"this notebook, got {type(fn).__name__}"
        )
    if fn.__module__ != "__main__" or fn.__globals__.get("__name__") != "__main__":
        source = fn.__globals__.get("__name__", fn.__module__)
        raise AssertionError(
            f"{name} comes from {source}, not from this notebook: write "
            f"it here (importing the answer earns no points)"
        )
    seen, todo = set(), [fn]
    while todo:  # fn and the notebook's own functions it calls
        current = todo.pop()
        if current.__code__ in seen:
            continue
        seen.add(current.__code__)
        names = _referenced_names(current.__code__)
        if name in names and any(n.startswith("attention_ref") for n in names):
            raise AssertionError(
                f"{name} imports attention_ref and uses its {name}: write it yourself "
                f"(calling the reference earns no points)"
            )
        for ref in names:
            target = current.__globals__.get(ref)
            module = _from_library(target)
            if module is not None:
                if isinstance(target, types.ModuleType) and name in names:
                    raise AssertionError(
                        f"{name} calls {module}.{name}: write it yourself "
                        f"(calling the reference earns no points)"
                    )
                if getattr(getattr(target, "func", target), "__name__", None) == name:
                    raise AssertionError(
                        f"{name} calls the reference {module}.{name}: write it yourself "
                        f"(calling the reference earns no points)"
                    )
            elif isinstance(target, types.FunctionType) and target.__globals__ is fn.__globals__:
                todo.append(target)


_ORIGINALS.update(_snapshot())
_snapshot_library()
