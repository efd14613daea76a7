"""How a failed check reads in a notebook: its message first, then the notebook's own lines.

IPython shows an error as a traceback, outermost frame first and the message last. A failing
check then showed some twenty lines of this package's own code (``expect_close`` -> ``fail`` ->
``raise``) before its message, which fell below the first screen. Inside IPython (JupyterLab,
Colab, a grading kernel) importing ``attention_ref.testing`` registers :func:`show` for errors:

* an AssertionError (every check raises one, its parts as attributes: checks.fail), or an error
  that passed through the course's code,
  reads: the message, the hint of the check when its test cell gives none
  (attention_ref.hints), then each frame of the notebook (``Cell In[7], line 5``) with
  its statement; the course's own frames are left out, and ``%tb`` shows the whole traceback;
* any other error raised while a test cell checked something (the learner's function crashing on
  a test's input, a hidden one included) reads the same way, with what was being checked
  (attention_ref.testing.checking: "(raised in a hidden test, while checking: ...)");
* any other error is shown by IPython as it always is.

Grading is unaffected: IPython has recorded the error before it calls the handler (the cell
fails, its execute reply says so), and the handler always publishes the error as an error output
(nbgrader gives a cell with one no points); if anything in the handler goes wrong, IPython's own
traceback is shown instead. While grading, coursekit.grading.guard snapshots the registered
handler with the rest of IPython's machinery and puts it back if a submission replaces it.

A cell in which checks ran and nothing failed says so in one line (:data:`PASSED`), and a cell
whose last statement is a check shows no ``Out[]``, except in a grading kernel (which sets
``QUIET_ENV``): the graded notebook and its feedback stay as they were.

Standard library only, and IPython only when it is already running: nothing to import elsewhere.
"""

from __future__ import annotations

import ast
import linecache
import os
import sys
import sysconfig
from pathlib import Path

from .. import hints
from . import cell_runs, checking

COURSE = Path(__file__).resolve().parents[1]  # attention_ref/: the frames a learner never needs
PASSED = "\u2713 passed: every check in this cell holds"
QUIET_ENV = "ATTENTION_REF_QUIET_PASSES"  # set in grading kernels: no line for a passing cell
CONTEXT = 6  # lines of a statement shown at most
_RED, _GREEN, _RESET = "\x1b[0;31m", "\x1b[0;32m", "\x1b[0m"
# Checks run in the cell now running: a list, so that the guard (which watches names) sees no
# change when it counts.
_checks_run = [0]
_course_paths: dict[str, bool] = {}
_library_paths: dict[str, bool] = {}


def note_check() -> None:
    """Called by every check as it starts (through require_untampered). The first check of a
    cell fails if the cell would test a definition its own cell no longer holds
    (cell_runs.expect_cells_ran)."""
    _checks_run[0] += 1
    if _checks_run[0] == 1:
        cell_runs.expect_cells_ran()


def _is_course(filename: str) -> bool:
    if filename not in _course_paths:
        try:
            _course_paths[filename] = Path(filename).resolve().is_relative_to(COURSE)
        except (OSError, ValueError):
            _course_paths[filename] = False
    return _course_paths[filename]


def _frames(tb) -> list:
    """(filename, line, function) of each frame, outermost first, IPython's run_code left out."""
    module = sys.modules.get("IPython")
    ipython = Path(module.__file__).resolve().parent if module is not None else None
    found = []
    while tb is not None:
        code = tb.tb_frame.f_code
        found.append((code.co_filename, tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    while found and ipython is not None and _inside(found[0][0], ipython):
        found.pop(0)
    return found


def _inside(filename: str, folder: Path) -> bool:
    try:
        return Path(filename).resolve().is_relative_to(folder)
    except (OSError, ValueError):
        return False


def _statement_lines(filename: str, line: int) -> list[str]:
    """The lines of the statement running at ``line`` (at most CONTEXT), that one marked."""
    lines = linecache.getlines(filename)
    first, last = hints.statement_lines("".join(lines), line)
    first, last = max(first, line - CONTEXT + 1), min(last, max(line, first + CONTEXT - 1))
    shown = []
    for number in range(first, last + 1):
        text = lines[number - 1].rstrip("\n") if number <= len(lines) else ""
        arrow = f"{_GREEN}---->{_RESET}" if number == line else "     "
        shown.append(f"{arrow} {number} {text}")
    return shown


def _where(shell, filename: str, line: int, function: str) -> str:
    named = None
    try:
        named = shell.compile.format_code_name(filename)
    except Exception:  # noqa: BLE001 -- an older IPython: the file name will do
        pass
    place = f"{named[0]} {named[1]}" if named else f"File {filename}"
    inside = "" if function == "<module>" else f", in {function}"
    return f"{_GREEN}{place}, line {line}{_RESET}{inside}"


def compact(shell, etype, value, tb) -> tuple[str, list[str]] | None:
    """(the message shown as the error's value, the lines shown as its traceback), or None where
    IPython's own traceback serves better (an error that never passed through the course, in a
    statement that checks nothing)."""
    frames = _frames(tb)
    own = [frame for frame in frames if not _is_course(frame[0]) and not _is_library(frame[0])]
    hidden = len(frames) - len(own)
    if not own:
        return None
    failed = issubclass(etype, AssertionError)
    missing = _missing_name_hint(shell, etype, value)
    note = None if failed or missing else _checking(tb, own)
    if not (failed or any(_is_course(f[0]) for f in frames) or missing or note):
        return None
    message = str(value)
    hint = missing
    if failed and "Hint:" not in message:
        hint = getattr(value, "hint", None) or hints.find(own[-1][0], own[-1][1])
    evalue = message + (f"\n  (raised {note})" if note else "")
    evalue += f"\n  Hint: {hint}" if hint else ""
    lines = [f"{_RED}{etype.__name__}{_RESET}: {evalue}", ""]
    for filename, line, function in own:
        lines += [_where(shell, filename, line, function), *_statement_lines(filename, line), ""]
    if hidden:
        lines.append(
            f"({hidden} frame{'s' if hidden > 1 else ''} of the course's and the libraries' code "
            "not shown: %tb shows the whole traceback)"
        )
    return evalue, ["\n".join(lines).rstrip("\n")]


def _is_library(filename: str) -> bool:
    """A frame of Python's own library or of an installed package (NumPy, PyTorch): never the
    learner's code, never a notebook's cell."""
    if filename not in _library_paths:
        paths = {
            sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")
        }
        _library_paths[filename] = any(_inside(filename, Path(p)) for p in paths if p)
    return _library_paths[filename]


def _checking(tb, own: list) -> str | None:
    """What the notebook's statements were checking when ``tb`` was raised (checking.checked):
    the outermost frame that names a property (the test cell's check, or one of its helpers),
    else what a hidden test's frame says."""
    namespaces = {}
    while tb is not None:
        frame = tb.tb_frame
        namespaces.setdefault(frame.f_code.co_filename, {**frame.f_globals, **frame.f_locals})
        tb = tb.tb_next
    notes = [
        checking.checked("".join(linecache.getlines(f)), line, namespaces.get(f, {}))
        for f, line, _ in own
    ]
    named = [note for note in notes if note and "while checking" in note]
    return (named or [note for note in notes if note] or [None])[0]


def _missing_name_hint(shell, etype, value) -> str | None:
    """For a NameError (not an unbound local): which cell to run (cell_runs.name_error_hint)."""
    name = getattr(value, "name", None)
    if not issubclass(etype, NameError) or issubclass(etype, UnboundLocalError) or not name:
        return None
    return cell_runs.name_error_hint(name, getattr(shell, "user_ns", None) or {})


def show(shell, etype, value, tb, tb_offset=None):
    """IPython's custom exception handler (``set_custom_exc``): publish the error, compactly
    where :func:`compact` can, else as IPython would. Returns nothing: IPython ignores it."""
    try:
        shown = compact(shell, etype, value, tb)
    except Exception:  # noqa: BLE001 -- how an error is shown must never decide whether it is
        shown = None
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb  # for %tb and %debug
    sys.last_exc = value
    if shown is not None:
        try:
            shell._showtraceback(etype, shown[0], shown[1])
            return None
        except Exception:  # noqa: BLE001 -- fall back on IPython's own form, below
            pass
    shell.showtraceback((etype, value, tb), running_compiled_code=True)
    return None


def _before_cell(info=None) -> None:
    _checks_run[0] = 0
    shell = _shell()
    try:
        cell_runs.before_cell(getattr(info, "raw_cell", None), shell.user_ns)
    except Exception:  # noqa: BLE001 -- bookkeeping must never print "Error in callback"
        cell_runs.forget()


def _after_cell(result) -> None:
    if _checks_run[0] and getattr(result, "success", False):
        print(PASSED)
    _checks_run[0] = 0
    shell = _shell()
    try:
        cell_runs.after_cell(result, shell.user_ns)
    except Exception:  # noqa: BLE001 -- as in _before_cell
        cell_runs.forget()


def _shell():
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def register(shell=None) -> bool:
    """Show failed checks compactly in this IPython (the one running, if ``shell`` is None); say
    so when a cell's checks pass. Does nothing outside IPython, or where another handler is set."""
    shell = shell if shell is not None else _shell()
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    if shell.custom_exceptions:
        return False  # already registered (imported again), or another tool's: leave it
    shell.set_custom_exc((Exception,), show)
    if not os.environ.get(QUIET_ENV):
        shell.events.register("pre_run_cell", _before_cell)
        shell.events.register("post_run_cell", _after_cell)
        _quiet_after_checks(shell)
    return True


def _quiet_after_checks(shell) -> None:
    """A cell whose last statement is a check shows no ``Out[]``, as if it ended in ``;``. Some
    checks return what they ran, for code that wants it (expect_device_agnostic: the result on
    PyTorch's meta device), and a learner read the echoed ``tensor(..., device='meta')`` above
    the cell's ✓ as a failure. Every other cell's result is shown as IPython would."""
    hook = getattr(shell, "displayhook", None)
    said = getattr(hook, "quiet", None)
    if said is None:
        return

    def quiet() -> bool:
        if said():
            return True
        try:
            return _ends_in_check(shell.history_manager.input_hist_parsed[-1])
        except Exception:  # noqa: BLE001 -- no history (an embedded shell): show as IPython does
            return False

    hook.quiet = quiet


def _ends_in_check(cell: str) -> bool:
    try:
        body = ast.parse(cell).body
    except (SyntaxError, ValueError):
        return False
    last = body[-1] if body else None
    call = last.value if isinstance(last, ast.Expr) else None
    function = getattr(call, "func", None)
    name = getattr(function, "id", None) or getattr(function, "attr", None)
    return isinstance(call, ast.Call) and str(name).startswith("expect_")


__all__ = ["PASSED", "QUIET_ENV", "compact", "note_check", "register", "show"]
