"""Which cell of a lesson defines each name: what a kernel tells a learner who skipped it.

A learner who skips a given cell (or runs a test before the exercise's answer) meets a bare
``NameError: name 'delta_rule_matrix_form' is not defined``. The kernel can say more when it knows
which cell of the lesson binds that name: ``make notebooks`` writes this table into the lesson's
hint table (course/hints.py, ``solutions/attention_ref/hints/<lesson>.json``), and
attention_ref.testing.cell_runs reads it when a NameError is shown.

Only what the learner's notebook binds is listed: the names a code cell binds at its top level
(``def``, ``class``, an assignment, an import), test cells left out (their hidden part is not the
learner's), and in an answer cell only what stands outside ``### BEGIN SOLUTION`` ...
``### END SOLUTION`` (the student edition has the rest as a stub).
"""

from __future__ import annotations

import ast
import re

from coursekit.course.cells import is_solution, is_test
from coursekit.course.statements import STATEMENT

_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
_SOLUTION = re.compile(r"^[ \t]*### BEGIN SOLUTION.*?^[ \t]*### END SOLUTION[^\n]*$", re.M | re.S)


def _bound(tree: ast.Module) -> list[str]:
    """The names a module's top level binds, in order (inside if/for/with/try too, not inside a
    function or class)."""
    names = []

    def visit(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.append(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.extend(
                    (a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"
                )
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    names.extend(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    break
                if isinstance(inner, list):
                    visit(inner)

    visit(tree.body)
    return names


def names_bound(cell) -> list[str]:
    """The names a code cell of the lesson binds for the learner, in order, each once."""
    source = cell.source
    if is_solution(cell):
        source = _SOLUTION.sub(lambda m: re.match(r"[ \t]*", m.group(0)).group(0) + "pass", source)
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython syntax (%magic): nothing the table can promise
        return []
    return list(dict.fromkeys(n for n in _bound(tree) if not n.startswith("_")))


def defining_cells(nb) -> dict[str, dict]:
    """``{name: {"section": ..., "exercise": ... or None, "cells": n}}``: for each name the
    lesson's code cells bind, the section (the heading above; None above the first heading after
    the lesson's title) and the exercise (a statement ``**Exercise N (...)**`` above an answer
    cell) of the first cell that binds it, and how many cells bind it."""
    found: dict[str, dict] = {}
    section, exercise, title = None, None, True  # under the lesson's title: section None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            headings = _HEADING.findall(cell.source)
            if headings[title:]:
                section, exercise = _plain(headings[-1]), None
            title = title and not headings
            statements = list(STATEMENT.finditer(cell.source))
            if statements:
                exercise = statements[-1]["label"]
            continue
        if cell.cell_type != "code" or is_test(cell):
            continue
        answer = exercise if is_solution(cell) else None
        for name in names_bound(cell):
            entry = found.setdefault(name, {"section": section, "exercise": answer, "cells": 0})
            entry["cells"] += 1
    return dict(sorted(found.items()))


_TEX = {r"\infty": "∞", r"\times": "×", r"\sqrt": "√", r"\cdot": "·", r"\to": "→"}


def _plain(heading: str) -> str:
    """A heading's text without MyST/markdown markup (backticks, emphasis, links, math)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"\{[a-z]+\}`([^`]*)`", r"\1", text)
    for tex, shown in _TEX.items():
        text = text.replace(tex, shown)
    text = re.sub(r"\\([A-Za-z]+)", r"\1", text)
    for markup in ("`", "**", "$", "{", "}"):
        text = text.replace(markup, "")
    return " ".join(text.split())
