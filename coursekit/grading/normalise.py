"""Code as the similarity report compares it: what a copier can change without changing the
code taken away before it is fingerprinted.

copydetect (coursekit.grading.similarity) already sets names, strings and comments aside. What
it still reads can be changed at no cost: spacing (``a@b`` reads to Pygments as a decorator),
the spelling of a number (``1.`` for ``1.0``), a string statement anywhere, and dead statements
(``_unused = None``, ``if False: ...``, ``assert True``, ``pass``) between the real ones, which
cut every k-gram they fall into. :func:`normalise` parses the cell and writes it back with
``ast.unparse`` (one spacing, one spelling of each literal, no comments), without:

* bare expressions with no effect (a string, a number, a name: docstrings included);
* ``pass`` where a block has other statements, and ``assert`` of a true constant;
* ``if`` / ``while`` on a constant: the branch that runs is kept, the other dropped;
* assignments, inside a function, to names that the function never reads (dead stores).

:func:`normalise_answers` (a whole submission) also writes one spelling for what NumPy, PyTorch
and the standard library let a copier write in several (coursekit.grading.spellings), inlines
the submission's helpers, and puts what can be written in several orders in one.

What does not parse (a broken answer) is compared as written. Normalising changes only what is
compared, never what is graded or shown to anyone.
"""

from __future__ import annotations

import ast
import copy

from coursekit.grading import spellings

_NO_EFFECT = (ast.Constant, ast.Name, ast.Attribute)


def _read_names(function: ast.AST) -> set[str]:
    return {
        n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def _dead_store(statement: ast.stmt, read: set[str] | None) -> bool:
    """An assignment whose every target is a plain name nobody reads (``read``: the names the
    enclosing function reads; None at a cell's top level, where other cells may read them)."""
    if read is None or not isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        return False
    targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
    return all(isinstance(t, ast.Name) and t.id not in read for t in targets)


def _constant(test: ast.expr) -> bool | None:
    """The truth of a constant test (``False``, ``0``, ``None``, ``'x'``), None otherwise."""
    return bool(test.value) if isinstance(test, ast.Constant) else None


def _statements(block: list[ast.stmt], read: set[str] | None) -> list[ast.stmt]:
    """``block`` without the statements that do nothing, constant branches resolved."""
    out: list[ast.stmt] = []
    for statement in block:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, _NO_EFFECT):
            continue
        if isinstance(statement, ast.Pass) or _dead_store(statement, read):
            continue
        if isinstance(statement, ast.Assert) and _constant(statement.test):
            continue
        if isinstance(statement, ast.If) and _constant(statement.test) is not None:
            kept = statement.body if _constant(statement.test) else statement.orelse
            out += _statements(kept, read)
            continue
        if isinstance(statement, ast.While) and _constant(statement.test) is False:
            out += _statements(statement.orelse, read)
            continue
        _normalise_blocks(statement, read)
        out.append(statement)
    return out


def _normalise_blocks(node: ast.AST, read: set[str] | None) -> None:
    """Every block of statements directly inside ``node`` (a function starts its own scope)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        read = _read_names(node)
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            setattr(node, name, _statements(block, read) or [ast.Pass()])
    for handler in getattr(node, "handlers", []):
        handler.body = _statements(handler.body, read) or [ast.Pass()]
    for case in getattr(node, "cases", []):
        case.body = _statements(case.body, read) or [ast.Pass()]


def normalise(code: str) -> str:
    """``code`` (one cell) as the similarity report compares it (see the module's docstring)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return code
    tree.body = _statements(tree.body, None)
    try:
        return ast.unparse(tree) + "\n"
    except (ValueError, RecursionError):
        return code


# ---------------------------------------------------------------- a whole submission


def _plain(function: ast.AST) -> bool:
    """A function that can be inlined: positional parameters only, no decorators, no yield, not
    calling itself."""
    if not isinstance(function, ast.FunctionDef) or function.decorator_list:
        return False
    args = function.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.defaults or args.posonlyargs:
        return False
    inner = list(ast.walk(function))
    return not any(
        isinstance(n, (ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal, ast.Lambda))
        or (isinstance(n, ast.Name) and n.id == function.name)
        for n in inner[1:]
    )


class _Substitute(ast.NodeTransformer):
    def __init__(self, values: dict[str, ast.expr]):
        self.values = values

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and node.id in self.values:
            return copy.deepcopy(self.values[node.id])
        return node


def _body_of(function: ast.FunctionDef, args: list[ast.expr]) -> list[ast.stmt]:
    body = copy.deepcopy(function.body)
    values = dict(zip((a.arg for a in function.args.args), args, strict=True))
    return [_Substitute(values).visit(statement) for statement in body]


class _Inline(ast.NodeTransformer):
    """Calls of the submission's own helpers replaced by what they do: a helper that returns one
    expression, anywhere; a helper of statements, where its call is a statement (its result
    unused) or what is returned, and it returns only at its end."""

    def __init__(self, helpers: dict[str, ast.FunctionDef]):
        self.helpers, self.used = helpers, set()

    def _helper(self, call) -> ast.FunctionDef | None:
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)) or call.keywords:
            return None
        found = self.helpers.get(call.func.id)
        if found is None or len(call.args) != len(found.args.args):
            return None
        if any(isinstance(a, ast.Starred) for a in call.args):
            return None
        return found

    def visit_Call(self, node):
        self.generic_visit(node)
        found = self._helper(node)
        if found is None or len(found.body) != 1 or not isinstance(found.body[0], ast.Return):
            return node
        self.used.add(found.name)
        return _body_of(found, node.args)[0].value or ast.Constant(None)

    def _statements(self, statement: ast.stmt) -> list[ast.stmt] | None:
        call = statement.value if isinstance(statement, (ast.Expr, ast.Return)) else None
        found = self._helper(call)
        if found is None:
            return None
        returns = [n for n in ast.walk(found) if isinstance(n, ast.Return)]
        last = found.body[-1]
        if isinstance(statement, ast.Expr) and returns:
            return None
        if isinstance(statement, ast.Return) and returns != (
            [last] if isinstance(last, ast.Return) else []
        ):
            return None
        self.used.add(found.name)
        return _body_of(found, call.args)

    def generic_visit(self, node):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out = []
                for statement in block:
                    out += self._statements(statement) or [statement]
                setattr(node, name, out)
        return super().generic_visit(node)


def _inline(trees: dict[str, ast.Module], keep: set[str]) -> None:
    """Inline the submission's own plain helpers (of the exercises' functions, ``keep``, only
    those that return one expression) into every cell, and drop the helpers nothing calls any
    more (never an exercise's function)."""
    helpers = {
        node.name: node
        for tree in trees.values()
        for node in tree.body
        if _plain(node) and (node.name not in keep or _one_return(node))
    }
    for _ in range(3):  # helpers of helpers
        inliner = _Inline(helpers)
        for tree in trees.values():
            inliner.visit(tree)
        if not inliner.used:
            break
    called = {n.id for t in trees.values() for n in ast.walk(t) if isinstance(n, ast.Name)}
    for tree in trees.values():
        tree.body = [
            n
            for n in tree.body
            if not (n in helpers.values() and n.name not in called and n.name not in keep)
        ]


def _one_return(function: ast.FunctionDef) -> bool:
    """An exercise's function that only returns an expression (``return weights @ values``):
    its calls in other answers are inlined too (its own answer stays)."""
    return len(function.body) == 1 and isinstance(function.body[0], ast.Return)


class _Canonical(ast.NodeTransformer):
    """One way to write what is written in several: ``while`` over a counter as ``for ... in
    range``, a list built by ``append`` in a loop as a comprehension, ``b > a`` as ``a < b``,
    the operands of ``*`` and keyword arguments in one order (sorted by their code), independent
    assignments in one order, variables used once inlined (:func:`_substituted`)."""

    def visit_Compare(self, node):
        self.generic_visit(node)
        flip = {ast.Gt: ast.Lt, ast.GtE: ast.LtE}
        if len(node.ops) == 1 and type(node.ops[0]) in flip:
            node.left, node.comparators = node.comparators[0], [node.left]
            node.ops = [flip[type(node.ops[0])]()]
        return node

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Mult) and ast.dump(node.right) < ast.dump(node.left):
            node.left, node.right = node.right, node.left
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if all(k.arg for k in node.keywords):
            node.keywords = sorted(node.keywords, key=lambda k: k.arg)
        start = node.args[0] if len(node.args) == 2 else None
        if isinstance(node.func, ast.Name) and node.func.id == "range" and start is not None:
            if isinstance(start, ast.Constant) and start.value == 0:
                node.args = node.args[1:]  # range(0, n) is range(n)
        return node

    def __init__(self):
        self.scopes: list[dict[str, tuple[int, int]]] = []  # the enclosing functions' names

    def generic_visit(self, node):
        function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        if function:
            self.scopes.append(_uses(node))
        try:
            super().generic_visit(node)
        finally:
            counts = self.scopes.pop() if function else (self.scopes[-1] if self.scopes else None)
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                block = _in_order(_as_comprehensions(_as_for(_as_all_any(_as_dict(block)))))
                setattr(node, name, _substituted(block, counts) if counts else block)
        return node


def _uses(function: ast.AST) -> dict[str, tuple[int, int]]:
    """{name: (times read, times bound)} in ``function`` (its parameters count as bound)."""
    counts: dict[str, list[int]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Name):
            counts.setdefault(node.id, [0, 0])[isinstance(node.ctx, ast.Store)] += 1
        elif isinstance(node, ast.arg):
            counts.setdefault(node.arg, [0, 0])[1] += 1
    return {name: (read, bound) for name, (read, bound) in counts.items()}


_ONCE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Expr)
_AGAIN = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _substituted(block: list[ast.stmt], counts: dict[str, tuple[int, int]]) -> list[ast.stmt]:
    """A variable bound once, read once, in the very next statement (not in a loop, lambda or
    comprehension there), replaced by what it was given: ``t = a @ b`` / ``return t / c`` as
    ``return a @ b / c``, whichever way a learner (or a copier) split the expression; the same
    for a value read once by the statement that rebinds its name or returns (``x = x - m`` /
    ``x = x.exp()`` as ``x = (x - m).exp()``, the chains of in-place updates). Inside
    functions only (``counts``: the enclosing function's names; at a cell's top level other
    cells may read a name)."""
    out: list[ast.stmt] = []
    for statement in block:
        last = out[-1] if out else None
        if (
            isinstance(last, ast.Assign)
            and len(last.targets) == 1
            and isinstance(name := last.targets[0], ast.Name)
            and (counts.get(name.id) == (1, 1) or _rebinds(statement, name.id))
            and isinstance(statement, _ONCE)
        ):
            again = {
                id(n) for a in ast.walk(statement) if isinstance(a, _AGAIN) for n in ast.walk(a)
            }
            use = [n for n in ast.walk(statement) if isinstance(n, ast.Name) and n.id == name.id
                   and isinstance(n.ctx, ast.Load) and id(n) not in again]  # fmt: skip
            if len(use) == 1:
                statement = _Substitute({name.id: last.value}).visit(statement)
                out.pop()
        out.append(statement)
    return out


def _rebinds(statement: ast.stmt, name: str) -> bool:
    """``statement`` gives ``name`` a new value (``x = x - m`` after ``x = ...``) or returns: the
    value before it is read there and never again, so it may be written in place of its name."""
    if isinstance(statement, ast.Return):
        return True
    return (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and statement.targets[0].id == name
    )


def _as_for(block: list[ast.stmt]) -> list[ast.stmt]:
    """``i = a`` / ``while i < b: ...; i += 1`` as ``for i in range(a, b): ...``."""
    out: list[ast.stmt] = []
    for statement in block:
        start = out[-1] if out else None
        if (
            isinstance(statement, ast.While)
            and isinstance(start, ast.Assign)
            and len(start.targets) == 1
            and isinstance(name := start.targets[0], ast.Name)
            and isinstance(test := statement.test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and test.left.id == name.id
            and isinstance(test.ops[0], ast.Lt)
            and _adds_one(statement.body[-1], name.id)
            and not statement.orelse
        ):
            bounds = [start.value, test.comparators[0]]
            if isinstance(start.value, ast.Constant) and start.value.value == 0:
                bounds = bounds[1:]
            span = ast.Call(ast.Name("range", ast.Load()), bounds, [])
            out[-1] = ast.For(ast.Name(name.id, ast.Store()), span, statement.body[:-1], [])
            continue
        out.append(statement)
    return out


def _adds_one(step: ast.stmt, name: str) -> bool:
    """``name += 1``, or ``name = name + 1`` (coursekit.grading.spellings writes it so)."""
    one = ast.dump(ast.Constant(1))
    if isinstance(step, ast.AugAssign):
        target, op, operands = step.target, step.op, [step.value]
    elif isinstance(step, ast.Assign) and isinstance(step.value, ast.BinOp):
        target, op, operands = step.targets[-1], step.value.op, [step.value.left, step.value.right]
        operands = [o for o in operands if not (isinstance(o, ast.Name) and o.id == name)]
    else:
        return False
    return (
        isinstance(target, ast.Name)
        and target.id == name
        and isinstance(op, ast.Add)
        and [ast.dump(o) for o in operands] == [one]
    )


def _appends_to(loop: ast.stmt, name: str) -> ast.expr | None:
    """The element a ``for`` loop appends to ``name`` (its body one ``name.append(e)``, maybe
    under ``if``s), as a comprehension; None if it is not such a loop."""
    if not isinstance(loop, ast.For) or loop.orelse or len(loop.body) != 1:
        return None
    inner, conditions = loop.body[0], []
    while isinstance(inner, ast.If) and not inner.orelse and len(inner.body) == 1:
        conditions.append(inner.test)
        inner = inner.body[0]
    call = inner.value if isinstance(inner, ast.Expr) else None
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "append"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == name
        and len(call.args) == 1
    ):
        return None
    return ast.ListComp(call.args[0], [ast.comprehension(loop.target, loop.iter, conditions, 0)])


def _as_comprehensions(block: list[ast.stmt]) -> list[ast.stmt]:
    """``x = []`` / ``for ...: x.append(e)`` as ``x = [e for ...]``."""
    out: list[ast.stmt] = []
    for statement in block:
        start = out[-1] if out else None
        if (
            isinstance(start, ast.Assign)
            and len(start.targets) == 1
            and isinstance(start.targets[0], ast.Name)
            and isinstance(start.value, ast.List)
            and not start.value.elts
            and (comprehension := _appends_to(statement, start.targets[0].id)) is not None
        ):
            start.value = comprehension
            continue
        out.append(statement)
    return out


def _as_all_any(block: list[ast.stmt]) -> list[ast.stmt]:
    """``for t in it: if not c: return False`` / ``return True`` as ``return all(c for t in
    it)``, and ``if c: return True`` / ``return False`` as ``return any(...)``."""
    out: list[ast.stmt] = []
    for statement in block:
        loop = out[-1] if out else None
        found = _verdict(loop, statement) if isinstance(loop, ast.For) else None
        if found is not None:
            out[-1] = ast.Return(found)
            continue
        out.append(statement)
    return out


def _verdict(loop: ast.For, after: ast.stmt) -> ast.expr | None:
    """``all(...)`` or ``any(...)`` of the loop :func:`_as_all_any` describes, else None."""
    test = loop.body[0] if len(loop.body) == 1 and not loop.orelse else None
    if not (isinstance(test, ast.If) and not test.orelse and len(test.body) == 1):
        return None
    early, last = test.body[0], after
    if not (isinstance(early, ast.Return) and isinstance(last, ast.Return)):
        return None
    values = [getattr(r.value, "value", None) for r in (early, last)]
    condition, name = test.test, "any"
    if values == [False, True]:
        name = "all"
        negated = isinstance(condition, ast.UnaryOp) and isinstance(condition.op, ast.Not)
        condition = condition.operand if negated else ast.UnaryOp(ast.Not(), condition)
    elif values != [True, False]:
        return None
    each = ast.GeneratorExp(condition, [ast.comprehension(loop.target, loop.iter, [], 0)])
    return ast.Call(ast.Name(name, ast.Load()), [each], [])


def _as_dict(block: list[ast.stmt]) -> list[ast.stmt]:
    """``d = {}`` / ``d['a'] = x`` / ``d['b'] = y`` as ``d = {'a': x, 'b': y}``."""
    out: list[ast.stmt] = []
    for statement in block:
        start = out[-1] if out else None
        if (
            isinstance(start, ast.Assign)
            and len(start.targets) == 1
            and isinstance(name := start.targets[0], ast.Name)
            and isinstance(start.value, ast.Dict)
            and isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(item := statement.targets[0], ast.Subscript)
            and isinstance(item.value, ast.Name)
            and item.value.id == name.id
            and isinstance(item.slice, ast.Constant)
            and name.id not in _names(statement.value)[0]
        ):
            start.value.keys.append(item.slice)
            start.value.values.append(statement.value)
            spellings.in_key_order(start.value)
            continue
        out.append(statement)
    return out


def _names(node: ast.AST) -> tuple[set[str], set[str]]:
    read, bound = set(), set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            (bound if isinstance(child.ctx, ast.Store) else read).add(child.id)
    return read, bound


_SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign)


def _in_order(block: list[ast.stmt]) -> list[ast.stmt]:
    """Each run of assignments in one order that keeps what each reads before it (the first, by
    its code, of those whose names are ready): the same for any order a copier chose."""
    out: list[ast.stmt] = []
    run: list[ast.stmt] = []
    for statement in [*block, None]:
        if isinstance(statement, _SIMPLE):
            run.append(statement)
            continue
        while run:
            names = [_names(s) for s in run]
            ready = [
                i
                for i in range(len(run))
                if not any(
                    names[j][1] & (names[i][0] | names[i][1]) or names[i][1] & names[j][0]
                    for j in range(i)
                )
            ]
            first = min(ready, key=lambda i: ast.dump(run[i]))
            out.append(run.pop(first))
        if statement is not None:
            out.append(statement)
    return out


def normalise_answers(cells: dict[str, str], keep: set[str] = frozenset()) -> dict[str, str]:
    """A submission's answers ({cell: code}) as the similarity report compares them: each cell
    as :func:`normalise` writes it, the submission's own helpers (not the functions named
    ``keep``: the exercises') inlined where they are called, and the ways to write one thing
    written one way (see :class:`_Canonical`). A cell that does not parse is left as written."""
    trees = {}
    for name, code in cells.items():
        try:
            trees[name] = ast.parse(code)
        except (SyntaxError, ValueError):
            continue
    try:
        modules = set().union(*(spellings.modules_of(t) for t in trees.values()))
        for tree in trees.values():
            tree.body = _statements(spellings.respell(tree, modules).body, None)
        for tree in trees.values():
            _Canonical().visit(tree)  # so that more helpers return one expression
        _inline(trees, set(keep))
        for tree in trees.values():
            _Canonical().visit(tree)
            tree.body = _statements(tree.body, None)  # what inlining left dead
        written = {
            name: ast.unparse(ast.fix_missing_locations(t)) + "\n" for name, t in trees.items()
        }
    except (RecursionError, ValueError, TypeError, AttributeError):
        return {name: normalise(code) for name, code in cells.items()}
    return {name: written.get(name, code) for name, code in cells.items()}


def defined(code: str) -> set[str]:
    """The names of the functions and classes ``code`` defines at its top level."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set()
    return {
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
    }
