"""The similarity report (coursekit.grading.similarity, copydetect underneath), measured on the
course's own answers, without grading anything:

* found: every lesson's solved answers, copied with each disguise of coursekit.democlass.copies
  (renamed variables, reordered functions, changed comments) and with all three, score at or
  above the default threshold against the original;
* not flagged: the course's independently written correct answers to one exercise (each
  lesson's solution and its alternatives.yml) stay below it.

Both rates are printed (`-s`); `make grade-class` reports them for a graded synthetic class, and
autograde_tests/test_class_report.py checks the planted copies of such a class are found.
"""

from __future__ import annotations

import nbformat
import numpy as np
import pytest

from coursekit.course.coursefile import CourseFileError
from coursekit.course.lessons import all_lessons
from coursekit.course.mistakes import fill_solutions, lesson_mistakes, plant, read_alternatives
from coursekit.course.sources import source_to_notebook
from coursekit.democlass.copies import DISGUISES, copy_of, independent_answers, rename, reorder
from coursekit.grading import similarity
from coursekit.grading.similarity import THRESHOLD, answers, compare, released_answers

pytestmark = pytest.mark.unit

LESSONS = all_lessons()
WAYS = [(way,) for way in DISGUISES] + [DISGUISES]


@pytest.fixture(scope="module")
def solved() -> dict:
    """lesson -> (the released answers, the solved answers, the solved notebook)."""
    found = {}
    for item in LESSONS:
        released = nbformat.read(item.student_notebook, 4)
        ids, stubs = released_answers(released)
        notebook = fill_solutions(released, source_to_notebook(item.source))
        found[item.assignment] = (ids, stubs, notebook)
    return found


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda item: item.assignment)
def test_a_disguised_copy_is_found(solved, lesson):
    ids, stubs, notebook = solved[lesson.assignment]
    for way in WAYS:
        copy = answers(copy_of(notebook, way), ids)
        original = answers(notebook, ids)
        # (reordering needs a cell with two functions; the test below has one)
        assert copy != original or way == ("reorder",), f"{way} changed nothing"
        (pair,) = compare({"original": original, "copy": copy}, stubs)
        assert pair.score >= THRESHOLD, f"{lesson.assignment}, {way}: {pair.score:.2f}"


@pytest.mark.parametrize("lesson", LESSONS[:4], ids=lambda item: item.assignment)
def test_the_shares_are_copydetects_own(solved, lesson):
    """similarity.py computes copydetect's similarity with one array lookup in place of
    compare_files' loop over shared hashes: the numbers must be compare_files' own."""
    from copydetect import compare_files

    ids, stubs, notebook = solved[lesson.assignment]
    mistake = next(m for m in lesson_mistakes(lesson.assignment))
    texts = {
        "solved": answers(notebook, ids),
        "copy": answers(copy_of(notebook), ids),
        "mistake": answers(plant(nbformat.read(lesson.student_notebook, 4),
                                 source_to_notebook(lesson.source), mistake), ids),
        "stub-only": stubs,
        "alternative": next((a.new for a in read_alternatives(lesson.source.parent)), "x = 1"),
    }  # fmt: skip
    common = np.array(sorted(similarity._fingerprint(stubs, None).hashes))
    for pair in compare(texts, stubs):
        a, b = (similarity._fingerprint(texts[n], common) for n in (pair.first, pair.second))
        _, shares, _ = compare_files(a, b)
        assert pair.shares == pytest.approx(tuple(shares), abs=1e-12), pair


def test_the_courses_independent_answers_are_not_flagged(capsys):
    pairs = independent_answers()
    flagged = [p for p in pairs if p.score >= THRESHOLD]
    assert len(pairs) >= 30, "alternatives.yml should give many pairs to measure on"
    with capsys.disabled():
        worst = max(pairs, key=lambda p: p.score)
        print(f"\nindependent correct answers flagged at {THRESHOLD}: {len(flagged)} of "
              f"{len(pairs)}; the most similar {worst.score:.2f} ({worst})")  # fmt: skip
    assert not flagged, flagged


def test_the_released_code_is_not_counted():
    stub = "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"
    longer = stub * 3
    assert compare({"a": longer, "b": longer}, longer) == []  # nothing of their own to compare
    own = "def f(x):\n    total = sum(v * v for v in x if v > 0)\n    return total / len(x)\n"
    (pair,) = compare({"a": longer + own, "b": longer + own}, longer)
    assert pair.score == 1.0


def test_disguises_keep_the_names_and_the_behaviour():
    code = (
        "def outer(x, axis=0):\n"
        "    size = len(x)  # how many\n"
        "    x = list(x)\n"
        "    scores = helper(x, axis=axis)\n"
        "    if not scores:\n"
        "        raise ValueError(f'{size} values, none positive')\n"
        "    return sum(scores) / size + x.count(axis)\n\n\n"
        "def helper(y, axis):\n"
        "    doubled = [2 * v for v in y]\n"
        "    return doubled\n"
    )
    copied = copy_of(nbformat.v4.new_notebook(cells=[_solution(code)]), DISGUISES).cells[0].source
    assert "def outer(x, axis=0)" in copied and "axis=axis" in copied and "x.count(axis)" in copied
    assert "my_scores_" in rename(code) and "my_doubled_" in copied
    assert "my_size_" not in copied and "my_x" not in copied  # in an f-string; a parameter
    assert copied.index("def helper") < copied.index("def outer")  # reordered
    assert "# how many" not in copied and "#" in copied  # comments changed
    original, disguised = {}, {}
    exec(code, original)  # noqa: S102 -- the test's own code
    exec(copied, disguised)  # noqa: S102
    assert disguised["outer"]([1.0, 2.0, 0.0]) == original["outer"]([1.0, 2.0, 0.0]) == 3.0
    assert reorder("def only():\n    pass\n") == "def only():\n    pass\n"


def _solution(code: str):
    cell = nbformat.v4.new_code_cell(code)
    cell.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "answer"}
    return cell


def test_the_report_page_shows_pairs_side_by_side_offline(tmp_path):
    own = "def f(x):\n    total = sum(v * v for v in x if v > 0)\n    return total / len(x)\n"
    other = "def g(items):\n    return [item for item in items if item is not None][::-1]\n"
    found = similarity.SimilarityReport(
        0.75, compare({"ann": own, "bo": own, "cy": other}), {"ann": own, "bo": own, "cy": other}
    )
    page = similarity.write_reports(tmp_path, found, "lesson01: the most similar answers")
    text = page.read_text()
    assert [(p.first, p.second) for p in found.flagged] == [("ann", "bo")]
    assert "ann and bo: 100%" in text and "<mark>" in text and "http" not in text
    assert (tmp_path / "similarity.csv").read_text().splitlines()[1].startswith("ann,bo,1.000")


def test_a_bad_threshold_is_refused(tmp_path, monkeypatch):
    toml = tmp_path / "course.toml"
    monkeypatch.setenv("CLASSROOM_COURSE", str(toml))
    toml.write_text("[similarity]\nthreshold = 75\n")
    with pytest.raises(CourseFileError, match=r"threshold = 75.0: must be in \(0, 1\]"):
        similarity.threshold()
    toml.write_text("[similarity]\nthreshold = 0.9\n")
    assert similarity.threshold() == 0.9


@pytest.mark.parametrize("lesson", LESSONS[:3], ids=lambda item: item.assignment)
def test_the_page_marks_no_released_code(solved, lesson):
    """The page says the released code is left out, so nothing of it is marked as shared: no
    def line, no line of a released docstring (copydetect's k-grams reach into them from the
    answer next to them: the instructors' review of 2026-11-28)."""
    import ast
    import html
    import re

    ids, stubs, notebook = solved[lesson.assignment]
    released = {line.strip() for line in stubs.splitlines() if len(line.strip()) >= 8}
    docstrings = [
        line.strip()
        for node in ast.walk(ast.parse(stubs))
        if isinstance(node, ast.FunctionDef) and ast.get_docstring(node)
        for line in ast.get_docstring(node).splitlines()
        if len(line.strip()) >= 8
    ]
    assert docstrings, "the stubs should have docstrings to check"
    original, copy = answers(notebook, ids), answers(copy_of(notebook), ids)
    for page in similarity.highlighted(original, copy, stubs):
        marked = [html.unescape(m) for m in re.findall(r"<mark>(.*?)</mark>", page, re.S)]
        assert marked, "the answers themselves are shared and marked"
        lines = {line.strip() for m in marked for line in m.splitlines()}
        assert not lines & released, sorted(lines & released)[:3]
        assert not [d for d in docstrings if any(d in m for m in marked)]
