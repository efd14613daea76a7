"""State kept outside what a graded call is given, found without the garbage collector.

``holdings.expect_no_hidden_state`` walks every object the way ``gc.get_referents`` does, which
the grading sandbox refuses (an audit hook: no notebook may walk the interpreter's objects while
it is graded). This narrower check needs none of that: it fingerprints, by content, what the
graded functions can keep data in besides their arguments -- the notebook's globals they name
(through the notebook's functions they call too), their default arguments, closures and
attributes, and the names held by the modules they name -- and fails if a call changed any of it.
A fingerprint walks dicts (keys too), lists, tuples, sets, NumPy arrays (their bytes), tensors
and objects' ``__dict__``; anything else is fingerprinted by ``pickle`` where it can be, by its
identity where it cannot."""

from __future__ import annotations

import hashlib
import pickle
import types

import numpy as np

from .checks import fail
from .ownership import names_used
from .tamper import require_untampered

_CODE = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)


def _digest(value, seen: set, out) -> None:
    """Feed ``value``'s content into the hash ``out`` (each container once)."""
    if id(value) in seen:
        out.update(b"seen")
        return
    seen.add(id(value))
    out.update(type(value).__qualname__.encode())
    if isinstance(value, dict):
        for key, item in value.items():
            _digest(key, seen, out)
            _digest(item, seen, out)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value:
            _digest(item, seen, out)
    elif isinstance(value, np.ndarray):
        out.update(repr((value.shape, value.dtype)).encode() + np.ascontiguousarray(value).tobytes())
    elif type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        out.update(value.detach().cpu().numpy().tobytes() if value.device.type != "meta" else b"")
    elif isinstance(value, (types.ModuleType, *_CODE)):
        out.update(str(id(value)).encode())
    elif hasattr(value, "__dict__"):
        _digest(vars(value), seen, out)
    else:
        try:
            out.update(pickle.dumps(value))
        except Exception:  # noqa: BLE001 -- an object pickle cannot take: its identity
            out.update(str(id(value)).encode())


def _fingerprint(value) -> str:
    out = hashlib.sha256()
    _digest(value, set(), out)
    return out.hexdigest()


def _places(fns) -> dict[str, object]:
    """Where the functions could keep data: {readable name: the object that would change}."""
    places = {}
    for fn in fns:
        places[f"{fn.__name__}'s defaults, closure and attributes"] = (
            fn.__defaults__, fn.__kwdefaults__,
            [c.cell_contents for c in fn.__closure__ or () if c.cell_contents is not fn],
            vars(fn),
        )  # fmt: skip
        for name in sorted(names_used(fn)):
            value = fn.__globals__.get(name)
            if isinstance(value, types.ModuleType):
                places[f"the module {name}'s names"] = sorted(vars(value))
            elif isinstance(value, types.FunctionType) and value.__globals__ is fn.__globals__:
                places[f"{name}'s defaults, closure and attributes"] = (
                    value.__defaults__, value.__kwdefaults__, vars(value),
                )  # fmt: skip
            elif name in fn.__globals__ and not isinstance(value, _CODE):
                places[f"the global {name}"] = value
    return places


def expect_nothing_kept_outside(fns, call, what: str, hint: str | None = None):
    """Run ``call()`` (which calls the graded functions ``fns`` with their arguments) and fail if
    it changed a place the functions could keep data in besides their arguments (module
    docstring). Returns what ``call`` returns."""
    require_untampered()
    before = {where: _fingerprint(value) for where, value in _places(fns).items()}
    result = call()
    after = {where: _fingerprint(value) for where, value in _places(fns).items()}
    changed = sorted(w for w in set(before) | set(after) if before.get(w) != after.get(w))
    if changed:
        fail(
            what,
            f"the calls changed {', '.join(changed[:3])}: data kept outside what they are given",
            hint or "keep everything between calls in the object the functions are given",
        )
    return result
