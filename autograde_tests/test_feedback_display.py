"""A failed check reads message first in a real kernel (attention_ref.testing.display), with its
hint from the course's table, the course's own frames left out, and still fails its cell."""

from __future__ import annotations

import re

import nbclient
import nbformat
import pytest

from attention_ref.testing import checking, expect_close
from attention_ref.testing.display import PASSED
from coursekit.course.cells import grade_id
from coursekit.course.lessons import lesson

pytestmark = pytest.mark.unit
ANSI = re.compile(r"\x1b\[[0-9;]*m")
MASKING = lesson("lesson03")


def _student_cell(name: str) -> str:
    cells = nbformat.read(MASKING.student_notebook, as_version=4).cells
    return next(c.source for c in cells if grade_id(c) == name)


SCALE_TEST = (
    "expect_own_function(scale, 'scale')\n"
    "expect_close(scale(np.ones(2)), 2 * np.ones(2), 'doubles')"
)

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
    # a false pass: an answer cell broken after it ran once
    "answer": "def scale(x):\n    return 2 * x",
    "its test": SCALE_TEST,
    "answer broken": "def scale(x):\n    return (2 * x",
    "its test again": SCALE_TEST,
    "answer raising first": "1 / 0\ndef scale(x):\n    return 3 * x",
    "its test through a helper": "def twice(x):\n    return scale(x)\n" + SCALE_TEST,
    "answer fixed": "def scale(x):\n    return 2 * x",
    "its test at last": SCALE_TEST,
    "crash in a check": "expect_close(np.einsum('ij->i', np.ones(3)), np.ones(3),\n"
    "             'rows of a batch')",
    # a hidden test (as nbgrader grades it) on an answer written for exactly one batch axis
    "one batch axis": "def scores(q, k):\n    return np.einsum('bqd,bkd->bqk', q, k)",
    "hidden crash in a check": "expect_close(scores(np.ones((1, 2, 3)), np.ones((1, 4, 3))), "
    "np.full((1, 2, 4), 3.0), 'one batch')\n### BEGIN HIDDEN TESTS\nfor _b in [(2,), (2, 3)]:\n"
    "    expect_close(scores(np.ones(_b + (2, 3)), np.ones(_b + (4, 3))),\n"
    "                 np.full(_b + (2, 4), 3.0),\n"
    "                 f'scores with batch axes {_b}, {_b[-1] + 1} in all, {len(_b)} {_b!r:>8}')\n"
    "### END HIDDEN TESTS",
    "hidden crash above its check": "### BEGIN HIDDEN TESTS\n_x = np.ones((2, 2, 2, 3))\n"
    "_got = scores(_x, _x)\nexpect_shape(_x, (2, 2, 2, 3), 'the input')\n"
    "expect_shape(_got, (2, 2, 2, 2), f'two batch axes of {_x.shape} ({_x.dtype}, {_x.sum()})')\n"
    "### END HIDDEN TESTS",
    "hidden crash naming nothing": "### BEGIN HIDDEN TESTS\nscores(np.ones((2, 3)), 1)\n"
    "### END HIDDEN TESTS",
    # a check that returns what it ran (on PyTorch's meta device), last in its cell: no Out[]
    "ends in a check": "import torch\nfrom attention_ref.testing import expect_device_agnostic\n"
    "expect_device_agnostic(lambda x: 2 * x, torch.ones(3), what='doubles')",
    "ends in a value": "out = expect_device_agnostic(lambda x: 2 * x, torch.ones(3), what='two')\n"
    "out.device.type",
    "lesson 3's kernel": "__session__ = 'work/lesson03/masking.ipynb'",
    "given cell skipped": "mask_image",
    "answer skipped": "leaks_future",
    "answer never ran": "def never(x):\n    return (x",
    "its test never ran": "expect_close(never(1), 1, 'never')",
    "typo": "sclae(1)",
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


def test_a_test_never_passes_on_a_definition_its_cell_no_longer_holds(ran):
    """A SyntaxError (or any error before the def ran) in the answer cell leaves the older
    function in the kernel: the test below names the cell to fix instead of testing it."""
    assert _stdout(ran["its test"]).strip() == PASSED
    ename, evalue, shown = _error(ran["its test again"])
    assert ename == "AssertionError" and PASSED not in _stdout(ran["its test again"])
    count = list(CELLS).index("answer broken") + 1
    assert evalue.startswith(
        f"your cell that defines scale (In [{count}]) did not run to the end: it raised "
        "SyntaxError: incomplete input (line 2): scale is still the older definition, which this "
        "cell would test instead"
    ), evalue
    assert "Hint: fix that cell and run it first (Shift+Enter)" in evalue
    assert shown.splitlines()[0].startswith("AssertionError: your cell that defines scale")
    _, evalue, _ = _error(ran["its test through a helper"])  # through a function of the notebook
    count = list(CELLS).index("answer raising first") + 1
    assert f"(In [{count}]) did not run to the end: it raised ZeroDivisionError: division" in evalue
    assert _stdout(ran["its test at last"]).strip() == PASSED


def test_a_crash_inside_a_check_names_the_property_it_was_checking(ran):
    ename, evalue, shown = _error(ran["crash in a check"])
    assert ename == "ValueError" and "(raised while checking: rows of a batch)" in evalue, evalue
    assert shown.splitlines()[0].startswith("ValueError: ") and "einsumfunc" not in shown, shown
    assert "----> 1 expect_close(np.einsum" in shown and "%tb shows the whole traceback" in shown


def test_a_crash_in_a_hidden_test_names_the_property_it_was_checking(ran):
    ename, evalue, shown = _error(ran["hidden crash in a check"])
    assert ename == "ValueError" and evalue.startswith("operand has more dimensions"), evalue
    assert evalue.endswith(
        "(raised in a hidden test, while checking: scores with batch axes (2, 3), 4 in all, 2 "
        "  (2, 3))"
    ), evalue  # the f-string's fields filled in with the values the crashing case had
    assert "----> 4     expect_close(scores" in shown and "einsumfunc" not in shown, shown
    # a plain statement crashed: the check below it that reads what it bound; an array's
    # shape and dtype are shown, a field that would run more code is not
    _, evalue, _ = _error(ran["hidden crash above its check"])
    assert evalue.endswith(
        "(raised in a hidden test, while checking: two batch axes of (2, 2, 2, 3) (float64, ...))"
    ), evalue
    _, evalue, _ = _error(ran["hidden crash naming nothing"])
    assert evalue.endswith(
        "(raised on an input of a hidden test that the visible ones do not try: re-read which "
        "shapes, batch axes, dtypes and values the exercise allows)"
    ), evalue


def test_a_cell_ending_in_a_check_shows_what_it_ran_only_when_asked(ran):
    def shown(cell):
        return [o.data["text/plain"] for o in cell.outputs if o.output_type == "execute_result"]

    assert shown(ran["ends in a check"]) == [], shown(ran["ends in a check"])
    assert _stdout(ran["ends in a check"]).strip() == PASSED
    assert shown(ran["ends in a value"]) == ["'meta'"]


def test_naming_the_property_runs_no_code_of_the_learners():
    class Sneaky:  # a value of the learner's: showing it must not run its methods
        def __format__(self, spec):
            raise RuntimeError("ran")

        __repr__ = __str__ = __format__

    source = (
        f"{checking.BEGIN_HIDDEN}\n_got = f(_x)\n"
        "expect_close(_got, 1, f'{_x} {_n ** _big} {len(_s)} {_x.shape} {_t[1]} {_s * 3}')\n"
        f"{checking.END_HIDDEN}\nf(1)"
    )
    names = {"expect_close": expect_close, "_x": Sneaky(), "_n": 2, "_big": 10**7, "_s": "ab"}
    names["_t"] = (1, 2.5)
    assert checking.checked(source, 2, names) == (
        "in a hidden test, while checking: ... ... 2 ... 2.5 ababab"
    )
    assert checking.checked(source, 5, names) is None  # not a test: nothing to say


def test_a_missing_name_says_which_cell_defines_it(ran):
    _, evalue, shown = _error(ran["given cell skipped"])
    assert evalue == (
        "name 'mask_image' is not defined\n  Hint: cells above this one define it (the first "
        'under "2. The causal mask"): run them first (JupyterLab: Run > Run All Above Selected '
        "Cell)"
    ), evalue
    _, evalue, _ = _error(ran["answer skipped"])
    assert evalue.endswith(
        'Hint: your answer to Exercise 6 (under "6. The leakage test: no information flows from '
        'the future") defines it: run that cell first, and fix it if it raises'
    ), evalue
    _, evalue, _ = _error(ran["its test never ran"])
    count = list(CELLS).index("answer never ran") + 1
    assert evalue == (
        f"name 'never' is not defined\n  Hint: your cell that defines never (In [{count}]) did "
        "not run to the end: it raised SyntaxError: incomplete input (line 2): fix that cell "
        "and run it first (Shift+Enter), then run this cell again"
    ), evalue
    ename, evalue, shown = _error(ran["typo"])  # no cell of the lesson binds it: Python's own
    assert (ename, evalue) == ("NameError", "name 'sclae' is not defined")
