"""The hints of the visible tests, kept out of sight until a check fails.

A lesson's source gives each check its hint where the check is written (``hint="..."``, or a
message's ``Hint: ...``). The test cells a learner sees carry none: ``make notebooks`` takes them
out of the student edition (coursekit.course.hints) and writes them here, one file per lesson
(``attention_ref/hints/<lesson>.json``), each beside the check it belongs to, written as that
check reads in the test cell. When a check fails in a notebook, :func:`find` looks up the
statement that failed in this table, and attention_ref.testing.display shows the hint under the
message.

A check is found by its statement's text without white space (the test cell is the file the
kernel compiled, so the text is there, in JupyterLab, in Colab and in a grading kernel alike);
where two test cells hold the same statement, by the digest of the test cell's visible part.
Hidden tests keep their hints where they are written: they never show before they fail.

Standard library only, and outside ``attention_ref.testing`` (which imports torch): this runs
inside the learner's kernel, wherever the library does, and the tooling that writes the tables
imports it cheaply.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import linecache
import re
from pathlib import Path

TABLES = Path(__file__).resolve().parent  # <lesson>.json, beside this file
HIDDEN_MARKER = "### BEGIN HIDDEN TESTS"  # nbgrader's marker: what follows is not the learner's
_DEF = re.compile(r"^(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*)", re.M)


def key(text: str) -> str:
    """A statement's text as the table keys it: all white space removed."""
    return "".join(text.split())


def visible_part(source: str) -> str:
    """A test cell's source above its hidden tests (all of it in the student edition)."""
    lines = source.splitlines()
    for number, line in enumerate(lines):
        if line.strip() == HIDDEN_MARKER:
            return "\n".join(lines[:number])
    return "\n".join(lines)


def cell_digest(source: str) -> str:
    """What tells two test cells apart: a digest of their visible part, white space aside."""
    return hashlib.sha256(key(visible_part(source)).encode("utf-8")).hexdigest()[:16]


def _statement(source: str, line: int) -> ast.stmt | None:
    """The innermost simple statement of ``source`` that spans ``line`` (1-based): the check that
    was running when an error was raised at that line."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # a cell with IPython syntax (%magic): no test cell
        return None
    found = None
    for node in ast.walk(tree):
        compound = hasattr(node, "body")  # for, if, with, def: their own lines say little
        if isinstance(node, ast.stmt) and not compound and node.lineno <= line <= node.end_lineno:
            if found is None or node.end_lineno - node.lineno < found.end_lineno - found.lineno:
                found = node
    return found


def defined_names(source: str) -> list[str]:
    """The functions and classes a cell's top level defines (inside if/try/with too), parsed,
    or, for a cell that does not parse, its unindented ``def``/``class`` lines."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return list(dict.fromkeys(_DEF.findall(source)))
    names, todo = [], list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            todo += [n for n in getattr(node, field, None) or [] if isinstance(n, ast.AST)]
    return list(dict.fromkeys(names))


def statement_at(source: str, line: int) -> str | None:
    """The text of the statement running at ``line`` of ``source``."""
    node = _statement(source, line)
    return None if node is None else ast.get_source_segment(source, node)


def statement_lines(source: str, line: int) -> tuple[int, int]:
    """The first and last line of the statement running at ``line`` (``line`` alone if none)."""
    node = _statement(source, line)
    return (line, line) if node is None else (node.lineno, node.end_lineno)


@functools.cache
def _index() -> dict[str, tuple[tuple[str, str], ...]]:
    """{statement key: ((cell digest, hint), ...)} of every lesson's table."""
    index: dict[str, list] = {}
    for path in sorted(TABLES.glob("*.json")):
        table = json.loads(path.read_text(encoding="utf-8"))
        for cell in table.get("test_cells", {}).values():
            for entry in cell.get("hints", []):
                index.setdefault(key(entry["check"]), []).append((cell["cell"], entry["hint"]))
    return {name: tuple(entries) for name, entries in index.items()}


def hint_for(source: str, line: int) -> str | None:
    """The hint of the check at ``line`` of the cell ``source``, if the course has one."""
    statement = statement_at(source, line)
    entries = _index().get(key(statement)) if statement else None
    if not entries:
        return None
    digest = cell_digest(source)
    for cell, hint in entries:
        if cell == digest:
            return hint
    hints = {hint for _, hint in entries}
    return hints.pop() if len(hints) == 1 else None


@functools.cache
def names() -> dict[str, dict[str, dict]]:
    """{lesson: {name: where the lesson binds it}} (coursekit/course/defining.py writes it):
    which cell to run when a name is missing."""
    found = {}
    for path in sorted(TABLES.glob("*.json")):
        table = json.loads(path.read_text(encoding="utf-8"))
        found[table.get("lesson", path.stem)] = table.get("names", {})
    return found


def find(filename: str, line: int) -> str | None:
    """The hint of the check at ``line`` of the file (a notebook's cell) ``filename``."""
    source = "".join(linecache.getlines(filename))
    return hint_for(source, line) if source else None
