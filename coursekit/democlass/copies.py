"""Planted copies: a classmate's notebook handed in again, disguised as copiers disguise it.

Each disguise works on the solution cells only, keeps every graded function's name (the tests
call it) and the behaviour, and changes what a person comparing the files by eye would look at:

* ``rename``: every local variable of every function gets another name;
* ``reorder``: the functions of a cell that defines several come in the opposite order;
* ``comments``: every comment is dropped and new ones are written.

``make grade-class`` hands in such copies of some of its students (coursekit.democlass.synthetic)
and reports how many the similarity report (coursekit.grading.similarity) finds.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

import nbformat

from coursekit.course.cells import grade_id, is_solution
from coursekit.course.lessons import ROOT, all_lessons
from coursekit.course.mistakes import read_alternatives
from coursekit.course.reading import source_to_notebook
from coursekit.grading.similarity import similarity_of

DISGUISES = ("rename", "reorder", "comments")


def _locals(tree: ast.AST) -> set[str]:
    """Names bound inside function bodies that are no parameter (a test may pass it by name),
    are bound nowhere at the cell's top level, and never appear as an attribute, a keyword or in
    an f-string (whose names the tokenizer does not show): renaming them cannot change what the
    code does or what other cells see."""
    inside, kept = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for child in ast.walk(node):
                if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                    inside.add(child.id)
        elif isinstance(node, ast.arg):
            kept.add(node.arg)
        elif isinstance(node, ast.Attribute):
            kept.add(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            kept.add(node.arg)
        elif isinstance(node, ast.JoinedStr):
            kept |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    for node in tree.body if isinstance(tree, ast.Module) else []:
        for child in ast.walk(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                kept.add(child.name)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            kept |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return inside - kept


def _edit(code: str, change) -> str:
    """``code`` with each token for which ``change(token)`` gives a string replaced by it, in
    place: the rest of each line, its spacing included, stays as it was."""
    lines = code.splitlines(keepends=True)
    edits = []
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        new = change(tok)
        if new is not None and tok.start[0] == tok.end[0]:
            edits.append((tok.start[0] - 1, tok.start[1], tok.end[1], new))
    for row, begin, end, new in sorted(edits, reverse=True):
        lines[row] = lines[row][:begin] + new + lines[row][end:]
    return "".join(lines)


def rename(code: str) -> str:
    """Every local variable renamed (``scores`` -> ``my_scores_1``), consistently."""
    names = sorted(_locals(ast.parse(code)))
    new = {name: f"my_{name.strip('_')}_{i}" for i, name in enumerate(names, 1)}
    return _edit(code, lambda tok: new.get(tok.string) if tok.type == tokenize.NAME else None)


def reorder(code: str) -> str:
    """The cell's top-level functions in the opposite order (each with its decorators)."""
    tree = ast.parse(code)
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(functions) < 2:
        return code
    lines = code.splitlines()

    def span(node) -> tuple[int, int]:
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        return first - 1, node.end_lineno

    spans = [span(f) for f in functions]
    blocks = ["\n".join(lines[a:b]) for a, b in spans]
    head, tail = "\n".join(lines[: spans[0][0]]), "\n".join(lines[spans[-1][1] :])
    middle = "\n\n\n".join(reversed(blocks))
    return "\n".join(part for part in (head, middle, tail) if part.strip()) + "\n"


def comments(code: str) -> str:
    """Every comment dropped, a new one on top and after each function's signature."""
    bare = _edit(code, lambda tok: "" if tok.type == tokenize.COMMENT else None)
    out = ["# my own solution, worked out step by step"]
    for line in bare.splitlines():
        if not line.strip() and out[-1] == "":
            continue  # a line that held only a comment
        out.append(line.rstrip())
        if line.lstrip().startswith("def ") and line.rstrip().endswith(":"):
            indent = " " * (len(line) - len(line.lstrip()) + 4)
            out.append(f"{indent}# compute the result")
    return "\n".join(out) + "\n"


def disguise(code: str, how=DISGUISES) -> str:
    """``code`` with the disguises ``how`` (all three by default), in that order; code that
    does not parse (a broken answer) is only recommented."""
    for name in how:
        try:
            code = {"rename": rename, "reorder": reorder, "comments": comments}[name](code)
        except (SyntaxError, tokenize.TokenError, IndentationError):
            continue
    return code


def copy_of(notebook: nbformat.NotebookNode, how=DISGUISES) -> nbformat.NotebookNode:
    """A copy of ``notebook`` whose solution cells are disguised."""
    copied = nbformat.from_dict(notebook)
    for cell in copied.cells:
        if is_solution(cell) and cell.cell_type == "code":
            cell.source = disguise(cell.source, how)
    return copied


# ---------------------------------------------------------------- what the report finds


def copy_name(number: int, source: str) -> str:
    return f"s{number:03d}-copy-of-{source}"


def source_of(student: str) -> str | None:
    """The student a planted copy was copied from (None: not a planted copy)."""
    _, found, source = student.partition("-copy-of-")
    return source if found else None


def planted_found(report) -> tuple[int, int]:
    """(planted copies whose pair with their original is flagged, planted copies) in a
    coursekit.grading.similarity report of a synthetic class."""
    flagged = {frozenset((p.first, p.second)) for p in report.flagged}
    planted = [s for s in report.texts if source_of(s)]
    return sum(frozenset((s, source_of(s))) in flagged for s in planted), len(planted)


@dataclass(frozen=True)
class Independent:
    """Two correct answers to one exercise written independently (the solution and an
    alternative, or two alternatives) and how similar the report finds them."""

    lesson: str
    cell: str
    first: str
    second: str
    score: float


def independent_answers(root: Path = ROOT) -> list[Independent]:
    """Every pair of the course's own independently written answers to one exercise: each
    lesson's solution and its alternatives.yml, compared exercise by exercise, the exercise's
    released stub left out, normalised as the class's answers are compared
    (coursekit.grading.similarity.similarity_of)."""
    found = []
    for item in all_lessons(root):
        alternatives = read_alternatives(item.source.parent)
        if not alternatives:
            continue
        solved = {grade_id(c): c.source for c in source_to_notebook(item.source).cells}
        stubs = {grade_id(c): c.source for c in nbformat.read(item.student_notebook, 4).cells}
        for cell in sorted({a.cell for a in alternatives}):
            texts = {"solution": solved[cell]} | {a.name: a.new for a in alternatives
                                                  if a.cell == cell}  # fmt: skip
            report = similarity_of({n: {cell: t} for n, t in texts.items()},
                                   {cell: stubs.get(cell, "")})  # fmt: skip
            found += [
                Independent(item.assignment, cell, p.first, p.second, p.score) for p in report.pairs
            ]
    return found
