"""The check helpers: values, shapes, errors, dtypes and devices, with messages that say what is
wrong.

Every ``expect_*`` raises AssertionError with a message that names the property that failed
(and, where one helps, a hint about why), so a learner reads the message, not the test code.
NumPy only; torch tensors are accepted and moved to the CPU for comparison.
"""

from __future__ import annotations

import numpy as np

from .tamper import require_untampered


def to_numpy(x) -> np.ndarray:
    """A NumPy view of an array, a tensor (any device, with or without grad) or a number."""
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":  # NumPy has no bfloat16
            x = x.float()
        x = x.numpy()
    return np.asarray(x)


def _num(x) -> str:
    """A number as a person writes it (not ``np.float32(0.5)``); a boolean as True or False
    (a mask's mismatch reads "got True, expected False", not "got 1, expected 0")."""
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    try:
        return f"{float(x):.6g}"
    except (TypeError, ValueError):
        return repr(x)


def fail(what: str, problem: str, hint: str | None) -> None:
    """Raise the AssertionError of a failed check. Its parts ride along as attributes (``what``,
    ``problem``, ``hint``), so that a notebook can show the message first and add the check's
    hint when the test cell gives none (attention_ref.testing.display); the error itself stays a
    plain AssertionError, which is what nbgrader, make check and feedback read by name."""
    message = f"{what}: {problem}"
    if hint:
        message += f"\n  Hint: {hint}"
    error = AssertionError(message)
    error.what, error.problem, error.hint = what, problem, hint or None
    raise error


def expect_shape(actual, shape: tuple, what: str, hint: str | None = None) -> None:
    """The result has exactly ``shape``."""
    require_untampered()
    got = tuple(getattr(actual, "shape", np.shape(actual)))
    if got != tuple(shape):
        fail(what, f"expected shape {tuple(shape)}, got {got}", hint)


def expect_close(
    actual, expected, what: str, hint: str | None = None, rtol: float = 1e-6, atol: float = 1e-8
) -> None:
    """Same shape, no NaN/inf where none is expected, equal within tolerances."""
    require_untampered()
    if actual is None:
        fail(what, "got None: did the function forget to `return` its result?", hint)
    got, want = to_numpy(actual), to_numpy(expected)
    expect_shape(got, want.shape, what, hint)
    bad = ~np.isfinite(got) & np.isfinite(want)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        fail(
            what,
            f"got {_num(got[index])} at index {index} where {_num(want[index])} was expected "
            "(NaN or inf: an overflow?)",
            hint,
        )
    if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        diff = np.where(np.isnan(diff), np.inf, diff)
        index = tuple(int(i) for i in np.unravel_index(np.argmax(diff), diff.shape))
        fail(
            what,
            f"values differ by up to {diff[index]:.3g}: at index {index} got "
            f"{_num(got[index])}, expected {_num(want[index])}",
            hint,
        )


def expect_raises(error: type[BaseException], call, what: str, hint: str | None = None) -> None:
    """``call()`` raises ``error``."""
    require_untampered()
    try:
        call()
    except error:
        return
    except Exception as other:  # noqa: BLE001 -- report what was raised instead
        fail(what, f"expected {error.__name__}, got {type(other).__name__}: {other}", hint)
    fail(what, f"expected {error.__name__}, but nothing was raised", hint)


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
    require_untampered()
    if actual is None:
        fail(what, "got None: did the function forget to `return` its result?", hint)
    if type(dtype).__module__ == "torch":  # a torch.dtype
        got = getattr(actual, "dtype", None)
        if not hasattr(actual, "detach"):
            fail(
                what,
                f"expected a torch.Tensor of dtype {_dtype_name(dtype)}, got "
                f"{type(actual).__name__}",
                hint,
            )
        if got != dtype:
            fail(what, f"expected dtype {_dtype_name(dtype)}, got {_dtype_name(got)}", hint)
        return
    got = np.asarray(to_numpy(actual)).dtype
    if got != np.dtype(dtype):
        fail(what, f"expected dtype {np.dtype(dtype)}, got {got}", hint)


def expect_integer(value, what: str, hint: str | None = None) -> None:
    """``value`` is an integer (a count), not a float that happens to be whole, nor a bool."""
    require_untampered()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        fail(
            what,
            f"expected an integer, got {type(value).__name__} {value!r}",
            hint or "a count is a whole number: `/` makes a float, `//` keeps an integer",
        )


def expect_tensor_like(actual, like, what: str, hint: str | None = None) -> None:
    """``actual`` is a torch.Tensor on ``like``'s device (type) and in ``like``'s dtype: a
    PyTorch function runs where its inputs live and answers in their precision."""
    require_untampered()
    if not hasattr(actual, "detach") or not hasattr(actual, "device"):
        fail(what, f"expected a torch.Tensor, got {type(actual).__name__}", hint)
    if actual.device.type != like.device.type:
        fail(
            what,
            f"the result is on {actual.device}, the inputs on {like.device}",
            hint
            or "stay on the inputs' device: never .cpu(), and create new tensors with "
            "device=x.device (or torch.zeros_like(x), x.new_zeros(...))",
        )
    if actual.dtype != like.dtype:
        fail(
            what,
            f"the inputs are {_dtype_name(like.dtype)}, the result is {_dtype_name(actual.dtype)}",
            hint
            or "answer in the inputs' dtype: a tensor made with another dtype (the default "
            "float32, or float64) mixed into the computation changes the result's dtype",
        )
