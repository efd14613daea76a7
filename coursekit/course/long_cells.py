"""Long cells, and whether the text above each says how long it takes.

A cell tagged ``experiment`` (a longer run the learner waits for: coursekit/course/
expected_time.py counts a minute for it) or ``slow`` (another cell measured at more than a few
seconds) must be announced: the markdown cell right above it states a time, so that a learner who
runs it, or "Run All", knows what the wait is before it starts.
"""

from __future__ import annotations

import re

LONG_TAGS = {"experiment", "slow"}
_NUMBER = r"\d+(?:\.\d+)?(?:\s*(?:-|–|to)\s*\d+(?:\.\d+)?)?"
_WORDS = r"(?:a|an|one|two|three|four|five|ten|a few|several)"
_UNIT = r"(?:seconds?|minutes?|hours?)"
TIME = re.compile(rf"(?<![\w.]){_NUMBER}\s*(?:s|sec|min|{_UNIT})\b|\b{_WORDS}\s+{_UNIT}\b", re.I)


def says_how_long(text: str) -> bool:
    """Whether ``text`` states a duration ("about 20 s", "1-2 minutes", "a few seconds")."""
    return bool(TIME.search(text))


def is_long(cell) -> bool:
    return cell.get("cell_type") == "code" and bool(LONG_TAGS & set(cell.metadata.get("tags", [])))


def unannounced(nb) -> list[str]:
    """The long cells (grade_id, else "cell N" from 1) whose nearest markdown cell above states
    no time."""
    missing, above = [], ""
    for number, cell in enumerate(nb.cells, 1):
        if cell.cell_type == "markdown":
            above = cell.source
        elif is_long(cell) and not says_how_long(above):
            missing.append(cell.metadata.get("nbgrader", {}).get("grade_id") or f"cell {number}")
    return missing
