"""Everything a state holds, counted by reachability, and the check that a graded call keeps no
state of its own outside what it is given and what it returns.

:func:`holdings` walks an object as the garbage collector would, type by type (the grading
sandbox refuses ``gc.get_referents``): the keys *and* values of dicts, lists, tuples, sets,
deques, ``bytes`` and strings, objects' attributes (``__dict__`` and ``__slots__``),
``functools.partial``'s function and arguments, functions' defaults and closures, the attributes
hung on a tensor. An object of a C type that keeps references in no attribute (an iterator, a
random generator's internal state) is counted for its own size but not entered. Each object is
counted once; each NumPy buffer once (a view counts its base's whole buffer, once however many
views share it); each torch storage once (by device and address, at
``untyped_storage().nbytes()``: a view of a big buffer holds the whole buffer). Modules, classes
and the library's functions are not state: the walk does not enter them.

:func:`expect_no_hidden_state` runs a graded call and fails if it left the notebook's globals, its
functions' defaults, closures and attributes, the course library's modules or the builtins other
than they were: a cache in a module-level dict keyed by ``id(cache)``, a default argument that
remembers, a list appended to at each call. What the call was given (and everything reachable from
its arguments) and what it returns may change; that is the exercise's state.
"""

from __future__ import annotations

import builtins
import collections
import functools
import re
import sys
import types
from dataclasses import dataclass, field

import numpy as np

from .checks import fail
from .tamper import require_untampered

# objects the walk counts but does not enter: code and its containers, not state
_OPAQUE = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType, types.CodeType, types.FrameType)  # fmt: skip


@dataclass
class Holdings:
    """What one object holds, everything reachable from it counted once."""

    bytes: int = 0  # all of it: array buffers, tensor storages and Python objects
    data_bytes: int = 0  # the data alone: buffers and storages, bytes and strings, numbers
    array_bytes: int = 0  # NumPy buffers and torch storages (each once)
    objects: int = 0  # Python objects reached
    arrays: int = 0  # distinct NumPy buffers and torch storages
    # references followed, also to objects already counted or skipped: a global list that grows by
    # one more reference to an argument holds no new object, yet it is a list that remembers
    links: int = 0
    # (where, data bytes): the parts that hold the most, e.g. ("memory[key 0]", 4096)
    largest: list[tuple[str, int]] = field(default_factory=list)

    def describe(self, top: int = 3) -> str:
        parts = ", ".join(f"{where} ({size:,} bytes)" for where, size in self.largest[:top])
        return f"{self.data_bytes:,} bytes of data in {self.objects:,} objects" + (
            f"; the most in {parts}" if parts else ""
        )


def _scalar_bytes(value) -> int:
    """The data a bytes, string or number holds (not the object's overhead)."""
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, memoryview):
        return value.nbytes
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    if isinstance(value, bool) or value is None:
        return 0
    if isinstance(value, int):
        return max(1, (value.bit_length() + 7) // 8)
    if isinstance(value, float):
        return 8
    if isinstance(value, complex):
        return 16
    return 0


_ATOMS = (type(None), bool, int, float, complex, str, bytes)


def _torch_tensor(value) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _buffer(value) -> tuple[object, int]:
    """The key of the memory behind an array or tensor, and its size in bytes."""
    if isinstance(value, np.ndarray):
        base = value
        while isinstance(base.base, np.ndarray):
            base = base.base
        if base.base is not None:  # memory lent by another object (a tensor, a bytes, mmap)
            return ("lent", id(base.base)), base.nbytes
        return ("numpy", id(base)), base.nbytes
    if value.device.type == "meta":
        return ("meta", id(value)), 0
    storage = value.untyped_storage()
    return ("torch", str(value.device), storage.data_ptr()), storage.nbytes()


def _children(value, where: str) -> list[tuple[object, str]]:
    """What ``value`` refers to, each with a readable path."""
    if isinstance(value, dict):
        found = []
        for i, (key, item) in enumerate(value.items()):
            found += [(key, f"{where}[key {i}]"), (item, f"{where}[{key!r:.40}]")]
        return found
    if isinstance(value, (list, tuple)):
        return [(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        return [(item, f"{where}{{item}}") for item in value]
    if isinstance(value, np.ndarray):
        return [(item, f"{where}[...]") for item in value.flat] if value.dtype == object else []
    if _torch_tensor(value):
        return [(v, f"{where}.{k}") for k, v in vars(value).items()] if vars(value) else []
    if isinstance(value, types.FunctionType):
        return _function_state(value, where)
    if isinstance(value, functools.partial):
        return [(value.func, f"{where}.func"), (value.args, f"{where}.args"),
                (value.keywords, f"{where}.keywords")]  # fmt: skip
    if isinstance(value, collections.deque):
        return [(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, types.CellType):
        return _cell(value, where)
    found = [(item, f"{where}.{name}") for name, item in _instance_dict(value).items()]
    return found + [(item, f"{where}.{name}") for name, item in _slots(value)]


# The walk reads attributes and containers type by type, never through gc.get_referents: the
# grading sandbox refuses the gc module's walks (coursekit/grading/sandbox.py), which would let
# any reference into other objects' frames out. What it cannot see, it says so in its docstring.


def _instance_dict(value) -> dict:
    try:
        found = object.__getattribute__(value, "__dict__")
    except (AttributeError, TypeError):
        return {}
    return found if isinstance(found, dict) else {}


def _slots(value) -> list[tuple[str, object]]:
    """The values in an object's ``__slots__`` (every class of its MRO), those that are set."""
    found = []
    for cls in type(value).__mro__:
        names = cls.__dict__.get("__slots__", ())
        for name in (names,) if isinstance(names, str) else names:
            if name in ("__dict__", "__weakref__"):
                continue
            try:
                found.append((name, object.__getattribute__(value, name)))
            except AttributeError:  # a slot never set
                pass
    return found


def _cell(cell, where: str) -> list[tuple[object, str]]:
    try:
        return [(cell.cell_contents, f"{where}.cell_contents")]
    except ValueError:  # an empty cell
        return []


def _function_state(fn, where: str) -> list[tuple[object, str]]:
    """A function's own state: its defaults, its closure's cells and its attributes."""
    found = [(d, f"{where} default {i}") for i, d in enumerate(fn.__defaults__ or ())]
    found += [(d, f"{where} default {k}") for k, d in (fn.__kwdefaults__ or {}).items()]
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        found += _cell(cell, f"{where} closure {name}")
    return found + [(v, f"{where}.{k}") for k, v in vars(fn).items()]


def holdings(value, where: str = "state", skip=(), home: dict | None = None) -> Holdings:
    """Everything ``value`` holds, reached as the garbage collector reaches it, each object,
    NumPy buffer and torch storage counted once. ``skip``: objects (and what only they reach)
    not to count, e.g. the inputs a cache refers to. The notebook's functions (and those whose
    globals are ``home``) are entered for their defaults, closures and attributes; modules,
    classes and other functions are not."""
    # an atom skipped (None, a number, a string) would hide every other reference to it
    seen = {id(s) for s in skip if not isinstance(s, _ATOMS)}
    buffers, total = set(), Holdings()
    parts: dict[str, int] = {}
    todo = [(value, where, None)]  # (object, its path, the part of ``value`` it belongs to)
    while todo:
        item, path, part = todo.pop()
        total.links += 1
        if id(item) in seen:
            continue
        seen.add(id(item))
        total.objects += 1
        overhead = sys.getsizeof(item, 0)
        if isinstance(item, np.ndarray) and item.flags.owndata:
            overhead -= item.nbytes  # counted with its buffer, below
        total.bytes += max(overhead, 0)
        data = _scalar_bytes(item)
        if isinstance(item, np.ndarray) or _torch_tensor(item):
            key, nbytes = _buffer(item)
            if key not in buffers:
                buffers.add(key)
                total.arrays += 1
                total.array_bytes += nbytes
                total.bytes += nbytes
                data += nbytes
        total.data_bytes += data
        if part is not None:
            parts[part] = parts.get(part, 0) + data
        if isinstance(item, _OPAQUE) and not _notebook_function(item, home):
            continue
        todo += [(child, p, part or p) for child, p in _children(item, path)]
    total.largest = sorted(((w, b) for w, b in parts.items() if b), key=lambda wb: -wb[1])[:5]
    return total


def _notebook_function(value, home: dict | None = None) -> bool:
    return isinstance(value, types.FunctionType) and (
        value.__module__ == "__main__" or value.__globals__ is home
    )


# ---- a graded call leaves everything else as it was ---------------------------------------------


def _module_state(module, skip=()) -> dict[str, tuple]:
    """A fingerprint of each mutable value a module holds (functions and submodules left out;
    ``skip``: objects not to walk into)."""
    found = {}
    for name, value in list(vars(module).items()):
        if isinstance(value, _OPAQUE) and not _notebook_function(value):
            found[name] = (id(value),)
        elif not name.startswith("__"):
            found[name] = _fingerprint(value, skip)
    return found


def _fingerprint(value, skip=(), home: dict | None = None) -> tuple:
    held = holdings(value, skip=skip, home=home)
    return (id(value), held.objects, held.bytes, held.arrays, held.links)


# What Python and IPython keep in a kernel's namespace: IPython's history; `exit`, `quit` and
# `get_ipython`, which hold the shell (a call that prints changes its state, and through it every
# object of the session); and the registry of warnings already shown, which a call that warns grows.
_IPYTHON = re.compile(
    r"_{1,3}|_i{1,3}|_i?\d+|_oh|_ih|_dh|In|Out|exit|quit|get_ipython|__warningregistry__"
)


def _library_modules() -> list:
    return [m for n, m in list(sys.modules.items()) if n.split(".")[0] == "attention_ref" and m]


def state_outside(fn, skip=()) -> dict[str, tuple]:
    """A fingerprint of what a call of ``fn`` could keep state in besides its arguments: the
    notebook's globals (values, and its functions' defaults, closures and attributes), the
    course library's modules and the builtins (``skip``: objects not to walk into)."""
    namespace = getattr(fn, "__globals__", {})
    found = {}
    for name, value in list(namespace.items()):
        if _IPYTHON.fullmatch(name) or name == "__builtins__":
            continue  # IPython's history of inputs and outputs, which a call does not change
        if not isinstance(value, types.ModuleType):
            found[f"global {name}"] = _fingerprint(value, skip, namespace)
    # A library module may refer to the call's arguments or to the notebook's namespace itself
    # (the check helpers' record of the running cell does): both are fingerprinted on their own
    # terms above, and an argument grows as it should, so neither is walked again from a module.
    for module in _library_modules():
        for name, print_ in _module_state(module, [*skip, namespace]).items():
            found[f"{module.__name__}.{name}"] = print_
    found["builtins"] = tuple(sorted(vars(builtins)))
    return found


def expect_no_hidden_state(fn, *args, what: str, hint: str | None = None, **kwargs):
    """Run ``fn(*args, **kwargs)`` and fail if it changed anything outside its arguments and its
    result: a global of the notebook bound, rebound or grown (a dict keyed by ``id(cache)``, a
    list that remembers), a default argument, closure or attribute of the notebook's functions,
    a value in the course library's modules, the builtins. Returns ``fn``'s result."""
    require_untampered()
    given = [args, kwargs, *args, *kwargs.values()]
    before = state_outside(fn, skip=given)
    result = fn(*args, **kwargs)
    after = state_outside(fn, skip=[*given, result])
    changed = [k for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
    if changed:
        names = ", ".join(changed[:4]) + (", ..." if len(changed) > 4 else "")
        fail(
            what,
            f"the call changed {names}: state kept outside what it is given and returns",
            hint
            or "keep everything the computation needs between calls in the object it is given "
            "(the cache, the memory), and nothing in globals, default arguments or modules",
        )
    return result


def expect_holds_at_most(state, limit: int, what: str, hint: str | None = None, skip=()) -> int:
    """Everything ``state`` holds is at most ``limit`` bytes of data: array buffers and tensor
    storages (each once), and the bytes, strings and numbers kept anywhere in it, dict keys
    included (:func:`holdings`; the containers' own overhead is not counted). ``skip``: objects
    the state may refer to without holding them (the inputs). Returns the bytes held."""
    require_untampered()
    held = holdings(state, skip=skip)
    if held.data_bytes > limit:
        fail(what, f"it holds more than {limit:,} bytes: {held.describe()}", hint)
    return held.data_bytes
