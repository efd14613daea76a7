"""What must never appear where a learner can see it: the tell-tale lines of a lesson's hidden
tests.

A helper for the tests that look for leaks (the book, the student edition, feedback), built on the
course's one parser of nbgrader's hidden-test markers (coursekit.course.cells.split_hidden). The
feedback redacts every hidden line of 8 characters or more; a *leak check* only counts lines long
enough to be telling and not also part of the released student edition (a `with ...:` that both
share, say), so that it never fires on what every learner may see anyway.
"""

from __future__ import annotations

import functools

import nbformat

from coursekit.course.cells import split_hidden

TELLING = 25  # characters: shorter hidden lines ("x = f(1)") say too little to count as a leak


def released_code(lesson) -> str:
    """All cell sources of the released student notebook: what every learner may see anyway,
    also as rendered (inline code loses its backticks: `f(x=1)`) becomes f(x=1))."""
    text = "\n".join(
        cell.source for cell in nbformat.read(lesson.student_notebook, as_version=4).cells
    )
    return text + "\n" + text.replace("`", "")


@functools.cache
def _every_released_code() -> str:
    """The released student notebooks of every lesson: a line one of them shows (lesson 15's
    ``g = torch.Generator().manual_seed(seed)``, say) tells nothing of another's hidden tests."""
    from coursekit.course.lessons import all_lessons

    return "\n".join(released_code(item) for item in all_lessons())


def hidden_test_lines(lesson) -> list[str]:
    """The hidden tests' lines that must appear nowhere public."""
    released = released_code(lesson) + "\n" + _every_released_code()
    hidden, _ = split_hidden(lesson.source.read_text(encoding="utf-8"))
    return [line for line in hidden if len(line) > TELLING and line not in released]
