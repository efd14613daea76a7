"""Broken and hostile submissions get the score they deserve, a note for the instructor, and
change nobody else's grade (see conftest.py for how the class is graded).

What each attack deserves is in its file (coursekit/democlass/attacks/NN-name.yml, "expected").
Scores: ``solved`` (every test passes), ``wrong`` (exactly the tests the lesson's costliest
planted mistake fails: an attack on the tests must not help that answer), ``blank`` (nothing
passes), or the list of test cells that must fail. Status: ``graded`` (points as earned),
``held`` (graded, but the points are withheld -- 0 in the gradebook, flagged -- until an
instructor accepts it), ``invalid`` (nothing gradable: 0 and a note).
"""

from __future__ import annotations

import html
import json
import re

import nbformat
import pytest

from coursekit.democlass import badsubmissions
from coursekit.grading import classgrade
from coursekit.grading import tempcourse as grading
from coursekit.grading.feedback import NOT_SHOWN
from coursekit.grading.gradebook import open_gradebook
from coursekit.grading.ledger import tree_digest

from ..leaks import hidden_test_lines
from ..sandboxes import nbgrader_flags
from .conftest import EXTRA, LESSON

pytestmark = [pytest.mark.chain, pytest.mark.hostile]

SOLVED, WRONG, BLANK = "solved", "wrong", "blank"

# kind: (which tests fail, status, finding kinds the instructor must see), as each attack's file
# in coursekit/democlass/attacks/ states it (its "expected", on lesson 1)
EXPECTED = {
    k.name: (k.expected.fails, k.expected.status, k.expected.findings)
    for k in badsubmissions.KINDS
    if k.expected is not None
}
HONEST = {"solved": SOLVED, "wrong": WRONG}


def _failing(hostile, expected) -> set[str]:
    if not isinstance(expected, str):
        return set(expected)
    return {
        SOLVED: set(),
        WRONG: set(hostile.materials.wrong_fails),
        BLANK: set(hostile.materials.test_ids()),
    }[expected]


def _max(hostile) -> float:
    return hostile.report.rows[0].max_score


def _points(hostile, cells) -> float:
    points = {
        c.metadata["nbgrader"]["grade_id"]: float(c.metadata["nbgrader"]["points"])
        for c in hostile.materials.student.cells
        if c.get("metadata", {}).get("nbgrader", {}).get("grade")
    }
    return sum(points[c] for c in cells)


def test_the_catalogue_has_at_least_twenty_kinds_and_each_has_an_expectation():
    names = [k.name for k in badsubmissions.KINDS]
    assert len(names) >= 20 and len(set(names)) == len(names)
    assert set(EXPECTED) == set(names), (
        f"attacks without an expectation: {set(names) - set(EXPECTED)}"
    )


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_bad_submission_gets_the_score_it_deserves(hostile, kind):
    fails, status, notes = EXPECTED[kind]
    row = hostile.report.row(kind)
    failing = _failing(hostile, fails)
    findings = "\n".join(f"  {f}" for f in row.findings)
    assert row.status == status, f"{kind}: {row.status}, expected {status}\n{findings}"
    assert set(row.failed) == (failing if status != "invalid" else set()), (
        f"{kind}: failed {row.failed}\n{findings}"
    )
    deserved = 0.0 if status == "invalid" else _max(hostile) - _points(hostile, failing)
    assert row.auto == deserved, f"{kind}: the tests gave {row.auto}, it deserves {deserved}"
    assert row.score == (deserved if status == "graded" else 0.0), f"{kind}: counted {row.score}"
    kinds = {f.kind for f in row.findings}
    assert notes <= kinds, (
        f"{kind}: the instructor should see {sorted(notes - kinds)}; got\n{findings}"
    )
    if status != "graded":
        assert any(f.severity in ("review", "invalid") and f.message for f in row.findings), (
            findings
        )
    print(f"{kind}: {row.score:g}/{row.max_score:g} ({row.status}; the tests gave {row.auto:g})")


@pytest.mark.parametrize("student", list(HONEST))
def test_honest_submissions_are_graded_as_usual(hostile, student):
    row = hostile.report.row(student)
    assert row.status == "graded" and not row.findings, [str(f) for f in row.findings]
    assert set(row.failed) == _failing(hostile, HONEST[student])
    assert row.score == row.auto == _max(hostile) - _points(hostile, row.failed)


def test_the_gradebook_and_the_export_agree_with_the_report(hostile):
    import csv

    grading.run_nbgrader("export", course=hostile.course)
    rows = {r["student_id"]: r for r in csv.DictReader((hostile.course / "grades.csv").open())}
    for row in hostile.report.rows:
        assert float(rows[row.student]["raw_score"]) == row.score, row.student
    with open_gradebook(hostile.course / "gradebook.db") as gradebook:
        for row in hostile.report.rows:
            nb = gradebook.find_submission_notebook(LESSON.name, LESSON.assignment, row.student)
            assert nb.flagged == (row.status != "graded"), row.student


def test_grading_changed_no_submission_and_no_course_file(hostile):
    assert hostile.report.problems == []
    assert tree_digest(hostile.course / "submitted") == hostile.submitted_before
    gradebook = hostile.course / "gradebook.db"
    assert gradebook.stat().st_size > 0


def test_an_interrupted_run_left_a_consistent_gradebook_and_resumed(hostile):
    state, ledger = hostile.interrupted["gradebook"], hostile.interrupted["ledger"]
    graded = {s for s, e in ledger.items() if e["status"] == "graded"}
    assert graded, "the run was killed before anything was merged"
    assert graded <= set(state), "the ledger names a submission the gradebook lacks"
    for student, scores in state.items():  # every submission in it is complete, or a recorded zero
        assert all(s is not None for s in scores), f"{student} is half-graded in the gradebook"
    everyone = {r.student for r in hostile.report.rows}
    assert len(everyone) == len(badsubmissions.KINDS) + len(HONEST)
    final = json.loads((hostile.course / "reports" / LESSON.assignment / "ledger.json").read_text())
    assert set(final) == everyone and all(e["status"] != "failed" for e in final.values())
    print(
        f"killed after {len(graded)} of {len(everyone)}; the whole class took "
        f"{hostile.seconds:.0f} s, "
        f"{hostile.report.per_minute:.1f} notebooks per minute after resuming"
    )


def test_grading_again_changes_nothing(hostile):
    """A second run grades nothing new; regrading some (--force) gives the same rows."""
    again = classgrade.grade_class(
        hostile.course, LESSON, extra=EXTRA + nbgrader_flags(), progress=False
    )
    assert again.graded == 0 and again.rows == hostile.report.rows
    some = ["patch-allclose", "malformed-json"]  # a held one and an invalid one
    forced = classgrade.grade_class(
        hostile.course,
        LESSON,
        force=True,
        extra=EXTRA + nbgrader_flags(),
        progress=False,
        students=some,
    )
    assert forced.graded == 1 and forced.problems == []
    for student in some:
        assert forced.row(student) == hostile.report.row(student), student


def test_an_instructor_can_accept_a_held_submission(hostile):
    student = "reads-gradebook"
    classgrade.accept(hostile.course, LESSON, student)
    row = classgrade.report_only(hostile.course, LESSON).row(student)
    assert row.status == "graded" and row.score == row.auto == _max(hostile)
    regraded = classgrade.grade_class(
        hostile.course,
        LESSON,
        force=True,
        extra=EXTRA + nbgrader_flags(),
        progress=False,
        students=[student],
    )
    assert regraded.row(student).score == _max(hostile), "an accepted submission stays accepted"
    assert (
        "make accept" in (hostile.course / "reports" / LESSON.assignment / "review.md").read_text()
    )


@pytest.fixture(scope="module")
def feedback(hostile):
    grading.run_nbgrader("generate_feedback", LESSON.assignment, "--force", course=hostile.course)
    return hostile.course / "feedback"


def _visible_text(path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    return html.unescape(re.sub(r"<[^>]+>", "", text)) + "\n" + text


def test_no_generated_file_contains_hidden_tests(hostile, feedback):
    hidden = hidden_test_lines(LESSON)
    assert hidden
    pages = [p for p in feedback.rglob("*") if p.is_file()]
    assert any("reads-hidden-tests" in str(p) for p in pages), (
        "feedback of the student who read the tests"
    )
    assert len({p.parts[-3] for p in pages if p.suffix == ".html"}) >= 30
    for page in pages + [LESSON.student_notebook]:
        text = _visible_text(page)
        leaked = [line for line in hidden if line in text]
        assert not leaked, f"{page} shows hidden tests: {leaked[:2]}"


def test_the_hidden_tests_were_really_printed_and_then_removed(hostile, feedback):
    """The leak attempt did print the calling hidden test; the feedback shows it redacted."""
    graded = (
        hostile.course
        / "autograded"
        / "reads-hidden-tests"
        / LESSON.assignment
        / f"{LESSON.name}.ipynb"
    )
    outputs = "".join(
        o.get("text", "") for c in nbformat.read(graded, 4).cells for o in c.get("outputs", [])
    )
    assert any(line in outputs for line in hidden_test_lines(LESSON)), (
        "the attack did not run as designed"
    )
    page = feedback / "reads-hidden-tests" / LESSON.assignment / f"{LESSON.name}.html"
    assert NOT_SHOWN in _visible_text(page)  # the test cell's printed output is left out


# The attacks on IPython's history (coursekit/democlass/attacks/46-48): each prints, as it runs,
# "history route: H of N entries hold hidden tests", then those entries reversed or hex-encoded.
HISTORY_KINDS = ("reads-test-history", "reads-earlier-test-history", "reads-history-manager")
_ROUTE = re.compile(r"history route: (\d+) of (\d+) entries hold hidden tests")
_HEX = re.compile(r"(?:[0-9a-f]{2}){16,}")


def _every_spelling(text: str) -> str:
    """``text``, reversed, and every long hex run in it decoded: how the attacks print."""
    decoded = [bytes.fromhex(run).decode("utf-8", "replace") for run in _HEX.findall(text)]
    return "\n".join([text, text[::-1], *decoded])


@pytest.mark.parametrize("kind", HISTORY_KINDS)
def test_ipythons_history_holds_no_test_cell(hostile, feedback, kind):
    """Test cells run without IPython's history: the attack ran and read In, _ih, _i<N>, Out or
    the history manager, in a test cell and after it, and found no hidden test there -- nothing
    to print in any spelling, in the graded notebook or the feedback."""
    graded = hostile.course / "autograded" / kind / LESSON.assignment / f"{LESSON.name}.ipynb"
    outputs = "".join(
        o.get("text", "") for c in nbformat.read(graded, 4).cells for o in c.get("outputs", [])
    )
    routes = [(int(h), int(n)) for h, n in _ROUTE.findall(outputs)]
    assert routes and sum(n for _, n in routes), f"{kind}: the attack did not run as designed"
    assert sum(h for h, _ in routes) == 0, f"{kind}: the history held hidden tests: {routes}"
    page = feedback / kind / LESSON.assignment / f"{LESSON.name}.html"
    for where, text in (("graded notebook", outputs), ("feedback", _visible_text(page))):
        seen = _every_spelling(text)
        leaked = [line for line in hidden_test_lines(LESSON) if line in seen]
        assert not leaked, f"{kind}: the {where} shows hidden tests: {leaked[:2]}"
