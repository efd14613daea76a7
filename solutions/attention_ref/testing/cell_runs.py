"""Whether the cell that defines what a test checks ran, and ran to the end.

A kernel keeps every function it was given. A learner who breaks an answer cell (a SyntaxError,
or any error before its ``def`` has run) and runs the test cell below it would see the test pass,
or fail, on the *previous* definition, still in the kernel: a "✓ passed" for code that is no
longer in the notebook, which ``make check`` (a fresh kernel) then grades as missing. So, inside
IPython (JupyterLab, Colab), where attention_ref.testing.display registers these hooks:

* before each cell, :func:`before_cell` notes the functions and classes it defines (from its
  source: parsed, or read line by line where it does not parse) and what each name holds now;
* after it, if the cell failed, :func:`after_cell` marks each of them that it did not bind anew
  and that the kernel holds as other code than the cell now says (*stale*: a test would run the
  older definition), with what went wrong (``In [12]``, ``SyntaxError: incomplete input (line
  3)``); a cell that binds it again clears it;
* the first check of a cell (:func:`expect_cells_ran`, through require_untampered) fails, naming
  the cell to fix, when the cell reads a stale name, directly or through the notebook's functions
  it calls.

A name that is not defined at all (a given cell skipped, a test run before its exercise's answer)
gives a NameError: :func:`name_error_hint` says which cell of the lesson binds it
(attention_ref.hints.names, written by ``make notebooks``), or that its cell failed.

Not in a grading kernel (it sets display.QUIET_ENV, and registers nothing): a graded notebook
runs top to bottom in a fresh kernel, where a cell that failed has defined nothing.
Standard library only.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import types

from .. import hints

# The cell now running: the names it defines and what each held before it, the names it reads.
_running: dict = {"defines": {}, "reads": set(), "namespace": {}, "source": ""}
# {name: what went wrong in the last cell that should have defined it}; changed in place only.
_stale: dict[str, str] = {}
_MISSING = object()
_RUN_ABOVE = "JupyterLab: Run > Run All Above Selected Cell"


def read_names(source: str) -> set[str]:
    """The names a cell's code reads (``swiglu`` in ``expect_close(swiglu(x), ...)``)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def before_cell(source: str | None, namespace: dict) -> None:
    """Note what the cell about to run defines and reads."""
    source = source or ""
    _running["defines"] = {n: namespace.get(n, _MISSING) for n in hints.defined_names(source)}
    _running["reads"] = read_names(source)
    _running["namespace"] = namespace
    _running["source"] = source


def after_cell(result, namespace: dict) -> None:
    """Mark the names the cell should have defined and did not (it failed first) where the kernel
    holds a definition the cell no longer reads as; clear the ones it defined anew."""
    error = getattr(result, "error_before_exec", None) or getattr(result, "error_in_exec", None)
    source = _running.get("source", "")
    for name, before in _running["defines"].items():
        now = namespace.get(name, _MISSING)
        if now is not before or error is None or _written_as(now, source):
            _stale.pop(name, None)  # bound anew, or what the kernel holds is what the cell says
        else:
            _stale[name] = _what_went_wrong(result, error)
    _running["defines"] = {}


def _written_as(value, source: str) -> bool:
    """Whether ``value`` (a function or class the kernel holds) is, to the white space, what
    ``source`` still says: a cell that failed before redefining it left nothing stale (a test
    cell's own helper, say, after one of its checks failed first)."""
    if value is _MISSING:
        return False
    texts = _sources(value)
    cell = hints.key(source)
    return bool(texts) and all(hints.key(text) in cell for text in texts)


def _sources(value) -> list[str]:
    """The source of a function (or of a Triton kernel's function, a decorated function's), or
    of each method of a class; empty where Python cannot find it."""
    if isinstance(value, type):
        methods = [_sources(v) for v in vars(value).values() if isinstance(v, types.FunctionType)]
        return [text for found in methods for text in found] if all(methods) else []
    for candidate in (value, getattr(value, "fn", None), getattr(value, "__wrapped__", None)):
        if isinstance(candidate, types.FunctionType):
            try:
                return [inspect.getsource(candidate)]
            except (OSError, TypeError):
                return []
    return []


def forget() -> None:
    """Start again from nothing known (where the bookkeeping itself failed)."""
    _running.update(defines={}, reads=set(), namespace={}, source="")
    _stale.clear()


def _what_went_wrong(result, error: BaseException) -> str:
    """``your cell that defines NAME`` + this: ``(In [12]) did not run to the end: it raised
    SyntaxError: incomplete input (line 3)``."""
    count = getattr(result, "execution_count", None)
    where = f" (In [{count}])" if count else ""
    if isinstance(error, SyntaxError):
        line = f" (line {error.lineno})" if error.lineno else ""
        raised = f"{type(error).__name__}: {error.msg}{line}"
    else:
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        message = message[:120] + ("..." if len(message) > 120 else "")
        raised = type(error).__name__ + (f": {message}" if message else "")
    return f"{where} did not run to the end: it raised {raised}"


def _reached(names: set[str], namespace: dict) -> set[str]:
    """``names`` and every name the notebook's functions among them read, followed through."""
    found, todo = set(names), list(names)
    while todo:
        value = namespace.get(todo.pop())
        code = getattr(value, "__code__", None)
        if not isinstance(value, types.FunctionType) or value.__module__ != "__main__":
            continue
        codes = [code]
        while codes:
            current = codes.pop()
            for name in current.co_names:
                if name not in found:
                    found.add(name)
                    todo.append(name)
            codes += [c for c in current.co_consts if isinstance(c, types.CodeType)]
    return found


def stale_names_read(namespace: dict) -> list[str]:
    """The stale names the running cell reads, directly or through the notebook's functions."""
    if not _stale:
        return []
    own = set(_running["defines"])  # what this cell defines itself, it reads anew
    return sorted((_reached(_running["reads"], namespace) & set(_stale)) - own)


HINT = "fix that cell and run it first (Shift+Enter), then run this cell again"


def expect_cells_ran() -> None:
    """The first check of a cell: fail, naming the cell to fix, if the cell would test a stale
    definition (one whose cell failed before defining it anew)."""
    stale = stale_names_read(_running["namespace"])
    if not stale:
        return
    name = stale[0]
    what = f"your cell that defines {name}{_stale[name]}"
    problem = f"{name} is still the older definition, which this cell would test instead"
    error = AssertionError(f"{what}: {problem}\n  Hint: {HINT}")
    error.what, error.problem, error.hint = what, problem, HINT  # as checks.fail makes them
    raise error


def name_error_hint(name: str, namespace: dict) -> str | None:
    """What to run so that ``name`` exists: its cell failed, or which cell of the lesson binds
    it (None where the lesson does not: a typo, say, which Python's own message serves)."""
    if name in _stale:
        return f"your cell that defines {name}{_stale[name]}: {HINT}"
    lesson = _current_lesson(namespace, name)
    where = hints.names().get(lesson, {}).get(name) if lesson else None
    if where is None:
        return None
    section = f'under "{where["section"]}"' if where.get("section") else "near the top"
    if where.get("exercise"):
        return (
            f"your answer to {where['exercise']} ({section}) defines it: run that cell first, "
            "and fix it if it raises"
        )
    if where.get("cells", 1) > 1:
        return (
            f"cells above this one define it (the first {section}): run them first ({_RUN_ABOVE})"
        )
    return (
        f"the cell {section} that defines it has not run, or raised: run it first (or every "
        f"cell above this one: {_RUN_ABOVE})"
    )


def _current_lesson(namespace: dict, name: str) -> str | None:
    """The lesson this kernel runs: named in the notebook's path where Jupyter says it (the
    ``lessonNN`` folder of work/); else the lesson whose names the kernel holds most of; else,
    in a kernel that holds none yet, the one lesson that binds ``name``."""
    tables = hints.names()
    for path in (os.environ.get("JPY_SESSION_NAME"), namespace.get("__session__")):
        found = re.search(r"lesson\d+", str(path or ""))
        if found and found.group(0) in tables:
            return found.group(0)
    held = {n for n in namespace if not n.startswith("_")}
    scores = {lesson: len(held & set(names)) for lesson, names in tables.items()}
    best = max(scores.values(), default=0)
    if best:
        winners = [lesson for lesson, score in scores.items() if score == best]
        return winners[0] if len(winners) == 1 else None
    binding = [lesson for lesson, names in tables.items() if name in names]
    return binding[0] if len(binding) == 1 else None


__all__ = [
    "HINT",
    "after_cell",
    "before_cell",
    "expect_cells_ran",
    "forget",
    "name_error_hint",
    "read_names",
    "stale_names_read",
]
