"""A lesson's whole round trip on the class's JupyterHub, in a real Chromium, one page per account.

1. the instructor logs in, generates and releases lesson 1 from formgrader's page;
2. student A fetches it in the Assignments tab, opens it, types a correct answer into one
   exercise in the editor, saves, validates and submits;
3. student B submits it untouched; student C submits a notebook that tries to read A's work,
   the grader's course folder and the gradebook;
4. the instructor collects (formgrader), grades (make autograde in the grader's course folder,
   which also says what the class got wrong and how alike the answers are), sees the scores and
   the due date in formgrader, generates and releases feedback (the due date has passed), and
   exports the grades for the LMS (nbgrader export --exporter=...MoodleExport);
5. student A fetches the feedback and reads the score.

Every step is a screenshot in build/classroom-screenshots/. Then: each score is what `make
check`'s grading (coursekit.grading.tempcourse) gives the same notebook; C's reads failed with
PermissionError (from the OS in C's own server; from the OS and the grading sandbox while
graded) and C is held; A's and B's files did not change; no hidden test reached any file a
student can open.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import re
import tempfile
from pathlib import Path

import nbformat
import pytest

from autograde_tests.leaks import hidden_test_lines
from coursekit.classroom import accounts
from coursekit.course.lessons import lesson as find_lesson
from coursekit.grading import tempcourse
from coursekit.grading.results import read_results

from . import pages
from .conftest import DUE, SHOTS, as_grader

pytestmark = [pytest.mark.hub, pytest.mark.accounts, pytest.mark.browser, pytest.mark.chain]

LESSON = find_lesson("lesson01")
NOTEBOOK = f"{LESSON.assignment}/{LESSON.name}.ipynb"
ANSWER = "return queries @ np.swapaxes(keys, -1, -2)"  # dot_scores, the lesson's first exercise


def _page(browser):
    return browser.new_context(viewport={"width": 1280, "height": 900}).new_page()


def _digest(home) -> dict[str, str]:
    """The student's lesson folder as handed in (feedback, when fetched, arrives beside it)."""
    folder = home / LESSON.assignment
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in pages.own_files(folder)
        if "feedback" not in p.relative_to(folder).parts
    }


def _snoop_source(test_class) -> str:
    room = test_class.room
    targets = [
        accounts.home(test_class.name("a")) / NOTEBOOK,
        room.folder / "solutions" / LESSON.assignment / f"{LESSON.name}.md",
        room.folder / "gradebook.db",
    ]
    return (
        "def dot_scores(queries, keys):\n"
        "    raise NotImplementedError()\n\n\n"
        "SNOOPED = {}\n"
        f"for target in {[str(t) for t in targets]!r}:\n"
        "    try:\n"
        "        with open(target, 'rb') as handle:\n"
        "            SNOOPED[target] = handle.read(32)\n"
        "    except Exception as error:\n"
        "        SNOOPED[target] = f'{type(error).__name__}: {error}'\n"
        "print(SNOOPED)\n"
    )


def test_a_lesson_round_trip_in_the_browser(test_class, hub, browser):
    steps = pages.Steps(SHOTS)
    room = test_class.room
    instructor = _page(browser)
    _release(instructor, test_class, hub, steps)
    before = {
        "a": _student_answers(_page(browser), test_class, hub, steps),
        "b": _student_submits_untouched(_page(browser), test_class, hub, steps),
    }
    snooped = _student_snoops(_page(browser), test_class, hub, steps)
    assert snooped.count("PermissionError: [Errno 13]") == 3, snooped  # the OS refused all three
    report = _grade(instructor, test_class, hub, steps)
    feedback_text = _student_reads_feedback(_page(browser), test_class, hub, steps)

    expected = _make_check_scores(test_class, room)
    a, b, c = (test_class.name(who) for who in "abc")
    for student in (a, b, c):
        assert float(report[student]["autograder_score"]) == expected[student].auto, student
    assert report[a]["status"] == report[b]["status"] == "graded"
    assert float(report[a]["score"]) > 0 and float(report[b]["score"]) == 0
    assert report[c]["status"] == "held", report[c]
    score = re.search(r"Score:\s*([\d.]+)\s*/\s*([\d.]+)", feedback_text)
    assert score and float(score.group(1)) == float(report[a]["score"]), feedback_text[:500]
    _assert_graded_reads_refused(room, c)
    for who, digest in before.items():
        assert _digest(accounts.home(test_class.name(who))) == digest, f"{who}'s files changed"
    _assert_no_hidden_tests(test_class, feedback_text)


def _release(page, test_class, hub, steps) -> None:
    room = test_class.room
    pages.log_in(page, hub.url, test_class.name("i"), test_class.passwords[test_class.name("i")])
    pages.formgrader(page, hub.url, room.course_id)
    steps.shot(page, "instructor-formgrader")
    assert "Successfully" in pages.formgrader_action(page, LESSON.assignment, "assign")
    steps.shot(page, "instructor-generated-lesson01")
    pages.close_dialog(page)
    assert "Released as" in pages.formgrader_action(page, LESSON.assignment, "release")
    steps.shot(page, "instructor-released-lesson01")
    pages.close_dialog(page)


def _student_lab(page, test_class, hub, steps, who: str) -> str:
    name = test_class.name(who)
    pages.log_in(page, hub.url, name, test_class.passwords[name])
    pages.open_lab(page, hub.url, name)
    assert pages.nbgrader_menu(page) == ["Assignment List"]  # no formgrader, no course list
    assert page.locator("#nbgrader-create_assignemnt").count() == 0  # (nbgrader's spelling)
    assert "Jupyter news" not in page.inner_text("body")
    steps.shot(page, f"student-{who}-jupyterlab")
    pages.open_assignments(page)
    pages.fetch(page, LESSON.assignment)
    steps.shot(page, f"student-{who}-fetched")
    return name


def _student_answers(page, test_class, hub, steps) -> dict[str, str]:
    name = _student_lab(page, test_class, hub, steps, "a")
    path = accounts.home(name) / NOTEBOOK
    pages.open_notebook(page, hub.url, name, NOTEBOOK)
    pages.replace_line(page, "def dot_scores", "raise NotImplementedError()", ANSWER)
    pages.save(page, path, ANSWER)
    steps.shot(page, "student-a-answered")
    pages.open_assignments(page)
    pages.show_notebooks(page, LESSON.assignment)
    verdict = pages.validate(page)
    steps.shot(page, "student-a-validated")
    assert "NotImplementedError" in verdict or "failed" in verdict.lower(), verdict
    pages.dismiss(page)
    pages.submit(page, LESSON.assignment)
    steps.shot(page, "student-a-submitted")
    page.context.close()  # A leaves: nothing of A's writes to A's files any more
    return _digest(accounts.home(name))


def _student_submits_untouched(page, test_class, hub, steps) -> dict[str, str]:
    name = _student_lab(page, test_class, hub, steps, "b")
    pages.submit(page, LESSON.assignment)
    steps.shot(page, "student-b-submitted")
    page.context.close()
    return _digest(accounts.home(name))


def _student_snoops(page, test_class, hub, steps) -> str:
    name = _student_lab(page, test_class, hub, steps, "c")
    pages.open_notebook(page, hub.url, name, NOTEBOOK)
    source = _snoop_source(test_class)
    pages.replace_cell(page, "def dot_scores", source)
    output = pages.run_cell(page, "SNOOPED", steps)
    steps.shot(page, "student-c-snooped")
    pages.save(page, accounts.home(name) / NOTEBOOK, "SNOOPED")
    pages.open_assignments(page)
    pages.submit(page, LESSON.assignment)
    steps.shot(page, "student-c-submitted")
    return output


def _grade(page, test_class, hub, steps) -> dict[str, dict]:
    room = test_class.room
    pages.formgrader(page, hub.url, room.course_id)
    assert "Successfully collected" in pages.formgrader_action(page, LESSON.assignment, "collect")
    steps.shot(page, "instructor-collected")
    pages.close_dialog(page)
    graded = as_grader(room, "make", "autograde", f"LESSON={LESSON.assignment}")
    print(graded.stdout)
    assert "what the class got wrong" in graded.stdout
    assert "similarity of the answers" in graded.stdout
    pages.formgrader(page, hub.url, room.course_id, "manage_students")
    steps.shot(page, "instructor-scores")
    shown = [row.inner_text() for row in page.locator("table tbody tr").all()]
    pages.formgrader(page, hub.url, room.course_id)
    assert DUE.strftime("%Y-%m-%d") in page.inner_text("body"), "formgrader shows the due date"
    pages.formgrader_action(page, LESSON.assignment, "generate-feedback")
    pages.close_dialog(page)
    pages.formgrader_action(page, LESSON.assignment, "release-feedback")
    steps.shot(page, "instructor-released-feedback")
    pages.close_dialog(page)
    with (room.folder / "reports" / LESSON.assignment / "grades.csv").open() as handle:
        report = {row["student"]: row for row in csv.DictReader(handle)}
    for student, row in report.items():  # formgrader shows what the gradebook counts
        assert any(student in line and f"{float(row['score']):g} / " in line for line in shown), (
            student,
            row,
            shown,
        )
    _assert_lms_export(room, report)
    return report


def _assert_lms_export(room, report: dict[str, dict]) -> None:
    """In the grader's terminal: the grades for Moodle, one row per rostered student (held ones
    "-", Moodle's "no grade": it reads a blank as 0), the same scores as the course's table."""
    out = room.folder / "moodle_grades.csv"
    as_grader(room, "nbgrader", "export", "--exporter=coursekit.grading.lms.MoodleExport",
              f"--to={out}")  # fmt: skip
    with out.open(newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["Username", LESSON.assignment], rows[0]
    exported = dict(rows[1:])
    assert set(exported) == set(room.students)
    for student, row in report.items():
        expected = "-" if row["status"] == "held" else f"{round(float(row['score']), 2):g}"
        assert exported[student] == expected, (student, exported[student], row)


def _student_reads_feedback(page, test_class, hub, steps) -> str:
    name = test_class.name("a")
    pages.log_in(page, hub.url, name, test_class.passwords[name])
    pages.open_lab(page, hub.url, name)
    pages.open_assignments(page)
    pages.fetch_feedback(page, LESSON.assignment)
    steps.shot(page, "student-a-fetched-feedback")
    html = next((accounts.home(name) / LESSON.assignment / "feedback").rglob("*.html"))
    relative = html.relative_to(accounts.home(name))
    page.goto(f"{hub.url}user/{name}/files/{relative}")
    steps.shot(page, "student-a-feedback")
    return page.inner_text("body")


def _make_check_scores(test_class, room) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        course = tempcourse.make_course(Path(folder) / "course", [LESSON])
        for who in "abc":
            student = test_class.name(who)
            collected = room.folder / "submitted" / student / NOTEBOOK
            tempcourse.submit(course, student, LESSON, nbformat.read(collected, as_version=4))
        tempcourse.autograde(course, LESSON)
        return read_results(course, LESSON)


def _assert_graded_reads_refused(room, student: str) -> None:
    """While graded (as the grader account), C's notebook read nothing: A's home is closed to
    the grader by the OS (Errno 13); the course folder and the gradebook are refused by the
    grading sandbox today ("not allowed while grading"). An OS sandbox that hides them instead
    would say FileNotFoundError: still nothing read."""
    graded = nbformat.read(room.folder / "autograded" / student / NOTEBOOK, as_version=4)
    printed = "".join(
        out.get("text", "")
        for cell in graded.cells
        for out in cell.get("outputs", [])
        if "SNOOPED" in cell.source
    )
    snooped = ast.literal_eval(printed.strip())
    assert len(snooped) == 3, printed
    for target, what in snooped.items():
        assert isinstance(what, str), f"{target} was read while grading: {what!r}"
        assert what.startswith(("PermissionError", "FileNotFoundError")), (target, what)


def _assert_no_hidden_tests(test_class, seen: str) -> None:
    room, hidden = test_class.room, hidden_test_lines(LESSON)
    assert hidden
    readable = [
        room.exchange / room.course_id / "outbound",
        room.exchange / room.course_id / "feedback",
    ]
    readable += [accounts.home(test_class.name(who)) for who in "abc"]
    texts = {"the feedback page": seen}
    for folder in readable:
        for path in pages.own_files(folder):
            texts[str(path)] = path.read_text(errors="replace")
            if path.suffix == ".ipynb":  # what JupyterLab shows: sources and outputs, unescaped
                notebook = nbformat.read(path, as_version=4)
                texts[str(path)] = "\n".join(
                    [cell.source for cell in notebook.cells]
                    + [json.dumps(cell.get("outputs", [])) for cell in notebook.cells]
                )
    for where, text in texts.items():
        leaked = [line for line in hidden if line in text]
        assert not leaked, f"{where} shows hidden tests: {leaked[:2]}"
