"""The static check that a visible test draws the same random numbers in JupyterLab as in grading
(coursekit.course.draws): what it refuses, what it lets pass, and every lesson passing it."""

from __future__ import annotations

import textwrap

import nbformat
import pytest

from coursekit.course import draws, skipped
from coursekit.course.lessons import all_lessons
from coursekit.course.reading import source_to_notebook

DEMO = {"grade": False, "grade_id": "demo_a", "locked": True, "schema_version": 3,
        "solution": False, "task": False}  # fmt: skip
TEST = {"grade": True, "grade_id": "test_b", "locked": True, "points": 1, "schema_version": 3,
        "solution": False, "task": False}  # fmt: skip
HIDDEN = "### BEGIN HIDDEN TESTS\n{}\n### END HIDDEN TESTS"


def _notebook(*cells) -> nbformat.NotebookNode:
    """Code cells: a string, or (source, "demo") for a skipped cell, or (source, "test_x")."""
    nb = nbformat.v4.new_notebook()
    for cell in cells:
        source, kind = (cell, None) if isinstance(cell, str) else cell
        code = nbformat.v4.new_code_cell(textwrap.dedent(source))
        if kind == "demo":
            code.metadata.update(nbgrader=dict(DEMO), tags=[skipped.TAG])
        elif kind:
            code.metadata.update(nbgrader={**TEST, "grade_id": kind})
        nb.cells.append(code)
    return nb


# hidden checks inside a with block, beside visible ones (lesson 1's softmax_stable has one)
INNER = HIDDEN.format("_x = rng.random(2)")
IN_WITH = "with ctx():\n    check(1)\n" + textwrap.indent(INNER, "    ")
HIDDEN_OWN = HIDDEN.format("_r = np.random.default_rng(9)\n_r.normal()")
SETUP = "import numpy as np\nimport torch\nrng = np.random.default_rng(0)\ntorch.manual_seed(0)"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("cells", "wrong"),
    [
        # a demonstration the grader skips draws from rng; a later visible test draws from it too
        ([SETUP, ("x = rng.normal(size=3)", "demo"), ("check(rng.normal(size=(2, 2)))", "test_b")],
         "test_b (line 1) draws from rng, and the skipped cell demo_a"),
        # ... or hands it to the learner's function
        ([SETUP, ("x = rng.normal(size=3)", "demo"), ("assert leaks(f, 6, 4, rng)", "test_b")],
         "draws from rng"),
        # hidden tests (the learner never runs them) draw before a later visible test
        ([SETUP, ("check(1)\n" + HIDDEN.format("_x = rng.normal(size=9)"), "test_a"),
          ("check(rng.normal(size=3))", "test_b")], "the hidden tests of test_a drew from it"),
        # ... inside a with block that holds both visible and hidden checks
        ([SETUP, (IN_WITH, "test_a"), ("check(rng.normal(size=3))", "test_b")],
         "hidden tests of test_a"),
        # torch's own generator after a skipped cell, drawn without generator=
        ([SETUP, ("train(model)", "demo"), ("q = torch.randn(2, 3, device=device)", "test_b")],
         "draws from torch's generator"),
        # fine: the test makes its own generator, or reseeds torch's, or draws with generator=
        ([SETUP, ("x = rng.normal(size=3)", "demo"),
          ("rng = np.random.default_rng(5)\ncheck(rng.normal(size=3))", "test_b")], None),
        ([SETUP, ("train(model)", "demo"), ("torch.manual_seed(3)\nq = torch.randn(2)", "test_b")],
         None),
        ([SETUP, ("train(model)", "demo"),
          ("g = torch.Generator().manual_seed(1)\nq = torch.randn(2, generator=g)", "test_b")],
         None),
        # fine: nothing the learner skips or the grader adds drew from rng before the test
        ([SETUP, "x = rng.normal(size=3)", ("check(rng.normal(size=3))", "test_b")], None),
        # fine: a hidden test with its own generator
        ([SETUP, ("check(1)\n" + HIDDEN_OWN, "test_a"), ("check(rng.normal(size=3))", "test_b")],
         None),
        # a name rebound by a cell both runs share is the same again
        ([SETUP, ("x = rng.normal(size=3)", "demo"), "rng = np.random.default_rng(1)",
          ("check(rng.normal(size=3))", "test_b")], None),
    ],
)  # fmt: skip
def test_the_check_refuses_a_visible_test_whose_draws_depend_on_the_run(cells, wrong):
    found = draws.problems(_notebook(*cells))
    if wrong is None:
        assert found == []
    else:
        assert len(found) == 1 and wrong in found[0], found


@pytest.mark.unit
@pytest.mark.parametrize("lesson", all_lessons(), ids=lambda item: item.assignment)
def test_every_lesson_passes_the_check(lesson):
    assert draws.problems(source_to_notebook(lesson.source)) == []
