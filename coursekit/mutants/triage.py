"""``solutions/<lesson>/mutants.yml``: the lesson's triage of its mutants, beside mistakes.yml.

Two sections. ``equivalent`` is written by hand: each mutant that survives because it computes
what the answer computes, named by its cell and its changed lines (``line``: as the answer has
them; ``mutant``: as the mutant has them; several lines are joined by newlines), with ``why``
in one line. ``exercises`` is written by each ``make mutants`` run: per answer cell, the graded
hash (coursekit/mutants/plan.py) it ran against and what it found. A unit test
(autograde_tests/test_mutants.py) fails when an answer has no record, when its hash is not the
current one (the answer or its tests changed since the last run), when a record has survivors,
and when an equivalent entry matches no mutant any more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

FILENAME = "mutants.yml"
HEADER = """\
# Mutation testing of this lesson's exercises: make mutants LESSON={lesson}
# (docs/writing-lessons.md, "Mutation testing").
# exercises: written by each run, per answer cell: the hash of the answer and of the tests it
#   reaches, and what the run found (killed counts timeouts and crashes); method: its planted
#   counter-answers (mistakes.yml, kind: method or numeric) and how many the tests caught.
# equivalent: written by hand: each surviving mutant that computes what the answer computes,
#   named by its cell and its changed lines (line: the answer's; mutant: the mutant's), and why.
"""
_ENTRY = {"cell", "line", "mutant", "why"}
_RECORD = {"graded", "mutants", "killed", "equivalent", "survived"}
# an exercise with counter-answers (coursekit/mutants/counters.py) also records them
_METHOD, _METHOD_RECORD = "method", {"graded", "counter_answers", "caught"}


@dataclass
class Triage:
    lesson: str
    records: dict[str, dict] = field(default_factory=dict)
    equivalent: list[dict] = field(default_factory=list)

    def why(self, key: tuple[str, str, str]) -> str | None:
        """Why the mutant named ``key`` (cell, lines before, lines after) is equivalent, or None."""
        for entry in self.equivalent:
            if (entry["cell"], entry["line"], entry["mutant"]) == key:
                return entry["why"]
        return None

    def unused(self, keys: set[tuple[str, str, str]], cells: set[str]) -> list[dict]:
        """The equivalent entries of the answer cells ``cells`` that name none of ``keys``."""
        return [
            entry
            for entry in self.equivalent
            if entry["cell"] in cells
            and (entry["cell"], entry["line"], entry["mutant"]) not in keys
        ]


class _Dumper(yaml.SafeDumper):
    """Writes a text of several lines (a statement over lines) as a block, one line a line."""


_Dumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None
    ),
)


def dump(data, **options) -> str:
    return yaml.dump(
        data, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True, **options
    )


def path(folder: Path) -> Path:
    return Path(folder) / FILENAME


def read(folder: Path) -> Triage:
    """The triage in ``folder`` (a lesson's solutions folder); an empty one if it has none."""
    file = path(folder)
    triage = Triage(Path(folder).name)
    if not file.exists():
        return triage
    data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    unknown = set(data) - {"exercises", "equivalent"}
    if unknown:
        raise ValueError(f"{file}: unknown sections {sorted(unknown)}")
    for cell, record in (data.get("exercises") or {}).items():
        if set(record) - {_METHOD} != _RECORD:
            raise ValueError(
                f"{file}: the record of {cell} has {sorted(record)}, not {sorted(_RECORD)}"
            )
        if _METHOD in record and set(record[_METHOD]) != _METHOD_RECORD:
            raise ValueError(
                f"{file}: the counter-answers' record of {cell} has {sorted(record[_METHOD])}, "
                f"not {sorted(_METHOD_RECORD)}"
            )
        triage.records[cell] = record
    for entry in data.get("equivalent") or []:
        if set(entry) != _ENTRY or not str(entry["why"]).strip():
            raise ValueError(
                f"{file}: an equivalent entry needs {sorted(_ENTRY)}, and a why: {entry}"
            )
        triage.equivalent.append({k: str(entry[k]) for k in ("cell", "line", "mutant", "why")})
    return triage


def write(folder: Path, triage: Triage, order: list[str]) -> None:
    """Write ``triage`` to the folder's mutants.yml, records and entries in the order of the
    answer cells ``order``."""
    rank = {cell: i for i, cell in enumerate(order)}
    records = {
        c: triage.records[c] for c in sorted(triage.records, key=lambda c: rank.get(c, len(rank)))
    }
    entries = sorted(triage.equivalent, key=lambda e: rank.get(e["cell"], len(rank)))
    text = HEADER.format(lesson=triage.lesson)
    text += dump({"exercises": records}, default_flow_style=None)
    text += dump({"equivalent": entries})
    path(folder).write_text(text, encoding="utf-8")
