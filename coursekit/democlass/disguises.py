"""Copies disguised as the course's own planted copies never are: a test set for the similarity
report that its own tests did not shape.

coursekit.democlass.copies plants the three disguises copydetect sees through by design (renamed
variables, reordered functions, new comments). A copier does more, and each disguise here is one
an instructor's review found or would expect (book/grading.md, "Similar answers", gives the
rates). Each works on one solution cell's code and leaves what it cannot change as it was:

* ``respelled``: every local renamed, and literals spelled otherwise (``1.0`` -> ``1.``,
  ``0.5`` -> ``.5``, ``1e-6`` -> ``1E-06``);
* ``no_spaces``: no spaces around operators or after commas;
* ``commented``: new comments, and a string statement before every ``return``;
* ``dead_code``: a dead statement after every statement (``_unused = None``, ``if False:
  ...``, ``assert True``, ``_ = len(())``);
* ``reordered``: independent neighbouring statements swapped, and the functions of a cell too;
* ``loops``: list comprehensions written as loops, and loops that append as comprehensions;
* ``helpers``: each check and each assignment of a call moved into a helper of its own, and
  calls of one-line functions of the lesson inlined;
* ``methods``: ``np.sum(x)`` as ``x.sum()`` and the reverse (reductions and reshapes);
* ``temporaries``: a part of each assignment or ``return`` computed into a variable first;
* ``everything``: every disguise above, the structural ones first.

Whole notebooks: :func:`disguised_copies` gives, for a solved notebook, a copy per disguise and
half copies (the first half of the exercises copied, the other half left unanswered, or answered
with the course's own alternative answers, solutions/*/alternatives.yml: a learner's own work).
:func:`honest_notebooks` gives notebooks of independently written correct answers from the same
alternatives: pairs of them must not be flagged.
"""

from __future__ import annotations

import ast
import io
import itertools
import tokenize

import nbformat

from coursekit.course.cells import grade_id, is_solution
from coursekit.democlass.copies import _edit, comments, rename, reorder

# ---------------------------------------------------------------- spelling


def _respell_number(text: str) -> str | None:
    if "e" in text.lower() and not text.lower().startswith("0x"):
        mantissa, _, exponent = text.lower().partition("e")
        sign = "-" if exponent.startswith("-") else "+"
        return f"{mantissa}E{sign}{int(exponent.lstrip('+-')):02d}"
    if text.endswith(".0"):
        return text[:-1]  # 1.0 -> 1.
    if text.startswith("0.") and len(text) > 2:
        return text[1:]  # 0.5 -> .5
    return None


def respelled(code: str) -> str:
    """Locals renamed (coursekit.democlass.copies.rename) and float literals spelled otherwise."""
    code = rename(code)
    return _edit(code, lambda t: _respell_number(t.string) if t.type == tokenize.NUMBER else None)


_WORDY = (tokenize.NAME, tokenize.NUMBER, tokenize.STRING)


def no_spaces(code: str) -> str:
    """Each line's tokens joined without spaces where Python needs none (indentation kept)."""
    lines = code.splitlines(keepends=True)
    out, previous = [], None
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type in (tokenize.NEWLINE, tokenize.NL):
            out.append(tok.string or "\n")
            previous = None
            continue
        if tok.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        if previous is None:  # the first token of a line: its indentation
            row = lines[tok.start[0] - 1]
            out.append(row[: len(row) - len(row.lstrip())])
        elif previous.type in _WORDY and tok.type in _WORDY or tok.type == tokenize.COMMENT:
            out.append(" ")
        elif previous.end[0] != tok.start[0]:  # a bracket continued on the next line
            out.append(" ")
        out.append(tok.string)
        previous = tok
    return "".join(out)


def commented(code: str) -> str:
    """New comments (copies.comments) and a string statement before every ``return``."""
    out = []
    for line in comments(code).splitlines():
        if line.lstrip().startswith("return"):
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f'{indent}"""Return the result computed above."""')
        out.append(line)
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- statements

DEAD = ("_unused = None", "if False:\n    print('never')", "assert True", "_ = len(())")


def _bodies(tree: ast.AST):
    """Every list of statements in function bodies (and the blocks inside them)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                for name in ("body", "orelse", "finalbody"):
                    block = getattr(inner, name, None)
                    if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                        yield block


def dead_code(code: str) -> str:
    """A dead statement after every statement of every function (by line: the rest untouched)."""
    tree = ast.parse(code)
    lines = code.splitlines()
    after: dict[int, str] = {}
    dead = itertools.cycle(DEAD)
    for block in _bodies(tree):
        for statement in block:
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                continue  # a docstring stays first
            indent = " " * statement.col_offset
            text = next(dead).replace("\n", "\n" + indent)
            after.setdefault(statement.end_lineno, indent + text)
    out = []
    for number, line in enumerate(lines, 1):
        out.append(line)
        if number in after:
            out.append(after[number])
    return "\n".join(out) + "\n"


def _names(node: ast.AST) -> tuple[set[str], set[str]]:
    """(names it reads, names it binds)."""
    read, bound = set(), set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            (bound if isinstance(child.ctx, ast.Store) else read).add(child.id)
    return read, bound


def _independent(one: ast.stmt, other: ast.stmt) -> bool:
    simple = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)
    if not (isinstance(one, simple) and isinstance(other, simple)):
        return False
    if isinstance(one, ast.Expr) and isinstance(one.value, ast.Constant):
        return False  # a docstring
    (read1, bound1), (read2, bound2) = _names(one), _names(other)
    return not (bound1 & (read2 | bound2) or bound2 & read1)


def _unparsed(tree: ast.AST) -> str:
    """``tree`` as code (its comments are gone: a copier who rewrites code loses them too)."""
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


_MIRROR = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}


class _Mirror(ast.NodeTransformer):
    """``a * b`` -> ``b * a``, ``a < b`` -> ``b > a``, keyword arguments in reverse order."""

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Mult):
            node.left, node.right = node.right, node.left
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1 and type(node.ops[0]) in _MIRROR:
            node.left, node.comparators = node.comparators[0], [node.left]
            node.ops = [_MIRROR[type(node.ops[0])]()]
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if not any(k.arg is None for k in node.keywords):  # no **kwargs: order is free
            node.keywords = node.keywords[::-1]
        return node


def reordered(code: str) -> str:
    """Neighbouring independent statements swapped, operands of ``*`` and comparisons and
    keyword arguments in the other order, then the cell's functions reversed."""
    tree = ast.parse(code)
    for block in _bodies(tree):
        i = 0
        while i + 1 < len(block):
            if _independent(block[i], block[i + 1]):
                block[i], block[i + 1] = block[i + 1], block[i]
                i += 2
            else:
                i += 1
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.body = [_Mirror().visit(statement) for statement in node.body]
    return reorder(_unparsed(tree))


_COMPREHENSIONS = (ast.ListComp, ast.GeneratorExp)


def _hoistable(node) -> bool:
    return (
        isinstance(node, _COMPREHENSIONS)
        and len(node.generators) == 1
        and not node.generators[0].is_async
    )


def _hoist(statement: ast.stmt, number: int) -> list[ast.stmt] | None:
    """``statement`` with its first list comprehension or generator written as a loop before
    it, into a list named ``_items<number>``; None when it has none (or only inside a lambda)."""
    if isinstance(statement, (ast.FunctionDef, ast.ClassDef, ast.For, ast.While, ast.If)):
        return None  # only simple statements: their blocks are visited on their own
    lambdas = {id(n) for lam in ast.walk(statement) if isinstance(lam, ast.Lambda)
               for n in ast.walk(lam)}  # fmt: skip
    found = next((n for n in ast.walk(statement) if _hoistable(n) and id(n) not in lambdas), None)
    if found is None:
        return None
    name = f"_items{number}"
    generator = found.generators[0]
    append = ast.Expr(ast.Call(ast.Attribute(ast.Name(name, ast.Load()), "append", ast.Load()),
                               [found.elt], []))  # fmt: skip
    for condition in reversed(generator.ifs):
        append = ast.If(condition, [append], [])
    loop = ast.For(generator.target, generator.iter, [append], [])

    class Replace(ast.NodeTransformer):
        def visit(self, node):
            return ast.Name(name, ast.Load()) if node is found else super().visit(node)

    start = ast.Assign([ast.Name(name, ast.Store())], ast.List([], ast.Load()))
    return [start, loop, Replace().visit(statement)]


def _while(loop: ast.For) -> list[ast.stmt] | None:
    """``for i in range(a, b): ...`` as ``i = a`` / ``while i < b: ...; i += 1`` (not with a
    ``continue``, which would skip the step)."""
    if not (
        isinstance(loop.target, ast.Name)
        and isinstance(loop.iter, ast.Call)
        and isinstance(loop.iter.func, ast.Name)
        and loop.iter.func.id == "range"
        and 1 <= len(loop.iter.args) <= 2
        and not loop.iter.keywords
        and not loop.orelse
        and not any(isinstance(n, ast.Continue) for n in ast.walk(loop))
    ):
        return None
    args = loop.iter.args
    low, high = (ast.Constant(0), args[0]) if len(args) == 1 else args
    name = loop.target.id
    test = ast.Compare(ast.Name(name, ast.Load()), [ast.Lt()], [high])
    step = ast.AugAssign(ast.Name(name, ast.Store()), ast.Add(), ast.Constant(1))
    return [ast.Assign([ast.Name(name, ast.Store())], low), ast.While(test, loop.body + [step], [])]


class _Loops(ast.NodeTransformer):
    """Loops that append written as comprehensions; comprehensions (and generators) written as
    loops; ``for`` over a ``range`` as ``while``."""

    def __init__(self):
        self.count = 0

    def _block(self, block: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        i = 0
        while i < len(block):
            statement = block[i]
            merged = self._comprehension(statement, block[i + 1] if i + 1 < len(block) else None)
            if merged is not None:
                out.append(merged)
                i += 2
                continue
            self.count += 1
            hoisted = _hoist(statement, self.count)
            if hoisted is not None:
                start, loop, rest = hoisted
                out += [start, *(_while(loop) or [loop]), rest]
            elif isinstance(statement, ast.For) and _while(statement):
                out += _while(statement)
            else:
                out.append(statement)
            i += 1
        return out

    @staticmethod
    def _comprehension(first, second) -> ast.stmt | None:
        if not (
            isinstance(first, ast.Assign)
            and len(first.targets) == 1
            and isinstance(first.targets[0], ast.Name)
            and isinstance(first.value, ast.List)
            and not first.value.elts
            and isinstance(second, ast.For)
            and not second.orelse
            and len(second.body) == 1
            and isinstance(second.body[0], ast.Expr)
        ):
            return None
        call = second.body[0].value
        name = first.targets[0].id
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "append"
            and isinstance(call.func.value, ast.Name)
            and call.func.value.id == name
            and len(call.args) == 1
        ):
            return None
        comp = ast.ListComp(call.args[0], [ast.comprehension(second.target, second.iter, [], 0)])
        return ast.Assign([ast.Name(name, ast.Store())], comp)

    def generic_visit(self, node):
        super().generic_visit(node)
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                setattr(node, name, self._block(block))
        return node


def loops(code: str) -> str:
    """List comprehensions assigned to a name written as loops, and such loops as comprehensions."""
    tree = ast.parse(code)
    before = ast.dump(tree)
    tree = _Loops().visit(tree)
    return _unparsed(tree) if ast.dump(tree) != before else code


# ---------------------------------------------------------------- helpers


def _extract(function: ast.FunctionDef) -> ast.FunctionDef | None:
    """The second half of ``function``'s body moved into a new helper, which ``function`` calls
    and returns; None when the body is too short or its second half is not plain code."""
    body = function.body[1:] if ast.get_docstring(function) else function.body
    if len(body) < 3:
        return None
    half = len(body) // 2
    first, second = body[:half], body[half:]
    if any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Nonlocal, ast.Global))
           for s in second for n in ast.walk(s)):  # fmt: skip
        return None
    params = [a.arg for a in function.args.posonlyargs + function.args.args]
    params += [a.arg for a in function.args.kwonlyargs]
    known = set(params) | {n for s in first for n in _names(s)[1]}
    needed = sorted({n for s in second for n in _names(s)[0]} & known)
    helper = ast.FunctionDef(
        f"_{function.name}_rest",
        ast.arguments([], [ast.arg(n) for n in needed], None, [], [], None, []),
        second,
        [],
        None,
        type_params=[],
    )
    call = ast.Call(
        ast.Name(helper.name, ast.Load()), [ast.Name(n, ast.Load()) for n in needed], []
    )
    function.body = function.body[: len(function.body) - len(second)] + [ast.Return(call)]
    return helper


class _Inline(ast.NodeTransformer):
    """Calls of the lesson's one-line functions (``def f(a, b): return a @ b``) replaced by the
    expression they return."""

    def __init__(self, functions: dict[str, tuple[list[str], ast.expr]]):
        self.functions = functions

    def visit_Call(self, node):
        self.generic_visit(node)
        found = self.functions.get(node.func.id) if isinstance(node.func, ast.Name) else None
        if found is None or node.keywords or len(node.args) != len(found[0]):
            return node
        params, expression = found
        values = dict(zip(params, node.args, strict=True))

        class Substitute(ast.NodeTransformer):
            def visit_Name(self, name):
                return values.get(name.id, name) if isinstance(name.ctx, ast.Load) else name

        import copy

        return Substitute().visit(copy.deepcopy(expression))


def one_liners(codes) -> dict[str, tuple[list[str], ast.expr]]:
    """{name: (parameters, returned expression)} of the functions in ``codes`` whose body is one
    ``return`` (after its docstring), with no default or keyword-only parameters."""
    found = {}
    for code in codes:
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            body = node.body[1:] if ast.get_docstring(node) else node.body
            plain = not (node.args.defaults or node.args.kwonlyargs or node.args.vararg)
            if plain and len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value:
                found[node.name] = ([a.arg for a in node.args.args], body[0].value)
    return found


def _steps(function: ast.FunctionDef) -> list[ast.FunctionDef]:
    """Each check (``if ...: raise ...``) and each assignment of a call in ``function``'s body
    moved into a small helper of its own (``_check_<f>_<n>``, ``_<f>_step<n>``) that takes the
    function's names it needs: how a learner who "organises" a copied answer splits it up."""
    params = {a.arg for a in function.args.posonlyargs + function.args.args}
    params |= {a.arg for a in function.args.kwonlyargs}
    local = params | {n for s in function.body for n in _names(s)[1]}
    made: list[ast.FunctionDef] = []
    body = []
    for statement in function.body:
        check = (isinstance(statement, ast.If) and len(statement.body) == 1
                 and isinstance(statement.body[0], ast.Raise) and not statement.orelse)  # fmt: skip
        step = (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.value, ast.Call))  # fmt: skip
        if not (check or step):
            body.append(statement)
            continue
        source = statement if check else statement.value
        needed = sorted(_names(source)[0] & local)
        name = (
            f"_check_{function.name}_{len(made)}" if check else f"_{function.name}_step{len(made)}"
        )
        inner = [statement] if check else [ast.Return(statement.value)]
        made.append(ast.FunctionDef(name, ast.arguments([], [ast.arg(n) for n in needed], None,
                                                        [], [], None, []),
                                    inner, [], None, type_params=[]))  # fmt: skip
        call = ast.Call(ast.Name(name, ast.Load()), [ast.Name(n, ast.Load()) for n in needed], [])
        body.append(ast.Expr(call) if check else ast.Assign(statement.targets, call))
    function.body = body
    return made


def helpers(code: str, inline: dict | None = None) -> str:
    """Calls of the lesson's one-line functions ``inline`` (:func:`one_liners`) inlined; then in
    every function each check and each assignment of a call moved into a helper of its own (or,
    where there is none, the second half of a longer body)."""
    tree = ast.parse(code)
    before = ast.dump(tree)
    own = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    tree = _Inline({k: v for k, v in (inline or {}).items() if k not in own}).visit(tree)
    body = []
    for node in tree.body:
        made = []
        if isinstance(node, ast.FunctionDef):
            made = _steps(node) or [e for e in [_extract(node)] if e is not None]
        body += [*made, node]
    tree.body = body
    return _unparsed(tree) if ast.dump(tree) != before else code


# ---------------------------------------------------------------- rewriting expressions

_METHODS = {"sum", "max", "min", "mean", "transpose", "reshape", "swapaxes", "exp", "sqrt"}


class _Methods(ast.NodeTransformer):
    """``np.sum(x, axis=-1)`` <-> ``x.sum(axis=-1)`` (NumPy's and PyTorch's reductions and
    reshapes, spelled the other way; ``np.exp`` and ``np.sqrt`` have no method and stay)."""

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in _METHODS):
            return node
        module = isinstance(func.value, ast.Name) and func.value.id in ("np", "torch")
        if module and node.args and func.attr not in ("exp", "sqrt"):
            method = ast.Attribute(node.args[0], func.attr, ast.Load())
            return ast.Call(method, node.args[1:], node.keywords)
        if not module and func.attr in ("sum", "max", "min", "mean") and not node.args:
            return ast.Call(ast.Attribute(ast.Name("np", ast.Load()), func.attr, ast.Load()),
                            [func.value], node.keywords)  # fmt: skip
        return node


def methods(code: str) -> str:
    """Reductions and reshapes written as functions where they were methods, and the reverse."""
    tree = ast.parse(code)
    before = ast.dump(tree)
    tree = _Methods().visit(tree)
    return _unparsed(tree) if ast.dump(tree) != before else code


class _Temporaries(ast.NodeTransformer):
    """A call or operation inside what a statement assigns or returns, computed first into a
    variable of its own: ``return a @ softmax(s / t)`` -> ``scaled = s / t`` ... ``return a @
    weights``."""

    def __init__(self):
        self.count = 0

    def _split(self, statement: ast.stmt) -> list[ast.stmt]:
        value = getattr(statement, "value", None)
        if not isinstance(statement, (ast.Assign, ast.Return)) or value is None:
            return [statement]
        inner = next((n for n in ast.walk(value) if n is not value
                      and isinstance(n, (ast.Call, ast.BinOp))
                      and not any(isinstance(m, (ast.Lambda, ast.comprehension, ast.Starred))
                                  for m in ast.walk(n))), None)  # fmt: skip
        if inner is None or any(isinstance(n, (ast.ListComp, ast.GeneratorExp, ast.Lambda))
                                for n in ast.walk(value)):  # fmt: skip
            return [statement]
        self.count += 1
        name = f"part{self.count}"

        class Replace(ast.NodeTransformer):
            def visit(self, node):
                return ast.Name(name, ast.Load()) if node is inner else super().visit(node)

        first = ast.Assign([ast.Name(name, ast.Store())], inner)
        return [first, Replace().visit(statement)]

    def generic_visit(self, node):
        super().generic_visit(node)
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                setattr(node, field, [s for statement in block for s in self._split(statement)])
        return node


def temporaries(code: str) -> str:
    """In every function, one call or operation of each assignment and ``return`` computed into
    a variable first."""
    tree = ast.parse(code)
    before = ast.dump(tree)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _Temporaries().visit(node)
    return _unparsed(tree) if ast.dump(tree) != before else code


# ---------------------------------------------------------------- whole notebooks

SPELLING = {
    "respelled": respelled,
    "no_spaces": no_spaces,
    "commented": commented,
    "dead_code": dead_code,
}
STRUCTURE = {
    "reordered": reordered,
    "loops": loops,
    "helpers": helpers,
    "methods": methods,
    "temporaries": temporaries,
}
DISGUISES = (*SPELLING, *STRUCTURE, "everything")


def disguise(code: str, how: str, inline: dict | None = None) -> str:
    """``code`` (one solution cell) with the disguise ``how``; what cannot be parsed, or where a
    disguise fails, is left as it was."""
    steps = [*STRUCTURE, "respelled", "no_spaces", "dead_code", "commented"]
    for name in steps if how == "everything" else [how]:
        change = {**SPELLING, **STRUCTURE}[name]
        try:
            code = change(code, inline) if name == "helpers" else change(code)
        except (SyntaxError, tokenize.TokenError, IndentationError, ValueError):
            continue
    return code


def _solutions(notebook) -> dict[str, str]:
    return {
        grade_id(c): c.source for c in notebook.cells if is_solution(c) and c.cell_type == "code"
    }


def disguised_copies(
    solved: nbformat.NotebookNode, released: nbformat.NotebookNode, alternatives=()
) -> dict[str, dict[str, str]]:
    """{disguise: {exercise: code}}: copies of the ``solved`` notebook's answers, one per
    disguise of :data:`DISGUISES` that changed anything, and the half copies: ``half-blank``
    (the first half of the exercises copied, the rest left as released), ``half-alternative``
    (the rest answered with the course's ``alternatives``, else left as released: another
    learner's own work). Every copy answers at least two exercises as the original."""
    answers, stubs = _solutions(solved), _solutions(released)
    inline = one_liners(answers.values())
    copies = {}
    for how in DISGUISES:
        copy = {gid: disguise(code, how, inline) for gid, code in answers.items()}
        if copy != answers:
            copies[how] = copy
    ids = list(answers)
    first = ids[: max(2, (len(ids) + 1) // 2)]
    other = {a.cell: a.new for a in alternatives}
    if len(ids) >= 4:
        copies["half-blank"] = {g: answers[g] if g in first else stubs[g] for g in ids}
        copies["half-alternative"] = {
            g: answers[g] if g in first else other.get(g, stubs[g]) for g in ids
        }
    return copies


def honest_notebooks(
    solved: nbformat.NotebookNode, released: nbformat.NotebookNode, alternatives=()
) -> dict[str, dict[str, str]]:
    """{name: {exercise: code}}: notebooks of independently written correct answers, the
    exercises with alternatives answered (``solution``: the course's; ``alternative-N``: each
    exercise's N-th alternative, where it has one), the others left as released."""
    answers, stubs = _solutions(solved), _solutions(released)
    by_cell: dict[str, list[str]] = {}
    for alternative in alternatives:
        by_cell.setdefault(alternative.cell, []).append(alternative.new)
    if not by_cell:
        return {}
    found = {"solution": {g: answers[g] if g in by_cell else stubs[g] for g in answers}}
    for n in range(max(len(v) for v in by_cell.values())):
        found[f"alternative-{n + 1}"] = {
            g: by_cell[g][n] if len(by_cell.get(g, [])) > n else stubs[g] for g in answers
        }
    return found
