"""Turn the solved lessons' MyST sources into the .ipynb files nbgrader reads.

The .md file is the single source of a lesson (reviewable diffs, nbgrader metadata kept by
jupytext). nbgrader only reads .ipynb, so the notebook is derived next to it, git-ignored,
and rewritten only when the source changed. nbgrader_config.py calls ``sync_sources`` so that
stock ``nbgrader`` commands work from the repo root on a fresh clone.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat

from coursekit.course import hints
from coursekit.course.lessons import ROOT, all_lessons
from coursekit.course.reading import source_digest, source_to_notebook

# The notebook's record of the source it was made from (``make notebooks`` regenerates a
# student notebook only when its source's digest differs: publishing/current.py).
MADE_FROM = "attention_course"


def nbgrader_source(md_path: Path) -> nbformat.NotebookNode:
    """The notebook nbgrader reads (its "source", solutions/<lesson>/<name>.ipynb): the lesson,
    with its visible tests' hints out of sight (course/hints.py) and the digest of its source."""
    nb = source_to_notebook(md_path)
    hints.strip_notebook(nb)
    nb.metadata[MADE_FROM] = {"source_sha256": source_digest(md_path)}
    return nb


# {notebook: (its source's and its own (mtime, size))} as this process last found them in sync:
# nbgrader loads the course's config, which calls sync_sources, up to three times per command,
# and converting every lesson takes half a second each time.
_in_sync: dict[Path, tuple] = {}


def _stamp(item) -> tuple:
    """(mtime, size) of the lesson's source and of its notebook (None: not there)."""
    stamp = []
    for path in (item.source, item.source_notebook):
        try:
            found = path.stat()
        except FileNotFoundError:
            stamp.append(None)
        else:
            stamp.append((found.st_mtime_ns, found.st_size))
    return tuple(stamp)


def sync_sources(root: Path = ROOT) -> list[Path]:
    """Write every stale solutions/<lesson>/<name>.ipynb; return the ones written."""
    written = []
    for item in all_lessons(root):
        target = item.source_notebook
        if _in_sync.get(target) == _stamp(item):  # neither file changed since this process looked
            continue
        text = nbformat.writes(nbgrader_source(item.source)) + "\n"
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            # Written aside, then renamed into place: every nbgrader process loads the course's
            # config, which calls this, and processes run side by side (parallel grading, the
            # test workers); a reader must never see half a notebook.
            partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            partial.write_text(text, encoding="utf-8")
            os.replace(partial, target)
            written.append(target)
        _in_sync[target] = _stamp(item)
    return written


if __name__ == "__main__":
    root = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT
    for path in sync_sources(root):
        print(f"wrote {path.relative_to(root)}")
