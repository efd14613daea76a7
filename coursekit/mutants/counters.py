"""Counter-answers: the planted mistakes of ``kind: method`` or ``kind: numeric`` (mistakes.yml),
run by ``make mutants`` beside the syntactic mutants, in-process, against the same tests.

A syntactic mutant changes a line; a counter-answer changes the algorithm (dense instead of
blockwise, one chunk for the whole text, a loop over the heads, a locked helper called, a cache in
a global) or meets the regime a formula must survive (the max shift dropped, the mask after exp,
half precision). Each is *caught* when a test its answer reaches fails on it (or it runs past its
time limit). A lesson's method clauses are the contract clauses marked ``method: true``; the
contracts check makes each name a counter-answer, and this run shows each is caught.

Each exercise's record in mutants.yml carries, where it has counter-answers, ``method:
{graded, counter_answers, caught}``: ``graded`` hashes the exercise's graded hash (the answer and
its tests) with the counter-answers' text, so ``autograde_tests/test_mutants.py`` sees when it is
stale. ``--counters-only`` runs them without the mutants (seconds), leaving the mutants' records.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from coursekit.course.contracts import load_contracts
from coursekit.course.lessons import SOLUTIONS, Lesson
from coursekit.course.mistakes import FILENAME, Mistake, read_mistakes
from coursekit.mutants.generate import Mutant
from coursekit.mutants.plan import Exercise

OPERATOR = "counter-answer"


def counter_answers(item: Lesson) -> dict[str, list[Mistake]]:
    """The lesson's counter-answers, by the answer cell they are planted in."""
    found: dict[str, list[Mistake]] = {}
    for mistake in read_mistakes(item.root / SOLUTIONS / item.assignment / FILENAME):
        if mistake.counter:
            found.setdefault(mistake.cell, []).append(mistake)
    return found


def method_clauses(item: Lesson) -> int:
    """How many clauses of the lesson's contracts are marked ``method: true``."""
    return sum(c.method for contract in load_contracts(item) for c in contract.clauses)


def as_mutants(exercise: Exercise, counters: list[Mistake]) -> list[Mutant]:
    """Each counter-answer as a mutant of the exercise: its cell with the mistake planted."""
    made = []
    for mistake in counters:
        if mistake.old not in exercise.source:
            raise ValueError(
                f"counter-answer {mistake.name}: its `old` text is not in {exercise.cell}"
            )
        source = exercise.source.replace(mistake.old, mistake.new)
        line = exercise.source[: exercise.source.index(mistake.old)].count("\n") + 1
        operator = f"{OPERATOR} ({mistake.counter})"
        made.append(Mutant(exercise.cell, operator, line, mistake.name, "", source))
    return made


def graded(exercise: Exercise, counters: list[Mistake]) -> str:
    """A hash of the exercise's graded hash and of its counter-answers' text."""
    digest = hashlib.sha256(exercise.graded.encode())
    for mistake in sorted(counters, key=lambda m: m.name):
        for text in (mistake.name, mistake.counter, mistake.old, mistake.new):
            digest.update(b"\0" + text.encode("utf-8"))
    return digest.hexdigest()[:16]


@dataclass
class Caught:
    """One exercise's (or one lesson's) counter-answers and how many its tests caught."""

    counter_answers: int = 0
    caught: int = 0

    def record(self, hash_: str) -> dict:
        return {"graded": hash_, "counter_answers": self.counter_answers, "caught": self.caught}


def table(rows) -> str:
    """Per lesson: its method clauses, the counter-answers planted, and how many were caught."""
    lines = ["{:<10}{:>16}{:>17}{:>9}".format("lesson", "method clauses", "counter-answers",
                                               "caught")]  # fmt: skip
    for lesson, clauses, caught in rows:
        mark = "" if caught.caught == caught.counter_answers else "  <- not all caught"
        lines.append(
            f"{lesson:<10}{clauses:>16}{caught.counter_answers:>17}{caught.caught:>9}{mark}"
        )
    return "\n".join(lines)


def clause_table(item: Lesson) -> list[str]:
    """Markdown rows, one per method clause: exercise, clause, counter-answers (kind), and what
    the last ``make mutants`` recorded for the exercise's counter-answers."""
    from coursekit.mutants import triage

    planted = {m.name: m for cell in counter_answers(item).values() for m in cell}
    records = triage.read(item.source.parent).records
    rows = []
    for contract in load_contracts(item):
        method = records.get(contract.cell, {}).get("method")
        caught = f"{method['caught']} of {method['counter_answers']}" if method else "not run"
        for clause in (c for c in contract.clauses if c.method):
            names = [f"`{n}` ({planted[n].counter})" for n in clause.mistakes if n in planted]
            rows.append(f"| {item.assignment} | `{contract.cell}` | {clause.text} | "
                        f"{', '.join(names)} | {caught} |")  # fmt: skip
    return rows


def main(argv=None) -> int:
    """Print the method-clause table of the lessons named (none: every lesson)."""
    import argparse

    from coursekit.course.lessons import all_lessons, lesson

    parser = argparse.ArgumentParser(prog="python -m coursekit.mutants.counters",
                                     description=main.__doc__)  # fmt: skip
    parser.add_argument("lessons", nargs="*")
    options = parser.parse_args(argv)
    items = [lesson(name) for name in options.lessons] or all_lessons()
    print("| lesson | exercise | method clause | counter-answers | caught (exercise) |")
    print("|---|---|---|---|---|")
    for item in items:
        print("\n".join(clause_table(item)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
