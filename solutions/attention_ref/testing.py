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


def _undecorated(fn):
    """``fn`` without the decorators of PyTorch and the standard library that wrap it
    (``@torch.no_grad()``, ``@torch.inference_mode()``, ``@functools.cache``): the function the
    notebook wrote. A decorator written in the notebook is kept, and checked like any function."""
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    torch_dir = torch_file.rsplit("/", 1)[0] + "/" if torch_file else None
    for _ in range(8):
        inner = getattr(fn, "__wrapped__", None)
        code = getattr(fn, "__code__", None)
        in_torch = bool(torch_dir and code is not None and code.co_filename.startswith(torch_dir))
        if inner is None or not (in_torch or type(fn).__module__ == "functools"):
            return fn
        fn = inner
    return fn


def expect_own_function(fn, name: str) -> None:
    """``fn`` is a function defined in this notebook, not the reference library's answer.

    Graded exercises must be written in the notebook. A function imported from
    ``attention_ref`` (or one that calls the library's function of the same name, directly,
    through a helper of the notebook or an import inside the function) earns nothing; using
    the library for what *earlier* lessons built is fine. A notebook function decorated with
    ``@torch.no_grad()`` (or another decorator of PyTorch or functools) is the notebook's own.
    """
    _require_untampered()
    fn = _undecorated(fn)
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


# ---- contracts beyond the values: dtype, device, how ---------------------------------------
# A result can hold the right numbers and still break the function's contract: a mask of 0/1
# integers (then ``~mask`` flips bits instead of negating), float32 inputs answered in float64,
# a tensor built on the CPU when the inputs live on a GPU, a two-pass softmax where the exercise
# is the one-pass algorithm. These checks make such results fail, with a message that says why.


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def expect_dtype(actual, dtype, what: str, hint: str | None = None) -> None:
    """The result has exactly ``dtype``: a NumPy dtype (``bool``, ``np.float32``, ...) for
    arrays, a torch dtype (``torch.bool``, ...) for tensors."""
    _require_untampered()
    if actual is None:
        _fail(what, "got None: did the function forget to `return` its result?", hint)
    if type(dtype).__module__ == "torch":  # a torch.dtype
        got = getattr(actual, "dtype", None)
        if not hasattr(actual, "detach"):
            _fail(
                what,
                f"expected a torch.Tensor of dtype {_dtype_name(dtype)}, got "
                f"{type(actual).__name__}",
                hint,
            )
        if got != dtype:
            _fail(what, f"expected dtype {_dtype_name(dtype)}, got {_dtype_name(got)}", hint)
        return
    got = np.asarray(to_numpy(actual)).dtype
    if got != np.dtype(dtype):
        _fail(what, f"expected dtype {np.dtype(dtype)}, got {got}", hint)


def expect_integer(value, what: str, hint: str | None = None) -> None:
    """``value`` is an integer (a count), not a float that happens to be whole, nor a bool."""
    _require_untampered()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        _fail(
            what,
            f"expected an integer, got {type(value).__name__} {value!r}",
            hint or "a count is a whole number: `/` makes a float, `//` keeps an integer",
        )


def expect_tensor_like(actual, like, what: str, hint: str | None = None) -> None:
    """``actual`` is a torch.Tensor on ``like``'s device (type) and in ``like``'s dtype: a
    PyTorch function runs where its inputs live and answers in their precision."""
    _require_untampered()
    if not hasattr(actual, "detach") or not hasattr(actual, "device"):
        _fail(what, f"expected a torch.Tensor, got {type(actual).__name__}", hint)
    if actual.device.type != like.device.type:
        _fail(
            what,
            f"the result is on {actual.device}, the inputs on {like.device}",
            hint
            or "stay on the inputs' device: never .cpu(), and create new tensors with "
            "device=x.device (or torch.zeros_like(x), x.new_zeros(...))",
        )
    if actual.dtype != like.dtype:
        _fail(
            what,
            f"the inputs are {_dtype_name(like.dtype)}, the result is {_dtype_name(actual.dtype)}",
            hint
            or "answer in the inputs' dtype: a tensor made with another dtype (the default "
            "float32, or float64) mixed into the computation changes the result's dtype",
        )


# ---- the device contract, checked on any machine --------------------------------------------
# A grader without a GPU cannot see a tensor created on the CPU next to inputs on the CPU. PyTorch's
# "meta" device can: its tensors have shapes and dtypes but no data, so a function run on meta
# inputs shows where it puts what it creates, on any machine. (What it cannot show: code that
# looks at the values, ``if mask.any():`` or ``.item()``; such a call leaves the check undecided,
# and the check then passes.)

_READS_VALUES = {
    "__bool__", "__int__", "__float__", "__index__", "__complex__", "item", "tolist",
    "nonzero", "argwhere", "equal", "allclose", "unique", "masked_select",
}  # fmt: skip
_LEAVES_DEVICE = {"cpu", "cuda", "mps", "numpy", "to"}


class _Undecided(Exception):
    """The function reads values, which meta tensors do not have."""


class _LeftDevice(Exception):
    """The function moved a tensor off its inputs' device."""


def _meta_mode(truth):
    """A TorchFunctionMode that stops at value reads and moves off the meta device (``truth``:
    the answer to ``bool(tensor)``, or None to leave the check undecided there)."""
    import torch
    from torch.overrides import TorchFunctionMode

    class OnMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            first = args[0] if args else None
            if isinstance(first, torch.Tensor) and first.device.type == "meta":
                if name == "__bool__" and truth is not None:
                    return truth
                if name in _READS_VALUES:
                    raise _Undecided(name)
                if name in _LEAVES_DEVICE:
                    target = (
                        torch._C._nn._parse_to(*args[1:], **kwargs)[0] if name == "to" else name
                    )
                    if target is not None and getattr(target, "type", target) != "meta":
                        raise _LeftDevice(f".{name}()" if name != "to" else f".to({target})")
            return func(*args, **kwargs)

    return OnMeta()


def _to_meta(value):
    """``value`` with every tensor, and every module's parameters, on the meta device."""
    import copy

    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("meta")
    if isinstance(value, torch.nn.Module):
        return copy.deepcopy(value).to("meta")
    if isinstance(value, dict):
        return {key: _to_meta(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_meta(item) for item in value)
    return value


def _devices(value) -> set[str]:
    """The device types of every tensor in ``value`` (tensors, dicts, lists, tuples)."""
    if hasattr(value, "device") and hasattr(value, "detach"):
        return {value.device.type}
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return set().union(*(_devices(item) for item in value)) if value else set()
    return set()


def _run_on_meta(fn, args, kwargs, truth) -> tuple[str, object]:
    """(outcome, detail) of ``fn`` run under the meta mode: done (detail: the result), undecided,
    left (how it left the device), mixed (PyTorch's complaint) or raised (the exception)."""
    try:
        with _meta_mode(truth):
            return "done", fn(*args, **kwargs)
    except _Undecided:
        return "undecided", None
    except _LeftDevice as moved:
        return "left", str(moved)
    except Exception as error:  # noqa: BLE001 -- classified below
        text = str(error).strip()
        if isinstance(error, NotImplementedError) and not text:
            raise  # the exercise's stub: the learner sees NotImplementedError, as everywhere
        first = text.splitlines()[0] if text else type(error).__name__
        if "device" in text and "cpu" in text:
            return "mixed", first
        if "meta" in text.lower():
            return "undecided", None  # an operation PyTorch cannot run without data
        return "raised", f"{type(error).__name__}: {first}"


_DEVICE_HINT = (
    "create new tensors on the inputs' device, torch.zeros(..., device=x.device), "
    "torch.zeros_like(x) or x.new_zeros(...), and never move anything with .cpu() or .numpy()"
)


def _judge_meta(outcome: str, detail, what: str, hint: str | None, setting: str) -> None:
    hint = hint or _DEVICE_HINT
    if outcome == "mixed":
        _fail(what, f"{setting}, a tensor made on the CPU met them: {detail}", hint)
    if outcome == "left":
        _fail(what, f"{setting}, the function moved a tensor off that device with {detail}", hint)
    if outcome == "raised":
        _fail(what, f"{setting}, it raised {detail}", hint)
    if outcome == "done" and _devices(detail) - {"meta"}:
        _fail(
            what, f"{setting}, the result came back on {sorted(_devices(detail) - {'meta'})}", hint
        )


def expect_device_agnostic(fn, *args, what: str, hint: str | None = None, truth=None, **kwargs):
    """``fn(*args, **kwargs)`` runs where its inputs live: with every tensor argument (and the
    parameters of every module argument) on PyTorch's ``meta`` device, it creates nothing on the
    CPU, moves nothing off, and returns its tensors on ``meta``.

    This checks on a machine without a GPU what a GPU would show. ``truth``: what ``bool(tensor)``
    answers during the check (e.g. False, so that ``if finished.all(): break`` lets a loop run on);
    by default a function that looks at values cannot be checked this way and passes. Returns the
    result on ``meta`` (shapes and dtypes only), or None when the check was undecided.
    """
    _require_untampered()
    setting = (
        "with its inputs on another device than the CPU (PyTorch's 'meta' device, which holds "
        "no data, stands in for a GPU here)"
    )
    outcome, detail = _run_on_meta(fn, _to_meta(args), _to_meta(kwargs), truth)
    _judge_meta(outcome, detail, what, hint, setting)
    return detail if outcome == "done" else None


def expect_device_argument(fn, *args, what: str, hint: str | None = None, **kwargs):
    """``fn(*args, device=..., **kwargs)`` puts its result on the ``device`` it is given, checked
    with PyTorch's ``meta`` device (which every machine has) rather than a GPU."""
    _require_untampered()
    import torch

    setting = "asked for device='meta' (a device without data that stands in for a GPU here)"
    outcome, detail = _run_on_meta(fn, args, {**kwargs, "device": torch.device("meta")}, None)
    _judge_meta(
        outcome,
        detail,
        what,
        hint
        or "build on the CPU if you like, then move the finished "
        "result with .to(device=device): the device argument is where the caller wants it",
        setting,
    )
    return detail if outcome == "done" else None


# ---- how: where an exercise's point is the method, watch the method ---------------------------


class TorchRecord:
    """What PyTorch ran during one call (see :func:`record_torch`)."""

    def __init__(self):
        self.calls: dict[str, int] = {}  # function name -> how many times it ran
        self.largest_bytes = 0  # the largest storage behind a tensor any function returned

    def count(self, *fragments: str) -> int:
        """How many calls had a name containing one of ``fragments`` ("conv", "matmul", ...)."""
        return sum(n for name, n in self.calls.items() if any(f in name for f in fragments))


def record_torch(fn, *args, **kwargs):
    """Run ``fn(*args, **kwargs)``; return ``(result, record)``: each PyTorch function it ran
    (``record.calls``, by name: ``conv1d``, ``matmul``, ``softmax``, ...) and the largest block of
    memory behind any tensor those functions returned (``record.largest_bytes``)."""
    _require_untampered()
    import torch
    from torch.overrides import TorchFunctionMode

    record = TorchRecord()

    class Recording(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = getattr(func, "__name__", str(func))
            record.calls[name] = record.calls.get(name, 0) + 1
            for tensor in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(tensor, torch.Tensor) and tensor.device.type != "meta":
                    size = tensor.untyped_storage().nbytes()
                    record.largest_bytes = max(record.largest_bytes, size)
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
        _fail(
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
    _require_untampered()
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


def _names_used(fn) -> set[str]:
    """The global and attribute names used by ``fn`` and by the notebook's functions it calls."""
    names, seen, todo = set(), set(), [fn]
    while todo:
        current = todo.pop()
        if current.__code__ in seen:
            continue
        seen.add(current.__code__)
        used = _referenced_names(current.__code__)
        names |= used
        for ref in used:
            target = current.__globals__.get(ref)
            if isinstance(target, types.FunctionType) and target.__globals__ is fn.__globals__:
                todo.append(target)
    return names


def expect_one_pass(fn, row, what: str, hint: str | None = None):
    """``fn(row)`` makes a single pass over the 1-D ``row``: it reads each entry once (one loop)
    and computes no maximum or sum over the whole row, neither of the row nor of an array computed
    from it (``np.max(row)``, ``np.exp(row - m).sum()``: passes of their own), and it calls no
    ready-made softmax. Elementwise arithmetic on the whole row (``np.exp(row - m) / l``) is
    fine. Returns ``fn``'s result as a plain array."""
    _require_untampered()
    hint = hint or (
        "one loop over the entries updates the running maximum m and the running sum l together; "
        "after it, exp(row - m) / l on the whole row is the softmax"
    )
    for banned in ("softmax", "log_softmax", "logsumexp"):
        if banned in _names_used(fn):
            _fail(what, f"{fn.__name__} calls {banned}, which makes passes of its own", hint)
    log = _ReadLog(len(row))
    watched = np.array(row).view(_WatchedRow)
    watched._log = log
    result = fn(watched)
    if log.reductions:
        done = ", ".join(sorted(set(log.reductions)))
        _fail(
            what,
            f"it reduced the whole row at once ({done}: np.max or np.sum of the row or "
            "of an array computed from it), a pass of its own besides the loop",
            hint,
        )
    if log.reads > log.size:
        _fail(
            what,
            f"it read the row's {log.size} entries {log.reads} times in all: more than one pass",
            hint,
        )
    return None if result is None else np.asarray(result).view(np.ndarray)
