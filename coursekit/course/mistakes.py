"""Planted mistakes: realistic bugs, each put into one solution cell of a solved lesson.

They are data about a lesson, so they live beside its source, in
``solutions/<lesson>/mistakes.yml`` (instructor side, never released). Two users read them here:
the chain tests (each mistake must lose exactly the points of the test cells in ``fails``: the
tests are neither too weak nor too strict) and the synthetic class of ``make grade-class``.

Every graded notebook costs a whole lesson's execution in nbgrader (~10 s of a core), so the chain
hands in mistakes that cannot meet several to a notebook (autograde_tests/chain/selection.py),
and each lesson names in ``everyday`` the few that every ``make test`` grades;
``make test-mistakes`` grades them all.

Beside them, ``solutions/<lesson>/alternatives.yml`` holds correct answers written another way
(einsum, loops, logsumexp, ``torch.where``, a decorator, ...): each must get full marks, so a test
tightened against a mistake stays fair to them. ``make test-mistakes`` grades them too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml

from coursekit.course.cells import grade_id, is_solution
from coursekit.course.lessons import ROOT, SOLUTIONS

FILENAME = "mistakes.yml"
ALTERNATIVES = "alternatives.yml"
_FIELDS = {"name", "cell", "old", "new", "fails", "why", "kind"}
# A planted mistake's ``kind``: none for a plain mistake; ``method`` for a counter-answer that
# computes the right numbers by the method the exercise forbids (dense instead of blockwise, one
# chunk, a loop over what should be batched, a locked helper, a cache in a global); ``numeric``
# for a numerically naive rewrite of a stable formula (the max shift dropped, the mask after
# exp, half-precision arithmetic). A contract clause marked ``method: true`` needs one of them.
COUNTER_ANSWERS = ("method", "numeric")
_ALTERNATIVE_FIELDS = {"name", "cell", "source", "why"}
# A mistakes.yml's top level: ``contracts`` is read by coursekit.course.contracts.
_SECTIONS = {"everyday", "mistakes", "contracts"}


@dataclass(frozen=True)
class Mistake:
    lesson: str  # assignment, e.g. "lesson01"
    name: str  # short id, used in the student's name in the gradebook
    cell: str  # grade_id of the solution cell that gets the mistake
    old: str  # text in that cell ...
    new: str  # ... replaced by this
    fails: frozenset[str]  # grade_ids of the test cells that must fail
    why: str = ""
    kind: str = "mistake"  # or "alternative": a correct answer (old "", new: the whole cell)
    counter: str = ""  # a counter-answer's kind (COUNTER_ANSWERS), "" for a plain mistake

    @property
    def student(self) -> str:
        return f"{self.kind}-{self.lesson}-{self.name}"


def _read(path: Path) -> tuple[list[Mistake], list[str]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    lesson = path.parent.name
    unknown = sorted(set(data) - _SECTIONS) if isinstance(data, dict) else [type(data).__name__]
    if unknown:  # a misspelt `everday:` would quietly grade no mistake every day
        raise ValueError(f"{path}: unknown sections {unknown}; it has {sorted(_SECTIONS)}")
    found = []
    for entry in data.get("mistakes", []):
        unknown = set(entry) - _FIELDS
        missing = {"name", "cell", "old", "new", "fails"} - set(entry)
        if unknown or missing:
            raise ValueError(
                f"{path}: mistake {entry.get('name')!r} has unknown fields {sorted(unknown)} "
                f"or lacks {sorted(missing)}"
            )
        counter = entry.get("kind", "")
        if counter and counter not in COUNTER_ANSWERS:
            raise ValueError(
                f"{path}: mistake {entry['name']!r} has kind {counter!r}; a planted mistake's "
                f"kind is one of {list(COUNTER_ANSWERS)} (or none)"
            )
        found.append(
            Mistake(
                lesson,
                entry["name"],
                entry["cell"],
                entry["old"],
                entry["new"],
                frozenset(entry["fails"]),
                entry.get("why", ""),
                counter=counter,
            )
        )
    everyday = list(data.get("everyday", []))
    unknown = [name for name in everyday if name not in {m.name for m in found}]
    if unknown:
        raise ValueError(f"{path}: everyday names no planted mistake: {unknown}")
    return found, everyday


def read_mistakes(path: Path) -> list[Mistake]:
    """The planted mistakes in one lesson's mistakes.yml (none if it has no such file)."""
    return _read(path)[0] if path.exists() else []


def _files(root: Path) -> list[Path]:
    return sorted((root / SOLUTIONS).glob(f"lesson*/{FILENAME}"))


def all_mistakes(root: Path = ROOT) -> list[Mistake]:
    """Every lesson's planted mistakes, in lesson order."""
    return [m for path in _files(root) for m in _read(path)[0]]


def everyday_mistakes(root: Path = ROOT) -> list[Mistake]:
    """The mistakes each lesson names in ``everyday``: what every ``make test`` grades."""
    found = []
    for path in _files(root):
        mistakes, everyday = _read(path)
        found += [m for m in mistakes if m.name in everyday]
    return found


def read_alternatives(folder: Path) -> list[Mistake]:
    """The alternative correct answers in a lesson folder's alternatives.yml (none without one),
    as mistakes that fail nothing: each replaces the whole of its solution cell."""
    path = folder / ALTERNATIVES
    if not path.exists():
        return []
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    found = []
    for entry in data.get("alternatives", []):
        unknown, missing = set(entry) - _ALTERNATIVE_FIELDS, {"name", "cell", "source"} - set(entry)
        if unknown or missing:
            raise ValueError(
                f"{path}: alternative {entry.get('name')!r} has unknown fields "
                f"{sorted(unknown)} or lacks {sorted(missing)}"
            )
        found.append(
            Mistake(folder.name, entry["name"], entry["cell"], "", entry["source"],
                    frozenset(), entry.get("why", ""), kind="alternative")
        )  # fmt: skip
    return found


def all_alternatives(root: Path = ROOT) -> list[Mistake]:
    """Every lesson's alternative correct answers (``alternatives.yml``)."""
    folders = sorted(path.parent for path in (root / SOLUTIONS).glob(f"lesson*/{ALTERNATIVES}"))
    return [m for folder in folders for m in read_alternatives(folder)]


def lesson_mistakes(assignment: str, root: Path = ROOT) -> list[Mistake]:
    return [m for m in all_mistakes(root) if m.lesson == assignment]


def fill_solutions(
    student_nb: nbformat.NotebookNode,
    solved_nb: nbformat.NotebookNode,
    edits: dict[str, tuple[str, str]] | None = None,
) -> nbformat.NotebookNode:
    """The student edition with each solution cell answered as in ``solved_nb``.

    That is what a learner who solved everything hands in. ``edits`` maps a solution cell's
    grade_id to an (old, new) text replacement in it: how a mistake is planted (an empty ``old``
    replaces the whole cell: how an alternative answer is handed in).
    """
    edits = dict(edits or {})
    answers = {grade_id(c): c.source for c in solved_nb.cells if is_solution(c)}
    filled = nbformat.from_dict(student_nb)
    for cell in filled.cells:
        if not is_solution(cell):
            continue
        source = answers[grade_id(cell)]
        if grade_id(cell) in edits:
            old, new = edits.pop(grade_id(cell))
            if old and old not in source:
                raise ValueError(
                    f"cannot plant the mistake in {grade_id(cell)}: {old!r} is not in it"
                )
            source = source.replace(old, new) if old else new
        cell.source = source
    if edits:
        raise ValueError(f"no solution cells called {sorted(edits)}")
    return filled


def plant(
    student_nb: nbformat.NotebookNode, solved_nb: nbformat.NotebookNode, mistake: Mistake
) -> nbformat.NotebookNode:
    """The solved lesson, handed in with ``mistake`` in it."""
    return fill_solutions(student_nb, solved_nb, {mistake.cell: (mistake.old, mistake.new)})
