"""Whether a graded function is the notebook's own work, not the reference library's answer."""

from __future__ import annotations

import sys
import types

from .checks import fail
from .tamper import require_untampered


def _referenced_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _referenced_names(const)
    return names


def from_library(value) -> str | None:
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
    require_untampered()
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
            module = from_library(target)
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
    reached = equivalents_reached(fn, name)
    if reached:
        raise AssertionError(
            f"{name} uses {', '.join(reached)}, which already computes this exercise's answer "
            f"(run on the tests' inputs, it returns what {name} must): write the computation "
            "yourself (a function the lesson or the library gives earns no points)"
        )


def equivalents_reached(fn, name: str) -> list[str]:
    """The answer-equivalent callables of the graded function ``name`` (found by machine:
    attention_ref.equivalents) that ``fn`` reaches: a library function by name or through its
    module, a notebook function (not one defined in ``fn``'s own cell) through the notebook's
    functions it calls."""
    from attention_ref.equivalents import equivalents

    forbidden = {e for names in equivalents(name).values() for e in names}
    if not forbidden:
        return []
    reached = library_functions_used(fn) & forbidden
    own_cell = fn.__code__.co_filename
    seen, todo = set(), [fn]
    while todo:  # fn and the notebook's functions it calls
        current = todo.pop()
        if current.__code__ in seen:
            continue
        seen.add(current.__code__)
        for ref in _referenced_names(current.__code__):
            target = current.__globals__.get(ref)
            if (
                not isinstance(target, types.FunctionType)
                or target.__globals__ is not fn.__globals__
            ):
                continue
            if target.__code__.co_filename != own_cell and target.__name__ in forbidden:
                reached.add(target.__name__)
            todo.append(target)
    return sorted(reached)


def names_used(fn) -> set[str]:
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


def _library_members(modules: list, names: set[str]) -> set[str]:
    """``module.name`` of each library function among ``names`` that one of ``modules`` holds
    (``r.softmax`` after ``import attention_ref.np as r``), submodules followed."""
    found, todo, seen = set(), list(modules), set()
    while todo:
        module = todo.pop()
        if module.__name__ in seen:
            continue
        seen.add(module.__name__)
        for ref in names:
            member = getattr(module, ref, None)
            if isinstance(member, types.ModuleType) and from_library(member):
                todo.append(member)
            elif callable(member) and from_library(member):
                found.add(f"{from_library(member)}.{getattr(member, '__name__', ref)}")
    return found


def library_functions_used(fn) -> set[str]:
    """The reference library's functions that ``fn`` (and the notebook's functions it calls)
    reach by name, as ``module.name``: through the notebook's globals, a library module's
    attribute, or an import inside the function."""
    found, seen, todo = set(), set(), [fn]
    while todo:
        current = todo.pop()
        if current.__code__ in seen:
            continue
        seen.add(current.__code__)
        names = _referenced_names(current.__code__)
        modules = [
            sys.modules[n] for n in names if n.startswith("attention_ref") and n in sys.modules
        ]
        for ref in names:
            target = current.__globals__.get(ref)
            module = from_library(target)
            if isinstance(target, types.ModuleType) and module:
                modules.append(target)
            elif module is not None and callable(target):
                found.add(f"{module}.{getattr(getattr(target, 'func', target), '__name__', ref)}")
            elif isinstance(target, types.FunctionType) and target.__globals__ is fn.__globals__:
                todo.append(target)
        found |= _library_members(modules, names)
    return found


def expect_no_library_call(fn, what: str, allowed: tuple = (), hint: str | None = None) -> None:
    """``fn`` reaches no function of the reference library but those named in ``allowed``
    (bare names, e.g. ``"plain_softmax"``): where the library's own care for an edge case (a
    softmax that returns zeros for a row of -inf) would do the exercise's work for it."""
    require_untampered()
    used = sorted(
        n for n in library_functions_used(_undecorated(fn)) if n.rsplit(".", 1)[-1] not in allowed
    )
    if used:
        fail(what, f"it uses the course library's {', '.join(used)}", hint)
