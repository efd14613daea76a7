"""Read a lesson's source (jupytext MyST markdown) as a notebook.

The lowest step of everything made from a lesson: the notebook nbgrader reads
(course/sources.py), the hints' table (course/hints.py), the checks that read a lesson's cells.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jupytext
import nbformat

from coursekit.course.cells import grade_id

# What JupyterLab writes into a notebook when its kernel starts: written in full here, so that
# opening a lesson does not mark it modified. (The Python version, which JupyterLab adds too, is
# the learner's: learner/workspace.py writes it into the learner's copy.)
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
}


def source_digest(md_path: Path) -> str:
    return hashlib.sha256(Path(md_path).read_bytes()).hexdigest()


def source_to_notebook(md_path: Path) -> nbformat.NotebookNode:
    """Read a lesson source; drop jupytext's own metadata, which would differ between versions."""
    nb = jupytext.read(md_path)
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = json.loads(json.dumps(LANGUAGE_INFO))
    _stable_cell_ids(nb)
    return nb


def _stable_cell_ids(nb: nbformat.NotebookNode) -> None:
    """Cell ids that depend on the source only, so that regenerating changes nothing.

    Graded cells are named by their grade_id; others by a hash of their text.
    """
    seen: set[str] = set()
    for cell in nb.cells:
        base = grade_id(cell) or "c-" + hashlib.sha1(cell.source.encode("utf-8")).hexdigest()[:10]
        cell_id, n = base, 1
        while cell_id in seen:
            n += 1
            cell_id = f"{base}-{n}"
        seen.add(cell_id)
        cell["id"] = cell_id
