"""The lesson a submission is compared with: its released notebook and its solved source."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path

import nbformat

from coursekit.course import skipped
from coursekit.course.cells import grade_id, nbgrader_meta


@lru_cache(maxsize=1024)
def parse_cell(source: str) -> ast.Module | None:
    """A code cell as Python, IPython magics and shell escapes included (as get_ipython() calls).

    Remembered by its text: most cells of a submission are the lesson's own, the same in every
    submission and in the release it is compared with, and parsing (IPython's transforms, then
    Python's) was most of the screening's time. The tree is shared: read it, never change it.
    """
    try:
        source = _ipython_transformer().transform_cell(source)
    except Exception:  # noqa: BLE001 -- plain Python is still worth parsing
        pass
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


@cache
def _ipython_transformer():
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager()


@dataclass
class RefCell:
    grade_id: str
    cell_type: str
    source: str  # the released source (a stub for solution cells, visible tests for test cells)
    metadata: dict  # the released nbgrader metadata
    checksum: str


@dataclass
class Reference:
    """What a submission of one notebook is compared with: the released notebook and its source."""

    assignment: str
    notebook: str
    cells: list[RefCell]  # nbgrader cells of the release, in order
    trusted: dict[str, list]  # names the set-up imports: {"np": ["numpy", None], ...}
    graded_functions: set[str]  # functions the learner writes (defined in solution cells)
    release: nbformat.NotebookNode = field(repr=False)
    # {grade_id: released source} of the cells grading skips (coursekit.course.skipped), read
    # from the course's source notebook; none while the lesson fails the check (skip_refused)
    skipped: dict[str, str] = field(default_factory=dict)
    skip_refused: list[str] = field(default_factory=list)

    @property
    def by_id(self) -> dict[str, RefCell]:
        return {c.grade_id: c for c in self.cells}

    @property
    def test_ids(self) -> list[str]:
        return [
            c.grade_id
            for c in self.cells
            if c.metadata.get("grade") and not c.metadata.get("solution")
        ]

    @classmethod
    def from_notebooks(cls, assignment: str, notebook: str, source_nb, release_nb) -> Reference:
        from nbgrader.utils import compute_checksum

        cells = []
        for cell in release_nb.cells:
            meta = nbgrader_meta(cell)
            if meta.get("grade_id"):
                cells.append(
                    RefCell(
                        meta["grade_id"],
                        cell.cell_type,
                        cell.source,
                        dict(meta),
                        meta.get("checksum") or compute_checksum(cell),
                    )
                )
        trusted, functions = {}, set()
        for cell in source_nb.cells:
            if cell.cell_type != "code":
                continue
            tree = parse_cell(cell.source)
            if tree is None:
                continue
            meta = nbgrader_meta(cell)
            if meta.get("solution"):
                functions |= {
                    n.name
                    for n in tree.body
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                }
            elif not meta.get("grade"):
                for node in tree.body:
                    if isinstance(node, ast.Import):
                        for alias in node.names:
                            if alias.asname:
                                trusted[alias.asname] = [alias.name, None]
                            else:
                                trusted[alias.name.split(".")[0]] = [alias.name.split(".")[0], None]
                    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                        for alias in node.names:
                            if alias.name != "*":
                                trusted[alias.asname or alias.name] = [node.module, alias.name]
        refused = skipped.problems(source_nb)
        ids = set() if refused else set(skipped.skipped_ids(source_nb))
        skip = {c.grade_id: c.source for c in cells if c.grade_id in ids}
        return cls(assignment, notebook, cells, trusted, functions, release_nb, skip, refused)

    @classmethod
    def from_course(
        cls,
        course: Path,
        assignment: str,
        notebook: str,
        source_dir: str = "solutions",
        release_dir: str = "notebooks",
    ) -> Reference:
        """From a course folder: ``<source_dir>/<assignment>/<notebook>.ipynb`` and its release.

        Remembered while the two files are unchanged: nbgrader screens and then runs every
        submission of a notebook against the same reference, and reading and validating both
        notebooks was a third of a second each time. The reference is shared: read it, never
        change it."""
        source_path = Path(course) / source_dir / assignment / f"{notebook}.ipynb"
        release_path = Path(course) / release_dir / assignment / f"{notebook}.ipynb"
        release = str(release_path) if release_path.exists() else None
        return _read_reference(
            assignment, notebook, str(source_path), release, _stamp(source_path), _stamp(release)
        )


def _stamp(path) -> tuple[int, int] | None:
    """What tells one version of a file from another: its size and time of change."""
    if path is None:
        return None
    info = Path(path).stat()
    return info.st_size, info.st_mtime_ns


@lru_cache(maxsize=16)
def _read_reference(
    assignment: str, notebook: str, source_path: str, release_path: str | None, *stamps
) -> Reference:
    source = nbformat.read(source_path, as_version=4)
    release = nbformat.read(release_path, as_version=4) if release_path else source
    return Reference.from_notebooks(assignment, notebook, source, release)


@cache
def _lesson_grade_ids(root: str) -> dict[str, set[str]]:
    from coursekit.course.lessons import all_lessons
    from coursekit.course.reading import source_to_notebook

    out = {}
    for item in all_lessons(Path(root)):
        nb = source_to_notebook(item.source)
        out[item.assignment] = {grade_id(c) for c in nb.cells if grade_id(c)}
    return out


def which_lesson(grade_ids: set[str], root: Path | None = None) -> str | None:
    """The lesson whose graded cells these are (most in common), if any."""
    from coursekit.course.lessons import ROOT

    best, overlap = None, 0
    for assignment, ids in _lesson_grade_ids(str(root or ROOT)).items():
        if len(ids & grade_ids) > overlap:
            best, overlap = assignment, len(ids & grade_ids)
    return best
