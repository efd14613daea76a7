"""Which names a notebook cell binds, reads or changes at the notebook's top level, from its AST.

A notebook's code cells share one namespace, so what a cell leaves behind is what later cells
see. coursekit.course.skipped asks two questions of a lesson with these: which names a cell
skipped when grading binds or changes, and whether a later cell reads one of them before
binding it again itself. Python scoping is followed where it matters for that question:
a function's body reads the names it does not bind itself (when it is called, later), a
comprehension's variables are its own, a ``for`` loop's target is bound before its body runs.
"""

from __future__ import annotations

import ast
from functools import cache

# Scopes of their own: what they bind stays inside; what they read from outside is read.
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_TRIES = (ast.Try, ast.TryStar)
# Methods that change the object they are called on (containers; PyTorch modules and optimizers).
# PyTorch's in-place operations end in an underscore (``add_``, ``requires_grad_``) and are
# recognised by it.
CHANGING_METHODS = frozenset(
    "append extend insert remove pop popitem clear update setdefault sort reverse add discard "
    "load_state_dict train eval zero_grad step backward register_buffer register_parameter".split()
)


@cache
def _transformer():
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager()


def parse(source: str) -> ast.Module | None:
    """A code cell as Python (IPython's magics and shell escapes as the calls they stand for)."""
    try:
        source = _transformer().transform_cell(source)
    except Exception:  # noqa: BLE001 -- plain Python is still worth parsing
        pass
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def binds(nodes) -> set[str]:
    """Names the statements or expressions ``nodes`` bind in the scope they run in (not inside
    the functions, classes and comprehensions they define)."""
    found: set[str] = set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            found.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
            stack += node.decorator_list  # the body is a scope of its own
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found.add(node.name)
            stack += node.body
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            found.add(node.name)
        elif not isinstance(node, (*_FUNCTIONS, *_COMPREHENSIONS)):
            stack += ast.iter_child_nodes(node)
    return found


def _arguments(args: ast.arguments) -> set[str]:
    every = args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def _scope_reads(node) -> set[str]:
    """What a function, class or comprehension reads from the scope around it."""
    if isinstance(node, _COMPREHENSIONS):
        first, *rest = node.generators
        inner = [g.target for g in node.generators] + [g.iter for g in rest]
        inner += [i for g in node.generators for i in g.ifs]
        inner += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        own = binds(g.target for g in node.generators)
        return reads([first.iter]) | (reads(inner) - own)
    if isinstance(node, ast.ClassDef):
        outside = node.decorator_list + node.bases + [k.value for k in node.keywords]
        return reads(outside) | reads(node.body)  # a class body reads its own names in order
    args = node.args
    outside = [d for d in args.defaults + args.kw_defaults if d is not None]
    outside += getattr(node, "decorator_list", [])
    body = node.body if isinstance(node.body, list) else [node.body]
    declared = {n for s in ast.walk(node) if isinstance(s, ast.Global) for n in s.names}
    own = (_arguments(args) | binds(body)) - declared
    return reads(outside) | (reads(body) - own)


def reads(nodes) -> set[str]:
    """Names ``nodes`` read from the scope they run in, now or when the functions they define
    are called (``del x`` reads x: it fails where x was never bound)."""
    found: set[str] = set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Load, ast.Del)):
            found.add(node.id)
        elif isinstance(node, (*_FUNCTIONS, *_COMPREHENSIONS, ast.ClassDef)):
            found |= _scope_reads(node)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
            stack.append(node.value)
        else:
            stack += ast.iter_child_nodes(node)
    return found


def _root(node) -> ast.Name | None:
    """The name an attribute or item chain starts from: ``model`` in ``model.layers[0].weight``
    (None through a call: ``nn.Linear(2, 2).eval()`` changes a new object, not ``nn``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node if isinstance(node, ast.Name) else None


def imported(tree: ast.Module) -> set[str]:
    """The names a cell's imports bind (modules and what they hold: ``np``, ``softmax``)."""
    return binds(n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)))


def changes(tree: ast.Module, modules: frozenset[str] = frozenset()) -> dict[str, str]:
    """{name: how}: the objects a cell changes in place through a name it did not bind
    (``model.weight = ...``, ``runs[k] = ...``, ``x += ...`` on an item, ``del x[0]``,
    ``model.train()``, ``x.add_(1)``). A method of ``modules`` is a function, not a change:
    ``np.sort(x)`` returns a new array. Objects changed by a function they are passed to are not
    seen."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func.attr
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id in modules:
                continue
            if method in CHANGING_METHODS or (method.endswith("_") and not method.startswith("_")):
                targets = [node.func]
        for target in targets:
            root = _root(target) if isinstance(target, (ast.Attribute, ast.Subscript)) else None
            if root is not None:
                found.setdefault(root.id, ast.unparse(node).splitlines()[0][:80])
    return found


def read_before_bound(statements, names: set[str]) -> list[tuple[str, int]]:
    """(name, line) for each of ``names`` that ``statements`` (a cell's, in order) read before
    they bind it again themselves."""
    found: list[tuple[str, int]] = []
    live = set(names)

    def check(nodes) -> None:
        for name in sorted(reads(nodes) & live):
            line = next(
                (n.lineno for x in nodes for n in ast.walk(x) if getattr(n, "id", None) == name),
                0,
            )
            found.append((name, line))
            live.discard(name)  # once is enough to say

    def walk(block) -> None:
        for stmt in block:
            if isinstance(stmt, (ast.For, ast.AsyncFor)):
                check([stmt.iter])
                live.difference_update(binds([stmt.target]))
                walk(stmt.body + stmt.orelse)
            elif isinstance(stmt, (ast.While, ast.If)):
                check([stmt.test])
                walk(stmt.body + stmt.orelse)
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                for item in stmt.items:
                    check([item.context_expr])
                    live.difference_update(
                        binds([item.optional_vars] if item.optional_vars else [])
                    )
                walk(stmt.body)
            elif isinstance(stmt, _TRIES):
                walk(stmt.body)
                for handler in stmt.handlers:
                    check([handler.type] if handler.type else [])
                    live.discard(handler.name)
                    walk(handler.body)
                walk(stmt.orelse + stmt.finalbody)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                check([stmt.value, *getattr(stmt, "targets", [getattr(stmt, "target", None)])])
                live.difference_update(binds([stmt]))
            else:
                check([stmt])
                live.difference_update(binds([stmt]))

    walk(list(statements))
    return found
