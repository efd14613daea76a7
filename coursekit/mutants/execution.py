"""Run a lesson's mutants in-process: the cells once, each mutant in a fork of their state.

The lesson's cells run in one namespace, as a kernel runs them when grading (the cells grading
skips left out), up to each exercise's answer. There the namespace is forked: first for the
answer itself (every test it reaches must pass, and its time sets the mutants' limit), then once
per mutant, which runs its mutated answer and the cells after it up to the last test the answer
reaches, and is killed as soon as one of those tests fails, or when it runs past its limit or
crashes. No nbgrader, no kernel: a mutant costs what its cells cost. The cells run in a
temporary folder that holds links to the files shipped beside the lesson: what they write stays
out of solutions/.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import os
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from coursekit.course.cells import grade_id, is_test
from coursekit.mutants.forks import Forks
from coursekit.mutants.generate import Mutant
from coursekit.mutants.plan import Exercise, graded_cells

KILLED, SURVIVED = "killed", "survived"
# A mutant's limit: this many times its answer's own run, and never below MINIMUM_LIMIT seconds
# (a loop that never ends is killed by it; a busy machine must not kill a slow but right one).
LIMIT_FACTOR, MINIMUM_LIMIT = 10, 5.0


class LessonBroken(Exception):
    """The solved lesson fails its own tests here: its mutants would prove nothing."""


@dataclass
class Result:
    mutant: Mutant
    status: str  # killed, survived, timeout or crashed (all but survived count as killed)
    by: str  # the test cell that failed and its error; or what ended the child
    seconds: float

    @property
    def killed(self) -> bool:
        return self.status != SURVIVED


def run_cell(source: str, name: str, namespace: dict) -> str | None:
    """Run one cell's code in ``namespace``, its output discarded; None, or its error in one
    line."""
    sink = io.StringIO()
    filename = f"<cell {name}>"
    # Its source where inspect finds it, as IPython puts a cell's (Triton's @jit reads it); no
    # modification time, so that linecache.checkcache keeps it.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            exec(compile(source, filename, "exec"), namespace)
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # noqa: BLE001 -- a cell may raise anything, SystemExit too
        line = traceback.format_exception_only(type(error), error)[-1].strip()
        return line[:300]
    return None


def _trial(namespace: dict, source: str, exercise: Exercise) -> dict:
    """In a child: the answer as ``source`` has it, then the cells up to its last test."""
    error = run_cell(source, exercise.cell, namespace)
    for cell in exercise.segment:
        failed = run_cell(cell.source, grade_id(cell) or "(code)", namespace)
        if failed and grade_id(cell) in exercise.tests:
            return {"status": KILLED, "by": f"{grade_id(cell)}: {failed}"}
    return {"status": SURVIVED, "by": error or ""}


def _baseline(namespace: dict, exercise: Exercise, lesson: str) -> float:
    """The answer as written, in a fork: its tests must pass. Returns its seconds."""
    found = {}
    forks = Forks(1, lambda key, answer, seconds: found.update(answer=answer, seconds=seconds))
    forks.submit(None, lambda: _trial(namespace, exercise.source, exercise), limit=1800)
    forks.drain()
    if found["answer"].get("status") != SURVIVED:
        raise LessonBroken(
            f"{lesson}: the solved answer {exercise.cell} fails here "
            f"({found['answer'].get('by') or found['answer'].get('status')})"
        )
    return found["seconds"]


def _test_exercise(namespace, exercise, lesson, jobs, report, extra=()) -> list[Result]:
    """The exercise's mutants (none when ``exercise.mutants`` is replaced by an empty list) and
    the ``extra`` ones (its counter-answers, as mutants), each in a fork."""
    limit = max(MINIMUM_LIMIT, LIMIT_FACTOR * _baseline(namespace, exercise, lesson))
    todo = [*exercise.mutants, *extra]
    results: dict[int, Result] = {}

    def done(index, answer, seconds):
        status = answer.get("status", "crashed")
        results[index] = Result(todo[index], status, answer.get("by", ""), seconds)
        report(results[index])

    forks = Forks(jobs, done)
    for index, mutant in enumerate(todo):
        forks.submit(index, lambda source=mutant.source: _trial(namespace, source, exercise), limit)
    forks.drain()
    return [results[i] for i in range(len(todo))]


def run_lesson(
    lesson, nb, todo: list[Exercise], jobs: int, report: Callable[[Result], None], extra=None
) -> dict[str, list[Result]]:
    """Every mutant of the exercises ``todo`` of ``lesson`` (whose source notebook is ``nb``),
    and the ``extra`` mutants of each answer cell (``{cell: [Mutant]}``: its counter-answers),
    with up to ``jobs`` children at once; ``report`` is told of each result as it comes. Each
    exercise's results: its mutants' first, then the extra ones'."""
    results: dict[str, list[Result]] = {}
    by_position = {exercise.position: exercise for exercise in todo}
    namespace = {"__name__": "__main__"}
    folder = os.getcwd()
    with tempfile.TemporaryDirectory(prefix=f"mutants-{lesson.assignment}-") as workdir:
        os.chdir(_workdir(lesson, Path(workdir)))
        try:
            _run_cells(nb, by_position, namespace, lesson, (jobs, report, extra or {}), results)
        finally:
            os.chdir(folder)
    return results


def _workdir(lesson, workdir: Path) -> Path:
    """A folder like the one grading runs a notebook in: the files shipped beside the lesson
    (linked, to be read), and room for what its cells write, which never lands in solutions/."""
    for shipped in lesson.source.parent.iterdir():
        if shipped.suffix not in {".md", ".yml", ".ipynb"} and not shipped.name.startswith("."):
            (workdir / shipped.name).symlink_to(shipped)
    return workdir


def _run_cells(nb, by_position, namespace, lesson, how, results) -> None:
    jobs, report, extra = how
    last = max(by_position, default=-1)
    for position, cell in enumerate(graded_cells(nb)):
        if position in by_position:
            exercise = by_position[position]
            results[exercise.cell] = _test_exercise(
                namespace, exercise, lesson.assignment, jobs, report, extra.get(exercise.cell, ())
            )
        if position >= last:
            break
        error = run_cell(cell.source, grade_id(cell) or f"code cell {position}", namespace)
        if error and is_test(cell):
            raise LessonBroken(f"{lesson.assignment}: {grade_id(cell)} fails here: {error}")
