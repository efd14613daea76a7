"""Feedback that never shows hidden tests, and shows their results only when the policy allows.

nbgrader's generate_feedback renders the autograded notebook, whose test cells hold the hidden
tests again (autograde puts them back to grade), and whose failed cells carry tracebacks that
quote the failing hidden line. nbgrader_config.py puts :class:`HideHiddenTests` first in
GenerateFeedback: hidden tests are removed with nbgrader's own ClearHiddenTests, and each error
in a test cell is reduced to its one-line message (e.g. "AssertionError: softmax of [1000,
1000]: got nan ..."), which is what the learner needs.

A submission can also try to smuggle hidden tests out through its own outputs (printing the
caller's source from a function the hidden tests call, say). So every line of a hidden test is
also blanked out of every output of every cell, whatever printed it.

**Released by policy** (:class:`ReleaseByPolicy`, before it, and :class:`WithholdScores`, after
nbgrader's GetGrades). The results of hidden tests are released once the lesson's due date and
every extension of it have passed (coursekit.grading.deadlines; a lesson without a due date is
released at once). After that, each test cell says in place of its hidden tests their name,
points and outcome -- passed, failed with the message the test's hint gives, or not run because
a visible test failed first -- never their code. Before it, feedback shows the visible tests
only: a test cell whose hidden tests ran loses its error and its score (both would tell how the
hidden tests went), the total counts the other cells, and a note at the top says when the rest
comes. ``make feedback`` (``python -m coursekit.grading.feedback``) refuses before then unless
told ``--before-due-date``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor

from coursekit.course.cells import (
    BEGIN_HIDDEN,
    END_HIDDEN,
    is_graded,
    is_test,
    nbgrader_meta,
    split_hidden,
)
from coursekit.grading import deadlines

REDACTED = "[hidden test]"
MIN_LENGTH = 8  # redact aggressively; shorter lines ("_x = 1", "else:") say nothing about the tests


def hidden_lines(nb) -> set[str]:
    """The stripped lines of the hidden tests that appear nowhere else in the notebook."""
    hidden, visible = split_hidden(cell.source for cell in nb.cells)
    return {line for line in set(hidden) - set(visible) if len(line) >= MIN_LENGTH}


def _scrub(text, lines: list[str]):
    if isinstance(text, list):
        return [_scrub(part, lines) for part in text]
    if not isinstance(text, str):
        return text
    for line in lines:
        if line in text:
            text = text.replace(line, REDACTED)
    return text


NOT_SHOWN = (
    "# (What this cell printed while it was graded is not shown: code of yours that the hidden "
    "tests call runs here.)"
)


def _keep_errors_only(cell) -> None:
    """A test cell with hidden tests keeps only its error: whatever else it shows was printed or
    displayed while the hidden tests ran, by the learner's code too -- their inputs, or the cell
    itself read back from anywhere, in any spelling (reversed, encoded), which no blanking of
    exact lines can catch. A note in the cell says so."""
    outputs = cell.get("outputs", [])
    kept = [out for out in outputs if out.get("output_type") == "error"]
    if len(kept) < len(outputs):
        cell.outputs = kept
        _put_before_hidden(cell, NOT_SHOWN)


class HideHiddenTests(NbGraderPreprocessor):  # nbgrader's base: enabled (nbconvert's is not)
    def preprocess(self, nb, resources):
        # longest first: no partial leftovers
        lines = sorted(hidden_lines(nb), key=len, reverse=True)
        for cell in nb.cells:
            if is_test(cell) and BEGIN_HIDDEN in cell.source:
                _keep_errors_only(cell)
        nb, resources = ClearHiddenTests().preprocess(nb, resources)
        for cell in nb.cells:
            graded = is_graded(cell)
            for output in cell.get("outputs", []):
                if graded and output.get("output_type") == "error":
                    output["traceback"] = [
                        f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"
                    ]
                for key in ("text", "evalue", "traceback"):
                    if key in output:
                        output[key] = _scrub(output[key], lines)
                for mime, data in output.get("data", {}).items():
                    if mime.startswith("text/") or mime.endswith(("json", "javascript", "svg+xml")):
                        output["data"][mime] = _scrub(data, lines)
        return nb, resources


# ---------------------------------------------------------------- released by policy

WITHHELD = "coursekit_withheld"  # a test cell's metadata key: its hidden result is not shown yet
_CELL_LINE = re.compile(r"Cell In\[\d+\], line (\d+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def release_time(course: Path, assignment: str) -> datetime | None:
    """When the hidden tests' results of ``assignment`` may be shown: its due date plus the
    longest extension (None: it has no due date, they may be shown now)."""
    found = deadlines.load(course)
    return found.last_due(assignment) if found else None


def shown(course: Path, when: datetime) -> str:
    """``when`` as the class reads it: in course.toml's [deadlines] timezone (else UTC)."""
    found = deadlines.load(course)
    return found.local(when) if found else f"{when:%Y-%m-%d %H:%M} UTC"


def _hidden_span(source: str) -> range:
    """The 1-based lines of ``source`` from its BEGIN HIDDEN TESTS marker to its END."""
    lines = source.splitlines()
    begin = next((i for i, line in enumerate(lines, 1) if BEGIN_HIDDEN in line), 0)
    end = next((i for i, line in enumerate(lines, 1) if END_HIDDEN in line), len(lines))
    return range(begin, end + 1) if begin else range(0)


def hidden_outcome(cell) -> tuple[str, str]:
    """("passed" | "failed" | "not run", message) of a test cell's hidden tests, from where its
    error was raised: a line among the hidden tests, or above them (a visible test failed first,
    so the hidden tests never ran). An error that names no line of the cell counts as failed."""
    errors = [out for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    if not errors:
        return "passed", ""
    error = errors[0]
    message = f"{error.get('ename', 'Error')}: {error.get('evalue', '')}".strip()
    found = _CELL_LINE.search(_ANSI.sub("", "\n".join(error.get("traceback", []))))
    if found and int(found.group(1)) not in _hidden_span(cell.source):
        return "not run", message
    return "failed", message


def _summary(cell, outcome: str, message: str, lines: list[str]) -> str:
    meta = nbgrader_meta(cell)
    head = f"# Hidden tests of {meta.get('grade_id')} ({meta.get('points', 0):g} points): {outcome}"
    if outcome == "not run":
        return head + " (a visible test above failed first)"
    detail = [f"#   {line}" for line in _scrub(message, lines).splitlines() if line.strip()]
    return "\n".join([head, *detail])


def _put_before_hidden(cell, text: str) -> None:
    """``text`` on the lines just above the hidden tests (ClearHiddenTests keeps them)."""
    lines = cell.source.split("\n")
    at = next(i for i, line in enumerate(lines) if BEGIN_HIDDEN in line)
    cell.source = "\n".join(lines[:at] + text.split("\n") + lines[at:])


def _withhold(cell, when: str) -> None:
    cell.outputs = [out for out in cell.get("outputs", []) if out.get("output_type") != "error"]
    _put_before_hidden(cell, f"# The hidden tests' result is shown after the due date ({when}).")
    cell.metadata[WITHHELD] = True


class ReleaseByPolicy(NbGraderPreprocessor):
    """Before HideHiddenTests: after the release time, a summary of each test cell's hidden tests
    in place of them; before it, the hidden tests' outcome taken out (see the module)."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        course = Path(CourseDirectory(config=self.config).root)
        when = release_time(course, info["assignment"])
        released = when is None or datetime.now(UTC) >= when
        lines = sorted(hidden_lines(nb), key=len, reverse=True)
        withheld = 0
        for cell in nb.cells:
            if not (is_test(cell) and BEGIN_HIDDEN in cell.source):
                continue
            outcome, message = hidden_outcome(cell)
            if released:
                _put_before_hidden(cell, _summary(cell, outcome, message, lines))
            elif outcome != "not run":  # a visible failure is the learner's to see now
                _withhold(cell, shown(course, when))
                withheld += 1
        if withheld:
            text = (
                f"**Feedback before the due date** ({shown(course, when)}): it shows the "
                f"visible tests only. The results of {withheld} test cells with hidden tests "
                "are neither shown nor counted in the score above until after the due date."
            )
            nb.cells.insert(0, nbformat.v4.new_markdown_cell(text))
        return nb, resources


class WithholdScores(NbGraderPreprocessor):
    """After GetGrades: a test cell whose hidden result is withheld shows no score, and the
    total counts only the cells shown."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            if cell.metadata.pop(WITHHELD, False):
                meta = nbgrader_meta(cell)
                resources["nbgrader"]["score"] -= float(meta.get("score") or 0)
                resources["nbgrader"]["max_score"] -= float(meta.get("points") or 0)
                meta["grade"] = False  # shown as code, not as a graded cell with a score
        return nb, resources


# ---------------------------------------------------------------- make feedback


def main(argv: list[str] | None = None) -> int:
    """``make feedback LESSON=...``: nbgrader generate_feedback, refused before the release
    time unless ``--before-due-date``."""
    import argparse
    import subprocess
    import sys

    from coursekit.course.coursefile import CourseFileError
    from coursekit.course.lessons import ROOT
    from coursekit.course.nbgrader_cli import nbgrader_command, nbgrader_env

    parser = argparse.ArgumentParser(prog="python -m coursekit.grading.feedback")
    parser.add_argument("lesson", help="the assignment, e.g. lesson01")
    parser.add_argument("--course", type=Path, default=ROOT, help="the course folder")
    parser.add_argument(
        "--before-due-date",
        action="store_true",
        help="write feedback now anyway: it shows the visible tests only",
    )
    args, more = parser.parse_known_args(argv)
    try:
        when = release_time(args.course, args.lesson)
    except CourseFileError as problem:
        sys.exit(f"feedback: {problem}")
    if when is not None and datetime.now(UTC) < when:
        due = f"{args.lesson} is due, with every extension, at {shown(args.course, when)}"
        if not args.before_due_date:
            sys.exit(
                f"feedback refused: {due}. Feedback written now shows the visible tests only; "
                f"to write it anyway: make feedback LESSON={args.lesson} "
                "FEEDBACK_FLAGS=--before-due-date"
            )
        print(f"{due}: the feedback shows the visible tests only", file=sys.stderr)
    command = nbgrader_command("generate_feedback", args.lesson, *more)
    return subprocess.run(command, cwd=args.course, env=nbgrader_env(), check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
