"""A lesson's expected time, computed from its source by a stated method, not guessed.

    python -m coursekit.course.expected_time            # each lesson: computed, stated, the parts
    python -m coursekit.course.expected_time --write    # rewrite each lesson's line to agree

The method (``METHOD`` below; the book's course map states it to readers):

* reading: the prose (markdown, the answers to the self-check questions included) at 200 words
  a minute, a pace for technical text with formulas; code at 20 lines a minute: every code cell
  that is neither a solution nor a test, the signatures and docstrings of the exercises, and the
  visible tests (hidden tests are not read);
* running: a quarter of a minute per code cell to run it and read what it prints, one minute
  per figure (``plt.show()``) and one per experiment (a cell tagged ``experiment``: a longer
  training run, an ablation, a timing, which the learner waits for and then reads, like a figure;
  grading skips it, as it skips figures no grade depends on);
* exercises, by kind: a graded function (NumPy or PyTorch) 3 minutes, a challenge (its statement
  is ``**Challenge ...**``) 5, a Triton kernel 20, a free-text answer 5; plus a minute per 30
  words of the exercise's statement and hint (from its ``**Exercise N**`` or ``**Challenge**`` to
  its answer cell: what it asks must be worked out, and a longer contract asks more), and a
  quarter of a minute per line of the model answer (non-blank, non-comment lines between the
  solution markers: a longer answer takes longer to write and debug), plus, for a function or a
  challenge, the square of those lines over 50 (the parts of a long answer meet each other: a
  cache with offsets beside grouped heads beside sinks is debugged as a whole, so a 38-line
  answer takes far more than twice a 19-line one; a Triton kernel's 20 minutes already count
  that); one minute per self-check question (a ``<details>`` whose summary asks a question:
  think, then open it);
* a margin of 10 % (restarts, typos, a second look), and the total rounded to 5 minutes, or to
  10 from two hours on.

Calibrated (2026-11-28) against the expert reads of four lessons: lesson 8, 3 to 4 hours; lesson
10, 3 hours (3.5 to 4 for a weaker learner); lessons 11 and 12, 4 to 5 hours. Recalibrated
(2026-12-07) against two more: lesson 13, 3 hours for a strong learner and 4 to 5 for a median
one; lesson 14, 4 to 6 hours, whose long answers (a 38-line attention block, 45 to 60 minutes by
the read) the method put at 200 minutes, below lesson 13. The squared answer lines were added
then: the method now gives lessons 8, 10, 11, 12, 13 and 14 230, 190, 300, 270, 250 and 280
minutes, each inside its read's range; the other lessons move by at most 18 % (lesson 1, whose
20-line challenge gains 8 minutes). (The method before 2026-11-28 charged 5 minutes per
experiment and nothing for a statement's length: it put lesson 10 above lesson 12 and lessons 11
and 12 near 200 minutes.)
The lesson's own line ``**Expected time:** about N minutes`` must state the computed N (a test
holds them together); ``--write`` rewrites those lines after the lessons change.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass

from coursekit.course.cells import grade_id, is_solution, is_test, split_hidden
from coursekit.course.lessons import Lesson, all_lessons
from coursekit.course.reading import source_to_notebook

LINE = re.compile(r"^\*\*Expected time:\*\* about (\d+) minutes[ \t]*$", re.MULTILINE)
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
QUESTION = re.compile(r"<summary>([^<]*\?)\s*</summary>")
STATEMENT = re.compile(r"^\*\*(Exercise|Challenge)\b", re.MULTILINE)
EXPERIMENT = "experiment"  # the tag of a longer run the learner waits for

WORDS_PER_MINUTE = 200
CODE_LINES_PER_MINUTE = 20
MINUTES_PER_CELL, MINUTES_PER_FIGURE, MINUTES_PER_EXPERIMENT = 0.25, 1, 1
MINUTES_PER_EXERCISE = {"function": 3, "challenge": 5, "kernel": 20, "free text": 5}
STATEMENT_WORDS_PER_MINUTE = 30
MINUTES_PER_ANSWER_LINE = 0.25
SQUARED_ANSWER_LINES_PER_MINUTE = 50  # an answer of L lines (function, challenge): L**2 / 50 more
MINUTES_PER_QUESTION = 1
MARGIN = 0.10
METHOD = (
    f"prose read at {WORDS_PER_MINUTE} words a minute and code (visible tests included) at"
    f" {CODE_LINES_PER_MINUTE} lines a minute; a quarter of a minute to run each code cell, a"
    f" minute per figure and per longer experiment;"
    f" {MINUTES_PER_EXERCISE['function']} minutes per graded function,"
    f" {MINUTES_PER_EXERCISE['challenge']} per challenge, {MINUTES_PER_EXERCISE['kernel']} per"
    f" Triton kernel and {MINUTES_PER_EXERCISE['free text']} per free-text answer, plus a minute"
    f" per {STATEMENT_WORDS_PER_MINUTE} words of the exercise's statement and a quarter of a"
    " minute per line of the model answer, and for a function or challenge the square of its"
    f" lines over {SQUARED_ANSWER_LINES_PER_MINUTE}; a minute per self-check question; then"
    f" {MARGIN:.0%} more, rounded to 5 minutes (to 10 from two hours on)"
)


@dataclass
class Parts:
    """Minutes by what they are spent on."""

    reading: float = 0.0
    running: float = 0.0
    exercises: float = 0.0

    @property
    def minutes(self) -> int:
        total = (self.reading + self.running + self.exercises) * (1 + MARGIN)
        step = 10 if total >= 120 else 5
        return max(step, int(step * round(total / step)))


def _split_answer(source: str) -> tuple[int, int]:
    """(lines outside the solution markers, the model answer's lines between them), both
    non-blank; the answer's comment lines are not counted."""
    inside, outside, answer = False, 0, 0
    for line in source.splitlines():
        if "### BEGIN SOLUTION" in line or "### END SOLUTION" in line:
            inside = "BEGIN" in line
        elif line.strip() and not inside:
            outside += 1
        elif line.strip() and not line.strip().startswith("#"):
            answer += 1
    return outside, answer


def answer_lines(source: str) -> int:
    """Non-blank, non-comment lines between the solution markers: the model answer's size."""
    return _split_answer(source)[1]


def exercise_kind(cell, statement: str) -> str:
    """The kind of an answer cell, ``statement`` being the last exercise statement above it
    ("Exercise" or "Challenge")."""
    if cell.cell_type == "markdown":
        return "free text"
    if "@triton.jit" in cell.source:
        return "kernel"
    return "challenge" if statement == "Challenge" else "function"


def _statement_words(text: str, open_statement: bool) -> tuple[int, bool]:
    """Words of an exercise's statement (and hint) in one markdown cell's ``text``: from a
    ``**Exercise``/``**Challenge`` opening on, or all of it while a statement is still open."""
    found = list(STATEMENT.finditer(text))
    if found:
        return len(text[found[0].start() :].split()), True
    return (len(text.split()), True) if open_statement else (0, False)


def _markdown(parts: Parts, cell, open_statement: bool) -> bool:
    text = COMMENT.sub(" ", cell.source)
    parts.reading += len(text.split()) / WORDS_PER_MINUTE
    parts.exercises += MINUTES_PER_QUESTION * len(QUESTION.findall(text))
    words, open_statement = _statement_words(text, open_statement)
    parts.exercises += words / STATEMENT_WORDS_PER_MINUTE
    return open_statement


def _code(parts: Parts, cell) -> None:
    parts.running += MINUTES_PER_CELL + MINUTES_PER_FIGURE * cell.source.count("plt.show()")
    if EXPERIMENT in cell.get("metadata", {}).get("tags", []):
        parts.running += MINUTES_PER_EXPERIMENT
    if is_test(cell):
        read = len(split_hidden(cell.source)[1])
    else:  # a solution cell's signature and docstring, the stub's context
        read = _split_answer(cell.source)[0]
    parts.reading += read / CODE_LINES_PER_MINUTE


def parts_of(item: Lesson) -> Parts:
    """The lesson's minutes, by part, before the margin."""
    parts, statement, open_statement = Parts(), "Exercise", False
    for cell in source_to_notebook(item.source).cells:
        if cell.cell_type == "markdown":
            statement = (STATEMENT.findall(cell.source) or [statement])[-1]
            open_statement = _markdown(parts, cell, open_statement)
        elif cell.cell_type == "code":
            _code(parts, cell)
        if is_solution(cell) and grade_id(cell):
            open_statement = False  # the statement ends at its answer
            kind, lines = exercise_kind(cell, statement), answer_lines(cell.source)
            parts.exercises += MINUTES_PER_EXERCISE[kind] + MINUTES_PER_ANSWER_LINE * lines
            if kind in ("function", "challenge"):
                parts.exercises += lines**2 / SQUARED_ANSWER_LINES_PER_MINUTE
    return parts


def computed_minutes(item: Lesson) -> int:
    """The lesson's expected time by the method above."""
    return parts_of(item).minutes


def stated_minutes(item: Lesson) -> int | None:
    """N of the lesson's ``**Expected time:** about N minutes`` (None: not exactly one line)."""
    found = LINE.findall(item.source.read_text(encoding="utf-8"))
    return int(found[0]) if len(found) == 1 else None


def write(item: Lesson) -> bool:
    """Make the lesson's line state the computed time; True if the file changed."""
    text = item.source.read_text(encoding="utf-8")
    if len(LINE.findall(text)) != 1:
        raise SystemExit(f"{item.source}: no single '**Expected time:** about N minutes' line")
    new = LINE.sub(f"**Expected time:** about {computed_minutes(item)} minutes", text)
    if new != text:
        item.source.write_text(new, encoding="utf-8")
    return new != text


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite each lesson's line")
    args = parser.parse_args(argv)
    print(f"{'lesson':10}{'computed':>9}{'stated':>8}{'reading':>9}{'running':>9}{'exercises':>10}")
    for item in all_lessons():
        parts, stated = parts_of(item), stated_minutes(item)
        changed = " (rewritten)" if args.write and write(item) else ""
        print(
            f"{item.assignment:10}{parts.minutes:>9}{stated or '-':>8}{parts.reading:>9.0f}"
            f"{parts.running:>9.0f}{parts.exercises:>10.0f}{changed}"
        )
    print(f"\nMethod: {METHOD}.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
