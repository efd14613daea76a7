"""A catalogue of broken and hostile submissions, to prove what the grader does with them.

Each :class:`Kind` builds, for any lesson, a submission folder's contents from the lesson's
student edition and solutions: an exception in an exercise, an infinite loop, a memory bomb,
``os._exit``, a deleted or edited test cell, an unreadable file, another assignment's notebook,
wrong shapes, NaN, monkeypatched ``np.allclose`` / ``torch.allclose`` / builtins / the course's
check helpers, fake "passed" lines, code that reads the solutions or the gradebook, or writes
into the course, ... The attacks are written against a *plausibly wrong* solution (the
lesson's planted mistake that loses the most points), so that an attack that worked would
visibly raise the score.

autograde_tests/hostile/ grades them all in one course and checks each gets the score it
deserves, with a note for the instructor; ``make grade-class`` (coursekit.democlass) mixes
them into a synthetic class.
"""

from __future__ import annotations

import copy
import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

import nbformat

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
class Materials:
    """What a kind is built from."""

    lesson: Lesson
    student: nbformat.NotebookNode  # the student edition as released
    solved: nbformat.NotebookNode  # the student edition answered with the solutions
    wrong: nbformat.NotebookNode  # ... with the lesson's costliest planted mistake
    wrong_fails: frozenset[str]  # the test cells that mistake fails
    wrong_cell: str  # the exercise cell that holds the mistake
    other: nbformat.NotebookNode | None = None  # another lesson's solved notebook

    def solution_ids(self) -> list[str]:
        return [grade_id(c) for c in self.student.cells if is_solution(c)]

    def test_ids(self) -> list[str]:
        return [grade_id(c) for c in self.student.cells if is_graded(c)]

    def first_failing(self) -> str:
        """The first test cell (in notebook order) that the wrong solution fails."""
        return next(t for t in self.test_ids() if t in self.wrong_fails)


@dataclass(frozen=True)
class Kind:
    name: str
    summary: str
    build: Callable[[Materials], Submission]
    runs: bool = True  # whether the notebook is executed at all (False: refused before grading)


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


# ---------------------------------------------------------------- the kinds


def _exception(m: Materials) -> Submission:
    first = m.solution_ids()[0]
    return Submission(
        edit_cell(m.solved, first, lambda s: "raise RuntimeError('I broke my own code')\n" + s)
    )


def _infinite_loop(m: Materials) -> Submission:
    target = m.solution_ids()[min(3, len(m.solution_ids()) - 1)]
    return Submission(edit_cell(m.solved, target, lambda s: "while True:\n    pass\n" + s))


def _stubborn_loop(m: Materials) -> Submission:
    return Submission(
        insert_after(
            m.solved,
            m.test_ids()[1],
            """
        import time
        while True:  # an infinite loop that swallows the timeout's interrupt
            try:
                time.sleep(1)
            except KeyboardInterrupt:
                pass
        """,
        )
    )


def _memory_bomb(m: Materials) -> Submission:
    return Submission(
        insert_after(
            m.solved,
            m.test_ids()[1],
            """
        hog = []
        for _ in range(1000):  # 256 GiB, 256 MiB at a time
            hog.append(bytearray(2**28))
        """,
        )
    )


def _os_exit(m: Materials) -> Submission:
    return Submission(insert_after(m.solved, m.test_ids()[1], "import os\nos._exit(1)"))


def _sys_exit(m: Materials) -> Submission:
    return Submission(
        insert_after(m.solved, m.test_ids()[1], "import sys\nsys.exit('done for today')")
    )


def _ipython_exit(m: Materials) -> Submission:
    return Submission(insert_after(m.solved, m.test_ids()[1], "exit()"))


def _kill_grader(m: Materials) -> Submission:
    return Submission(
        insert_after(
            m.solved,
            m.test_ids()[0],
            """
        import os, signal
        os.kill(os.getppid(), signal.SIGKILL)  # the process that runs nbgrader
        """,
        )
    )


def _deleted_test_cell(m: Materials) -> Submission:
    nb = _copy(m.wrong)
    del nb.cells[_index(nb, m.first_failing())]
    return Submission(nb)


def _edited_test_cell(m: Materials) -> Submission:
    return Submission(
        edit_cell(m.wrong, m.first_failing(), lambda s: "pass  # nothing to see here")
    )


def _deleted_exercise(m: Materials) -> Submission:
    nb = _copy(m.solved)
    first, test = m.solution_ids()[0], m.test_ids()[0]
    for wanted in (test, first):
        del nb.cells[_index(nb, wanted)]
    return Submission(nb)


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


def _wrong_shapes(m: Materials) -> Submission:
    return Submission(wrap_result(m.solved, m.solution_ids()[0], "out[None]  # one axis too many"))


def _wrong_dtype(m: Materials) -> Submission:
    return Submission(
        wrap_result(
            m.solved,
            m.solution_ids()[1],
            "out.long() if hasattr(out, 'long') else out.astype('int64')",
        )
    )


def _nan_outputs(m: Materials) -> Submission:
    return Submission(wrap_result(m.solved, m.solution_ids()[2], "out * float('nan')"))


def _patch(code: str) -> Callable[[Materials], Submission]:
    def build(m: Materials) -> Submission:
        return Submission(insert_after(m.wrong, m.solution_ids()[0], code))

    return build


def _patch_during_test(m: Materials) -> Submission:
    """The exercise itself rebinds the check helper, while the test cell that calls it runs."""
    name = _function_name(m.wrong, m.wrong_cell)
    return Submission(
        edit_cell(
            m.wrong,
            m.wrong_cell,
            lambda s: (
                s
                + textwrap.dedent(f"""

        _{name}_plain = {name}

        def {name}(*args, **kwargs):
            globals()["expect_close"] = lambda *a, **k: None
            return _{name}_plain(*args, **kwargs)
        """)
            ),
        )
    )


def _fake_passed(m: Materials) -> Submission:
    lines = "\n".join(f"print('{t}: passed')" for t in m.test_ids())
    return Submission(
        insert_after(
            m.student, m.test_ids()[-1], lines + "\nprint('All tests passed! Score: 100/100')"
        )
    )


def _reads_solutions(m: Materials) -> Submission:
    return Submission(
        insert_after(
            m.student,
            m.test_ids()[0],
            f"""
        import glob, json
        stolen = ""
        for path in glob.glob("../../../**/{m.lesson.name}.*", recursive=True) + [
                "../../../solutions/{m.lesson.assignment}/{m.lesson.name}.md",
                "../../../solutions/{m.lesson.assignment}/{m.lesson.name}.ipynb"]:
            try:
                stolen += open(path).read()
            except OSError as error:
                print("could not read", path, error)
        print(len(stolen), "characters of solutions")
        """,
        )
    )


def _reads_hidden_tests(m: Materials) -> Submission:
    """Read the hidden tests: from the notebook being graded, and from the calling test cell."""
    first = m.solution_ids()[0]
    name = _function_name(m.solved, first)
    nb = insert_after(
        m.solved,
        m.test_ids()[0],
        f"""
        try:
            print(open("{m.lesson.name}.ipynb").read())
        except OSError as error:
            print("no luck:", error)
        """,
    )
    return Submission(
        edit_cell(
            nb,
            first,
            lambda s: (
                s
                + textwrap.dedent(f"""

        import linecache, sys

        _{name}_plain = {name}

        def {name}(*args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename  # the test cell that calls me
            print("".join(linecache.getlines(caller)))
            return _{name}_plain(*args, **kwargs)
        """)
            ),
        )
    )


def _reads_gradebook(m: Materials) -> Submission:
    return Submission(
        insert_after(
            m.solved,
            m.test_ids()[0],
            """
        import sqlite3
        db = "../../../gradebook.db"
        for attempt in (lambda: open(db, "rb").read(100),
                        lambda: sqlite3.connect(db).execute("select * from grade").fetchall()):
            try:
                print(attempt())
            except Exception as error:
                print("refused:", type(error).__name__, error)
        """,
        )
    )


def _writes_course(m: Materials) -> Submission:
    return Submission(
        insert_after(
            m.solved,
            m.test_ids()[0],
            f"""
        import os, shutil
        attempts = [
            lambda: open("../../../nbgrader_config.py", "a").write("\\nc.Execute.timeout = 1\\n"),
            lambda: open("../../../gradebook.db", "r+b").write(b"x"), lambda:
            open("../../../solutions/{m.lesson.assignment}/{m.lesson.name}.ipynb",
            "w").write("{{}}"), lambda: os.remove("../../../gradebook.db"), lambda:
            os.makedirs("../../other-student/{m.lesson.assignment}", exist_ok=True), lambda:
            shutil.rmtree("../../../submitted"), lambda: os.symlink("../../../gradebook.db", "gb"),
        ]
        for attempt in attempts:
            try:
                attempt()
                print("wrote!")
            except Exception as error:
                print("refused:", type(error).__name__, error)
        """,
        )
    )


def _reference_answer(m: Materials) -> Submission:
    first = m.solution_ids()[0]
    name = _function_name(m.solved, first)
    return Submission(
        edit_cell(m.solved, first, lambda s: f"from attention_ref.np import {name}\n")
    )


KINDS: list[Kind] = [
    Kind("exception", "an exception in an exercise cell", _exception),
    Kind(
        "infinite-loop", "an infinite loop (the cell times out, the rest is graded)", _infinite_loop
    ),
    Kind("stubborn-loop", "an infinite loop that ignores the timeout's interrupt", _stubborn_loop),
    Kind("memory-bomb", "a cell that allocates without end", _memory_bomb),
    Kind("os-exit", "os._exit() in a cell", _os_exit),
    Kind("sys-exit", "sys.exit() in a cell", _sys_exit),
    Kind("ipython-exit", "exit() in a cell", _ipython_exit),
    Kind("kill-grader", "os.kill of the grading process", _kill_grader),
    Kind("deleted-test-cell", "a failing test cell deleted", _deleted_test_cell),
    Kind("edited-test-cell", "a failing (locked) test cell replaced by `pass`", _edited_test_cell),
    Kind("deleted-exercise", "an exercise cell and its test cell deleted", _deleted_exercise),
    Kind(
        "edited-metadata",
        "test cells' metadata edited (points, grade flag, schema version)",
        _edited_metadata,
    ),
    Kind(
        "foreign-graded-cell",
        "a cell of its own that claims to be a test worth 50 points",
        _foreign_graded_cell,
    ),
    Kind("deleted-notebook", "no notebook handed in", _deleted_notebook, runs=False),
    Kind("renamed-notebook", "the notebook under another name", _renamed_notebook, runs=False),
    Kind("malformed-json", "a truncated notebook file", _malformed_json, runs=False),
    Kind("empty-file", "an empty notebook file", _empty_file, runs=False),
    Kind("other-assignment", "another lesson's notebook", _other_assignment, runs=False),
    Kind("symlink", "a symbolic link to the gradebook in the submission", _symlink, runs=False),
    Kind("wrong-shapes", "an exercise returns an extra axis", _wrong_shapes),
    Kind("wrong-dtype", "an exercise returns integers", _wrong_dtype),
    Kind("nan-outputs", "an exercise returns NaN", _nan_outputs),
    Kind("patch-allclose", "np.allclose always True", _patch("np.allclose = lambda *a, **k: True")),
    Kind(
        "patch-np-testing",
        "np.testing's assertions do nothing",
        _patch("np.testing.assert_allclose = np.testing.assert_array_equal = lambda *a, **k: None"),
    ),
    Kind(
        "patch-torch-allclose",
        "torch.allclose always True, torch.testing.assert_close does nothing",
        _patch(
            "torch.allclose = lambda *a, **k: True\ntorch.testing.assert_close = lambda *a, **k: "
            "None"
        ),
    ),
    Kind(
        "patch-builtins",
        "builtins.isinstance and abs replaced",
        _patch(
            "import builtins\nbuiltins.isinstance = lambda obj, cls: True\nbuiltins.abs = lambda "
            "x: 0"
        ),
    ),
    Kind(
        "patch-helpers",
        "the course's check helpers rebound to no-ops",
        _patch(
            "expect_close = expect_shape = expect_raises = expect_own_function = lambda *a, **k: "
            "None"
        ),
    ),
    Kind(
        "patch-reference",
        "the reference library made to agree with the submission",
        _patch(
            "import attention_ref.np as _r, attention_ref.pt as _p, attention_ref.testing as _t\n"
            "for _name in dir(_r):\n"
            "    if _name in globals() and callable(globals()[_name]):\n"
            "        setattr(_r, _name, globals()[_name]); setattr(_p, _name, globals()[_name])\n"
            "_t.expect_close = lambda *a, **k: None"
        ),
    ),
    Kind(
        "patch-code",
        "the reference's __code__ swapped for the submission's",
        _patch(
            "import attention_ref.np as _r\n"
            "for _name in dir(_r):\n"
            "    _mine = globals().get(_name)\n"
            "    if callable(_mine) and hasattr(_mine, '__code__') and _mine.__module__ == "
            "'__main__':\n"
            "        getattr(_r, _name).__code__ = _mine.__code__"
        ),
    ),
    Kind(
        "patch-during-test",
        "an exercise that rebinds expect_close while its test runs",
        _patch_during_test,
    ),
    Kind(
        "ipython-hooks",
        "IPython told to swallow every later cell (input transformer)",
        _patch("get_ipython().input_transformers_post.append(lambda lines: ['pass\\n'])"),
    ),
    Kind("fake-passed", "prints fake 'passed' lines", _fake_passed),
    Kind("reads-solutions", "reads the solutions from the course directory", _reads_solutions),
    Kind(
        "reads-hidden-tests",
        "reads the hidden tests from the graded notebook and the calling cell",
        _reads_hidden_tests,
    ),
    Kind("reads-gradebook", "reads the gradebook", _reads_gradebook),
    Kind("writes-course", "writes into the course directory and the gradebook", _writes_course),
    Kind("reference-answer", "imports the reference library's answer", _reference_answer),
]


def kind(name: str) -> Kind:
    return next(k for k in KINDS if k.name == name)


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
    course, lesson: Lesson, mistakes=(), other: nbformat.NotebookNode | None = None
) -> Materials:
    """The ingredients of every kind, from a course made by
    coursekit.grading.tempcourse.make_course."""
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
    return Materials(lesson, student, solved, wrong, fails, cell, other)


def other_lesson_notebook(lesson: Lesson) -> nbformat.NotebookNode | None:
    """Another lesson's notebook (its solved source), for the 'other assignment' kind."""
    from coursekit.course.lessons import all_lessons
    from coursekit.course.sources import source_to_notebook

    for item in all_lessons(lesson.root):
        if item.assignment != lesson.assignment:
            return source_to_notebook(item.source)
    return None


def describe() -> str:
    return json.dumps({k.name: k.summary for k in KINDS}, indent=1)
