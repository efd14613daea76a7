"""The tamper snapshot: what the tests rely on, as it was when the check helpers were imported.

A test cell passes when it raises nothing, so a notebook could make every check pass by replacing
what the checks call (``np.allclose = lambda *a, **k: True``, a reference function's ``__code__``).
:func:`snapshot` records those objects once, when ``attention_ref.testing`` is imported; every
check first calls :func:`require_untampered`, which fails with a message that names what was
replaced. (While grading, coursekit.grading.guard also puts the originals back, judging the
library's own wrappers with :func:`library_wrapper`; this check is what protects a plain nbgrader
run.)
"""

from __future__ import annotations

import sys
import types

from .display import note_check

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
    """Record the library's functions that are not recorded yet.

    Scanning every module's namespace on every check cost a millisecond per check, and a lesson
    makes hundreds of checks. So the list of the library's modules is kept until ``sys.modules``
    changes size (an import), and a module's namespace is scanned again only when its size
    changes (a module still being imported, a function added). A module replaced in
    ``sys.modules`` under the same size is still caught: its functions are not the recorded ones."""
    if _LIBRARY_MODULES[0] != len(sys.modules):
        # in place: the grader's guard (coursekit/grading/guard.py) fails a test during which a
        # global of the library was rebound
        _LIBRARY_MODULES[:] = [len(sys.modules), [n for n in sys.modules if n.startswith(_PACKAGE)]]
    for module_name in _LIBRARY_MODULES[1]:
        module = sys.modules.get(module_name)
        if module is None or len(vars(module)) == _SCANNED.get(module_name):
            continue
        _SCANNED[module_name] = len(vars(module))
        for name, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType) and not name.startswith("__"):
                _ORIGINALS.setdefault((module_name, name), (value, value.__code__))


_PACKAGE = "attention_ref"
_ORIGINALS: dict = {}
_SCANNED: dict[str, int] = {}  # module name -> the size of its namespace when last scanned
_LIBRARY_MODULES: list = [-1, []]  # len(sys.modules), and the library's modules at that size


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


def require_untampered() -> None:
    """Fail with a message naming what was replaced, if anything the tests rely on was. Every
    check calls this first: it also counts the checks a cell runs (display.note_check)."""
    note_check()
    changed = _tampered()
    if changed:
        raise AssertionError(
            "the tests cannot be trusted: "
            + "; ".join(changed[:4])
            + ("; ..." if len(changed) > 4 else "")
            + ". Put the originals back (restart the kernel) and run the tests again."
        )


def snapshot() -> None:
    """Record the watched objects and every public function of the reference library as the
    originals (called once, by ``attention_ref.testing`` when all its parts are imported)."""
    _ORIGINALS.update(_snapshot())
    _snapshot_library()


def remember_library() -> None:
    """Record the functions of the library's modules imported since (attention_ref.flash calls
    this at the end of its import, so that its checker's functions are the originals before any
    notebook code can run)."""
    _snapshot_library()
