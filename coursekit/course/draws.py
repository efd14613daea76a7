"""Random numbers a visible test would draw differently in JupyterLab and in grading.

A learner runs every cell of the student edition; the grader skips the demonstration cells
(coursekit.course.skipped) and runs the hidden tests the learner never has. When one of those
draws from a generator before a visible test draws from it too, the test gets other numbers in
grading than the learner saw: the failure the learner saw need not be the one graded, and a test
whose power depends on its draw can catch a mistake in one run and miss it in the other.

:func:`problems` finds such tests statically. The generators it follows are the lesson's named
ones (``rng = np.random.default_rng(0)``, ``g = torch.Generator().manual_seed(1)``), drawn from
through a method (``rng.normal(...)``) or handed to a function (``leaks_future(f, 6, 4, rng)``,
``generator=g``), and torch's and NumPy's global generators drawn from explicitly
(``torch.randn(...)`` without ``generator=``, ``np.random.normal(...)``). Binding the name again
or reseeding (``torch.manual_seed``) in a cell both runs share makes it the same again. A function
that draws when a later cell calls it is not seen.
"""

from __future__ import annotations

import ast

from coursekit.course.cells import BEGIN_HIDDEN, END_HIDDEN, grade_id, is_test
from coursekit.course.names import _root, binds, parse
from coursekit.course.skipped import is_skipped

TORCH, NUMPY = "torch's generator", "np.random's generator"
_TORCH_DRAWS = {"rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial",
                "poisson", "rand_like", "randn_like", "randint_like"}  # fmt: skip
_TORCH_SEEDS = {"manual_seed", "seed", "set_rng_state"}
_NUMPY_KEEPS = {
    "default_rng",
    "Generator",
    "get_state",
    "seed",
    "set_state",
    "PCG64",
    "SeedSequence",
}
_NUMPY_SEEDS = {"seed", "set_state"}
_IN_PLACE_DRAWS = {"uniform_", "normal_", "bernoulli_", "random_", "exponential_", "geometric_",
                   "cauchy_", "log_normal_"}  # fmt: skip
_MAKERS = {
    "default_rng",
    "Generator",
}  # np.random.default_rng, np.random.Generator, torch.Generator


def _dotted(node) -> str:
    """``torch.random.manual_seed`` for that attribute chain ('' through a call or subscript)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def _makes_generator(value) -> bool:
    """``np.random.default_rng(0)``, ``torch.Generator().manual_seed(1)``: a new generator."""
    while isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Attribute) and func.attr in _MAKERS:
            return True
        if isinstance(func, ast.Name) and func.id in _MAKERS:
            return True
        value = func.value if isinstance(func, ast.Attribute) else None
    return False


def generator_names(trees) -> set[str]:
    """Names some cell binds to a new generator (a plain or a tuple assignment)."""
    found: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                pairs = [(target, node.value)]
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs = list(zip(target.elts, node.value.elts))
                found |= {t.id for t, v in pairs if isinstance(t, ast.Name) and _makes_generator(v)}
    return found


def draws(node, generators: set[str]) -> set[str]:
    """The generators ``node`` draws from: a named one, torch's or NumPy's global one."""
    found: set[str] = set()
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        func, keywords = call.func, {k.arg for k in call.keywords}
        root = _root(func) if isinstance(func, ast.Attribute) else None
        if root is not None and root.id in generators:
            found.add(root.id)  # rng.normal(...)
        handed = [*call.args, *(k.value for k in call.keywords)]
        found |= {a.id for a in handed if isinstance(a, ast.Name) and a.id in generators}
        name = _dotted(func)
        if name.startswith("torch.") and name.split(".")[-1] in _TORCH_DRAWS:
            if "generator" not in keywords:
                found.add(TORCH)
        elif isinstance(func, ast.Attribute) and func.attr in _IN_PLACE_DRAWS:
            if "generator" not in keywords:
                found.add(TORCH)
        elif name.startswith(("np.random.", "numpy.random.")) and name.count(".") == 2:
            if name.split(".")[-1] not in _NUMPY_KEEPS:
                found.add(NUMPY)
    return found


def reseeds(node) -> set[str]:
    """The global generators ``node`` seeds again (``torch.manual_seed(0)``, ``np.random.seed``)."""
    found: set[str] = set()
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        name = _dotted(call.func)
        if name.startswith("torch.") and name.split(".")[-1] in _TORCH_SEEDS:
            found.add(TORCH)
        elif (
            name.startswith(("np.random.", "numpy.random.")) and name.split(".")[-1] in _NUMPY_SEEDS
        ):
            found.add(NUMPY)
    return found


def _hidden_lines(source: str) -> set[int]:
    """The 1-based lines of ``source`` between nbgrader's hidden-test markers."""
    lines, inside = set(), False
    for number, line in enumerate(source.splitlines(), 1):
        if BEGIN_HIDDEN in line:
            inside = True
        elif END_HIDDEN in line:
            inside = False
        elif inside:
            lines.add(number)
    return lines


_BODIES = ("body", "orelse", "finalbody", "handlers")


def _units(statements, hidden: set[int]):
    """(node, hidden?) in the order they run: a statement whole, unless hidden tests sit inside
    it (``with np.errstate(...):`` around visible and hidden checks): then its header, and
    what its bodies hold, each on its own."""
    for statement in statements:
        end = statement.end_lineno or statement.lineno
        inside = hidden & set(range(statement.lineno, end + 1))
        if statement.lineno in hidden:
            yield statement, True
        elif not inside or not any(hasattr(statement, field) for field in _BODIES):
            yield statement, False
        else:
            for field, value in ast.iter_fields(statement):
                if field not in _BODIES:
                    nodes = value if isinstance(value, list) else [value]
                    yield from ((n, False) for n in nodes if isinstance(n, ast.AST))
            for field in _BODIES:
                yield from _units(getattr(statement, field, []), hidden)


def problems(nb) -> list[str]:
    """Each visible test in ``nb`` (a lesson's source) that draws from a generator which a cell
    skipped when grading, or the hidden tests of an earlier cell, drew from since both runs last
    made it the same."""
    trees = [parse(c.source) if c.get("cell_type") == "code" else None for c in nb.cells]
    generators = generator_names(t for t in trees if t is not None)
    differs: dict[str, str] = {}  # generator -> which cell made it differ
    found: list[str] = []
    for cell, tree in zip(nb.cells, trees):
        if tree is None:
            continue
        label = grade_id(cell) or "a cell"
        if is_skipped(cell):
            for name in draws(tree, generators) | (binds(tree.body) & generators) | {TORCH}:
                differs[name] = f"the skipped cell {label} drew from it"
            continue
        hidden = _hidden_lines(cell.source) if is_test(cell) else set()
        said: set[str] = set()
        for statement, secret in _units(tree.body, hidden):
            if secret:  # only the grader runs it
                for name in draws(statement, generators) | (binds([statement]) & generators):
                    differs[name] = f"the hidden tests of {label} drew from it"
                continue
            if is_test(cell):
                for name in sorted(draws(statement, generators) & set(differs) - said):
                    said.add(name)  # once a cell is enough to say
                    line = getattr(statement, "lineno", "?")
                    found.append(
                        f"{label} (line {line}) draws from {name}, and "
                        f"{differs[name]}: it draws other numbers in grading than in JupyterLab; "
                        "give the test its own generator"
                    )
            for name in (binds([statement]) & generators) | reseeds(statement):
                differs.pop(name, None)
    return found
