"""A failed check reads message first in a real kernel (attention_ref.testing.display), with its
hint from the course's table, the course's own frames left out, and still fails its cell."""

from __future__ import annotations

import re

import nbclient
import nbformat
import pytest

from attention_ref.testing.display import PASSED
from coursekit.course.cells import grade_id
from coursekit.course.lessons import lesson

pytestmark = pytest.mark.unit
ANSI = re.compile(r"\x1b\[[0-9;]*m")
MASKING = lesson("lesson03")


def _student_cell(name: str) -> str:
    cells = nbformat.read(MASKING.student_notebook, as_version=4).cells
    return next(c.source for c in cells if grade_id(c) == name)


CELLS = {
    "imports": "import numpy as np\nfrom attention_ref.testing import expect_close, expect_dtype, "
    "expect_own_function, expect_shape",
    "passes": "expect_close(np.ones(3), np.ones(3), 'ones')",
    "fails": "x = 1\n"
    "expect_close(np.zeros(3),\n             np.ones(3), 'three ones', hint='add one')",
    "wrong answer": "def causal_mask(n_q, n_k=None):\n    n_k = n_q if n_k is None else n_k\n"
    "    return np.tril(np.ones((n_q, n_k)))",
    "student test": _student_cell("test_causal_mask"),
    "traceback": "%tb",
    "assert": "assert 1 + 1 == 3, 'arithmetic: 1 + 1 is 2'",
    "grading guard": "from coursekit.grading import guard\n"
    "guard.install(shell=get_ipython(), kernel=get_ipython().kernel)",
    "broken message": "class Broken(AssertionError):\n"
    "    def __str__(self):\n        return 1 / 0\nraise Broken()",
    "swallow errors": "get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)",
    "guard check": "print(guard.check())",
    "fails after": "expect_close(np.zeros(2), np.ones(2), 'two ones')",
}


@pytest.fixture(scope="module")
def ran():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS.values()])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbclient.NotebookClient(nb, allow_errors=True, timeout=120, kernel_name="python3").execute()
    return dict(zip(CELLS, nb.cells))


def _error(cell) -> tuple[str, str, str]:
    (error,) = [o for o in cell.outputs if o.output_type == "error"]
    return error.ename, error.evalue, ANSI.sub("", "\n".join(error.traceback))


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def test_a_cell_whose_checks_pass_says_so_in_one_line(ran):
    assert _stdout(ran["passes"]).strip() == PASSED
    assert not _stdout(ran["imports"]).strip() and not _stdout(ran["wrong answer"]).strip()


def test_the_message_comes_first_then_the_notebooks_line(ran):
    ename, evalue, shown = _error(ran["fails"])
    assert ename == "AssertionError"  # as nbgrader, make check and feedback read it
    assert evalue.startswith("three ones: values differ by up to 1") and "Hint: add one" in evalue
    lines = shown.splitlines()
    assert lines[0] == f"AssertionError: {evalue.splitlines()[0]}" and "Hint: add one" in lines[1]
    assert "Cell In[3], line 2" in shown and "----> 2 expect_close(np.zeros(3)," in shown
    assert "attention_ref" not in shown and "def fail" not in shown
    assert len(lines) <= 10, shown  # the message within the first screen of any notebook


def test_a_check_without_a_hint_in_its_cell_finds_the_courses(ran):
    """The student edition's test cell carries no hint; the table in the library does."""
    assert "hint" not in _student_cell("test_causal_mask")
    ename, evalue, shown = _error(ran["student test"])
    assert evalue.startswith("causal_mask(3) is a boolean mask: expected dtype bool, got float64")
    assert "Hint: 0/1 numbers are not a boolean mask" in evalue and "dtype=bool" in shown


def test_the_whole_traceback_is_one_command_away(ran):
    ename, _, shown = _error(ran["traceback"])  # IPython's own, of the error before
    assert ename == "AssertionError" and "attention_ref" in shown and "checks.py" in shown


def test_a_plain_assert_reads_message_first_too(ran):
    ename, evalue, shown = _error(ran["assert"])
    assert (ename, evalue) == ("AssertionError", "arithmetic: 1 + 1 is 2")
    assert shown.splitlines()[0] == "AssertionError: arithmetic: 1 + 1 is 2"


def test_an_error_that_cannot_be_shown_compactly_still_fails_its_cell(ran):
    """Its message cannot be read: neither can IPython's own traceback, and the kernel reports
    the error of reading it. (IPython drops a handler that raised: the guard puts it back.)"""
    ename, _, _ = _error(ran["broken message"])
    assert ename == "ZeroDivisionError"


def test_a_submission_cannot_swallow_failures_while_graded(ran):
    """The grading guard snapshots the handler and puts it back; the next failure shows."""
    assert "CustomTB was replaced" in _stdout(ran["guard check"])
    ename, evalue, _ = _error(ran["fails after"])
    assert ename == "AssertionError" and evalue.startswith("two ones")
