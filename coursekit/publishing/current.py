"""Is a student notebook current? ``make notebooks`` (and so ``make lab``) asks before it runs
nbgrader to regenerate one.

    python -m coursekit.publishing.current notebooks/<lesson>/<name>.ipynb \
        solutions/<lesson>/<name>.md

After a ``git clone`` the files' times are those of the checkout, in no useful order: make saw
the lesson sources as newer than the committed notebooks and regenerated all of them (37 s, and
two dozen lines that looked as if the tool rewrote the repository). Each notebook records the
digest of the source it was made from (course/sources.py, ``MADE_FROM``), and so does the
lesson's hint table (course/hints.py). When both match, this only gives the notebook a newer
time, so that make sees it as current, and exits 0; otherwise it exits 1 and make regenerates
them. Standard library only: a few hundredths of a second.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

MADE_FROM = "attention_course"  # coursekit.course.sources.MADE_FROM (a test holds them equal)


def hint_table(source: Path) -> Path:
    """solutions/attention_ref/hints/<lesson>.json, written with the notebook (course/hints.py)."""
    return source.parent.parent / "attention_ref" / "hints" / f"{source.parent.name}.json"


def _recorded(path: Path, *keys: str) -> str | None:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
        for key in keys:
            found = found[key]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found if isinstance(found, str) else None


def is_current(notebook: Path, source: Path) -> bool:
    """Whether ``notebook`` and the lesson's hint table were made from ``source`` as it is now."""
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    return _recorded(notebook, "metadata", MADE_FROM, "source_sha256") == digest and (
        _recorded(hint_table(source), "source_sha256") == digest
    )


def main(argv: list[str]) -> int:
    notebook, source = Path(argv[0]), Path(argv[1])
    if not is_current(notebook, source):
        return 1
    os.utime(notebook)  # now newer than its source: make leaves it alone from now on
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
