"""Where things are, and which lessons exist."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: coursekit/course/lessons.py
SOLUTIONS = "solutions"
NOTEBOOKS = "notebooks"
SUBMITTED, AUTOGRADED, FEEDBACK = "submitted", "autograded", "feedback"
# Lessons that need a package some platforms cannot install: {assignment: (module, why)}.
NEEDS = {"lesson11": ("triton", "Triton publishes wheels for Linux only")}


@dataclass(frozen=True)
class Lesson:
    """One lesson = one nbgrader assignment holding one notebook."""

    assignment: str  # e.g. "lesson01", the folder name in solutions/ and notebooks/
    name: str  # e.g. "retrieval_as_attention", the notebook's file stem
    root: Path = ROOT

    @property
    def source(self) -> Path:
        return self.root / SOLUTIONS / self.assignment / f"{self.name}.md"

    @property
    def source_notebook(self) -> Path:
        return self.root / SOLUTIONS / self.assignment / f"{self.name}.ipynb"

    @property
    def student_notebook(self) -> Path:
        return self.root / NOTEBOOKS / self.assignment / f"{self.name}.ipynb"

    # nbgrader's folders in a course directory (``root``): <folder>/<student>/<assignment>/

    def in_course(self, course: Path) -> Lesson:
        """The same lesson in another course directory (a temporary or a class's course)."""
        return Lesson(self.assignment, self.name, Path(course))

    def student_folder(self, step: str, student: str) -> Path:
        """``<root>/<step>/<student>/<assignment>``; step is submitted, autograded or feedback."""
        return self.root / step / student / self.assignment

    def submitted(self, student: str) -> Path:
        return self.student_folder(SUBMITTED, student) / f"{self.name}.ipynb"

    def autograded(self, student: str) -> Path:
        return self.student_folder(AUTOGRADED, student) / f"{self.name}.ipynb"

    def students(self) -> list[str]:
        """Everyone with a folder in ``submitted/<student>/<assignment>``, sorted."""
        found = (self.root / SUBMITTED).glob(f"*/{self.assignment}")
        return sorted(folder.parent.name for folder in found if folder.is_dir())


def all_lessons(root: Path = ROOT) -> list[Lesson]:
    """Every lesson, in course order: solutions/lessonNN/<name>.md."""
    found = []
    for md in sorted((root / SOLUTIONS).glob("lesson*/*.md")):
        found.append(Lesson(assignment=md.parent.name, name=md.stem, root=root))
    return found


def lesson(assignment: str, root: Path = ROOT) -> Lesson:
    """The lesson called ``assignment`` (e.g. "lesson01"), with a clear error if there is none."""
    for item in all_lessons(root):
        if item.assignment == assignment:
            return item
    known = ", ".join(item.assignment for item in all_lessons(root)) or "none"
    raise SystemExit(f"no lesson called {assignment!r}; the lessons are: {known}")


def missing_requirement(assignment: str) -> str | None:
    """Why ``assignment`` cannot run on this machine (a package it needs is not installed), or
    None. Its own first cell says the same to a learner."""
    module, why = NEEDS.get(assignment, (None, ""))
    if module is None or importlib.util.find_spec(module) is not None:
        return None
    return f"{assignment} needs {module}, which is not installed here: {why}"
