"""The device contract, checked on any machine.

A grader without a GPU cannot see a tensor created on the CPU next to inputs on the CPU. PyTorch's
"meta" device can: its tensors have shapes and dtypes but no data, so a function run on meta
inputs shows where it puts what it creates, on any machine. (What it cannot show: code that
looks at the values, ``if mask.any():`` or ``.item()``; such a call leaves the check undecided,
and the check then passes.)
"""

from __future__ import annotations

from .checks import fail
from .dynamo_free import dynamo_left_unimported
from .tamper import require_untampered

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
        with _meta_mode(truth), dynamo_left_unimported():
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
        fail(what, f"{setting}, a tensor made on the CPU met them: {detail}", hint)
    if outcome == "left":
        fail(what, f"{setting}, the function moved a tensor off that device with {detail}", hint)
    if outcome == "raised":
        fail(what, f"{setting}, it raised {detail}", hint)
    if outcome == "done" and _devices(detail) - {"meta"}:
        fail(
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
    require_untampered()
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
    require_untampered()
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
