"""``make upgrade [LESSON=lessonNN]``: your answers carried into a lesson's newer edition.

When the course changes a lesson you started, ``make lab`` keeps your file and puts the new edition
beside it. This makes the new edition yours in one step, answer by answer:

* every answer cell of the new edition (by its grade id, the name nbgrader grades it by) gets the
  code of the same answer cell in your file, unless yours is still the untouched stub (then the
  new edition's stub stays: its signature may have changed);
* the cells you added yourself (scratch cells, notes) come along, each after the cell it followed
  in your file;
* your file is kept, renamed ``<name>.old.ipynb`` (``.old-2`` ... if that exists), and the new
  edition with your answers becomes ``<name>.ipynb``, the file ``make check`` grades;
* it says what it carried, what it could not (an answer whose exercise the new edition no longer
  has: its code stays in the old file), and where an exercise's first line (its ``def``) changed.

Close the notebook in JupyterLab first (File > Close and Shut Down Notebook): an open tab would
save your old copy over the new file.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from coursekit.course.lessons import ROOT, Lesson, all_lessons, lesson
from coursekit.learner import workspace

_STUB = re.compile(r"#\s*YOUR CODE HERE\s*\n\s*raise NotImplementedError\(\)")


def _grade_id(cell: dict) -> str | None:
    return (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id")


def _is_answer(cell: dict) -> bool:
    return bool((cell.get("metadata", {}).get("nbgrader") or {}).get("solution"))


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _untouched(source: str) -> bool:
    """Still the stub nbgrader left: ``# YOUR CODE HERE`` then ``raise NotImplementedError()``
    in code, ``YOUR ANSWER HERE`` in a written answer."""
    return bool(_STUB.search(source)) or source.strip() == "YOUR ANSWER HERE"


def _first_def(source: str) -> str | None:
    found = re.search(r"^(?:async\s+)?def\s.*$", source, re.M)
    return " ".join(found.group(0).split()) if found else None


def carry(mine: dict, edition: dict) -> tuple[dict, dict]:
    """The new edition with ``mine``'s answers and own cells; and what happened, by kind."""
    new = json.loads(json.dumps(edition))
    theirs = {_grade_id(c): c for c in mine["cells"] if _is_answer(c) and _grade_id(c)}
    report = {"carried": [], "stub": [], "lost": [], "changed": [], "own": 0}
    for cell in new["cells"]:
        name = _grade_id(cell)
        if not _is_answer(cell) or name not in theirs:
            continue
        old = _source(theirs.pop(name))
        if _untouched(old):
            report["stub"].append(name)
            continue
        if (
            _first_def(old)
            and _first_def(_source(cell))
            and _first_def(old) != _first_def(_source(cell))
        ):
            report["changed"].append(f"{name}: the new stub's is `{_first_def(_source(cell))}`")
        cell["source"] = old
        report["carried"].append(name)
    report["lost"] = sorted(n for n, c in theirs.items() if not _untouched(_source(c)))
    report["own"] = _carry_own_cells(mine, new)
    return new, report


def _carry_own_cells(mine: dict, new: dict) -> int:
    """Put the cells the learner added (no nbgrader metadata, an id the edition does not have)
    after the cell they followed; return how many."""
    edition_ids = {c.get("id") for c in new["cells"]}
    placed, after = 0, None
    for cell in mine["cells"]:
        if cell.get("id") in edition_ids:
            after = cell.get("id")
            continue
        if cell.get("metadata", {}).get("nbgrader"):
            continue  # a course cell the new edition dropped: not the learner's
        ids = [c.get("id") for c in new["cells"]]
        at = ids.index(after) + 1 if after in ids else 0
        new["cells"].insert(at, json.loads(json.dumps(cell)))
        after = cell.get("id")
        placed += 1
    return placed


def _aside(mine: Path) -> Path:
    """Where the learner's file goes: <name>.old.ipynb, or .old-2, .old-3 ... if taken."""
    stem = mine.name.removesuffix(".ipynb")
    target, n = mine.with_name(f"{stem}.old.ipynb"), 1
    while target.exists():
        n += 1
        target = mine.with_name(f"{stem}.old-{n}.ipynb")
    return target


def upgrade(item: Lesson, root: Path = ROOT) -> list[str]:
    """Carry the learner's answers of ``item`` into its current edition; what to tell them."""
    relative = f"{item.assignment}/{item.name}.ipynb"
    mine = root / workspace.WORK / relative
    where = f"{workspace.WORK}/{relative}"
    if not mine.exists():
        return [f"{item.assignment}: no copy of yours at {where} yet (`make lab` makes one)"]
    ledger_path = root / workspace.WORK / workspace.LEDGER
    ledger = json.loads(ledger_path.read_text()) if ledger_path.exists() else {}
    edition_id = workspace.edition_id(item.student_notebook)
    if ledger.get(relative) in (None, edition_id) or workspace.made_from(mine, item):
        return [f"{item.assignment}: {where} is the course's current edition already"]
    new, report = carry(
        json.loads(mine.read_text(encoding="utf-8")),
        workspace.learners_edition(item.student_notebook),
    )
    old = _aside(mine)
    mine.rename(old)
    mine.write_text(json.dumps(new, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    ledger[relative] = edition_id
    ledger_path.write_text(json.dumps(ledger, indent=1, sort_keys=True) + "\n")
    _drop_untouched_copy(workspace.newer_edition(mine, edition_id))
    return _told(item, where, old.name, report)


def _drop_untouched_copy(beside: Path) -> None:
    """The new edition make lab put beside the learner's file: gone if no answer was written in
    it (it is now the learner's file itself), kept otherwise."""
    if beside.exists():
        cells = json.loads(beside.read_text(encoding="utf-8"))["cells"]
        if all(_untouched(_source(c)) for c in cells if _is_answer(c)):
            beside.unlink()


def _told(item: Lesson, where: str, old: str, report: dict) -> list[str]:
    lines = [f"{item.assignment}: {where} is now the course's newer edition, with your answers;"
             f" your file as it was is {old} beside it."]  # fmt: skip
    if report["carried"]:
        lines.append(f"  carried over: {', '.join(report['carried'])}")
    if report["own"]:
        lines.append(f"  and {report['own']} cell(s) you added, each after the cell it followed")
    if report["stub"]:
        lines.append(f"  not started, the new stub kept: {', '.join(report['stub'])}")
    for change in report["changed"]:
        lines.append(f"  check your first line against the new stub's: {change}")
    if report["lost"]:
        lines.append(
            f"  NOT carried (the new edition has no such exercise; your code stays in {old}): "
            + ", ".join(report["lost"])
        )
    lines.append(
        f"  Run its cells and test cells again, then `make check LESSON={item.assignment}`."
    )
    return lines


def main(argv: list[str], root: Path = ROOT) -> int:
    """The lessons named; without names, every lesson of which a newer edition waits."""
    items = [lesson(name, root) for name in argv] or all_lessons(root)
    print(
        "make upgrade: close the lessons' notebooks in JupyterLab first (File > Close and Shut "
        "Down Notebook): an open tab would save your old copy over the new file.",
        flush=True,
    )
    done = 0
    for item in items:
        if item.student_notebook.exists():
            said = upgrade(item, root)
            done += len(said) > 1
            if argv or len(said) > 1:
                print("\n".join(said), flush=True)
    if not argv and not done:
        print("make upgrade: every lesson in work/ is the course's current edition.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
