"""The learner's own copies of the student notebooks, in work/ (git-ignored).

``make lab`` calls this before it opens JupyterLab on work/. A learner's file is never
overwritten, not by a rerun and not by a newer edition of the course: when the student edition
of a lesson changes after the learner copied it, the new edition is put beside their copy as
``<name>.<edition-id>.ipynb`` and they are told, so they can move their answers over.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

from coursekit.course.lessons import ROOT, all_lessons

WORK = "work"
LEDGER = ".editions.json"  # which edition each copy in work/ was made from


def _edition_id(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:8]


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
            shutil.copy2(item.student_notebook, mine)
            ledger[relative] = edition
            messages.append(f"new lesson: {WORK}/{relative}")
        elif ledger.get(relative) not in (None, edition):
            newer = mine.with_name(f"{item.name}.{edition}.ipynb")
            if not newer.exists():
                shutil.copy2(item.student_notebook, newer)
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
