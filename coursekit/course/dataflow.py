"""Which test cells of a lesson an answer can reach: the cells whose outcome may change with it.

A notebook's cells share one namespace. A learner's answer (a solution cell) binds names, usually
a function; a later cell that reads one of them may behave differently when the answer does, and
so may what that cell leaves behind: a name it binds from something reached, an object whose
method it hands something reached (the object may keep it), what it hands to the learner's code
or hands over together with something reached (a model handed to the learner's training loop is
trained by it), and whatever it binds under a condition that reads something reached.
:class:`LessonFlow` follows that from an answer's cell to the end of the notebook and returns the
test cells on the way.

It is the question the grading chain asks before it hands in several planted mistakes in one
notebook (autograde_tests/chain/selection.py): mistakes whose answers reach no test cell in common
each lose, side by side, exactly what they lose alone. The analysis errs on the side of reaching:
a name, once reached, stays reached even where a later cell binds it again from something else.
What it cannot see (a random generator drawn from inside a function, two names for one object)
the chain sees instead: a notebook of several mistakes must lose exactly the union of their
points, or its mistakes are graded again one by one.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

from coursekit.course.cells import grade_id, is_test
from coursekit.course.names import binds, changes, imported, parse, read_before_bound, reads
from coursekit.course.skipped import is_skipped

# Python's own names (len, range, dict) are handed to calls, never changed by them.
_BUILTINS = frozenset(dir(builtins))
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_LOOPS = (ast.For, ast.AsyncFor)

Edge = tuple[frozenset, frozenset]  # (names read, names reached when any of them is)


def _root(node) -> str | None:
    """``model`` in ``model.layers[0].weight`` (None through a call or a literal)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _binding(node) -> tuple[list, list]:
    """(targets, what they are made from) of a statement or expression that binds names or
    changes an object through one (``a[i] = ...``, ``x.w += ...``)."""
    if isinstance(node, ast.Assign):
        return node.targets, [node.value]
    if isinstance(node, ast.AugAssign):
        return [node.target], [node.value, node.target]
    if isinstance(node, (ast.AnnAssign, ast.NamedExpr)):
        return [node.target], [node.value] if node.value is not None else []
    if isinstance(node, (*_LOOPS, ast.comprehension)):
        return [node.target], [node.iter]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        items = node.items
        return [i.optional_vars for i in items if i.optional_vars], [i.context_expr for i in items]
    return [], []


def _bound_names(targets) -> set[str]:
    """Names ``targets`` bind, and the roots of the objects they change."""
    changed = {_root(n) for t in targets for n in ast.walk(t) if not isinstance(n, ast.Name)}
    return binds(targets) | (changed - {None})


class _Edges:
    """The flows of one cell, found once: each edge reaches its names when one it reads is."""

    def __init__(self, code: frozenset[str], imported: frozenset[str]):
        self.code, self.imported, self.edges = code, imported, []

    def add(self, sources, sinks) -> None:
        sinks = frozenset(sinks) - _BUILTINS
        if sources and sinks:
            self.edges.append((frozenset(sources), sinks))

    def call(self, call: ast.Call, condition: frozenset) -> None:
        """What a call may change. Its arguments: when the function called is reached (the
        learner's code may change what it is given), when it is a function of the notebook's own
        handed something reached (it may put it into another argument), or when one of them is
        a function or lambda that is reached (the function handed it calls it with the others:
        ``expect_device_agnostic(rolling_cache_attention, ..., cache, 6)``). A library's function
        handed reached data changes nothing: ``expect_close(got, want, rtol=tol)``. The object
        whose method it is, when an argument is reached (it may keep it); not the arguments of a
        reached object's method: ``zen_ids.to(device)`` changes no device. Functions and classes
        are not changed by being handed over (``loss_fn=next_token_loss``)."""
        arguments = [*call.args, *(k.value for k in call.keywords)]
        roots = {r for r in map(_root, arguments) if r is not None} - self.code - self.imported
        if isinstance(call.func, ast.Name):
            callables = [a for a in arguments if isinstance(a, ast.Lambda)]
            callables += [a for a in arguments if isinstance(a, ast.Name) and a.id in self.code]
            self.add({call.func.id} | reads(callables), roots)
            if call.func.id not in self.imported:  # it may do anything, or not, with them
                self.add(reads(arguments) | condition, roots)
        elif (owner := _root(call.func)) is not None:
            self.add(reads(arguments) | condition, {owner})

    def walk(self, node, condition: frozenset) -> None:
        """The edges of ``node``; ``condition``: what the conditions it runs under read."""
        if isinstance(node, _DEFINITIONS):
            self.add(reads([node]) | condition, {node.name})
            # its body runs when called, on its own arguments, but may change the notebook's
            # objects: those it declares global, and those it reads from outside and changes
            body = ast.Module(body=node.body, type_ignores=[])
            declared = {n for s in ast.walk(node) if isinstance(s, ast.Global) for n in s.names}
            outside = (set(changes(body, self.imported)) & reads([node])) | declared
            self.add(reads([node]) | {node.name} | condition, outside)
            return
        if isinstance(node, ast.Lambda):
            return
        targets, made_from = _binding(node)
        if targets:
            self.add(reads(made_from) | condition, _bound_names(targets))
        if isinstance(node, ast.Call):
            self.call(node, condition)
        if isinstance(node, (ast.If, ast.While, *_LOOPS)):
            test = node.iter if isinstance(node, _LOOPS) else node.test
            self.walk(test, condition)
            inner = condition | reads([test])
            for child in node.body + node.orelse:
                self.walk(child, inner)
            return
        for child in ast.iter_child_nodes(node):
            self.walk(child, condition)


def _code_names(trees) -> frozenset[str]:
    """Names the notebook binds only with ``def`` or ``class``: its functions and classes, which a
    call does not change."""
    defined: set[str] = set()
    other: set[str] = set()
    for tree in trees:
        for node in tree.body:
            kind = defined if isinstance(node, _DEFINITIONS) else other
            kind |= binds([node])
    return frozenset(defined - other)


def _edges(tree: ast.Module, code: frozenset[str], imported: frozenset[str]) -> list[Edge]:
    """The edges of a cell: imported names (modules, a library's functions) are never reached."""
    found = _Edges(code, imported)
    for node in tree.body:
        found.walk(node, frozenset())
    return [(sources, sinks - imported) for sources, sinks in found.edges if sinks - imported]


def _spread(reached: set[str], edges: list[Edge]) -> set[str]:
    """``reached`` and everything the edges reach from it (a loop's later statement can reach an
    earlier one's names, so until nothing changes)."""
    reached = set(reached)
    grew = True
    while grew:
        grew = False
        for sources, sinks in edges:
            if not sinks <= reached and not sources.isdisjoint(reached):
                reached |= sinks
                grew = True
    return reached


@dataclass
class _Cell:
    grade_id: str | None
    is_test: bool
    reads_first: frozenset  # names it reads before it binds them itself
    edges: list


class LessonFlow:
    """The flows of a lesson's code cells (``nb``: its source notebook), found once; then
    :meth:`reached_tests` for each of its answers."""

    def __init__(self, nb):
        # The cells grading skips never run where a test's outcome is decided (and nothing graded
        # may read what they bind: coursekit.course.skipped), so no answer reaches a test through
        # them.
        code_cells = [c for c in nb.cells if c.get("cell_type") == "code" and not is_skipped(c)]
        trees = [parse(c.source) for c in code_cells]
        self.imported = frozenset().union(*(imported(t) for t in trees if t is not None))
        self.code = _code_names([t for t in trees if t is not None])
        self.cells = []
        for cell, tree in zip(code_cells, trees):
            if tree is None:  # a cell that does not parse runs nothing
                self.cells.append(_Cell(grade_id(cell), is_test(cell), frozenset(), []))
                continue
            first = {name for name, _ in read_before_bound(tree.body, reads(tree.body))}
            edges = _edges(tree, self.code, self.imported)
            self.cells.append(_Cell(grade_id(cell), is_test(cell), frozenset(first), edges))
        self.sources = {grade_id(c): c.source for c in code_cells if grade_id(c)}

    def reached_tests(self, answer: str, planted: tuple[str, ...] = ()) -> set[str]:
        """The grade_ids of the test cells whose outcome may depend on the solution cell
        ``answer``, as the lesson writes it or as any of the ``planted`` sources (the cell with a
        mistake in it) writes it."""
        if answer not in self.sources:
            raise ValueError(f"the lesson has no code cell {answer!r}")
        position = next(i for i, c in enumerate(self.cells) if c.grade_id == answer)
        reached: set[str] = set()
        for source in (self.sources[answer], *planted):
            tree = parse(source)
            if tree is not None:  # everything the answer binds is the answer
                made = binds(tree.body)
                reached |= _spread(made, _edges(tree, self.code, self.imported))
        tests: set[str] = set()
        for cell in self.cells[position + 1 :]:
            if cell.reads_first.isdisjoint(reached):
                continue
            if cell.is_test:
                tests.add(cell.grade_id)
            reached = _spread(reached, cell.edges)
        return tests
