"""A catalogue of broken and hostile submissions, to prove what the grader does with them.

Each attack is a file of coursekit/democlass/attacks/ (NN-name.yml, in the catalogue's order):
what it does (summary), how its notebook is made from the lesson's student edition and solutions
(start: the notebook it starts from; steps: code inserted after a cell, put before, after or in
place of a cell's source, an exercise's result wrapped, a cell deleted; or build: one of the
builders below, for what is not code: a missing, renamed, truncated or linked file, edited
metadata), and what it deserves on lesson 1, which autograde_tests/hostile/ grades (expected).
The attacks are an exception in an exercise, an infinite loop, a memory bomb, ``os._exit``, a
deleted or edited test cell, an unreadable file, another assignment's notebook, wrong shapes,
NaN, monkeypatched ``np.allclose`` / ``torch.allclose`` / builtins / the course's check helpers,
fake "passed" lines, code that reads the solutions or the gradebook, or writes into the course,
and attacks on the operating-system boundary. Many are written against a *plausibly wrong*
solution (the lesson's planted mistake that loses the most points), so that an attack that
worked would visibly raise the score.

The code in the steps is Python with ``$``-placeholders (string.Template): ``$lesson_name``,
``$assignment``, ``$name`` (the function the step's cell defines), ``$attack`` and ``$paths`` (as
Python literals: the attack's name, the files of :class:`Targets` it names under ``paths``),
``$port`` and ``$passed_lines``. Cells are named ``exercise N`` / ``test N`` (the N-th solution or
test cell; past the end: the last), ``wrong exercise`` and ``failing test``.

autograde_tests/hostile/ grades them all in one course and checks each gets the score it
deserves, with a note for the instructor; ``make grade-class`` (coursekit.democlass) mixes
them into a synthetic class.
"""

from __future__ import annotations

import copy
import json
import string
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import yaml

from coursekit.course.cells import grade_id, is_graded, is_solution, nbgrader_meta
from coursekit.course.lessons import Lesson


@dataclass
class Submission:
    """What a student's folder ``submitted/<student>/<assignment>/`` holds."""

    notebook: nbformat.NotebookNode | None = None  # written as <name>.ipynb ...
    raw: bytes | None = None  # ... or these bytes instead
    filename: str | None = None  # another file name than <name>.ipynb (a renamed notebook)
    links: dict[str, str] = field(default_factory=dict)  # symbolic links: name -> target


@dataclass
class Targets:
    """What the attacks on the operating-system boundary aim at, by absolute path (a relative
    path from the kernel's folder proves nothing: that folder is the kernel's own)."""

    other_submission: str = ""  # another student's submitted notebook
    gradebook: str = ""
    solved: tuple[
        str, ...
    ] = ()  # the solved lesson: the course's notebook, the repository's source
    home_file: str = ""  # a file in the grader's home
    victim: str = ""  # a file of the course to overwrite
    new_file: str = ""  # a file to create outside the kernel's folder
    port: int = 9  # a TCP server on 127.0.0.1 (the tests start one; 9 is "discard")

    @classmethod
    def in_course(cls, course, lesson: Lesson, other: str = "solved", **more) -> Targets:
        from pathlib import Path

        course = Path(course).resolve()
        name = f"{lesson.name}.ipynb"
        return cls(
            other_submission=str(course / "submitted" / other / lesson.assignment / name),
            gradebook=str(course / "gradebook.db"),
            solved=(str(course / "solutions" / lesson.assignment / name), str(lesson.source)),
            home_file=str(Path.home() / ".coursekit-grader-secret"),
            victim=str(course / "grader-notes.txt"),
            new_file=str(course / "written-by-a-submission.txt"),
            **more,
        )


@dataclass
class Materials:
    """What a kind is built from."""

    lesson: Lesson
    student: nbformat.NotebookNode  # the student edition as released
    solved: nbformat.NotebookNode  # the student edition answered with the solutions
    wrong: nbformat.NotebookNode  # ... with the lesson's costliest planted mistake
    wrong_fails: frozenset[str]  # the test cells that mistake fails
    wrong_cell: str  # the exercise cell that holds the mistake
    other: nbformat.NotebookNode | None = None  # another lesson's solved notebook
    targets: Targets = field(default_factory=Targets)  # what the OS-boundary attacks aim at

    def solution_ids(self) -> list[str]:
        return [grade_id(c) for c in self.student.cells if is_solution(c)]

    def test_ids(self) -> list[str]:
        return [grade_id(c) for c in self.student.cells if is_graded(c)]

    def first_failing(self) -> str:
        """The first test cell (in notebook order) that the wrong solution fails."""
        return next(t for t in self.test_ids() if t in self.wrong_fails)


@dataclass(frozen=True)
class Expected:
    """What an attack deserves on lesson 1 (autograde_tests/hostile/ checks it)."""

    fails: str | frozenset[str]  # "solved", "wrong", "blank", or the test cells that fail
    status: str  # graded, held (points withheld until accepted) or invalid
    findings: frozenset[str]  # the kinds of finding the instructor must see


# steps of a kind applied to a notebook: (notebook, materials) -> the edited copy
Edit = Callable[[nbformat.NotebookNode, Materials], nbformat.NotebookNode]


@dataclass(frozen=True)
class Kind:
    name: str
    summary: str
    build: Callable[[Materials], Submission]
    runs: bool = True  # whether the notebook is executed at all (False: refused before grading)
    os_boundary: bool = False  # written with nothing the screening scan knows
    expected: Expected | None = None
    # a kind made of steps on the solved notebook: those steps, applied to any notebook
    edit: Edit | None = None


# ---------------------------------------------------------------- editing notebooks


def _copy(nb):
    return nbformat.from_dict(copy.deepcopy(nb))


def _index(nb, wanted: str) -> int:
    for i, cell in enumerate(nb.cells):
        if grade_id(cell) == wanted:
            return i
    raise KeyError(wanted)


def insert_after(nb, grade_id: str, code: str):
    """A copy of ``nb`` with a new code cell after the cell ``grade_id``."""
    nb = _copy(nb)
    nb.cells.insert(
        _index(nb, grade_id) + 1, nbformat.v4.new_code_cell(textwrap.dedent(code).strip())
    )
    return nb


def edit_cell(nb, grade_id: str, edit: Callable[[str], str]):
    nb = _copy(nb)
    cell = nb.cells[_index(nb, grade_id)]
    cell.source = edit(cell.source)
    return nb


def _function_name(nb, grade_id: str) -> str:
    import ast

    tree = ast.parse(nb.cells[_index(nb, grade_id)].source)
    return next(n.name for n in tree.body if isinstance(n, ast.FunctionDef))


def wrap_result(nb, grade_id: str, transform: str):
    """The exercise in cell ``grade_id`` returns ``transform`` of its correct result (``out``)."""
    name = _function_name(nb, grade_id)
    wrapper = f"""

_{name}_right = {name}

def {name}(*args, **kwargs):
    out = _{name}_right(*args, **kwargs)
    return {transform}
"""
    return edit_cell(nb, grade_id, lambda source: source + wrapper)


def _bytes(nb) -> bytes:
    return nbformat.writes(nb).encode("utf-8")


# ---------------------------------------------------------------- what is not code


def _edited_metadata(m: Materials) -> Submission:
    nb = _copy(m.wrong)
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        if not meta:
            continue
        if meta.get("grade"):
            meta["points"] = 100  # more points
        if meta.get("grade_id") in m.wrong_fails:
            meta["grade"] = False  # "not a test"
            meta["schema_version"] = 1  # stock nbgrader stops the whole class on this
    return Submission(nb)


def _foreign_graded_cell(m: Materials) -> Submission:
    nb = insert_after(m.student, m.test_ids()[0], "print('bonus')")
    cell = nb.cells[_index(nb, m.test_ids()[0]) + 1]
    cell.metadata["nbgrader"] = {
        "grade": True,
        "grade_id": "bonus",
        "locked": False,
        "points": 50,
        "schema_version": 3,
        "solution": False,
        "task": False,
    }
    return Submission(nb)


def _deleted_notebook(m: Materials) -> Submission:
    return Submission()


def _renamed_notebook(m: Materials) -> Submission:
    return Submission(m.solved, filename=f"{m.lesson.name} (1).ipynb")


def _malformed_json(m: Materials) -> Submission:
    data = _bytes(m.solved)
    return Submission(raw=data[: len(data) // 2])


def _empty_file(m: Materials) -> Submission:
    return Submission(raw=b"")


def _other_assignment(m: Materials) -> Submission:
    return Submission(m.other if m.other is not None else nbformat.v4.new_notebook())


def _symlink(m: Materials) -> Submission:
    return Submission(m.solved, links={"data.txt": "../../../gradebook.db"})


BUILDERS = {
    "edited-metadata": _edited_metadata,
    "foreign-graded-cell": _foreign_graded_cell,
    "deleted-notebook": _deleted_notebook,
    "renamed-notebook": _renamed_notebook,
    "malformed-json": _malformed_json,
    "empty-file": _empty_file,
    "other-assignment": _other_assignment,
    "symlink": _symlink,
}


# ---------------------------------------------------------------- the catalogue, from its files

ATTACKS = Path(__file__).with_name("attacks")
_SHARED = yaml.safe_load((ATTACKS / "shared.yml").read_text(encoding="utf-8"))
_OPERATIONS = ("insert_after", "prepend", "append", "replace", "wrap_result", "delete")


def _cell(m: Materials, where: str) -> str:
    """The grade_id of ``exercise N``, ``test N``, ``wrong exercise`` or ``failing test``."""
    if where == "wrong exercise":
        return m.wrong_cell
    if where == "failing test":
        return m.first_failing()
    part, number = where.split()
    ids = {"exercise": m.solution_ids, "test": m.test_ids}[part]()
    return ids[min(int(number), len(ids) - 1)]


def _context(m: Materials, name: str, spec: dict) -> dict[str, str]:
    paths = []
    for target in spec.get("paths", []):
        value = getattr(m.targets, target)
        paths += list(value) if isinstance(value, tuple) else [value]
    return {
        "lesson_name": m.lesson.name,
        "assignment": m.lesson.assignment,
        "attack": repr(name),
        "paths": repr(paths),
        "port": str(m.targets.port),
        "passed_lines": "\n".join(f"print('{t}: passed')" for t in m.test_ids()),
    }


def _code(step: dict, nb, cell: str, context: dict[str, str]) -> str:
    text = _SHARED[step["shared"]] if "shared" in step else step.get("code", "")
    if "prelude" in step:
        text = _SHARED[step["prelude"]] + "\n" + text
    if "$name" in text or "${name}" in text:
        context = {**context, "name": _function_name(nb, cell)}
    return string.Template(text).substitute(context)


def _apply(nb, m: Materials, step: dict, context: dict[str, str]):
    """``nb`` (a copy) after one step of an attack."""
    operation = next(op for op in _OPERATIONS if op in step)
    cell = _cell(m, step[operation])
    if operation == "delete":
        nb = _copy(nb)
        del nb.cells[_index(nb, cell)]
        return nb
    if operation == "wrap_result":
        return wrap_result(nb, cell, step["transform"])
    code = _code(step, nb, cell, context)
    if operation == "insert_after":
        return insert_after(nb, cell, code)
    edit = {
        "prepend": lambda source: code + source,
        "append": lambda source: source + "\n\n" + code,
        "replace": lambda source: code,
    }[operation]
    return edit_cell(nb, cell, edit)


def _editor(name: str, spec: dict) -> Edit:
    def edit(nb, m: Materials):
        context = _context(m, name, spec)
        for step in spec["steps"]:
            nb = _apply(nb, m, step, context)
        return nb

    return edit


def _builder(spec: dict, edit: Edit | None) -> Callable[[Materials], Submission]:
    if edit is None:
        return BUILDERS[spec["build"]]
    return lambda m: Submission(edit(getattr(m, spec["start"]), m))


def _check(path: Path, spec: dict) -> None:
    """Refuse an attack file that would build something else than it says, naming it."""
    known = {"summary", "runs", "os_boundary", "start", "paths", "build", "steps", "expected"}
    problems = [f"unknown key {key!r}" for key in spec if key not in known]
    if ("build" in spec) == ("steps" in spec):
        problems.append("give either build or start and steps")
    if "build" in spec and spec["build"] not in BUILDERS:
        problems.append(f"no builder {spec['build']!r} (there are {', '.join(BUILDERS)})")
    if "steps" in spec and spec.get("start") not in ("solved", "wrong", "student"):
        problems.append("start must be solved, wrong or student")
    for step in spec.get("steps", []):
        if sum(op in step for op in _OPERATIONS) != 1:
            problems.append(f"a step needs exactly one of {', '.join(_OPERATIONS)}: {step}")
    if problems:
        raise ValueError(f"{path}: " + "; ".join(problems))


def _load(path: Path) -> Kind:
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    _check(path, spec)
    name = path.stem.split("-", 1)[1]
    wanted = spec.get("expected")
    expected = None
    if wanted is not None:
        fails = wanted["fails"]
        expected = Expected(
            fails if isinstance(fails, str) else frozenset(fails),
            wanted["status"],
            frozenset(wanted.get("findings", [])),
        )
    edit = _editor(name, spec) if "steps" in spec else None
    return Kind(
        name,
        spec["summary"],
        _builder(spec, edit),
        runs=spec.get("runs", True),
        os_boundary=spec.get("os_boundary", False),
        expected=expected,
        edit=edit if spec.get("start") == "solved" else None,
    )


KINDS: list[Kind] = [_load(path) for path in sorted(ATTACKS.glob("[0-9][0-9]-*.yml"))]
OS_KINDS = tuple(k.name for k in KINDS if k.os_boundary)


def kind(name: str) -> Kind:
    return next(k for k in KINDS if k.name == name)


def together(m: Materials, names) -> Submission:
    """One solved notebook with the attempts of every kind in ``names``, one after another: kinds
    made of steps on the solved notebook (the OS kinds), graded with one kernel instead of one
    each. Each attempt still says which kind made it (its ATTACK line's ``attack``)."""
    nb = m.solved
    for name in names:
        found = kind(name)
        if found.edit is None:
            raise ValueError(f"{name} is not made of steps on the solved notebook")
        nb = found.edit(nb, m)
    return Submission(nb)


def write(folder, lesson: Lesson, submission: Submission) -> None:
    """Put ``submission`` into ``folder`` (a student's submitted/<student>/<assignment>)."""
    import os
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (submission.filename or f"{lesson.name}.ipynb")
    if submission.raw is not None:
        path.write_bytes(submission.raw)
    elif submission.notebook is not None:
        nbformat.write(submission.notebook, path)
    for name, target in submission.links.items():
        os.symlink(target, folder / name)


def materials(
    course,
    lesson: Lesson,
    mistakes=(),
    other: nbformat.NotebookNode | None = None,
    targets: Targets | None = None,
) -> Materials:
    """The ingredients of every kind, from a course made by
    coursekit.grading.tempcourse.make_course (``targets``: by default those in the course)."""
    from pathlib import Path

    from coursekit.course.mistakes import fill_solutions, plant

    course = Path(course)
    student = nbformat.read(course / "notebooks" / lesson.assignment / f"{lesson.name}.ipynb", 4)
    solutions = nbformat.read(course / "solutions" / lesson.assignment / f"{lesson.name}.ipynb", 4)
    solved = fill_solutions(student, solutions)
    costly = max(
        (m for m in mistakes if m.lesson == lesson.assignment),
        key=lambda m: len(m.fails),
        default=None,
    )
    if costly is None:
        first = next(grade_id(c) for c in student.cells if is_solution(c))
        wrong, fails, cell = solved, frozenset(), first
    else:
        wrong = plant(student, solutions, costly)
        fails, cell = frozenset(costly.fails), costly.cell
    targets = targets or Targets.in_course(course, lesson)
    return Materials(lesson, student, solved, wrong, fails, cell, other, targets)


def other_lesson_notebook(lesson: Lesson) -> nbformat.NotebookNode | None:
    """Another lesson's notebook (its solved source), for the 'other assignment' kind."""
    from coursekit.course.lessons import all_lessons
    from coursekit.course.reading import source_to_notebook

    for item in all_lessons(lesson.root):
        if item.assignment != lesson.assignment:
            return source_to_notebook(item.source)
    return None


def describe() -> str:
    return json.dumps({k.name: k.summary for k in KINDS}, indent=1)
