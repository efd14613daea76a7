"""Feedback that never shows hidden tests.

nbgrader's generate_feedback renders the autograded notebook, whose test cells hold the hidden
tests again (autograde puts them back to grade), and whose failed cells carry tracebacks that
quote the failing hidden line. nbgrader_config.py puts this preprocessor first in
GenerateFeedback: hidden tests are removed with nbgrader's own ClearHiddenTests, and each error
in a test cell is reduced to its one-line message (e.g. "AssertionError: softmax of [1000,
1000]: got nan ..."), which is what the learner needs.

A submission can also try to smuggle hidden tests out through its own outputs (printing the
caller's source from a function the hidden tests call, say). So every line of a hidden test is
also blanked out of every output of every cell, whatever printed it.
"""

from __future__ import annotations

from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor

from coursekit.course.cells import is_graded, split_hidden

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


class HideHiddenTests(NbGraderPreprocessor):  # nbgrader's base: enabled (nbconvert's is not)
    def preprocess(self, nb, resources):
        # longest first: no partial leftovers
        lines = sorted(hidden_lines(nb), key=len, reverse=True)
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
