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
* any other error is shown by IPython as it always is.

Grading is unaffected: IPython has recorded the error before it calls the handler (the cell
fails, its execute reply says so), and the handler always publishes the error as an error output
(nbgrader gives a cell with one no points); if anything in the handler goes wrong, IPython's own
traceback is shown instead. While grading, coursekit.grading.guard snapshots the registered
handler with the rest of IPython's machinery and puts it back if a submission replaces it.

A cell in which checks ran and nothing failed says so in one line (:data:`PASSED`), except in a
grading kernel (which sets ``QUIET_ENV``): the graded notebook and its feedback stay as they were.

Standard library only, and IPython only when it is already running: nothing to import elsewhere.
"""

from __future__ import annotations

import linecache
import os
import sys
from pathlib import Path

from .. import hints

COURSE = Path(__file__).resolve().parents[1]  # attention_ref/: the frames a learner never needs
PASSED = "\u2713 passed: every check in this cell holds"
QUIET_ENV = "ATTENTION_REF_QUIET_PASSES"  # set in grading kernels: no line for a passing cell
CONTEXT = 6  # lines of a statement shown at most
_RED, _GREEN, _RESET = "\x1b[0;31m", "\x1b[0;32m", "\x1b[0m"
# Checks run in the cell now running: a list, so that the guard (which watches names) sees no
# change when it counts.
_checks_run = [0]
_course_paths: dict[str, bool] = {}


def note_check() -> None:
    """Called by every check as it starts (through require_untampered)."""
    _checks_run[0] += 1


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
    IPython's own traceback serves better (an error that never passed through the course)."""
    frames = _frames(tb)
    own = [frame for frame in frames if not _is_course(frame[0])]
    hidden = len(frames) - len(own)
    if not own or not (issubclass(etype, AssertionError) or hidden):
        return None
    message = str(value)
    hint = None
    if issubclass(etype, AssertionError) and "Hint:" not in message:
        hint = getattr(value, "hint", None) or hints.find(own[-1][0], own[-1][1])
    evalue = message + (f"\n  Hint: {hint}" if hint else "")
    lines = [f"{_RED}{etype.__name__}{_RESET}: {evalue}", ""]
    for filename, line, function in own:
        lines += [_where(shell, filename, line, function), *_statement_lines(filename, line), ""]
    if hidden:
        lines.append(
            f"({hidden} frame{'s' if hidden > 1 else ''} of the course's own code not shown: "
            "%tb shows the whole traceback)"
        )
    return evalue, ["\n".join(lines).rstrip("\n")]


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


def _before_cell(*_args) -> None:
    _checks_run[0] = 0


def _after_cell(result) -> None:
    if _checks_run[0] and getattr(result, "success", False):
        print(PASSED)
    _checks_run[0] = 0


def register(shell=None) -> bool:
    """Show failed checks compactly in this IPython (the one running, if ``shell`` is None); say
    so when a cell's checks pass. Does nothing outside IPython, or where another handler is set."""
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return False
    if shell.custom_exceptions:
        return False  # already registered (imported again), or another tool's: leave it
    shell.set_custom_exc((Exception,), show)
    if not os.environ.get(QUIET_ENV):
        shell.events.register("pre_run_cell", _before_cell)
        shell.events.register("post_run_cell", _after_cell)
    return True


__all__ = ["PASSED", "QUIET_ENV", "compact", "note_check", "register", "show"]
