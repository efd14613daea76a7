"""Expected times by a stated method (coursekit.course.expected_time): each lesson's own line
states the computed value, and the method counts what it says it counts. Fast: sources only."""

from __future__ import annotations

import jupytext
import nbformat
import pytest

from coursekit.course import expected_time as method
from coursekit.course.lessons import all_lessons

pytestmark = pytest.mark.unit


def test_every_lessons_line_states_the_computed_time():
    wrong = [
        f"{lesson.assignment}: its line says {method.stated_minutes(lesson)}, the method gives"
        f" {method.computed_minutes(lesson)}: write '**Expected time:** about"
        f" {method.computed_minutes(lesson)} minutes'"
        for lesson in all_lessons()
        if method.stated_minutes(lesson) != method.computed_minutes(lesson)
    ]
    assert not wrong, (
        "expected times that disagree with the stated method (`python -m"
        " coursekit.course.expected_time --write` rewrites them all):\n  " + "\n  ".join(wrong)
    )


def _solution(name: str, body: str, markdown: bool = False) -> nbformat.NotebookNode:
    meta = {"grade_id": name, "solution": True, "grade": markdown, "locked": False}
    make = nbformat.v4.new_markdown_cell if markdown else nbformat.v4.new_code_cell
    return make(body, metadata={"nbgrader": {**meta, "schema_version": 3, "task": False}})


def _test(name: str, visible: int, hidden: int) -> nbformat.NotebookNode:
    lines = ["assert True"] * visible + ["### BEGIN HIDDEN TESTS"] + ["assert 1"] * hidden
    meta = {"grade_id": name, "solution": False, "grade": True, "locked": True, "points": 1}
    return nbformat.v4.new_code_cell(
        "\n".join(lines + ["### END HIDDEN TESTS"]),
        metadata={"nbgrader": {**meta, "schema_version": 3, "task": False}},
    )


def _answer(signature: str, lines: int) -> str:
    body = "\n".join(["    # a comment is not counted"] + ["    x = 1"] * lines)
    return f"{signature}\n    ### BEGIN SOLUTION\n{body}\n    ### END SOLUTION"


WORDS = " ".join(["word"] * 390)
LINE = "**Expected time:** about 5 minutes"
CELLS = [
    nbformat.v4.new_markdown_cell(f"# Lesson 1 — Timed\n\n{LINE}\n\n{WORDS}"),
    nbformat.v4.new_code_cell("\n".join(["y = 2"] * 18) + "\nplt.show()\n\nplt.show()"),
    nbformat.v4.new_markdown_cell("**Exercise 1 (2 points).** " + " ".join(["ask"] * 26)),
    _solution("f", _answer("def f():", 8)),
    _test("test_f", visible=10, hidden=50),
    nbformat.v4.new_markdown_cell(
        "## 2. Harder\n\n**Challenge (3 points).** Write g.\n\n<!-- words nobody sees -->"
    ),
    _solution("g", _answer("def g():", 4)),
    _solution("k", _answer("@triton.jit\ndef k():", 4)),
    _solution("why", "Explain.", markdown=True),
    nbformat.v4.new_code_cell("train()", metadata={"tags": ["skip-when-grading", "experiment"]}),
    nbformat.v4.new_markdown_cell(
        "<details><summary>1. Why?</summary>\n\nBecause.\n</details>\n\n"
        "<details>\n<summary>Hint (open it only if you are stuck)</summary>\n\nLook.\n</details>"
    ),
]  # fmt: skip


@pytest.fixture
def timed_lesson(tmp_path):
    folder = tmp_path / "solutions" / "lesson01"
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.from_dict(c) for c in CELLS])
    jupytext.write(nb, folder / "timed.md", fmt="md:myst")
    (lesson,) = all_lessons(tmp_path)
    return lesson


def test_the_method_counts_what_it_states(timed_lesson):
    parts = method.parts_of(timed_lesson)
    # prose, split at white space: title 5 + line 5 + 390, the exercise's statement 30, heading
    # 3 and the challenge's statement 5 (not the comment), the free-text cell 1, question and hint
    # 15: 454 words at 200/min; code: 20 lines, the stubs' 1 + 1 + 2 lines outside the
    # solution, 10 visible test lines, 1: 35 lines at 20/min
    assert parts.reading == pytest.approx(454 / 200 + 35 / 20)
    # 6 code cells at 1/4, 2 figures at 1, one experiment at 1
    assert parts.running == pytest.approx(6 * 0.25 + 2 + 1)
    # a function 3, a challenge 5, a kernel 20, a free text 5; the statements' 30 + 5 words at
    # 30 a minute (the free text after an answer is no statement); 16 answer lines at 1/4, and
    # the function's 8 and the challenge's 4 squared over 50 (not the kernel's); a question 1
    assert parts.exercises == pytest.approx(
        3 + 5 + 20 + 5 + 35 / 30 + 16 * 0.25 + (64 + 16) / 50 + 1
    )
    total = (parts.reading + parts.running + parts.exercises) * 1.10
    assert method.computed_minutes(timed_lesson) == 5 * round(total / 5)
    assert [
        method.exercise_kind(c, s) for c, s in [(CELLS[3], "Exercise"), (CELLS[6], "Challenge")]
    ] == ["function", "challenge"]


def test_a_cell_skipped_when_grading_is_an_experiment_only_when_tagged_so():
    """A figure grading skips is a figure (a minute); a longer run is tagged ``experiment`` (a
    minute too: the learner waits, then reads what it printed, as for a figure)."""
    skipped = {"tags": ["skip-when-grading"]}
    figure = nbformat.v4.new_code_cell("plt.show()", metadata=skipped)
    run = nbformat.v4.new_code_cell("train()", metadata={"tags": [*skipped["tags"], "experiment"]})
    for cell, minutes in ((figure, 0.25 + 1), (run, 0.25 + 1)):
        parts = method.Parts()
        method._code(parts, cell)
        assert parts.running == pytest.approx(minutes)


@pytest.mark.parametrize(
    ("minutes", "rounded"), [(1, 5), (62.4, 60), (63, 65), (117, 115), (118, 120), (176, 180)]
)
def test_the_total_is_rounded_to_5_minutes_and_to_10_from_two_hours_on(minutes, rounded):
    assert method.Parts(reading=minutes / (1 + method.MARGIN)).minutes == rounded


def test_write_rewrites_the_line_and_nothing_else(timed_lesson):
    before = timed_lesson.source.read_text(encoding="utf-8")
    assert method.stated_minutes(timed_lesson) == 5
    assert method.write(timed_lesson) is True
    after = timed_lesson.source.read_text(encoding="utf-8")
    computed = method.computed_minutes(timed_lesson)
    assert method.stated_minutes(timed_lesson) == computed != 5
    assert after == before.replace("about 5 minutes", f"about {computed} minutes")
    assert method.write(timed_lesson) is False


def test_the_command_prints_each_lesson_and_the_method(capsys):
    assert method.main([]) == 0
    out = capsys.readouterr().out
    assert all(lesson.assignment in out for lesson in all_lessons())
    assert f"Method: {method.METHOD}." in out
