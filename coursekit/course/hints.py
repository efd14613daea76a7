"""Keep the visible tests' hints out of sight until their check fails.

A lesson's source writes each check with its hint, where an author reads them together:
``expect_dtype(m, bool, "causal_mask(3) is a boolean mask", hint="...")``, or an assertion's
message that ends ``"... Hint: ..."``. Shown in the test cell, right under the exercise, such a
hint gives the answer away before the learner has tried (and repeats the folded "open it only if
you are stuck" hint). So every notebook made from the source -- the one nbgrader reads
(course/sources.py), hence the student edition and the graded notebooks, and the book's page --
shows the test cells without them, and ``make notebooks`` writes them into the reference
library's table, ``solutions/attention_ref/hints/<lesson>.json``, each under the check it
belongs to as that check reads in the test cell. When a check fails, the notebook's kernel finds
its hint there (attention_ref.hints) and shows it under the message: in JupyterLab, in
Colab, in ``make check`` and in feedback alike.

Only the visible part of a test cell changes, and only string constants: hidden tests keep their
hints (they never show before they fail), and a hint built at run time (``Hint: {hint}``) stays in
view, since no table can hold it; ``python -m coursekit.course.hints`` lists those.
"""

from __future__ import annotations

import ast
import io
import json
import re
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from attention_ref import hints as table
from coursekit.course.cells import BEGIN_HIDDEN, END_HIDDEN, grade_id, is_test
from coursekit.course.defining import defining_cells
from coursekit.course.lessons import ROOT, Lesson, all_lessons
from coursekit.course.reading import source_digest, source_to_notebook

MARK = "Hint:"
_FIELD = re.compile(r"\{(?!\{)")  # a replacement field of an f-string ("{{" is a brace)


@dataclass
class Stripped:
    """A test cell's source without its visible hints: what was moved and what stayed."""

    source: str
    moved: list[tuple[str, str]] = field(default_factory=list)  # (check as it now reads, hint)
    kept: list[str] = field(default_factory=list)  # hints built at run time, left in view


@dataclass
class _Edit:
    start: int  # byte offsets into the cell's source
    end: int
    text: bytes
    statement: ast.stmt
    hint: str


def _offsets(source: bytes) -> list[int]:
    """The byte offset at which each line (1-based: index line - 1) starts."""
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


def _span(node, starts: list[int]) -> tuple[int, int]:
    return starts[node.lineno - 1] + node.col_offset, starts[
        node.end_lineno - 1
    ] + node.end_col_offset


def _keyword_edit(call: ast.Call, keyword: ast.keyword, starts: list[int]) -> tuple[int, int]:
    """The bytes that go with ``hint=...``: up to the next argument, or from the previous one."""
    arguments = sorted([*call.args, *call.keywords], key=lambda n: (n.lineno, n.col_offset))
    at = arguments.index(keyword)
    start, end = _span(keyword, starts)
    if at + 1 < len(arguments):
        return start, _span(arguments[at + 1], starts)[0]
    if at > 0:
        return _span(arguments[at - 1], starts)[1], end
    return start, end


def _literals(segment: str) -> list[tuple[int, int]]:
    """Character spans of the string literals that make up ``segment`` (an implicit
    concatenation); Python 3.12 cuts an f-string into pieces, which are joined here."""
    spans, start = [], None
    lines = [0]
    for line in f"({segment})".splitlines(keepends=True):
        lines.append(lines[-1] + len(line))
    for token in tokenize.generate_tokens(io.StringIO(f"({segment})").readline):
        name = tokenize.tok_name[token.type]
        begin = lines[token.start[0] - 1] + token.start[1] - 1
        finish = lines[token.end[0] - 1] + token.end[1] - 1
        if name == "STRING":
            spans.append((begin, finish))
        elif name == "FSTRING_START":
            start = begin
        elif name == "FSTRING_END":
            spans.append((start, finish))
    return spans


def _parts(literal: str) -> tuple[str, str, str]:
    """(prefix, quote, body) of a string literal's source."""
    prefix = re.match(r"[A-Za-z]*", literal).group(0)
    rest = literal[len(prefix) :]
    quote = rest[:3] if rest[:3] in ('"""', "'''") else rest[0]
    return prefix, quote, rest[len(quote) : len(rest) - len(quote)]


def _value(prefix: str, quote: str, body: str) -> str | None:
    """The text of a literal piece; None if it is an f-string piece with a replacement field."""
    if "f" in prefix.lower():
        if _FIELD.search(body.replace("{{", "")):
            return None
        body, prefix = (
            body.replace("{{", "{").replace("}}", "}"),
            prefix.replace("f", "").replace("F", ""),
        )
    return ast.literal_eval(f"{prefix}{quote}{body}{quote}")


def _message_edit(message: ast.expr, source: bytes, starts: list[int]):
    """(start, end, new text, hint) that cuts ``Hint: ...`` off a message made of string literals,
    or None when it has no hint, or one built at run time (then "kept")."""
    start, end = _span(message, starts)
    segment = source[start:end].decode("utf-8")
    if MARK not in segment or not isinstance(message, (ast.Constant, ast.JoinedStr)):
        return None
    literals = _literals(segment)
    for number, (begin, finish) in enumerate(literals):
        prefix, quote, body = _parts(segment[begin:finish])
        if MARK not in body:
            continue
        at = body.index(MARK)
        pieces = [(prefix, quote, body[at + len(MARK) :])]
        pieces += [_parts(segment[b:f]) for b, f in literals[number + 1 :]]
        values = [_value(*piece) for piece in pieces]
        if any(value is None for value in values):
            return "kept"
        kept = body[:at].rstrip(" ")
        kept = kept[:-2].rstrip(" ") if kept.endswith("\\n") else kept
        if kept or not number:
            new = segment[:begin] + f"{prefix}{quote}{kept}{quote}"
        else:  # the hint was a literal of its own: drop it, not leave "" behind
            new = segment[: literals[number - 1][1]]
        return start, end, new.encode("utf-8"), " ".join("".join(values).split())
    return None


def _hint_edits(tree: ast.Module, source: bytes, hidden: set[int]):
    """The edits that take each visible hint out, and the hints that must stay."""
    starts, edits, kept = _offsets(source), [], []
    statements = [s for s in ast.walk(tree) if isinstance(s, ast.stmt) and not hasattr(s, "body")]
    for statement in statements:
        if statement.lineno in hidden:
            continue
        for node in ast.walk(statement):
            found = None
            if isinstance(node, ast.Call):
                for keyword in node.keywords:
                    value = keyword.value
                    if keyword.arg == "hint" and isinstance(value, ast.Constant):
                        if isinstance(value.value, str):
                            a, b = _keyword_edit(node, keyword, starts)
                            edits.append(_Edit(a, b, b"", statement, value.value))
                    elif keyword.arg == "hint" and not (
                        isinstance(value, ast.Constant) and value.value is None
                    ):
                        kept.append(ast.get_source_segment(source.decode("utf-8"), statement))
            if isinstance(node, ast.Assert) and node.msg is not None:
                found = _message_edit(node.msg, source, starts)
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                found = _message_edit(node.exc.args[0], source, starts)
            if found == "kept":
                kept.append(ast.get_source_segment(source.decode("utf-8"), statement))
            elif found is not None:
                edits.append(_Edit(found[0], found[1], found[2], statement, found[3]))
    return edits, kept


def _hidden_lines(text: str) -> set[int]:
    """The 1-based lines from a BEGIN HIDDEN TESTS marker to its END (or the cell's end)."""
    lines, inside = set(), False
    for number, line in enumerate(text.splitlines(), 1):
        if BEGIN_HIDDEN in line:
            inside = True
        if inside:
            lines.add(number)
        if END_HIDDEN in line:
            inside = False
    return lines


def strip_cell(text: str) -> Stripped:
    """``text`` (a test cell's source) without the hints of its visible checks."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return Stripped(text)
    source = text.encode("utf-8")
    edits, kept = _hint_edits(tree, source, _hidden_lines(text))
    starts = _offsets(source)
    shifts = []  # (old end, bytes removed)
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        source = source[: edit.start] + edit.text + source[edit.end :]
        shifts.append((edit.end, (edit.end - edit.start) - len(edit.text)))

    def moved(offset: int) -> int:
        return offset - sum(removed for end, removed in shifts if end <= offset)

    result = Stripped(source.decode("utf-8"), kept=kept)
    for edit in sorted(edits, key=lambda e: e.start):  # in the order the cell reads
        a, b = _span(edit.statement, starts)
        check = source[moved(a) : moved(b)].decode("utf-8")
        result.moved.append((check, edit.hint))
    return result


def strip_notebook(nb) -> dict:
    """Take the visible hints out of ``nb``'s test cells (in place); return the lesson's table
    of them, ``{grade_id: {"cell": digest, "hints": [{"check", "hint"}]}}``."""
    cells = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or not is_test(cell):
            continue
        stripped = strip_cell(cell.source)
        cell.source = stripped.source
        if stripped.moved:
            merged: dict[str, list[str]] = {}
            for check, hint in stripped.moved:
                merged.setdefault(check, []).append(hint)
            cells[grade_id(cell)] = {
                "cell": table.cell_digest(stripped.source),
                "hints": [{"check": c, "hint": "; ".join(h)} for c, h in merged.items()],
            }
    return cells


def table_path(item: Lesson) -> Path:
    """solutions/attention_ref/hints/<lesson>.json: where the kernel looks a hint up."""
    return item.root / "solutions" / "attention_ref" / "hints" / f"{item.assignment}.json"


def table_text(item: Lesson) -> str:
    """The lesson's hint table as ``make notebooks`` writes it, with the digest of the source it
    was made from (publishing/current.py regenerates a lesson whose table is missing or stale)."""
    notebook = source_to_notebook(item.source)
    data = {
        "lesson": item.assignment,
        "made_by": "make notebooks, from the test cells of "
        f"solutions/{item.assignment}/{item.name}.md (coursekit/course/hints.py): do not edit",
        "source_sha256": source_digest(item.source),
        # which cell binds each name, for a NameError (course/defining.py)
        "names": defining_cells(notebook),
        "test_cells": strip_notebook(notebook),
    }
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def write_table(item: Lesson) -> Path:
    """Write the lesson's table, if it changed."""
    path, text = table_path(item), table_text(item)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


def main(argv: list[str]) -> int:
    """List, lesson by lesson, how many hints move and which stay in view (built at run time)."""
    for item in all_lessons(ROOT):
        moved, kept = 0, []
        for cell in source_to_notebook(item.source).cells:
            if cell.cell_type == "code" and is_test(cell):
                stripped = strip_cell(cell.source)
                moved += len(stripped.moved)
                kept += [f"{grade_id(cell)}: {' '.join(k.split())[:90]}" for k in stripped.kept]
        if argv and item.assignment not in argv:
            continue
        print(f"{item.assignment}: {moved} hints out of sight, {len(kept)} in view")
        for line in kept:
            print(f"  in view (built at run time): {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
