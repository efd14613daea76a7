"""A long cell says so before it runs: minutes, not a surprise.

Every code cell tagged ``experiment`` (a training run, an ablation, a timing: the learner waits
for it) or ``slow`` (any other cell measured at more than a few seconds) has, in the markdown
right above it, how long it takes on a laptop's CPU: "about 20 s", "1-2 minutes", "a few
seconds". ``python -m coursekit.bench.cells --slow 5 lessonNN`` times a lesson's cells and lists
those to tag and describe (docs/writing-lessons.md, "Long cells"). From the sources alone.
"""

from __future__ import annotations

import pytest

from coursekit.course.lessons import all_lessons
from coursekit.course.long_cells import LONG_TAGS, says_how_long, unannounced
from coursekit.course.reading import source_to_notebook

pytestmark = pytest.mark.unit
LESSONS = all_lessons()
# Lessons whose long cells another change is describing: {assignment: why}.
PENDING: dict[str, str] = {}


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda item: item.assignment)
def test_every_long_cell_says_how_long_it_takes_before_it_runs(lesson):
    if lesson.assignment in PENDING:
        pytest.skip(PENDING[lesson.assignment])
    missing = unannounced(source_to_notebook(lesson.source))
    assert not missing, (
        f"{lesson.assignment}: cells tagged {' or '.join(sorted(LONG_TAGS))} without a time in "
        f"the markdown right above them ('about 20 s', '1-2 minutes'): {missing}"
    )


@pytest.mark.parametrize(
    "text",
    [
        "The next cell trains the model: about 40 s on a laptop's CPU.",
        "It takes 1-2 minutes.",
        "This takes a few seconds.",
        "Training for 300 steps takes under a minute.",
        "(about 2 minutes; the bar shows how far it is)",
        "about 0.5 s",
    ],
)
def test_a_time_reads_as_one(text):
    assert says_how_long(text)


@pytest.mark.parametrize(
    "text",
    ["Run the cell below.", "The model has 2 layers of 4 heads.", "at step 300 the loss is 1.2"],
)
def test_other_text_does_not(text):
    assert not says_how_long(text)


def test_the_timing_tool_lists_slow_cells_and_what_they_lack():
    import nbformat

    from coursekit.bench.cells import slow

    def ran(source, seconds, tags=()):
        cell = nbformat.v4.new_code_cell(source, metadata={"tags": list(tags)})
        cell.metadata["execution"] = {
            "iopub.execute_input": "2026-12-08T10:00:00.000000Z",
            "shell.execute_reply": f"2026-12-08T10:00:{seconds:09.6f}Z",
        }
        return cell

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("Train it (about 20 s):"),
        ran("train()", 21.5, ["experiment"]),
        nbformat.v4.new_markdown_cell("Now the big one."),
        ran("big()", 12.0),
        ran("quick()", 0.2, ["experiment"]),
    ])  # fmt: skip
    assert slow(nb, 5) == [
        "  cell 1: 21.5 s; tagged; its time is said above",
        "  cell 3: 12.0 s; NOT tagged experiment or slow; NO time said above",
    ]
    assert unannounced(nb) == ["cell 5"]
