"""The visible tests' hints stay out of sight until their check fails (coursekit/course/hints.py
takes them out of every notebook made from a lesson; attention_ref.hints finds them again)."""

from __future__ import annotations

import ast
import io
import json
import shutil
import tokenize

import nbformat
import pytest

from attention_ref import hints as table
from coursekit.course import hints, reading, sources
from coursekit.course.cells import grade_id, is_test
from coursekit.course.lessons import all_lessons
from coursekit.publishing import current

pytestmark = pytest.mark.unit
LESSONS = all_lessons()


def test_a_hint_keyword_goes_with_its_comma_wherever_it_stands():
    cell = (
        'expect_close(a, b, "é first",\n'  # a non-ASCII letter before: ast counts bytes
        '             hint="ha" "lf", rtol=1e-3)\n'
        'expect_shape(a, (2,), "second", hint="last")\n'
        "expect_dtype(a, bool, hint='only keyword', what='w')\n"
    )
    stripped = hints.strip_cell(cell)
    assert stripped.source == (
        'expect_close(a, b, "é first",\n'
        "             rtol=1e-3)\n"
        'expect_shape(a, (2,), "second")\n'
        "expect_dtype(a, bool, what='w')\n"
    )
    assert stripped.moved == [
        ('expect_close(a, b, "é first",\n             rtol=1e-3)', "half"),
        ('expect_shape(a, (2,), "second")', "last"),
        ("expect_dtype(a, bool, what='w')", "only keyword"),
    ]


def test_a_message_loses_its_hint_and_keeps_what_failed():
    cell = (
        "for x in xs:\n"
        '    assert f(x) == 1, (f"f({x}) is {f(x)}, expected 1\\n  Hint: one "\n'
        '                       "line, two")\n'
        'raise AssertionError(f"{e!r} raised. Hint: leave it") from None\n'
        'assert y, f"y is {y}. Hint: {hint}"  # built at run time: stays\n'
    )
    stripped = hints.strip_cell(cell)
    assert stripped.source == (
        "for x in xs:\n"
        '    assert f(x) == 1, (f"f({x}) is {f(x)}, expected 1")\n'
        'raise AssertionError(f"{e!r} raised.") from None\n'
        'assert y, f"y is {y}. Hint: {hint}"  # built at run time: stays\n'
    )
    assert [hint for _, hint in stripped.moved] == ["one line, two", "leave it"]
    assert len(stripped.kept) == 1


def test_a_hint_in_a_literal_of_its_own_leaves_no_empty_string_behind():
    cell = (
        "assert ok, (\n"
        '    "nothing was written yet. "\n'
        '    "Hint: write first, then read")\n'
        'assert ok, "Hint: all of it"\n'
    )
    stripped = hints.strip_cell(cell)
    assert stripped.source == (
        'assert ok, (\n    "nothing was written yet. ")\nassert ok, ""\n'
    )  # a message that was all hint keeps an empty one: the assert still has a message
    assert [hint for _, hint in stripped.moved] == ["write first, then read", "all of it"]


def test_hidden_tests_keep_their_hints():
    cell = (
        'expect_close(a, b, "seen", hint="out of sight")\n'
        "### BEGIN HIDDEN TESTS\n"
        'expect_close(a, c, "hidden", hint="stays: it never shows before it fails")\n'
        "### END HIDDEN TESTS\n"
    )
    stripped = hints.strip_cell(cell)
    assert 'hint="stays' in stripped.source and "out of sight" not in stripped.source


def _shape(source: str) -> str:
    """The code with every string constant blanked and every hint keyword gone."""

    class Blank(ast.NodeTransformer):
        def visit_Constant(self, node):
            return ast.Constant("S") if isinstance(node.value, str) else node

        def visit_JoinedStr(self, node):
            return ast.Constant("S")

        def visit_Call(self, node):
            node.keywords = [k for k in node.keywords if k.arg != "hint"]
            return self.generic_visit(node)

    return ast.dump(Blank().visit(ast.parse(source)))


def _empty_pieces(source: str) -> list[str]:
    """Empty string literals joined to another literal (``"..." ""``): what a learner reads as a
    leftover."""
    strings = [[]]
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.STRING:
            strings[-1].append(token.string)
        elif token.type not in (tokenize.NL, tokenize.COMMENT):
            strings.append([])
    return [p for run in strings if len(run) > 1 for p in run if p in ('""', "''")]


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda item: item.assignment)
def test_only_hints_leave_the_test_cells(lesson):
    """Every check stays as it was written; no visible hint is left but those built at run time."""
    for cell in reading.source_to_notebook(lesson.source).cells:
        if cell.cell_type != "code" or not is_test(cell):
            continue
        stripped = hints.strip_cell(cell.source)
        assert _shape(stripped.source) == _shape(cell.source), grade_id(cell)
        visible = table.visible_part(stripped.source)
        left = [n for n in ast.walk(ast.parse(visible)) if isinstance(n, ast.keyword)]
        assert not [k for k in left if k.arg == "hint" and isinstance(k.value, ast.Constant)
                    and isinstance(k.value.value, str)], grade_id(cell)  # fmt: skip
        assert visible.count(hints.MARK) == sum(k.count(hints.MARK) for k in stripped.kept)
        assert not _empty_pieces(visible), f"{grade_id(cell)}: an empty string where a hint was"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda item: item.assignment)
def test_the_hint_tables_are_made_from_the_lessons_as_they_are(lesson):
    path = hints.table_path(lesson)
    assert path.exists() and path.read_text(encoding="utf-8") == hints.table_text(lesson), (
        f"{path.relative_to(lesson.root)} is stale: make notebooks (or python -m "
        f"coursekit.publishing.release {lesson.assignment}) writes it"
    )


def _lines_of(check: str, source: str) -> int:
    """The line of ``source`` (1-based) on which the statement ``check`` starts."""
    for node in ast.walk(ast.parse(source)):
        segment = ast.get_source_segment(source, node) if isinstance(node, ast.stmt) else None
        if segment is not None and table.key(segment) == table.key(check):
            return node.lineno
    raise AssertionError(f"not in the test cell: {check}")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda item: item.assignment)
def test_a_failing_check_finds_its_hint_in_the_student_edition_and_in_grading(lesson):
    """As the kernel looks it up: the statement at the line that failed, in the cell it ran."""
    tables = json.loads(hints.table_path(lesson).read_text(encoding="utf-8"))["test_cells"]
    student = {grade_id(c): c.source for c in nbformat.read(lesson.student_notebook, 4).cells}
    graded = {grade_id(c): c.source for c in sources.nbgrader_source(lesson.source).cells}
    for cell_id, entry in tables.items():
        for source in (student[cell_id], graded[cell_id]):  # graded: hidden tests put back
            for item in entry["hints"]:
                line = _lines_of(item["check"], source) + item["check"].count("\n")
                assert table.hint_for(source, line) == item["hint"], (cell_id, item["check"])


def test_a_notebook_is_current_while_its_source_is_unchanged(tmp_path):
    lesson = LESSONS[2]
    assert current.MADE_FROM == sources.MADE_FROM
    assert current.is_current(lesson.student_notebook, lesson.source)
    copy = tmp_path / "solutions" / lesson.assignment / lesson.source.name
    copy.parent.mkdir(parents=True)
    shutil.copy2(lesson.source, copy)
    (tmp_path / "solutions" / "attention_ref" / "hints").mkdir(parents=True)
    shutil.copy2(hints.table_path(lesson), current.hint_table(copy))
    assert current.is_current(lesson.student_notebook, copy)
    copy.write_text(copy.read_text(encoding="utf-8") + "\nOne more sentence.\n", encoding="utf-8")
    assert not current.is_current(lesson.student_notebook, copy)
