"""Cells skipped when grading (coursekit.course.skipped): the static check that refuses a lesson
in which something later depends on such a cell, and grading through real nbgrader -- stock
``nbgrader autograde``, class grading on Dask (`make autograde`) and `make check` -- that skips
exactly the course's own demonstration cells, whatever a submission does to its cells."""

from __future__ import annotations

import shutil
import textwrap

import nbformat
import pytest

from coursekit.course import skipped
from coursekit.course.lessons import ROOT, Lesson, all_lessons
from coursekit.course.mistakes import fill_solutions
from coursekit.course.reading import source_to_notebook
from coursekit.grading import classgrade
from coursekit.grading import tempcourse as grading
from coursekit.grading.results import read_results
from coursekit.learner import selfcheck
from coursekit.publishing import release

from .sandboxes import nbgrader_flags

SKIPPED = {"grade": False, "grade_id": "demo_x", "locked": True, "schema_version": 3,
           "solution": False, "task": False}  # fmt: skip


def _notebook(*cells) -> nbformat.NotebookNode:
    """A notebook of code cells: a string, or (source, grade_id) for a skipped cell."""
    nb = nbformat.v4.new_notebook()
    for cell in cells:
        source, gid = (cell, None) if isinstance(cell, str) else cell
        code = nbformat.v4.new_code_cell(textwrap.dedent(source))
        if gid:
            code.metadata.update(nbgrader={**SKIPPED, "grade_id": gid}, tags=[skipped.TAG])
        nb.cells.append(code)
    return nb


@pytest.mark.unit
@pytest.mark.parametrize(
    ("cells", "wrong"),
    [
        # a later cell reads what the skipped cell made: refused
        ([("runs = train()", "demo_a"), "plot(runs)"], "reads 'runs'"),
        # ... inside a function it defines (called later), or a name bound in a loop's body
        ([("for k in ks:\n    last = k", "demo_a"), "def f():\n    return last"], "'last'"),
        # the skipped cell changes in place an object the lesson made before it
        (["model = make()", ("model.train()\nmodel.weight = 0", "demo_a"), "score(model)"],
         "changes it in place"),
        (["runs = {}", ("runs['a'] = 1", "demo_a"), "print(runs)"], "changes it in place"),
        # bound again before it is read (a loop's target, an assignment): fine
        ([("i, fig = 3, draw()", "demo_a"), "for i in range(2):\n    print(i)\nfig = draw()\nfig"],
         None),
        # a comprehension's own variable, a function's own argument: fine
        ([("x = 1", "demo_a"), "[x for x in range(3)]\ndef g(x):\n    return x"], None),
        # reading what the lesson made before the skipped cell, which only reads it: fine
        (["data = load()", ("plot(data)", "demo_a"), "check(data)"], None),
        # a module's function is not a change of the module: np.sort returns a new array
        (["import numpy as np", ("x = np.sort(np.ones(3))", "demo_a"), "np.ones(2)"], None),
        (["import numpy as np", ("np.thing = 1", "demo_a"), "np.ones(2)"], "changes it in place"),
    ],
)  # fmt: skip
def test_the_check_refuses_a_lesson_that_depends_on_a_skipped_cell(cells, wrong):
    found = skipped.problems(_notebook(*cells))
    if wrong is None:
        assert found == []
    else:
        assert len(found) == 1 and wrong in found[0], found


@pytest.mark.unit
def test_a_tag_on_a_cell_that_is_not_a_demonstration_is_refused():
    nb = _notebook(("print(1)", "demo_a"), ("print(2)", "test_b"))
    nb.cells[1].metadata["nbgrader"].update(grade=True, points=1)  # a graded test cell
    nb.cells.append(nbformat.v4.new_code_cell("print(3)", metadata={"tags": [skipped.TAG]}))
    found = skipped.problems(nb)
    assert skipped.skipped_ids(nb) == ["demo_a"]
    assert len(found) == 2 and "test_b" in found[0] and "code cell 3" in found[1], found


@pytest.mark.unit
@pytest.mark.parametrize("lesson", all_lessons(), ids=lambda item: item.assignment)
def test_every_lesson_passes_the_check(lesson):
    assert skipped.problems(source_to_notebook(lesson.source)) == []


@pytest.mark.unit
def test_make_notebooks_refuses_a_lesson_that_fails_the_check(tmp_path):
    lesson = Lesson("lesson01", "demo", tmp_path)
    lesson.source_notebook.parent.mkdir(parents=True)
    nbformat.write(_notebook(("runs = train()", "demo_a"), "plot(runs)"), lesson.source_notebook)
    with pytest.raises(SystemExit, match="reads 'runs'"):
        release.refuse_bad_skips(lesson)


# A lesson of its own for the grading tests: an exercise, a test before and a test after a
# demonstration cell, which prints a line if it ever runs.
LESSON_TEXT = """\
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# Lesson 1 — a demonstration skipped when grading

```{code-cell} ipython3
---
nbgrader:
  grade: false
  grade_id: double
  locked: false
  schema_version: 3
  solution: true
  task: false
---
def double(x):
    ### BEGIN SOLUTION
    return 2 * x
    ### END SOLUTION
```

```{code-cell} ipython3
---
nbgrader:
  grade: true
  grade_id: test_double
  locked: true
  points: 1
  schema_version: 3
  solution: false
  task: false
---
assert double(2) == 4, "double(2) is 4"
```

```{code-cell} ipython3
---
nbgrader:
  grade: false
  grade_id: demo_long_run
  locked: true
  schema_version: 3
  solution: false
  task: false
tags: [skip-when-grading]
---
print("the demonstration ran")
```

```{code-cell} ipython3
---
nbgrader:
  grade: true
  grade_id: test_double_again
  locked: true
  points: 1
  schema_version: 3
  solution: false
  task: false
---
assert double(5) == 10, "double(5) is 10"
### BEGIN HIDDEN TESTS
assert double(-3) == -6, "double(-3) is -6"
### END HIDDEN TESTS
```
"""
RAN = "the demonstration ran"


def _cell(nb, gid):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == gid)


def _submissions(release, solved) -> dict:
    """{student: notebook}: the solved lesson, and wrong answers that try to use the marking."""
    wrong = fill_solutions(release, solved, {"double": ("2 * x", "0")})
    out = {"solved": fill_solutions(release, solved)}
    # tags its test cells to have them skipped
    tagger = nbformat.from_dict(wrong)
    for gid in ("test_double", "test_double_again"):
        _cell(tagger, gid).metadata["tags"] = [skipped.TAG]
    out["tags_its_tests"] = tagger
    # renames a test cell demo_..., once as a new name and once as the lesson's own demo cell
    for student, new in (("renames_a_test_demo", "demo_mine"), ("takes_the_demos_name", None)):
        renamed = nbformat.from_dict(wrong)
        cell = _cell(renamed, "test_double")
        cell.metadata["nbgrader"]["grade_id"] = new or "demo_long_run"
        cell.metadata["tags"] = [skipped.TAG]
        out[student] = renamed
    # writes the right answer into the demonstration cell, before the second test
    edits = nbformat.from_dict(wrong)
    _cell(edits, "demo_long_run").source = "def double(x):\n    return 2 * x"
    out["edits_the_demo"] = edits
    return out


@pytest.fixture(scope="module")
def demo_course(tmp_path_factory):
    """(the lesson in a course graded by `make autograde`'s class grading, the submissions)."""
    root = tmp_path_factory.mktemp("demo-lesson")
    source = root / "solutions" / "lesson01" / "skipping.md"
    source.parent.mkdir(parents=True)
    source.write_text(LESSON_TEXT)
    shutil.copy2(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    lesson = Lesson("lesson01", "skipping", root)
    course = grading.make_course(root / "course", [lesson], root=root).resolve()
    here = lesson.in_course(course)
    release = nbformat.read(here.student_notebook, as_version=4)
    submissions = _submissions(release, nbformat.read(here.source_notebook, as_version=4))
    for student, nb in submissions.items():
        grading.submit(course, student, here, nb)
    classgrade.grade_class(course, here, workers=2, extra=nbgrader_flags(), progress=False)
    return root, here, submissions


@pytest.mark.chain
@pytest.mark.cluster  # demo_course grades on a Dask cluster on 127.0.0.1
def test_grading_skips_the_demonstration_and_scores_the_solved_lesson(demo_course):
    _, lesson, _ = demo_course
    result = read_results(lesson.root, lesson)["solved"]
    assert result.score == result.max_score == 2 and not result.errors
    graded = nbformat.read(lesson.autograded("solved"), as_version=4)
    demo = _cell(graded, "demo_long_run")
    assert [o.get("text") for o in demo.outputs] == [skipped.NOTE]


@pytest.mark.chain
@pytest.mark.cluster  # demo_course grades on a Dask cluster on 127.0.0.1
@pytest.mark.parametrize(
    "student", ["tags_its_tests", "renames_a_test_demo", "takes_the_demos_name", "edits_the_demo"]
)
def test_a_submission_that_tags_renames_or_edits_cells_gains_nothing(demo_course, student):
    """The marking is read from the course's source: whatever the wrong answer does to its cells,
    both tests run (put back where deleted) and fail, and the demonstration stays skipped."""
    _, lesson, _ = demo_course
    result = read_results(lesson.root, lesson)[student]
    assert result.auto == 0 and {c.grade_id for c in result.cells} == {
        "test_double",
        "test_double_again",
    }, result
    graded = nbformat.read(lesson.autograded(student), as_version=4)
    skipped_cells = [
        c for c in graded.cells if [o.get("text") for o in c.get("outputs", [])] == [skipped.NOTE]
    ]
    assert [c.source for c in skipped_cells] == [f'print("{RAN}")'], "only the lesson's own demo"


@pytest.mark.chain
@pytest.mark.cluster  # demo_course grades on a Dask cluster on 127.0.0.1
def test_the_feedback_shows_the_skipped_cell_with_its_note(demo_course):
    _, lesson, _ = demo_course
    grading.run_nbgrader("generate_feedback", lesson.assignment, "--force", course=lesson.root)
    page = (lesson.student_folder("feedback", "solved") / f"{lesson.name}.html").read_text()
    assert RAN in page, "the skipped cell's code is shown"
    assert skipped.NOTE.split(":")[0] in page, "with the note that it was not run"


@pytest.mark.chain
@pytest.mark.cluster  # demo_course grades on a Dask cluster on 127.0.0.1
def test_make_check_skips_it_as_class_grading_does(demo_course):
    root, lesson, submissions = demo_course
    mine = root / "work" / lesson.assignment / f"{lesson.name}.ipynb"
    mine.parent.mkdir(parents=True)
    nbformat.write(submissions["solved"], mine)
    result = selfcheck.check(lesson.assignment, root=root)
    course = root / selfcheck.COURSES / lesson.assignment
    graded = nbformat.read(lesson.in_course(course).autograded(selfcheck.STUDENT), as_version=4)
    assert result.score == result.max_score == 2
    assert [o.get("text") for o in _cell(graded, "demo_long_run").outputs] == [skipped.NOTE]
