"""What the class got wrong: per test cell, the share of the class that lost its points and the
commonest failure messages (the course's checks name the property that failed, and hint why),
as a table (reports/<lesson>/failures.md) and a plot (reports/<lesson>/failures.png).

Counted: every submission nbgrader graded (``graded`` or ``held``); one that could not be graded
at all (``invalid``, ``failed``) has no test results and is left out (the per-student table
lists it). A test cell whose exercise still raises NotImplementedError counts as *not answered*,
apart from the answers that are wrong, so that the plot tells "nobody tried" from "everybody
tried and got it wrong". Messages are grouped with their numbers set aside (two learners' wrong
values differ; the property is the same) and shown as first written.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from coursekit.grading.results import NotebookResult

NOT_ANSWERED = "not answered (the exercise still raises NotImplementedError)"
SHOWN = 5  # test cells in the terminal's summary
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?", re.I)


@dataclass
class CellFailures:
    grade_id: str
    points: float
    counted: int = 0  # submissions with a result for this cell
    lost: int = 0  # ... that lost (some of) its points
    unanswered: int = 0  # ... of them because the exercise was not answered
    messages: Counter = field(default_factory=Counter)  # key -> submissions
    examples: dict[str, str] = field(default_factory=dict)  # key -> the message as written

    @property
    def share(self) -> float:
        return self.lost / self.counted if self.counted else 0.0

    @property
    def wrong(self) -> int:
        return self.lost - self.unanswered

    def top(self, n: int = 3) -> list[tuple[str, int]]:
        """The ``n`` commonest failure messages (as first written) with their counts."""
        return [(self.examples[key], count) for key, count in self.messages.most_common(n)]


def _key(message: str) -> str:
    return _NUMBER.sub("#", message.strip().splitlines()[0] if message.strip() else "")


def tally(rows: list[NotebookResult]) -> list[CellFailures]:
    """Each test cell's failures over ``rows``, in the notebook's order."""
    cells: dict[str, CellFailures] = {}
    for row in rows:
        if row.status not in ("graded", "held"):
            continue
        for cell in row.cells:
            found = cells.setdefault(cell.grade_id, CellFailures(cell.grade_id, cell.max_score))
            found.counted += 1
            if cell.passed:
                continue
            found.lost += 1
            message = cell.message.strip() or "(no message: the cell lost its points silently)"
            if message.startswith("NotImplementedError"):
                found.unanswered += 1
                message = NOT_ANSWERED
            key = _key(message)
            found.messages[key] += 1
            found.examples.setdefault(key, message.strip().splitlines()[0])
    return list(cells.values())


def worst(cells: list[CellFailures], n: int = SHOWN) -> list[CellFailures]:
    """The ``n`` test cells that the most learners who answered them got wrong (ties: the most
    lost overall, then the notebook's order)."""
    order = {c.grade_id: i for i, c in enumerate(cells)}
    ranked = sorted(cells, key=lambda c: (-c.wrong, -c.lost, order[c.grade_id]))
    return [c for c in ranked if c.lost][:n]


def summary(cells: list[CellFailures], n: int = SHOWN) -> list[str]:
    """Lines for the terminal: the worst test cells, each with its commonest wrong answers."""
    if not cells or not any(c.lost for c in cells):
        return ["what the class got wrong: nothing; every graded test cell passed"]
    lines = [f"what the class got wrong (of {max(c.counted for c in cells)} graded notebooks):"]
    for c in worst(cells, n):
        lines.append(
            f"  {c.grade_id}: {c.share:.0%} lost its {c.points:g} points "
            f"({c.wrong} wrong, {c.unanswered} not answered)"
        )
        lines += [
            f"    {count:>3} x {message[:110]}"
            for message, count in c.top(3)
            if message != NOT_ANSWERED
        ]
    return lines


def _markdown(cells: list[CellFailures], title: str) -> str:
    lines = [f"# {title}", "", "| test cell | points | lost | wrong | not answered | commonest |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for c in cells:
        top = "; ".join(f"{count} x {message}" for message, count in c.top(2))
        cell = top.replace("|", "\\|")
        lines.append(
            f"| {c.grade_id} | {c.points:g} | {c.share:.0%} | {c.wrong} | {c.unanswered} | {cell} |"
        )
    return "\n".join(lines) + "\n"


def plot(cells: list[CellFailures], title: str, path: Path) -> Path:
    """One bar per test cell, in the notebook's order: the share of the class that lost its
    points, wrong answers and unanswered exercises stacked."""
    from matplotlib.figure import Figure  # no pyplot: no global state, no display needed

    figure = Figure(figsize=(8, 0.4 * len(cells) + 1.6), layout="constrained")
    axes = figure.subplots()
    names = [c.grade_id for c in cells][::-1]
    wrong = [100 * c.wrong / c.counted if c.counted else 0 for c in cells][::-1]
    unanswered = [100 * c.unanswered / c.counted if c.counted else 0 for c in cells][::-1]
    axes.barh(names, wrong, color="#c0392b", label="wrong answer")
    axes.barh(names, unanswered, left=wrong, color="#bbbbbb", label="not answered")
    for row, (w, u) in enumerate(zip(wrong, unanswered)):
        axes.text(w + u + 1, row, f"{w + u:.0f} %", va="center", fontsize=8)
    axes.set_xlim(0, 100)
    axes.set_xlabel("% of the graded notebooks that lost the test cell's points")
    axes.set_title(title)
    axes.legend(loc="lower right")
    figure.savefig(path, dpi=100)
    return path


def write_reports(folder: Path, cells: list[CellFailures], lesson: str) -> list[Path]:
    """failures.md and failures.png in ``folder`` (reports/<lesson>/)."""
    folder.mkdir(parents=True, exist_ok=True)
    title = f"{lesson}: what the class got wrong"
    table = folder / "failures.md"
    table.write_text(_markdown(cells, title), encoding="utf-8")
    return [table, plot(cells, title, folder / "failures.png")] if cells else [table]
