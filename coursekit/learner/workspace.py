"""The learner's own copies of the student notebooks, in work/ (git-ignored).

``make lab`` calls this before it opens JupyterLab on work/, and puts work/AGENTS.md there for AI
assistants (they teach, they do not write the answers). A learner's file is never overwritten,
not by a rerun and not by a newer edition of the course: when the student edition of a lesson
changes after the learner copied it, the new edition is put beside their copy as
``newer-edition-<edition-id>.ipynb`` (:func:`newer_edition`) and they are told, so they can move
their answers over (``make upgrade``, coursekit/learner/upgrade.py).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from coursekit.course.lessons import ROOT, all_lessons

WORK = "work"
LEDGER = ".editions.json"  # which edition each copy in work/ was made from


def edition_id(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:8]


def learners_edition(edition: Path) -> dict:
    """A student notebook as the learner's copy holds it: with the Python version their kernel
    reports. JupyterLab writes the kernel's language_info into a notebook it opens, and a notebook
    that holds a different one is marked modified before the learner typed anything (the rest of
    it is in the edition already: coursekit.course.reading.LANGUAGE_INFO)."""
    nb = json.loads(edition.read_text(encoding="utf-8"))
    language = nb.setdefault("metadata", {}).setdefault("language_info", {})
    language["version"] = sys.version.split()[0]  # what ipykernel reports
    return nb


def copy_edition(edition: Path, target: Path) -> None:
    """Copy a student notebook for the learner (:func:`learners_edition`)."""
    text = json.dumps(learners_edition(edition), indent=1, ensure_ascii=False) + "\n"
    target.write_text(text, encoding="utf-8")


def made_from(mine: Path, item) -> bool:
    """Whether the learner's file is the lesson's edition but for their answers: it holds every
    cell of the edition that is not an answer, with the same id and, where the learner cannot or
    need not edit it (text, test cells, read-only cells), the same source."""
    try:
        theirs = {c.get("id"): c for c in json.loads(mine.read_text(encoding="utf-8"))["cells"]}
    except (OSError, ValueError, KeyError, TypeError):
        return False
    for cell in json.loads(item.student_notebook.read_text(encoding="utf-8"))["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            continue
        same = theirs.get(cell.get("id"))
        fixed = cell["cell_type"] == "markdown" or meta.get("locked") or meta.get("grade")
        if same is None or (fixed and "".join(same["source"]) != "".join(cell["source"])):
            return False
    return True


def newer_edition(mine: Path, edition: str) -> Path:
    """Where a newer edition goes beside the learner's file: a name that starts apart from theirs
    (``<name>.<id>.ipynb`` was cut to the same ``around_the_n_…`` as theirs in JupyterLab's file
    browser)."""
    return mine.with_name(f"newer-edition-{edition}.ipynb")


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
        edition = edition_id(item.student_notebook)
        if not mine.exists():
            mine.parent.mkdir(parents=True, exist_ok=True)
            copy_edition(item.student_notebook, mine)
            ledger[relative] = edition
            messages.append(f"new lesson: {WORK}/{relative}")
        elif ledger.get(relative) not in (None, edition) and made_from(mine, item):
            ledger[relative] = edition  # the learner moved their answers into the newer edition
        elif ledger.get(relative) not in (None, edition):
            newer = newer_edition(mine, edition)
            if not newer.exists():
                copy_edition(item.student_notebook, newer)
            messages.append(
                f"{WORK}/{relative} is yours and was kept; the course's newer edition "
                f"of it is {WORK}/{item.assignment}/{newer.name}"
            )
        elif relative not in ledger:
            ledger[relative] = edition
    ledger_path.write_text(json.dumps(ledger, indent=1, sort_keys=True) + "\n")
    return messages


TUTOR = Path(__file__).with_name("AGENTS.md")  # for AI assistants opened on work/ (README)


def place_tutor_notes(root: Path = ROOT) -> None:
    """work/AGENTS.md: the conventions AI assistants read, asking them to teach, not to answer.
    The course's file, not the learner's: rewritten when the course's version changes."""
    target = root / WORK / "AGENTS.md"
    text = TUTOR.read_text(encoding="utf-8")
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")


def notices(messages: list[str]) -> list[str]:
    """What ``make lab`` says before JupyterLab's address: new copies in one line, each newer
    edition with what to do about it, and the one habit ``make check`` needs."""
    new = [m.removeprefix("new lesson: ") for m in messages if m.startswith("new lesson: ")]
    lines = []
    if new:
        lessons = ", ".join(Path(path).parent.name for path in new)
        lines.append(f"make lab: your own copies of {lessons} are now in {WORK}/.")
    for message in messages:
        if not message.startswith("new lesson: "):
            lesson = message.split("/")[1]
            lines.append(
                f"make lab: {message}. `make upgrade LESSON={lesson}` carries your answers over "
                "into it and keeps your file (README: a newer edition of a lesson)."
            )
    lines.append(
        f"make lab: your answers live in {WORK}/, never overwritten. Save a notebook (Ctrl+S) "
        "before `make check LESSON=lessonNN`: it grades the file on disk."
    )
    return lines


if __name__ == "__main__":
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT
    found = sync_workspace(root)
    place_tutor_notes(root)
    print("\n".join(notices(found)), flush=True)
