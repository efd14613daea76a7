"""The learner's own copies of the student notebooks, in work/ (git-ignored).

``make lab`` calls this before it opens JupyterLab on work/. A learner's file is never
overwritten, not by a rerun and not by a newer edition of the course: when the student edition
of a lesson changes after the learner copied it, the new edition is put beside their copy as
``<name>.<edition-id>.ipynb`` and they are told, so they can move their answers over.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from coursekit.course.lessons import ROOT, all_lessons

WORK = "work"
LEDGER = ".editions.json"  # which edition each copy in work/ was made from


def _edition_id(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:8]


def _copy(edition: Path, target: Path) -> None:
    """Copy a student notebook for the learner, with the Python version their kernel reports:
    JupyterLab writes the kernel's language_info into a notebook it opens, and a notebook that
    holds a different one is marked modified before the learner typed anything (the rest of it
    is in the edition already: coursekit.course.sources.LANGUAGE_INFO)."""
    nb = json.loads(edition.read_text(encoding="utf-8"))
    language = nb.setdefault("metadata", {}).setdefault("language_info", {})
    language["version"] = sys.version.split()[0]  # what ipykernel reports
    target.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def sync_workspace(root: Path = ROOT) -> list[str]:
    """Copy missing lessons into work/; report newer editions without touching the learner's."""
    work = root / WORK
    work.mkdir(exist_ok=True)
    ledger_path = work / LEDGER
    ledger = json.loads(ledger_path.read_text()) if ledger_path.exists() else {}
    messages = []
    for item in all_lessons(root):
        if not item.student_notebook.exists():
            continue
        relative = f"{item.assignment}/{item.name}.ipynb"
        mine = work / relative
        edition = _edition_id(item.student_notebook)
        if not mine.exists():
            mine.parent.mkdir(parents=True, exist_ok=True)
            _copy(item.student_notebook, mine)
            ledger[relative] = edition
            messages.append(f"new lesson: {WORK}/{relative}")
        elif ledger.get(relative) not in (None, edition):
            newer = mine.with_name(f"{item.name}.{edition}.ipynb")
            if not newer.exists():
                _copy(item.student_notebook, newer)
            messages.append(
                f"{WORK}/{relative} is yours and was kept; the course's newer edition "
                f"of it is {WORK}/{item.assignment}/{newer.name}"
            )
        elif relative not in ledger:
            ledger[relative] = edition
    ledger_path.write_text(json.dumps(ledger, indent=1, sort_keys=True) + "\n")
    return messages


if __name__ == "__main__":
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT
    for line in sync_workspace(root):
        print(line)
