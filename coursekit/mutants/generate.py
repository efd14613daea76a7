"""The mutants of one answer cell: each a copy of the cell with one small change, in a fixed order.

Only the learner's part of the cell is changed (between nbgrader's ``### BEGIN SOLUTION`` and
``### END SOLUTION``: the signature and docstring are given), and not what no test is meant to
read: the text of an error message or an assertion (a raise or an assert is dropped as a whole
instead), what is printed or shown on a progress bar, decorators and annotations. Two changes
that give the same program (compared as Python's AST) are one mutant, and one that gives the
answer back is none.

A mutant is named by its cell and the lines it changes, before and after (stripped of their
indentation), never by a line number or a counter: the name of an equivalent mutant in
``mutants.yml`` holds while the rest of the lesson, and of the cell, is edited.
"""

from __future__ import annotations

import ast
import difflib
import io
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import ExpressionContext, ExpressionContextProvider, PositionProvider
from mutmut.mutation.file_mutation import deep_replace

from coursekit.mutants.operators import droppable, mixed_up, replacements

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
# Calls whose arguments no test reads, or that mutmut itself leaves alone (len, isinstance).
# A progress bar and what it shows are for the learner's eyes: no test reads them.
QUIET_CALLS = {
    "print",
    "len",
    "isinstance",
    "warn",
    "format",
    "tqdm",
    "set_postfix",
    "set_description",
}
# Nodes whose inside is never mutated (see the module's docstring).
QUIET_NODES = (cst.FormattedString, cst.Decorator, cst.Annotation, cst.Raise, cst.Assert)
DROPPED, MIXED = "statement dropped", "name mixed up"


@dataclass(frozen=True)
class Mutant:
    cell: str  # grade_id of the answer cell
    operator: str  # what changed it (coursekit.mutants.operators.OPERATORS, or DROPPED)
    line: int  # the first changed line, counted from 1 in the cell
    before: str  # the changed lines as the answer has them (stripped, one per line)
    after: str  # the same lines in the mutant
    source: str  # the whole mutated cell

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.cell, self.before, self.after)


def solution_lines(source: str) -> set[int]:
    """The lines (from 1) between the solution markers; every line when there are none."""
    lines = source.splitlines()
    inside, found, marked = False, set(), False
    for number, line in enumerate(lines, start=1):
        if BEGIN in line:
            inside, marked = True, True
        elif END in line:
            inside = False
        elif inside:
            found.add(number)
    return found if marked else set(range(1, len(lines) + 1))


def _quiet(node: cst.CSTNode) -> bool:
    if isinstance(node, QUIET_NODES):
        return True
    if isinstance(node, cst.Call):
        func = node.func
        name = func.value if isinstance(func, cst.Name) else getattr(func, "attr", None)
        return getattr(name, "value", name) in QUIET_CALLS
    return False


def _quiet_call(statement: cst.BaseSmallStatement) -> bool:
    """A statement that only calls a quiet function (``print(...)``, ``bar.set_postfix(...)``)."""
    return isinstance(statement, cst.Expr) and _quiet(statement.value)


def _dropped(line: cst.SimpleStatementLine) -> Iterator[cst.SimpleStatementLine]:
    for i, statement in enumerate(line.body):
        if droppable(statement) and not _quiet_call(statement):
            body = [*line.body[:i], cst.Pass(), *line.body[i + 1 :]]
            yield line.with_changes(body=body)


def _changes(
    module: cst.Module, region: set[int]
) -> Iterator[tuple[str, cst.CSTNode, cst.CSTNode]]:
    """(operator, node, replacement) for every change inside ``region``, in source order."""
    wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    read = _read_names(wrapper)
    present = {n.value for n in read} | {
        n.value for n in positions if isinstance(n, (cst.Name, cst.SimpleString))
    }

    def inside(node) -> bool:
        position = positions.get(node)
        return position is not None and {position.start.line, position.end.line} <= region

    def visit(node: cst.CSTNode) -> Iterator[tuple[str, cst.CSTNode, cst.CSTNode]]:
        if isinstance(node, cst.SimpleStatementLine) and inside(node):
            for new in _dropped(node):
                yield DROPPED, node, new
        if _quiet(node):
            return
        if inside(node):
            for name, new in replacements(node):
                yield name, node, new
            if node in read or isinstance(node, cst.SimpleString):
                for new in mixed_up(node, present):
                    yield MIXED, node, new
        for child in node.children:
            yield from visit(child)

    yield from visit(module)


def _read_names(wrapper: cst.MetadataWrapper) -> set[cst.Name]:
    """The names the code reads: not those it binds, nor a keyword argument's name."""
    context = wrapper.resolve(ExpressionContextProvider)
    keywords = {
        arg.keyword for arg in _walk(wrapper.module) if isinstance(arg, cst.Arg) and arg.keyword
    }
    return {
        node
        for node, how in context.items()
        if isinstance(node, cst.Name) and how == ExpressionContext.LOAD and node not in keywords
    }


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in node.children:
        yield from _walk(child)


def _statements(source: str) -> list[tuple[int, int]]:
    """The lines of each logical line of ``source`` (a call over three lines is one): [start,
    end) counted from 0. A newline ends one outside brackets only."""
    spans, start, depth = [], 0, 0
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
        elif token.type == tokenize.NEWLINE or (token.type == tokenize.NL and depth == 0):
            spans.append((start, token.end[0]))
            start = token.end[0]
    return spans


def _difference(source: str, mutated: str, spans) -> tuple[int, str, str]:
    """(first changed line, lines before, lines after), the lines stripped: the whole logical
    lines that hold the change, so that two changes on one line of a long call differ."""
    old, new = source.splitlines(), mutated.splitlines()
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    changed = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    i1, i2, j1, j2 = changed[0][1], changed[-1][2], changed[0][3], changed[-1][4]
    touched = [(a, b) for a, b in spans if a < max(i2, i1 + 1) and b > i1]
    if touched:  # widen both sides by the same unchanged lines
        above, below = i1 - touched[0][0], max(0, touched[-1][1] - i2)
        i1, i2, j1, j2 = i1 - above, i2 + below, j1 - above, j2 + below
    before = "\n".join(line.strip() for line in old[i1:i2])
    after = "\n".join(line.strip() for line in new[j1:j2])
    return i1 + 1, before, after


def mutants_of(source: str, cell: str) -> list[Mutant]:
    """The mutants of the answer cell ``cell`` (its grade_id) whose text is ``source``."""
    module = cst.parse_module(source)
    seen = {ast.dump(ast.parse(source))}
    spans = _statements(source)
    found = []
    for operator, node, new in _changes(module, solution_lines(source)):
        mutated = deep_replace(module, node, new).code
        try:
            dump = ast.dump(ast.parse(mutated))
        except SyntaxError:
            continue
        if dump in seen:
            continue
        seen.add(dump)
        line, before, after = _difference(source, mutated, spans)
        found.append(Mutant(cell, operator, line, before, after, mutated))
    return found


def diff(mutant: Mutant) -> Iterable[str]:
    """The mutant's change as ``-``/``+`` lines."""
    yield from (f"- {line}" for line in mutant.before.splitlines())
    yield from (f"+ {line}" for line in mutant.after.splitlines())
