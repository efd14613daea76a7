"""Exercise contracts: what each exercise's text promises, the tests that check each promise, and
the planted mistakes that prove those tests can fail.

    python -m coursekit.course.contracts lesson02   # a lesson's contracts, exercise by exercise
    python -m coursekit.course.contracts --check    # every lesson's problems at once; 1 if any

A lesson's contracts are data beside its planted mistakes, under ``contracts:`` in
``solutions/<lesson>/mistakes.yml``::

    contracts:
    - cell: attention_weights              # grade_id of an autograded solution cell
      clauses:
      - clause: weights sum to 1 over the keys (the softmax runs over the last axis)
        tests: [test_attention_weights]    # grade_ids of the test cells that check it
        mistakes: [softmax-over-queries]   # planted mistakes that prove those tests can fail
      - clause: one product per projection, no loop over the heads
        method: true                       # a method clause: how, not only what
        tests: [test_multi_head_attention]
        mistakes: [projections-per-head]   # one of them `kind: method` (or `numeric`)

A clause marked ``method: true`` promises *how* the answer computes (blockwise, a chunk at a
time, no loop over the heads, a stable formula); it needs a planted counter-answer, a mistake of
``kind: method`` (the right numbers by the forbidden method) or ``kind: numeric`` (a numerically
naive rewrite), among its mistakes. ``make mutants`` runs those beside the syntactic mutants.

The check here reads only the lesson's source and that file (no kernel, no nbgrader), and asks:
every autograded solution cell has a contract; every clause has a text, at least one graded test
cell after the exercise, and at least one planted mistake, put into that exercise's cell, whose
``fails`` includes one of the clause's tests; every planted mistake and every test cell serves a
clause. The grading chain proves that each mistake fails exactly its ``fails`` cells (through
real nbgrader); together the two make every clause provably tested: the test exists, it names the
clause, and a wrong answer of that kind loses its points.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import yaml

from coursekit.course.cells import grade_id, is_autograded_answer, is_solution, is_test
from coursekit.course.lessons import ROOT, SOLUTIONS, Lesson, all_lessons
from coursekit.course.mistakes import FILENAME, Mistake, read_alternatives, read_mistakes
from coursekit.course.reading import source_to_notebook

KEY = "contracts"
_ENTRY_FIELDS = {"cell", "clauses"}
_CLAUSE_FIELDS = {"clause", "tests", "mistakes"}
_OPTIONAL_CLAUSE_FIELDS = {"method"}


@dataclass(frozen=True)
class Clause:
    text: str  # what the exercise's text promises, in a reader's words
    tests: tuple[str, ...]  # grade_ids of the test cells that check it
    mistakes: tuple[str, ...]  # names of planted mistakes that break it
    method: bool = False  # a method clause: needs a counter-answer (kind: method or numeric)


@dataclass(frozen=True)
class Contract:
    lesson: str  # assignment, e.g. "lesson02"
    cell: str  # grade_id of the exercise's solution cell
    clauses: tuple[Clause, ...]


def _names(value, where: str, field: str, problems: list[str]) -> tuple[str, ...]:
    """A list of names (grade_ids, mistake names); a problem for anything else."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        problems.append(f"{where}: `{field}` must be a list of names, e.g. [name], not {value!r}")
        return ()
    return tuple(value)


def _clause(entry, where: str, problems: list[str]) -> Clause | None:
    if not isinstance(entry, dict):
        problems.append(f"{where}: a clause is a mapping with {sorted(_CLAUSE_FIELDS)}")
        return None
    unknown = set(entry) - _CLAUSE_FIELDS - _OPTIONAL_CLAUSE_FIELDS
    missing = _CLAUSE_FIELDS - set(entry)
    if unknown or missing:
        problems.append(f"{where}: unknown fields {sorted(unknown)} or missing {sorted(missing)}")
    method = entry.get("method", False)
    if not isinstance(method, bool):
        problems.append(f"{where}: `method` must be true or false, not {method!r}")
    text = entry.get("clause")
    if not isinstance(text, str) or not text.strip():
        problems.append(f"{where}: `clause` must say what the exercise promises, not {text!r}")
        text = ""
    tests = _names(entry.get("tests"), where, "tests", problems)
    mistakes = _names(entry.get("mistakes"), where, "mistakes", problems)
    return Clause(text.strip(), tests, mistakes, method is True)


def _contract(entry, lesson: str, number: int, problems: list[str]) -> Contract | None:
    where = f"contract {number}"
    if not isinstance(entry, dict):
        problems.append(f"{where}: a contract is a mapping with {sorted(_ENTRY_FIELDS)}")
        return None
    where = f"contract {number} (cell {entry.get('cell')!r})"
    unknown, missing = set(entry) - _ENTRY_FIELDS, _ENTRY_FIELDS - set(entry)
    if unknown or missing:
        problems.append(f"{where}: unknown fields {sorted(unknown)} or missing {sorted(missing)}")
    cell, clauses = entry.get("cell"), entry.get("clauses")
    if not isinstance(cell, str) or not cell:
        problems.append(f"{where}: `cell` must be the grade_id of an exercise's solution cell")
        return None
    if not isinstance(clauses, list) or not clauses:
        problems.append(f"{where}: `clauses` must be a non-empty list")
        return None
    found = [_clause(c, f"{where}, clause {i}", problems) for i, c in enumerate(clauses, 1)]
    return Contract(lesson, cell, tuple(c for c in found if c is not None))


def parse_contracts(data, lesson: str) -> tuple[list[Contract] | None, list[str]]:
    """(contracts, problems with their form) from a mistakes.yml's parsed ``data``; contracts is
    None when the file has no ``contracts:`` key at all."""
    if not isinstance(data, dict) or KEY not in data:
        return None, []
    entries, problems = data[KEY], []
    if not isinstance(entries, list):
        return [], [f"`{KEY}:` must be a list of contracts, one per exercise, not {entries!r}"]
    found = [_contract(entry, lesson, i, problems) for i, entry in enumerate(entries, 1)]
    return [c for c in found if c is not None], problems


def read_contracts(path: Path) -> tuple[list[Contract] | None, list[str]]:
    """The contracts in a lesson's mistakes.yml (None: it has none) and the problems with their
    form."""
    if not path.exists():
        return None, []
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return parse_contracts(data, path.parent.name)


def load_contracts(item: Lesson) -> list[Contract]:
    """The lesson's contracts; a ValueError naming every malformed entry."""
    path = item.root / SOLUTIONS / item.assignment / FILENAME
    contracts, problems = read_contracts(path)
    if problems:
        raise ValueError(f"{path}: malformed contracts:\n  " + "\n  ".join(problems))
    return contracts or []


@dataclass(frozen=True)
class Cells:
    """The graded cells of a lesson's source, by grade_id, with their position in the notebook."""

    exercises: dict[str, int]  # autograded solution cells
    tests: dict[str, int]  # graded test cells
    others: dict[str, str]  # every other named cell: what it is
    answers: dict[str, str]  # the source of every solution cell (where mistakes are planted)

    @classmethod
    def of(cls, item: Lesson) -> Cells:
        exercises, tests, others, answers = {}, {}, {}, {}
        for index, cell in enumerate(source_to_notebook(item.source).cells):
            name = grade_id(cell)
            if name is None:
                continue
            if is_solution(cell):
                answers[name] = cell.source
            if is_autograded_answer(cell):
                exercises[name] = index
            elif is_test(cell):
                tests[name] = index
            else:
                others[name] = f"a {cell.cell_type} cell that is neither an exercise nor a test"
        return cls(exercises, tests, others, answers)


def _unknown(name: str, known, what: str) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    guess = f" (did you mean `{close[0]}`?)" if close else ""
    return f"`{name}` is not {what} of the lesson{guess}"


def _clause_problems(clause: Clause, contract: Contract, cells: Cells, planted: dict) -> list[str]:
    where = f"`{contract.cell}`, clause {textwrap.shorten(clause.text, 60, placeholder=' …')!r}"
    found = []
    if not clause.tests:
        found.append(f"{where}: names no test")
    if not clause.mistakes:
        found.append(f"{where}: names no planted mistake that proves its tests can fail")
    for test in clause.tests:
        if test not in cells.tests:
            found.append(f"{where}: " + _unknown(test, cells.tests, "a graded test cell"))
        elif cells.tests[test] < cells.exercises.get(contract.cell, -1):
            found.append(f"{where}: test `{test}` comes before the exercise it is said to check")
    counters = [n for n in clause.mistakes if n in planted and planted[n].counter]
    if clause.method and clause.mistakes and not counters:
        found.append(
            f"{where}: a method clause needs a counter-answer among its mistakes "
            "(a planted mistake of `kind: method` or `kind: numeric`)"
        )
    for name in clause.mistakes:
        mistake = planted.get(name)
        if mistake is None:
            found.append(f"{where}: " + _unknown(name, planted, "a planted mistake"))
        elif mistake.cell != contract.cell:
            found.append(
                f"{where}: mistake `{name}` is planted in `{mistake.cell}`, not in this exercise"
            )
        elif clause.tests and not mistake.fails & set(clause.tests):
            found.append(
                f"{where}: mistake `{name}` fails {sorted(mistake.fails)}, none of the clause's"
                f" tests {list(clause.tests)}: it proves nothing about them"
            )
    return found


def _misplaced(cell: str, cells: Cells) -> str:
    """A contract for a cell that is no exercise: say what it is."""
    what = "a graded test cell" if cell in cells.tests else cells.others.get(cell)
    what = f"it is {what}" if what else _unknown(cell, cells.exercises, "an exercise")
    return f"contract for `{cell}`: {what}; contracts are for autograded solution cells"


def _coverage_problems(contracts: list[Contract], cells: Cells, planted: dict) -> list[str]:
    """Exercises with no contract (or two); mistakes and tests that serve no clause."""
    found, seen = [], {}
    for contract in contracts:
        seen[contract.cell] = seen.get(contract.cell, 0) + 1
        if contract.cell not in cells.exercises:
            found.append(_misplaced(contract.cell, cells))
    found += [f"`{cell}` has {n} contracts; give it one" for cell, n in seen.items() if n > 1]
    found += [f"exercise `{cell}` has no contract" for cell in cells.exercises if cell not in seen]
    clauses = [clause for contract in contracts for clause in contract.clauses]
    served = {name for clause in clauses for name in clause.mistakes}
    found += [
        f"planted mistake `{name}` (in `{m.cell}`) serves no clause: name it where it breaks one"
        for name, m in planted.items()
        if name not in served
    ]
    checked = {test for clause in clauses for test in clause.tests}
    found += [
        f"test `{test}` checks no clause: name it in the clauses it checks"
        for test in cells.tests
        if test not in checked
    ]
    return found


def _mistake_problems(mistake: Mistake, cells: Cells) -> list[str]:
    """What the chain would find only when it grades this mistake (``make test-mistakes``): a
    cell that is no solution, a text not in it, a test that does not exist or comes too early."""
    where = f"{mistake.kind} `{mistake.name}`"
    if mistake.cell not in cells.answers:
        return [f"{where}: " + _unknown(mistake.cell, cells.answers, "a solution cell")]
    found = []
    if mistake.old and mistake.old not in cells.answers[mistake.cell]:
        found.append(f"{where}: its `old` text is not in `{mistake.cell}`: {mistake.old!r}")
    if mistake.kind == "mistake" and (not mistake.fails or mistake.old == mistake.new):
        found.append(f"{where}: fails no test (or changes nothing): an alternative answer?")
    for test in sorted(mistake.fails):
        if test not in cells.tests:
            found.append(f"{where}: fails " + _unknown(test, cells.tests, "a graded test cell"))
        elif cells.tests[test] < cells.exercises.get(mistake.cell, -1):
            found.append(f"{where}: fails `{test}`, which runs before `{mistake.cell}`")
    return found


def planted_problems(item: Lesson, cells: Cells) -> tuple[dict[str, Mistake], list[str]]:
    """({name: mistake}, problems) of the lesson's mistakes.yml and alternatives.yml."""
    folder = item.root / SOLUTIONS / item.assignment
    try:
        mistakes, alternatives = read_mistakes(folder / FILENAME), read_alternatives(folder)
    except ValueError as error:
        return {}, [str(error)]
    found = []
    for group in (mistakes, alternatives):
        names = [m.name for m in group]
        found += [f"two {m.kind}s are called `{m.name}`" for m in group if names.count(m.name) > 1]
    for mistake in mistakes + alternatives:
        found += _mistake_problems(mistake, cells)
    return {m.name: m for m in mistakes}, sorted(set(found), key=found.index)


def lesson_problems(item: Lesson) -> list[str]:
    """Everything wrong with the lesson's contracts, each problem a sentence naming the names."""
    path = item.root / SOLUTIONS / item.assignment / FILENAME
    cells = Cells.of(item)
    planted, problems = planted_problems(item, cells)
    contracts, malformed = read_contracts(path)
    problems += malformed
    if contracts is None and cells.exercises:
        where, names = path.relative_to(item.root), ", ".join(cells.exercises)
        return problems + [f"no `{KEY}:` in {where}: its exercises ({names}) need one each"]
    for contract in contracts or []:
        for clause in contract.clauses:
            problems += _clause_problems(clause, contract, cells, planted)
    return problems + _coverage_problems(contracts or [], cells, planted)


def report(lessons: list[Lesson]) -> str:
    """Every lesson's problems, lesson by lesson ("" when there are none)."""
    sections = []
    for item in lessons:
        problems = lesson_problems(item)
        if problems:
            lines = "\n".join(f"  - {problem}" for problem in problems)
            count = f"{len(problems)} problem" + ("s" if len(problems) > 1 else "")
            sections.append(f"{item.assignment} ({count}):\n{lines}")
    return "\n\n".join(sections)


def _title(item: Lesson) -> str:
    for line in item.source.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return item.name


def describe(item: Lesson) -> str:
    """The lesson's contracts as a reviewer reads them: per exercise, each clause with the tests
    that check it and the planted mistakes that prove those tests can fail, then the problems."""
    path = item.root / SOLUTIONS / item.assignment / FILENAME
    planted, _ = planted_problems(item, Cells.of(item))  # the problems are listed below
    contracts, _ = read_contracts(path)
    by_cell = {c.cell: c for c in contracts or []}
    lines = [f"{item.assignment}: {_title(item)}", ""]
    for cell in Cells.of(item).exercises:
        contract = by_cell.get(cell)
        lines.append(f"{cell}" + ("" if contract else "  (no contract)"))
        for clause in contract.clauses if contract else ():
            lines.append(f"  * {clause.text}" + ("  (method)" if clause.method else ""))
            lines.append(f"      tests:    {', '.join(clause.tests) or '(none)'}")
            for name in clause.mistakes or ("(none)",):
                why = planted[name].why if name in planted else ""
                counter = planted[name].counter if name in planted else ""
                label = f"{name} ({counter})" if counter else name
                lines.append(f"      mistake:  {label}" + (f": {why}" if why else ""))
        lines.append("")
    problems = lesson_problems(item)
    lines += ["problems:"] + [f"  - {p}" for p in problems] if problems else ["no problems"]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*", help="e.g. lesson02 (default: every lesson)")
    parser.add_argument(
        "--check", action="store_true", help="print only the problems; exit 1 if there are any"
    )
    args = parser.parse_args(argv)
    lessons = all_lessons(ROOT)
    unknown = set(args.lessons) - {item.assignment for item in lessons}
    if unknown:
        parser.error(f"no lessons called {sorted(unknown)}")
    chosen = [item for item in lessons if not args.lessons or item.assignment in args.lessons]
    if args.check:
        found = report(chosen)
        print(found or f"the contracts of {len(chosen)} lessons are complete")
        return 1 if found else 0
    print("\n\n".join(describe(item) for item in chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
