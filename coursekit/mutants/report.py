"""What a run found: each exercise's record, the per-lesson table, the survivors as diffs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from coursekit.mutants.execution import Result
from coursekit.mutants.generate import Mutant, diff
from coursekit.mutants.triage import Triage, dump

GOAL = 0.95  # of the mutants that are not equivalent, the share the tests must kill

WHAT_TO_DO = """\
Each survivor is a hole in the tests or an equivalent mutant:
- a hole (an answer written this way is wrong, and still gets full marks): add a test that
  fails on it (visible, or hidden between ### BEGIN HIDDEN TESTS and ### END HIDDEN TESTS; hidden
  tests run for every student: keep them cheap), and plant the mutant in mistakes.yml with that
  test in `fails` and in the exercise's contract (docs/writing-lessons.md);
- equivalent (it computes what the answer computes, so no test can tell): paste its entry,
  printed under it, into the lesson's mutants.yml under `equivalent:`, with why in one line.
Then run make mutants again for that lesson (MUTANTS_FLAGS="--cell ANSWER" for one exercise)."""


@dataclass
class Tally:
    """One lesson's (or one exercise's) count."""

    mutants: int = 0
    killed: int = 0
    equivalent: int = 0
    survivors: list[Result] = field(default_factory=list)
    contradicted: list[Result] = field(default_factory=list)  # killed, yet triaged equivalent

    def add(self, result: Result, why: str | None) -> None:
        self.mutants += 1
        if result.killed:
            self.killed += 1
            if why is not None:
                self.contradicted.append(result)
        elif why is not None:
            self.equivalent += 1
        else:
            self.survivors.append(result)

    def __iadd__(self, other: Tally) -> Tally:
        self.mutants += other.mutants
        self.killed += other.killed
        self.equivalent += other.equivalent
        self.survivors += other.survivors
        self.contradicted += other.contradicted
        return self

    @property
    def score(self) -> float:
        """Killed over the mutants that are not equivalent (1 when every mutant is)."""
        live = self.mutants - self.equivalent
        return self.killed / live if live else 1.0

    def record(self, graded: str) -> dict:
        return {
            "graded": graded,
            "mutants": self.mutants,
            "killed": self.killed,
            "equivalent": self.equivalent,
            "survived": len(self.survivors),
        }


def tally(results: list[Result], triage: Triage) -> Tally:
    count = Tally()
    for result in results:
        count.add(result, triage.why(result.mutant.key))
    return count


HEADS = ("lesson", "mutants", "killed", "equivalent", "survivors", "score", "minutes")


def table(rows: Iterable[tuple[str, Tally, float]]) -> str:
    """The per-lesson table; score: killed / (mutants - equivalent)."""
    lines = ["{:<10}{:>9}{:>8}{:>12}{:>11}{:>9}{:>9}".format(*HEADS)]
    for lesson, count, seconds in rows:
        mark = "" if count.score >= GOAL and not count.survivors else "  <- below the goal"
        lines.append(
            f"{lesson:<10}{count.mutants:>9}{count.killed:>8}{count.equivalent:>12}"
            f"{len(count.survivors):>11}{count.score:>8.1%}{seconds / 60:>9.1f}{mark}"
        )
    return "\n".join(lines)


def entry(mutant: Mutant) -> str:
    """The mutants.yml entry that triages ``mutant`` as equivalent (``why`` to be written)."""
    data = [{"cell": mutant.cell, "line": mutant.before, "mutant": mutant.after, "why": "..."}]
    return dump(data)


def survivor(result: Result, where: str) -> str:
    """A survivor: where it is, what changed, and its entry, ready to paste."""
    mutant = result.mutant
    lines = [f"{mutant.cell}  {where}  ({mutant.operator})"]
    lines += [f"    {line}" for line in diff(mutant)]
    if result.by:
        lines.append(f"    (the mutated answer itself raised: {result.by})")
    lines += [f"    {line}" for line in entry(mutant).splitlines()]
    return "\n".join(lines)


def md_line(md_text: str, cell_source: str, line: int) -> int | None:
    """The line of the lesson's .md file that is line ``line`` of the cell (None: not found)."""
    start = md_text.find(cell_source)
    if start < 0:
        return None
    return md_text.count("\n", 0, start) + line
