"""Triton's interpreter, patched once per launch instead of once per call (lesson 11).

To run a kernel, Triton's interpreter (3.9) swaps the functions of ``triton.language`` for
NumPy ones for the time of the launch, and puts them back after. But every *call* of a
``@triton.jit`` helper inside the kernel (lesson 11's ``attend_blocks``, and Triton's own
``tl.max``, ``tl.sum``, ``tl.zeros``, ...) swaps them again, about a millisecond each (a fifth to a
quarter of an interpreted attention kernel's time), and those swaps are never undone: after a
launch, ``triton.language.core`` still holds the interpreter's functions, so that the compiler,
run later in the same process, fails on kernels it accepts elsewhere.

:func:`install` wraps the two places: within a launch, a helper's call swaps only the modules the
launch has not swapped yet; after the launch, everything of ``triton.language`` is put back as it
was before any kernel ran (attention_ref.flash.compiler noted it at import).

It also skips work whose result the interpreter throws away: every integer ``+``, ``-`` and ``*``
on a block is computed a second time in int64 and compared with the type's bounds
(``sanitize_overflow``), for a ``tl.device_assert`` that does nothing unless the kernel is run
in debug mode, which the interpreter never is: a third to a half of an interpreted kernel's time;
within a launch that is not in debug mode, the check is off.

The numbers a kernel computes are the same, to the bit (autograde_tests/reference/
test_flash_reference.py compares with Triton's own interpreter).
Where Triton's interpreter is not built this way (another version), nothing is changed.
"""

from __future__ import annotations

import dataclasses
import types

from attention_ref.flash import compiler

_STATE = {"depth": 0, "patched": set(), "installed": False, "originals": None}


def _languages(fn) -> frozenset[int]:
    """The triton.language modules a function's globals hold: what the interpreter swaps for it."""
    from triton.runtime import interpreter

    wanted = (interpreter.tl, interpreter.tl.core)
    found = (v for v in fn.__globals__.values() if isinstance(v, types.ModuleType))
    return frozenset(id(v) for v in found if v in wanted)


def _restore_language() -> None:
    """Everything of triton.language as it was before any kernel ran."""
    for (owner, name), value in compiler._PRISTINE.items():
        if vars(owner).get(name, compiler._ABSENT) is not value:
            setattr(owner, name, value)


def install() -> bool:
    """Wrap the interpreter's swapping (once per process); False where it is not Triton 3.9's."""
    from triton.runtime import interpreter

    needed = ("_patch_lang", "_LangPatchScope", "GridExecutor", "interpreter_builder")
    if _STATE["installed"] or not all(hasattr(interpreter, name) for name in needed):
        return _STATE["installed"]
    swap, launch = interpreter._patch_lang, interpreter.GridExecutor.__call__

    def patch_lang(fn):
        key = _languages(fn)
        if _STATE["depth"] and key <= _STATE["patched"]:
            return interpreter._LangPatchScope()  # swapped already in this launch
        scope = swap(fn)
        if _STATE["depth"]:
            _STATE["patched"].update(key)
        return scope

    def run(self, *args, **kwargs):
        builder = interpreter.interpreter_builder
        options = builder.options
        if not _STATE["depth"] and not options.debug and options.sanitize_overflow:
            # its only use is an assertion that device_assert drops when not debug
            builder.options = dataclasses.replace(options, sanitize_overflow=False)
        _STATE["depth"] += 1
        try:
            return launch(self, *args, **kwargs)
        finally:
            _STATE["depth"] -= 1
            if not _STATE["depth"]:
                _STATE["patched"].clear()
                _restore_language()
                builder.options = options

    interpreter._patch_lang = patch_lang
    interpreter.GridExecutor.__call__ = run
    _STATE.update(installed=True, originals=(swap, launch))
    return True


def uninstall() -> None:
    """Triton's interpreter as it came (the tests compare the two)."""
    from triton.runtime import interpreter

    if _STATE["installed"]:
        interpreter._patch_lang, interpreter.GridExecutor.__call__ = _STATE["originals"]
        _STATE.update(installed=False, originals=None)
