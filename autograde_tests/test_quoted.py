"""Text quoted from output (coursekit.course.quoted): the markers' form and the quotes' presence
in their own text are checked from the lessons' sources here, fast; that an earlier cell printed
each quote is checked against the book's executed pages in test_book.py."""

from __future__ import annotations

import nbformat
import pytest

from coursekit.course import quoted
from coursekit.course.lessons import all_lessons
from coursekit.course.reading import source_to_notebook
from coursekit.publishing import quoted_output

pytestmark = pytest.mark.unit

new_code, new_markdown = nbformat.v4.new_code_cell, nbformat.v4.new_markdown_cell


def test_every_lessons_markers_are_well_formed_and_quote_their_own_text():
    found = {}
    for lesson in all_lessons():
        problems = quoted.source_problems(source_to_notebook(lesson.source))
        if problems:
            found[lesson.assignment] = problems
    assert not found, "quotes from output, marked wrongly:\n" + "\n".join(
        f"{lesson}: {p}" for lesson, problems in found.items() for p in problems
    )


@pytest.mark.parametrize(
    ("text", "quote", "holds"),
    [
        ("log P = -2.98 (greedy -3.48)", "\u22122.98", True),  # the minus sign is a minus
        ("log P \u22122.98", "-2.98", True),
        ("Now is\n  better\u00a0than complex.", "Now is better than complex.", True),
        ("mean 12.95", "2.9", False),  # a piece of a number is not the number
        ("mean 2.95", "2.9", False),
        ("2.9.", "2.9", True),  # the end of a sentence
        ("ratio 0.28 at d_k = 1024", "0.28", True),
        ("tensor(123)", "12", False),
        ("is better than", "better", True),
        ("betterment", "better", False),
        ("(-3.48)", "-3.48", True),
        ("anything", "", False),
    ],
)
def test_a_quote_matches_as_a_whole_after_normalizing_minus_and_spaces(text, quote, holds):
    assert quoted.contains(text, quote) is holds


def test_the_markers_list_the_quotes_and_a_malformed_one_is_named():
    cell = 'It prints "−2.98".\n<!-- from output: "−2.98", "Now is better" -->\n<!-- a note -->'
    assert quoted.quotes(cell) == (["−2.98", "Now is better"], [])
    for bad in (
        "<!-- from output: '-2.98' -->",
        "<!-- from output: -2.98 -->",
        '<!-- from outputs: "-2.98" -->',
        '<!-- From output: "-2.98" -->',
        "<!-- from output: -->",
        '<!-- from output: "" -->',
        '<!-- from output: "a" "b" -->',
    ):
        listed, problems = quoted.quotes(bad)
        assert listed == [] and len(problems) == 1, bad
        assert 'write <!-- from output: "first", "second" -->' in problems[0]
    assert quoted.visible_text(cell) == 'It prints "−2.98".\n \n '


def _executed(*cells) -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(cells=list(cells))


def _printed(text: str = "", **data) -> nbformat.NotebookNode:
    cell = new_code("...")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)] if text else []
    if data:
        cell.outputs.append(nbformat.v4.new_output("execute_result", data=data, execution_count=1))
    return cell


def test_printed_text_is_streams_plain_text_and_html_without_tags():
    cell = _printed("beam: -2.98\n", **{"text/html": "<td>0.25&nbsp;ms</td>", "text/plain": "x"})
    cell.outputs.append(nbformat.v4.new_output("stream", name="stderr", text="UserWarning: y"))
    cell.outputs.append(nbformat.v4.new_output("display_data", data={"image/png": "AAAA"}))
    text = quoted.printed_text(cell)
    for part in ("beam: -2.98", "x", "0.25\u00a0ms", "UserWarning: y"):
        assert part in text
    assert "<td>" not in text and "AAAA" not in text


def test_each_quote_must_be_in_its_text_and_printed_by_an_earlier_cell():
    nb = _executed(
        new_markdown("# Lesson\n\n## 4. Beam search"),
        _printed("greedy: Now is better than never. (-3.48)\n"),
        new_markdown('Greedy prints "Now is better than never."\n'
                     '<!-- from output: "Now is better than never.", "−3.48", "-2.98" -->'),
        _printed("beam: -2.98\n"),
    )  # fmt: skip
    assert quoted.source_problems(nb) == [
        "cell 2 under '4. Beam search' ('Greedy prints \"Now is better than never.\"'...):"
        " '−3.48' is listed but not in the text",
        "cell 2 under '4. Beam search' ('Greedy prints \"Now is better than never.\"'...):"
        " '-2.98' is listed but not in the text",
    ]
    found = quoted.output_problems(nb)
    assert len(found) == 1 and found[0].endswith("no earlier cell printed '-2.98'"), found


def test_a_quote_spread_over_two_cells_outputs_is_not_found():
    nb = _executed(_printed("Now is"), _printed("better"), new_markdown(
        'It says "Now is better".\n<!-- from output: "Now is better" -->'
    ))  # fmt: skip
    assert quoted.output_problems(nb) != []
    nb.cells.insert(0, _printed("Now is better than ever"))
    assert quoted.output_problems(nb) == []


def test_numbers_the_prose_may_quote_unmarked_are_listed_at_the_prose_precision():
    nb = _executed(
        _printed("gradient mean 2.9e-01, median 1.2e-05; 8,256 parameters; weight 1.000\n"),
        new_markdown("## Results\n\nAbout 0.29 (0.3 rounded), a count of 8,256, a weight of 1.0, "
                     "a gain of 0.31 and 1.2e-5.\n<!-- from output: \"8,256\" -->"),
    )  # fmt: skip
    found = quoted_output.unmarked(nb)
    assert [line.rsplit(": ", 1)[1] for line in found] == [
        "'0.29' is printed above",
        "'1.2e-5' is printed above",
    ], found  # 0.3: one digit; 8,256 is marked; 1.0 a constant; 0.31 was not printed


def test_a_lesson_the_book_has_not_executed_asks_for_make_book(tmp_path, monkeypatch):
    monkeypatch.setattr(quoted_output, "CACHE", tmp_path / "no-cache")
    lesson = all_lessons()[0]
    with pytest.raises(quoted_output.NotExecuted, match="run `make book`"):
        quoted_output.executed_lesson(lesson)
    assert not (tmp_path / "no-cache").exists()
