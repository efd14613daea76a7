"""Cells skipped when grading: a lesson's code cells that only demonstrate.

A long training run for a figure, ablations, a timing: a learner runs them in JupyterLab and the
book shows their output, but no grade depends on them, and grading every submission would pay
for them again. Such a cell is marked in the lesson's source as a read-only nbgrader cell whose
grade_id starts with ``demo_`` and which carries the tag ``skip-when-grading``::

    ```{code-cell} ipython3
    ---
    nbgrader:
      grade: false
      grade_id: demo_ablations
      locked: true
      schema_version: 3
      solution: false
      task: false
    tags: [skip-when-grading]
    ---
    ```

The grader (coursekit.grading.autograder.GuardedExecute) reads which cells to skip from the
course's own source notebook, by grade_id, never from the submission; nbgrader's OverwriteCells
has already put the locked cell's source back. :func:`problems` is the static check that
refuses a lesson in which a later cell reads a name such a cell binds or changes: nothing graded
may depend on a skipped cell. (It cannot see everything a cell changes: an object passed to a
function that changes it, a random generator drawn from -- coursekit.course.draws checks the
visible tests for that. The grading chain shows the rest: the solved lesson, graded with these
cells skipped, gets full marks, and each planted mistake loses exactly its points.)
"""

from __future__ import annotations

from coursekit.course.cells import grade_id, nbgrader_meta
from coursekit.course.names import binds, changes, imported, parse, read_before_bound

TAG = "skip-when-grading"
PREFIX = "demo_"
NOTE = (
    "Not run when grading: this cell only demonstrates, and no grade depends on it. "
    "Run the notebook in JupyterLab to see its output.\n"
)


def tagged(cell) -> bool:
    return TAG in ((cell.get("metadata") or {}).get("tags") or [])


def is_skipped(cell) -> bool:
    """A code cell marked as above: read-only (locked, neither graded nor an answer), its
    grade_id ``demo_...``, tagged ``skip-when-grading``."""
    meta = nbgrader_meta(cell)
    return (
        cell.get("cell_type") == "code"
        and tagged(cell)
        and str(meta.get("grade_id", "")).startswith(PREFIX)
        and bool(meta.get("locked"))
        and not any(meta.get(flag) for flag in ("grade", "solution", "task"))
    )


def skipped_ids(nb) -> list[str]:
    """The grade_ids of the cells of ``nb`` (a lesson's source) that grading skips."""
    return [grade_id(cell) for cell in nb.cells if is_skipped(cell)]


def _label(cell, index: int) -> str:
    return grade_id(cell) or f"code cell {index + 1}"


def _misplaced(cell, index: int) -> str | None:
    if cell.get("cell_type") != "code" or not tagged(cell) or is_skipped(cell):
        return None
    return (
        f"{_label(cell, index)} is tagged {TAG!r} but is not a read-only demonstration cell "
        f"(nbgrader: locked, not graded, not a solution, grade_id {PREFIX}...): it would be run"
    )


def problems(nb) -> list[str]:
    """What is wrong with the cells ``nb`` (a lesson's source) skips when grading: a tag on a
    cell that is not marked as one, and every later cell that reads a name a skipped cell binds
    or changes before binding it again itself."""
    found: list[str] = []
    left: dict[str, str] = {}  # name -> what a skipped cell left in it
    trees = [parse(c.source) if c.get("cell_type") == "code" else None for c in nb.cells]
    modules = frozenset().union(*(imported(tree) for tree in trees if tree is not None))
    for index, cell in enumerate(nb.cells):
        misplaced = _misplaced(cell, index)
        if misplaced:
            found.append(misplaced)
        tree = trees[index]
        if tree is None:
            continue
        if is_skipped(cell):
            made = binds(tree.body)
            for name, how in changes(tree, modules).items():
                if name not in made:
                    left[name] = f"{grade_id(cell)} changes it in place ({how})"
            left.update({name: f"{grade_id(cell)} binds it" for name in made})
            continue
        for name, line in read_before_bound(tree.body, set(left)):
            found.append(
                f"{_label(cell, index)} (line {line}) reads {name!r}, and the skipped cell "
                f"{left[name]}: when grading, {name!r} would not be what the lesson makes it"
            )
        for name in binds(tree.body):
            left.pop(name, None)
    return found
