"""What class grading remembers between runs: which submission (by content hash) is in the
gradebook with which status, and the digests that prove grading changed nothing it must not."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from coursekit.course.lessons import Lesson

SKIP = ("__pycache__", ".ipynb_checkpoints")


def tree_digest(root: Path, skip=SKIP) -> dict[str, str]:
    """{relative path: sha256 (or "-> target" for a link)} of every file under ``root``."""
    root, out = Path(root), {}
    if not root.exists():
        return out
    for path in sorted(root.rglob("*")):
        if any(part in skip for part in path.parts):
            continue
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def folder_digest(folder: Path) -> str:
    return hashlib.sha256(json.dumps(tree_digest(folder), sort_keys=True).encode()).hexdigest()


def course_digest(course: Path, lesson: Lesson) -> dict[str, str]:
    """What grading must never change: the submissions and the course's own files."""
    out = {}
    for part in ("submitted", "solutions", f"notebooks/{lesson.assignment}"):
        out |= {f"{part}/{k}": v for k, v in tree_digest(course / part).items()}
    config = course / "nbgrader_config.py"
    if config.exists():
        out["nbgrader_config.py"] = hashlib.sha256(config.read_bytes()).hexdigest()
    return out


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Paths whose digest differs (added, removed or changed)."""
    return [
        path for path in sorted(set(before) | set(after)) if before.get(path) != after.get(path)
    ]


def write_json(path: Path, data) -> None:
    """Write atomically: a file beside it, renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}
