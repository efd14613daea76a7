"""Feedback that never shows hidden tests.

nbgrader's generate_feedback renders the autograded notebook, whose test cells hold the hidden
tests again (autograde puts them back to grade), and whose failed cells carry tracebacks that
quote the failing hidden line. nbgrader_config.py puts this preprocessor first in
GenerateFeedback: hidden tests are removed with nbgrader's own ClearHiddenTests, and each error
in a test cell is reduced to its one-line message (e.g. "AssertionError: softmax of [1000,
1000]: got nan ..."), which is what the learner needs.
"""

from __future__ import annotations

from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor


class HideHiddenTests(NbGraderPreprocessor):  # nbgrader's base: enabled (nbconvert's is not)
    def preprocess(self, nb, resources):
        nb, resources = ClearHiddenTests().preprocess(nb, resources)
        for cell in nb.cells:
            if not cell.get("metadata", {}).get("nbgrader", {}).get("grade"):
                continue
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return nb, resources
