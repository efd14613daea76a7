"""What a test cell was checking when an error other than a failed check was raised in it.

A check that fails names its property ("softmax of shape (2, 9) along axis 0: ..."). A learner's
function that *crashes* on a test's input (NumPy's "matmul: Input operand 1 has a mismatch ...")
named nothing, and in a hidden test the learner cannot read the line either. So the error shown
(attention_ref.testing.display) says what the statement was checking:

* a check (``expect_*(..., what)``) or an ``assert`` with a message: its ``what``, an f-string's
  fields filled in from the cell's variables where they hold plain values (numbers, strings,
  shapes, dtypes: nothing of the learner's runs to show them; a field that would need more reads
  ``...``);
* a plain statement (``_got = attention(_q, _k, _v)``): the first check below it, in the same
  cell, that reads what it bound (or, for a bare call, the names it passed);
* in a hidden test, "a hidden test" is said too, and where nothing names a property, what to
  re-read (the shapes, batch axes, dtypes and values the exercise allows).

Standard library only; the cell's source comes from ``linecache`` (IPython registers each cell).
"""

from __future__ import annotations

import ast
import inspect
import operator

BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
UNKNOWN = "..."  # a field of an f-string that is not shown
HIDDEN_UNNAMED = (
    "an input of a hidden test that the visible ones do not try: re-read which shapes, batch "
    "axes, dtypes and values the exercise allows"
)
_PLAIN = (bool, int, float, complex, str, bytes, type(None))
_ARRAYS = {("numpy", "ndarray"), ("torch", "Tensor")}
_ARRAY_FIELDS = {"shape", "dtype", "ndim"}
_CALLS = {"len": len, "tuple": tuple, "list": list, "repr": repr, "str": str}
_OPERATORS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: lambda a, b: _small(a) * _small(b),
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: lambda a, b: a ** _small(b), ast.USub: operator.neg, ast.Not: operator.not_,
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
}  # fmt: skip


def checked(source: str, line: int, namespace: dict) -> str | None:
    """The note an error raised at ``line`` of the cell ``source`` gets: "while checking: ..."
    (its property), "in a hidden test, while checking: ..." or, for a hidden test that names
    none, "on an input of a hidden test ...". None where there is nothing to say."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # IPython syntax (%magic): no test cell
        return None
    statements = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.stmt) and not hasattr(n, "body")),
        key=lambda n: (n.lineno, n.col_offset),
    )
    here = [s for s in statements if s.lineno <= line <= s.end_lineno]
    if not here:
        return None
    statement = min(here, key=lambda s: s.end_lineno - s.lineno)
    what = _property(statement, namespace)
    if what is None:
        later = [s for s in statements if s.lineno > statement.end_lineno]
        what = _property_below(statement, later, namespace)
    if not _hidden(source, line):
        return None if what is None else f"while checking: {what}"
    return f"in a hidden test, while checking: {what}" if what else f"on {HIDDEN_UNNAMED}"


def _hidden(source: str, line: int) -> bool:
    inside = False
    for number, text in enumerate(source.splitlines(), 1):
        inside = (inside or text.strip() == BEGIN_HIDDEN) and text.strip() != END_HIDDEN
        if number == line:
            return inside
    return False


def _property(statement: ast.stmt, namespace: dict) -> str | None:
    """The ``what`` of the check, or the message of the assert, that ``statement`` is."""
    if isinstance(statement, ast.Assert):
        return _text(statement.msg, namespace) if statement.msg is not None else None
    for node in ast.walk(statement):  # outermost first
        name = getattr(node, "func", None)
        name = getattr(name, "id", None) or getattr(name, "attr", None)
        if isinstance(node, ast.Call) and str(name).startswith("expect_"):
            what = _what_argument(namespace.get(name), node)
            if what is not None:
                return _text(what, namespace)
    return None


def _what_argument(check, call: ast.Call) -> ast.expr | None:
    """The expression passed as the ``what`` of a call of the function ``check``."""
    try:
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        return inspect.signature(check).bind_partial(*call.args, **keywords).arguments.get("what")
    except (TypeError, ValueError):  # not a function here, or a call it cannot take (*args)
        return None


def _property_below(statement: ast.stmt, later: list[ast.stmt], namespace: dict) -> str | None:
    """The property of the first check below ``statement`` that reads what it bound (for a bare
    call: a name it passed), e.g. ``_got = f(_x)`` then ``expect_close(_got, ...)``."""
    names = {
        n.id for t in _targets(statement) for n in ast.walk(t) if isinstance(n, ast.Name)
    }  # fmt: skip
    if not names and isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        arguments = [*statement.value.args, *(k.value for k in statement.value.keywords)]
        names = {n.id for a in arguments for n in ast.walk(a) if isinstance(n, ast.Name)}
    for other in later:
        read = {n.id for n in ast.walk(other) if isinstance(n, ast.Name)}
        if names & read:
            what = _property(other, namespace)
            if what is not None:
                return what
    return None


def _targets(statement: ast.stmt) -> list[ast.expr]:
    if isinstance(statement, ast.Assign):
        return statement.targets
    if isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
        return [statement.target]
    return []


def _text(node: ast.expr, namespace: dict) -> str | None:
    """A literal string, or an f-string with its fields filled in (:data:`UNKNOWN` where a field
    needs more than plain values); None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split("Hint:")[0].strip() or None
    if not isinstance(node, ast.JoinedStr):
        return None
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
        elif isinstance(value, ast.FormattedValue):
            parts.append(_field(value, namespace))
    return "".join(parts).split("Hint:")[0].strip() or None


def _field(node: ast.FormattedValue, namespace: dict) -> str:
    try:
        value = _value(node.value, namespace)
        value = {115: str, 114: repr, 97: ascii}.get(node.conversion, lambda v: v)(value)
        spec = _text(node.format_spec, namespace) if node.format_spec is not None else ""
        return format(value, spec or "")
    except Exception:  # noqa: BLE001 -- anything not plain, or any failure: not shown
        return UNKNOWN


def _value(node: ast.expr, namespace: dict):
    """The value of a field made of plain values only (else ValueError): names holding numbers,
    strings, dtypes or tuples of them, arithmetic, comparisons, ``x.shape``/``x.dtype``/``x.ndim``
    of an array, ``len``/``tuple``/``list`` of those. No code of the learner's runs."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return _plain(namespace[node.id])
    if isinstance(node, ast.Attribute) and node.attr in _ARRAY_FIELDS:
        array = namespace[node.value.id] if isinstance(node.value, ast.Name) else None
        if (type(array).__module__, type(array).__name__) in _ARRAYS:
            return _plain(getattr(array, node.attr))
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_value(e, namespace) for e in node.elts)
    if isinstance(node, ast.Subscript):
        return _plain(_value(node.value, namespace)[_value(node.slice, namespace)])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        if node.func.id in _CALLS and node.func.id not in namespace and len(node.args) == 1:
            return _plain(_CALLS[node.func.id](_value(node.args[0], namespace)))
    return _operation(node, namespace)


def _operation(node: ast.expr, namespace: dict):
    """Arithmetic, a comparison or a condition over plain values (else ValueError)."""
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _value(node.left, namespace), _value(node.right, namespace)
        return _plain(_OPERATORS[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _plain(_OPERATORS[type(node.op)](_value(node.operand, namespace)))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPERATORS:
        left, right = _value(node.left, namespace), _value(node.comparators[0], namespace)
        return _plain(_OPERATORS[type(node.ops[0])](left, right))
    if isinstance(node, ast.IfExp):
        chosen = node.body if _value(node.test, namespace) else node.orelse
        return _value(chosen, namespace)
    raise ValueError("not a plain value")


def _small(value):
    """``value`` unless it is a number or sequence big enough to make showing a field slow."""
    size = len(value) if isinstance(value, (str, bytes, tuple, list)) else abs(value)
    if size > 1_000_000:
        raise ValueError("too big to show")
    return value


def _plain(value, depth: int = 0):
    """``value`` when showing it runs no code of the learner's (else ValueError)."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind in (tuple, list) and depth < 3 and len(value) <= 16:
        return kind(_plain(v, depth + 1) for v in value)
    module = kind.__module__.split(".")[0]
    if module in ("numpy", "torch") and kind.__name__ not in ("ndarray", "Tensor", "Parameter"):
        if kind.__name__ == "Size" or "dtype" in kind.__name__.lower() or kind.__name__ == "device":
            return value
        if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:  # a NumPy scalar
            return value.item()
    raise ValueError("not a plain value")


__all__ = ["BEGIN_HIDDEN", "END_HIDDEN", "HIDDEN_UNNAMED", "checked"]
