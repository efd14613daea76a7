"""The submitted folder and file (readable? the right notebook?), and the notebook's graded
cells: missing, edited and foreign ones are found, and repaired before grading."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from coursekit.course.cells import grade_id, nbgrader_meta
from coursekit.grading.integrity.findings import Finding
from coursekit.grading.integrity.reference import Reference, which_lesson


def _links(folder: Path) -> list[Finding]:
    links = [p for p in folder.rglob("*") if p.is_symlink()] if folder.is_dir() else []
    if not links:
        return []
    names = ", ".join(p.name for p in links)
    message = (
        f"the submission holds symbolic links ({names}): nbgrader would copy what they point to "
        "(the gradebook, say) next to the notebook; not graded"
    )
    return [Finding("symlink", "invalid", message, str(folder))]


def _missing(folder: Path, expected: Path) -> list[Finding]:
    others = sorted(p.name for p in folder.glob("*.ipynb")) if folder.is_dir() else []
    if not others:
        return [
            Finding("missing-notebook", "invalid", f"no {expected.name} was handed in", str(folder))
        ]
    message = (
        f"no {expected.name}, but {', '.join(others)}: rename the file to {expected.name} in "
        f"{folder} and grade again"
    )
    return [Finding("renamed-notebook", "invalid", message, str(folder))]


def _malformed(path: Path, why: str) -> list[Finding]:
    return [Finding("malformed-notebook", "invalid", f"{path.name} {why}", str(path))]


def _read_notebook(path: Path) -> tuple[nbformat.NotebookNode | None, list[Finding]]:
    data = path.read_bytes()
    if not data.strip():
        return None, [Finding("empty-file", "invalid", f"{path.name} is empty", str(path))]
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        return None, _malformed(
            path, f"is not valid JSON ({error}): a truncated or hand-edited file"
        )
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        return None, _malformed(path, "is JSON but not a notebook")
    try:
        return nbformat.reads(data.decode("utf-8"), as_version=4), []
    except Exception as error:  # noqa: BLE001 -- any reason nbformat refuses it
        return None, _malformed(
            path, f"is not a readable notebook ({type(error).__name__}: {error})"
        )


def read_submission(
    folder: Path, notebook: str
) -> tuple[nbformat.NotebookNode | None, list[Finding]]:
    """The submitted notebook ``<folder>/<notebook>.ipynb`` if it can be graded, and what is
    wrong (symbolic links, a missing or renamed file, an empty or malformed one)."""
    folder = Path(folder)
    expected = folder / f"{notebook}.ipynb"
    links = _links(folder)
    if links:
        return None, links
    if not expected.exists():
        return None, _missing(folder, expected)
    return _read_notebook(expected)


# ---------------------------------------------------------------- the notebook's structure

EDITABLE_META = ("grade", "solution", "locked", "points", "schema_version", "task")


def _foreign(gid: str, meta: dict) -> Finding:
    where = f"cell {gid}"
    if meta.get("grade") and meta.get("points"):
        message = (
            f"a cell the assignment does not have claims to be graded ({gid!r}, "
            f"{meta.get('points')} points); it is graded as an ordinary cell"
        )
        return Finding("foreign-graded-cell", "review", message, where)
    message = f"unknown nbgrader cell {gid!r}: graded as an ordinary cell"
    return Finding("foreign-graded-cell", "note", message, where)


def _edited(gid: str, cell, ref_cell) -> list[Finding]:
    """Changed metadata or type (restored before grading), an edited locked cell (the original
    is graded)."""
    meta, where, found = nbgrader_meta(cell), f"cell {gid}", []
    changed = sorted(k for k in EDITABLE_META if meta.get(k) != ref_cell.metadata.get(k))
    if cell.cell_type != ref_cell.cell_type:
        changed.append("cell_type")
    if changed:
        message = (
            f"the nbgrader metadata of {gid!r} was changed ({', '.join(changed)}); "
            "restored before grading"
        )
        found.append(Finding("edited-cell-metadata", "note", message, where))
    if ref_cell.metadata.get("locked") and cell.source.strip() != ref_cell.source.strip():
        message = f"the locked cell {gid!r} was edited; the original was graded instead"
        found.append(Finding("edited-test-cell", "note", message, where))
    return found


def _deleted(ref_cell) -> Finding:
    gid, where = ref_cell.grade_id, f"cell {ref_cell.grade_id}"
    if ref_cell.metadata.get("solution"):
        message = f"the exercise cell {gid!r} was deleted: graded as unanswered"
        return Finding("deleted-exercise-cell", "note", message, where)
    message = f"the test cell {gid!r} was deleted; it was put back and graded"
    return Finding("deleted-test-cell", "note", message, where)


def _wrong_assignment(ids, ref: Reference, root: Path | None) -> Finding:
    other = which_lesson({gid for gid, _ in ids if gid}, root)
    what = (
        f"this is the notebook of {other}"
        if other and other != ref.assignment
        else "it has none of the assignment's exercise and test cells"
    )
    return Finding("wrong-assignment", "invalid", f"not {ref.assignment}'s notebook: {what}")


def structure(nb, ref: Reference, root: Path | None = None) -> list[Finding]:
    """Missing, edited and foreign graded cells (everything here is repaired by :func:`repair`)."""
    ids = [(grade_id(c), c) for c in nb.cells if nbgrader_meta(c)]
    known = ref.by_id
    present = {gid for gid, _ in ids if gid in known}
    if not present:
        return [_wrong_assignment(ids, ref, root)]
    found, seen = [], set()
    for gid, cell in ids:
        if gid not in known:
            found.append(_foreign(gid, nbgrader_meta(cell)))
        elif gid in seen:
            message = f"a second cell {gid!r} (copied?): only the first counts"
            found.append(Finding("duplicate-cell", "note", message, f"cell {gid}"))
        else:
            seen.add(gid)
            found += _edited(gid, cell, known[gid])
    return found + [_deleted(c) for c in ref.cells if c.grade_id not in present]


def repair(nb, ref: Reference) -> nbformat.NotebookNode:
    """A copy of ``nb`` that nbgrader can grade whatever was done to its graded cells.

    Graded cells get the released metadata back; foreign or duplicate nbgrader cells become
    ordinary cells; deleted graded cells are put back as released (a deleted exercise as its
    stub, a deleted test cell as the visible test, to which nbgrader re-adds the hidden tests).
    Without this, one cell with a changed ``schema_version`` stops ``nbgrader autograde`` for
    every student after it, and a deleted exercise with its test cell fails the notebook.
    """
    out = nbformat.from_dict(json.loads(json.dumps(nb)))
    known, seen, cells = ref.by_id, set(), []
    for cell in out.cells:
        meta = nbgrader_meta(cell)
        gid = meta.get("grade_id")
        if meta and (gid not in known or gid in seen):
            cell.metadata.pop("nbgrader", None)
        elif meta:
            seen.add(gid)
            cell.metadata["nbgrader"] = dict(known[gid].metadata)
            if cell.cell_type != known[gid].cell_type:
                cell = _as_type(cell, known[gid].cell_type)
        cells.append(cell)
    position = -1
    for ref_cell in ref.cells:
        index = next(
            (i for i, c in enumerate(cells) if grade_id(c) == ref_cell.grade_id),
            None,
        )
        if index is None:
            restored = _as_type(nbformat.v4.new_markdown_cell(ref_cell.source), ref_cell.cell_type)
            restored.metadata["nbgrader"] = dict(ref_cell.metadata)
            position += 1
            cells.insert(position, restored)
        else:
            position = max(position, index)
    out.cells = cells
    ids = set()
    for cell in out.cells:  # restored and retyped cells need ids, and ids must be unique
        if not cell.get("id") or cell["id"] in ids:
            cell["id"] = nbformat.v4.nbbase.random_cell_id()
        ids.add(cell["id"])
    return out


def _as_type(cell, cell_type: str):
    source, metadata = cell.source, cell.metadata
    new = (
        nbformat.v4.new_code_cell(source)
        if cell_type == "code"
        else nbformat.v4.new_markdown_cell(source)
    )
    new.metadata = metadata
    return new
