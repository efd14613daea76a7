"""A name swapped for another function while a check runs: in the notebook's namespace and in
the library's modules that hold it (lesson 14 hands a learner's function a lesson-10 rotation
that marks its result, to see the result used and not only the name mentioned)."""

from __future__ import annotations

import contextlib

from .tamper import require_untampered

__all__ = ["swapped_names"]


@contextlib.contextmanager
def swapped_names(namespaces, **replacements):
    """Within the block, each name of ``replacements`` is bound to its replacement in every
    namespace (a dict: ``globals()``, a module's ``__dict__``) that holds the name; then put
    back."""
    require_untampered()
    saved = [(space, name, space[name]) for space in namespaces for name in replacements
             if name in space]  # fmt: skip
    try:
        for space, name, _ in saved:
            space[name] = replacements[name]
        yield
    finally:
        for space, name, value in saved:
            space[name] = value
