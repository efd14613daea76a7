"""Answer-equivalent callables, found by machine: for each graded exercise, the functions of the
solved notebook and of the course library that already return the exercise's answer on its test
inputs (``python -m coursekit.mutants.equivalents LESSON --write`` runs every candidate on the
inputs the tests give and writes ``attention_ref/equivalents/<lesson>.json``; a unit test fails
while a table is older than its lesson).

A graded function that reaches one of them by name (directly, through a helper of the notebook,
or through a library module) is refused by ``attention_ref.testing.expect_own_function``, which
every graded test cell calls first: the lesson gave that computation, the exercise asks for it.
Those the model answer itself uses are left out when the table is made (the exercise allows
them).

Standard library only: the tables are read in the learner's kernel and in grading kernels.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

TABLES = Path(__file__).resolve().parent  # <lesson>.json, beside this file


@functools.cache
def _tables() -> dict[str, dict]:
    return {
        path.stem: json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(TABLES.glob("lesson*.json"))
    }


def equivalents(function: str) -> dict[str, list[str]]:
    """{lesson: the callables equivalent to the graded function called ``function`` there}:
    notebook functions by their name, library functions as ``module.name``."""
    found = {}
    for lesson, table in _tables().items():
        for exercise in table.get("exercises", {}).values():
            if function in exercise.get("functions", []) and exercise.get("equivalents"):
                found[lesson] = list(exercise["equivalents"])
    return found
