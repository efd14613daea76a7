"""Grading fails closed: stock `nbgrader autograde` and `generate_feedback` refuse to run when the
course's defences (coursekit: screening, sandbox kernel, guard, holds, feedback without hidden
tests) cannot load, unless COURSE_GRADE_WITHOUT_SANDBOX=1 accepts it.

Through real nbgrader in a temporary course, with coursekit made unimportable by a package of the
same name, found first on PYTHONPATH, whose import fails (as a broken install or a missing
dependency does). The submission writes a file from its first cell, so its absence shows that no
kernel ran it.
"""

from __future__ import annotations

import subprocess

import nbformat
import pytest

from coursekit.course.lessons import lesson
from coursekit.course.mistakes import fill_solutions
from coursekit.course.nbgrader_cli import nbgrader_command, nbgrader_env
from coursekit.grading import tempcourse
from coursekit.grading.results import read_results

from .sandboxes import nbgrader_flags

pytestmark = pytest.mark.chain

OVERRIDE = "COURSE_GRADE_WITHOUT_SANDBOX"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course with lesson 1 and one solved submission whose first cell leaves a mark."""
    root = tmp_path_factory.mktemp("failsclosed")
    item = lesson("lesson01")
    course = tempcourse.make_course(root / "course", [item])
    student_nb = nbformat.read(item.in_course(course).student_notebook, 4)
    solved_nb = nbformat.read(item.in_course(course).source_notebook, 4)
    handed_in = fill_solutions(student_nb, solved_nb)
    mark = root / "the submission ran"
    handed_in.cells.insert(0, nbformat.v4.new_code_cell(f"open({str(mark)!r}, 'w').close()"))
    tempcourse.submit(course, "alice", item, handed_in)
    hidden = root / "hidden" / "coursekit"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(
        'raise ImportError("coursekit is broken in this Python (made so by the test)")\n'
    )
    return {"root": course, "lesson": item, "mark": mark, "hide": str(hidden.parent)}


def _nbgrader(course, *args, **env) -> subprocess.CompletedProcess:
    """`nbgrader ARGS` in the course, from a Python in which coursekit cannot be imported."""
    environment = nbgrader_env(PYTHONPATH=course["hide"])
    environment.pop(OVERRIDE, None)
    environment.update(env)
    return subprocess.run(
        nbgrader_command(*args),
        cwd=course["root"],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_autograde_refuses_and_runs_nothing_unless_the_override_says_so(course):
    result = _nbgrader(course, "autograde", "lesson01", "--force")
    assert result.returncode != 0, result.stderr[-3000:]
    message = result.stderr
    assert "nbgrader autograde refused" in message, message[-3000:]
    assert "coursekit is broken in this Python" in message  # what is missing
    assert "-m pip install -e" in message  # how to fix it
    assert f"{OVERRIDE}=1" in message  # the setting that overrides
    assert not (course["root"] / "autograded").exists()
    assert not course["mark"].exists(), "a kernel ran the submission"

    result = _nbgrader(course, "autograde", "lesson01", "--force", **{OVERRIDE: "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "grading with stock nbgrader, no screening, no sandbox" in result.stderr
    assert course["mark"].exists(), "the override graded nothing"
    graded = read_results(course["root"], course["lesson"])["alice"]
    assert graded.score == graded.max_score > 0, graded

    feedback = _nbgrader(course, "generate_feedback", "lesson01", "--force")
    assert feedback.returncode != 0, feedback.stderr[-3000:]
    assert "nbgrader generate_feedback refused" in feedback.stderr, feedback.stderr[-3000:]
    assert not (course["root"] / "feedback").exists()


def test_commands_that_run_no_submitted_code_go_on(course):
    result = _nbgrader(course, "db", "student", "list")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "refused" not in result.stderr
    assert result.stderr.count("autograde and generate_feedback refuse until it loads") == 1


def test_the_guard_starts_before_any_submitted_code_or_grading_stops(tmp_path):
    """Before the first cell, the guard imports what the lesson's set-up imports, to know the
    originals the tests use. That import has its own limit (GuardedExecute.setup_timeout), not the
    cell timeout: torch and Triton can take longer to import on a busy grader than a cell may run.
    Here a set-up import takes 5 s and a cell may take 1 s: the notebook is graded. When even the
    set-up's limit passes, the notebook is not graded and nbgrader says why (grading once went on
    with a guard that had been interrupted before it knew any original)."""
    item = lesson("lesson01")
    course = tempcourse.make_course(tmp_path / "course", [item])
    student_nb = nbformat.read(item.in_course(course).student_notebook, 4)
    solved_nb = nbformat.read(item.in_course(course).source_notebook, 4)
    tempcourse.submit(course, "bob", item, fill_solutions(student_nb, solved_nb))
    handed_in = item.in_course(course).submitted("bob").parent
    (handed_in / "slow_setup.py").write_text("import time\n\ntime.sleep(5)\n")
    source = item.in_course(course).source_notebook.with_suffix(".md")  # the lesson as written
    first = "```{code-cell} ipython3\n"
    text = source.read_text()
    source.write_text(text.replace(first, f"{first}import slow_setup\n```\n\n{first}", 1))
    # a cell may run 1 s; nbclient checks for a reply every shell_timeout_interval seconds
    flags = ["--Execute.timeout=1", "--Execute.shell_timeout_interval=1", *nbgrader_flags()]

    with pytest.raises(tempcourse.GradingError, match="did not start its guard"):
        tempcourse.autograde(course, item, *flags, "--GuardedExecute.setup_timeout=2")

    tempcourse.autograde(course, item, *flags)  # raises if not graded
    graded = read_results(course, item)["bob"]
    assert graded.status == "graded" and graded.score == graded.max_score > 0, graded
    assert graded.sandbox, "graded without the course's sandbox kernel"
