"""What a mutant changes: mutmut's mutation operators, and the few that attention code needs.

mutmut (3.8) is used as a library: its operators are plain functions from a libcst node to the
nodes that may replace it (``mutmut.mutation.mutators``), which work on any source, a notebook
cell's included; mutmut's own runner (a package on disk, trampolines, pytest) does not fit
cells, so :mod:`coursekit.mutants.execution` runs them. cosmic-ray (8.7) can also mutate a string
of code, but it replaces each binary operator by every other one (eleven mutants for each ``+``,
most of them crashing at once) where mutmut makes the one a learner would write (``+`` -> ``-``,
``<`` -> ``<=``); and neither has ``@``.

Taken from mutmut: binary, unary, boolean and comparison operators swapped; ``not``/``~`` dropped;
``True``/``False`` swapped (``keepdims=True``); ``is``/``in`` negated; each call argument dropped
or made ``None`` (``dim=-1``, ``dtype=...``, ``keepdim=True``); ``x += y`` made ``x = y``; a
lambda's body made ``None``; a conditional expression forced down each branch. Left out: its
string operators (error messages, which the tests rarely read, and einsum specs, whose
upper-cased form means the same: an equivalent mutant each), ``dict(...)`` keywords, string
methods, and ``x = ...`` made ``x = None`` (a crash at once: dropping the statement, below, is
the mutant that tells).

Our own, where neither library has one (each says why it matters in attention code): constants
-1 as well as +1, and large floats halved and doubled where +-1 would change nothing (a mask
fill of -1e9); ``<`` -> ``>`` (mutmut has only ``<`` -> ``<=``); functions swapped for their
twins (``max``/``min``, ``triu``/``tril``, ``softmax``/``log_softmax``, ``sum``/``mean``,
``zeros``/``ones``); a call unwrapped to its argument (``sqrt`` of the scale, ``masked_fill``,
``transpose``, ``clone``); ``.T`` and ``.mT`` dropped; arguments swapped where their order is a
layout (``reshape``, ``permute``, ``where``, ``matmul``, ``cat``'s list); subscript indices
swapped (``x[:, None]`` -> ``x[None, :]``: a broadcast along the wrong axis); ``a @ b`` ->
``b @ a``; einsum output letters swapped (a transpose); float32 <-> float64; ``"-inf"`` <->
``"inf"``; slices cut on the other side (``x[:k]`` -> ``x[k:]``: the halves of RoPE) or left
open; a bound that is a name, not a number, one off (``x[:t + 1]``, ``range(n - 1)``: a window
one too long, a causal offset one short); a boolean mask inverted (``masked_fill(~m, ...)``,
``key_padding_mask=~m``: the two conventions); a name read in place of its twin (``keys`` for
``queries``, ``params["w_v"]`` for ``params["w_k"]``, ``n_k`` for ``n_q``: tests that hand in
one array as queries and keys cannot see it); and a statement dropped (a mask line, a scale, an
in-place update).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import libcst as cst
from mutmut.mutation import mutators as mutmut

Operator = Callable[[cst.CSTNode], Iterable[cst.CSTNode]]

# A float at least this large is changed by halving and doubling: +-1 would be lost in it.
LARGE = 100.0
COMPARISON_FLIPS = {
    cst.LessThan: cst.GreaterThan,
    cst.GreaterThan: cst.LessThan,
    cst.LessThanEqual: cst.GreaterThanEqual,
    cst.GreaterThanEqual: cst.LessThanEqual,
}
TWINS = {
    "max": "min", "min": "max", "amax": "amin", "amin": "amax", "argmax": "argmin",
    "argmin": "argmax", "maximum": "minimum", "minimum": "maximum", "triu": "tril",
    "tril": "triu", "softmax": "log_softmax", "log_softmax": "softmax", "sum": "mean",
    "mean": "sum", "zeros": "ones", "ones": "zeros", "zeros_like": "ones_like",
    "ones_like": "zeros_like", "logical_and": "logical_or", "logical_or": "logical_and",
    "all": "any", "any": "all", "floor": "ceil", "ceil": "floor", "cumsum": "cumprod",
}  # fmt: skip
# Calls whose result a learner may forget to take: the call is replaced by its first argument
# (a function) or by the object it is called on (a method).
UNWRAP = {
    "sqrt", "rsqrt", "exp", "log", "abs", "tanh", "sigmoid", "relu", "clone", "copy", "detach",
    "transpose", "swapaxes", "permute", "movedim", "moveaxis", "flip", "masked_fill", "t",
}  # fmt: skip
# Calls whose positional arguments are a layout: two neighbours swapped is a different layout.
LAYOUT = {"reshape", "view", "permute", "movedim", "moveaxis", "matmul", "bmm", "expand", "tile",
          "repeat", "unflatten", "broadcast_to"}  # fmt: skip
SEQUENCE_ARGUMENT = {"cat", "concat", "concatenate", "stack", "hstack", "vstack"}
DTYPES = {"float32": "float64", "float64": "float32", "float16": "float32", "bfloat16": "float32",
          "int64": "int32", "int32": "int64", "double": "float", "float": "double"}  # fmt: skip
INFINITIES = {"-inf": "inf", "inf": "-inf", "+inf": "-inf"}


def _name(call: cst.Call) -> str | None:
    """``softmax`` for ``softmax(x)``, ``F.softmax(x)`` and ``x.softmax()``."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def _renamed(call: cst.Call, name: str) -> cst.Call:
    if isinstance(call.func, cst.Name):
        return call.with_changes(func=call.func.with_changes(value=name))
    return call.with_changes(func=call.func.with_changes(attr=cst.Name(name)))


def _positional(call: cst.Call) -> list[int]:
    return [i for i, arg in enumerate(call.args) if arg.keyword is None and not arg.star]


def _swapped(items: list, i: int, j: int) -> list:
    """``items`` with the values at i and j exchanged, each keeping its own comma and spacing."""
    out = list(items)
    out[i] = items[i].with_changes(value=items[j].value)
    out[j] = items[j].with_changes(value=items[i].value)
    return out


def number(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """+1 and -1 (mutmut has +1 only); a large float halved and doubled instead."""
    if not isinstance(node, (cst.Integer, cst.Float)):
        return
    value = node.evaluated_value
    if isinstance(value, float) and abs(value) >= LARGE:
        changed = [value / 2, value * 2]
    else:
        changed = [value + 1, value - 1]
    for new in changed:
        literal = node.with_changes(value=repr(abs(new)))
        # a negative number is written as a unary minus on a literal (-1 is not one token)
        yield literal if new >= 0 else cst.UnaryOperation(operator=cst.Minus(), expression=literal)


def comparison_flip(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """``a < b`` -> ``a > b``: the direction flipped (mutmut: ``<`` -> ``<=`` only)."""
    if isinstance(node, cst.ComparisonTarget) and type(node.operator) in COMPARISON_FLIPS:
        yield node.with_changes(operator=COMPARISON_FLIPS[type(node.operator)]())


def twin_function(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    if isinstance(node, cst.Call) and _name(node) in TWINS:
        yield _renamed(node, TWINS[_name(node)])


def unwrap_call(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    if not isinstance(node, cst.Call) or _name(node) not in UNWRAP:
        return
    positional = _positional(node)
    if isinstance(node.func, cst.Attribute) and not _is_module(node.func.value):
        yield node.func.value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    elif positional:
        value = node.args[positional[0]].value
        yield value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _is_module(node: cst.CSTNode) -> bool:
    """``np``, ``torch``, ``F``, ``math``, ``torch.nn.functional``: what a function is called
    on, not an array whose method it is."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name) and node.value in {"np", "numpy", "torch", "F", "math", "nn"}


def argument_dropped(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """mutmut's: each argument dropped, or made ``None``, but a positional argument made ``None``
    (an array that is ``None`` crashes at once, a mutant that tells nothing)."""
    for new in mutmut.operator_arg_removal(node):
        if len(new.args) == len(node.args) and any(
            old.keyword is None
            and isinstance(arg.value, cst.Name)
            and arg.value.value == "None"
            and not (isinstance(old.value, cst.Name) and old.value.value == "None")
            for old, arg in zip(node.args, new.args)
        ):
            continue
        yield new


def drop_transpose(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    if isinstance(node, cst.Attribute) and node.attr.value in {"T", "mT", "mH", "H"}:
        yield node.value


def swap_arguments(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """Neighbouring positional arguments of a layout call, ``where``'s two branches, einsum's
    operands, and the items of the list handed to ``cat``/``stack``."""
    if not isinstance(node, cst.Call):
        return
    name, positional = _name(node), _positional(node)
    if name in LAYOUT or name == "einsum":
        start = 1 if name == "einsum" else 0
        pairs = zip(positional[start:], positional[start + 1 :])
    elif name == "where" and len(positional) == 3:
        pairs = [(positional[1], positional[2])]
    else:
        pairs = []
    for i, j in pairs:
        yield node.with_changes(args=_swapped(list(node.args), i, j))
    if name in SEQUENCE_ARGUMENT | {"reshape", "view"} and positional:
        sequence = node.args[positional[0]].value
        if isinstance(sequence, (cst.List, cst.Tuple)):
            for i in range(len(sequence.elements) - 1):
                swapped = sequence.with_changes(
                    elements=_swapped(list(sequence.elements), i, i + 1)
                )
                yield node.deep_replace(sequence, swapped)


def swap_indices(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """``x[:, None]`` -> ``x[None, :]``, ``x[..., 0]`` -> ``x[0, ...]``: an index on the wrong
    axis (a mask broadcast along the queries instead of the keys)."""
    if isinstance(node, cst.Subscript) and len(node.slice) > 1:
        for i in range(len(node.slice) - 1):
            a, b = node.slice[i].slice, node.slice[i + 1].slice
            if a.deep_equals(b) or _ellipsis_and_all(a, b):
                continue
            items = list(node.slice)
            items[i], items[i + 1] = (
                items[i].with_changes(slice=b),
                items[i + 1].with_changes(slice=a),
            )
            yield node.with_changes(slice=items)


def _ellipsis_and_all(a: cst.BaseSlice, b: cst.BaseSlice) -> bool:
    """``...`` next to a bare ``:``: either order selects the same (always an equivalent mutant)."""

    def every(s):
        return isinstance(s, cst.Slice) and s.lower is s.upper is s.step is None

    def ellipsis(s):
        return isinstance(s, cst.Index) and isinstance(s.value, cst.Ellipsis)

    return (every(a) and ellipsis(b)) or (ellipsis(a) and every(b))


def swap_matmul(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.MatrixMultiply):
        yield node.with_changes(left=node.right, right=node.left)


def einsum_output(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """Two neighbouring letters of an einsum's output swapped: its result transposed."""
    if not (isinstance(node, cst.Call) and _name(node) == "einsum" and node.args):
        return
    spec = node.args[0].value
    if not isinstance(spec, cst.SimpleString) or "->" not in spec.value:
        return
    inputs, output = spec.value.rsplit("->", 1)
    quote = output[-1]
    letters = output[:-1]
    for i in range(len(letters) - 1):
        if letters[i].isalpha() and letters[i + 1].isalpha() and letters[i] != letters[i + 1]:
            swapped = letters[:i] + letters[i + 1] + letters[i] + letters[i + 2 :]
            yield node.deep_replace(spec, spec.with_changes(value=f"{inputs}->{swapped}{quote}"))


def dtype(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """``torch.float32`` <-> ``torch.float64`` (an attribute only: ``float(x)`` is Python's)."""
    if isinstance(node, cst.Attribute) and node.attr.value in DTYPES:
        if _is_module(node.value):
            yield node.with_changes(attr=cst.Name(DTYPES[node.attr.value]))


def infinity(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """``float("-inf")`` -> ``float("inf")`` (a masked score that wins every softmax)."""
    if isinstance(node, cst.SimpleString) and node.value[1:-1].lower() in INFINITIES:
        text = INFINITIES[node.value[1:-1].lower()]
        yield node.with_changes(value=node.value[0] + text + node.value[-1])


def slice_side(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """``x[:k]`` <-> ``x[k:]``; ``x[i:j]`` -> ``x[:j]`` and ``x[i:]``."""
    if not isinstance(node, cst.Slice):
        return
    lower, upper = node.lower, node.upper
    if lower is not None and upper is None:
        yield node.with_changes(lower=None, upper=lower)
    elif upper is not None and lower is None:
        yield node.with_changes(lower=upper, upper=None)
    elif lower is not None and upper is not None:
        yield node.with_changes(lower=None)
        yield node.with_changes(upper=None)


def _shifted(value: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """``value + 1`` and ``value - 1`` (parenthesised unless it binds tighter than ``+``)."""
    if not isinstance(value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    for operator in (cst.Add(), cst.Subtract()):
        yield cst.BinaryOperation(left=value, operator=operator, right=cst.Integer("1"))


def _literal(value) -> bool:
    """A number, or minus a number: the constant operator changes those already."""
    if isinstance(value, cst.UnaryOperation):
        value = value.expression
    return isinstance(value, (cst.Integer, cst.Float))


def off_by_one(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """A bound that is not a literal, +-1: ``x[:t]`` -> ``x[:t + 1]``, ``range(n)`` ->
    ``range(n - 1)`` (a window one too long, a causal offset one short)."""
    if isinstance(node, cst.Slice):
        for field in ("lower", "upper"):
            value = getattr(node, field)
            if value is not None and not _literal(value):
                for new in _shifted(value):
                    yield node.with_changes(**{field: new})
    elif isinstance(node, cst.Call) and _name(node) == "range" and isinstance(node.func, cst.Name):
        for i in _positional(node)[:2]:  # start and stop; not the step
            if not _literal(node.args[i].value):
                for new in _shifted(node.args[i].value):
                    args = list(node.args)
                    args[i] = args[i].with_changes(value=new)
                    yield node.with_changes(args=args)


def _inverted(value: cst.BaseExpression) -> cst.BaseExpression | None:
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.BitInvert):
        return None  # mutmut's operator drops the ~ already
    if isinstance(value, cst.Name) and value.value == "None":
        return None
    if not isinstance(value, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):
        value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.UnaryOperation(operator=cst.BitInvert(), expression=value)


def mask_inverted(node: cst.CSTNode) -> Iterable[cst.CSTNode]:
    """A boolean mask in the other convention: ``masked_fill(~m, ...)`` for ``masked_fill(m,
    ...)``, ``attn_mask=~m``, ``key_padding_mask=~m`` (True = may attend here, True = ignore in
    ``nn.MultiheadAttention``: the course teaches both)."""
    if not isinstance(node, cst.Call):
        return
    positional = _positional(node)
    for i, arg in enumerate(node.args):
        masks = arg.keyword is not None and arg.keyword.value.endswith("mask")
        filled = _name(node) in {"masked_fill", "masked_fill_"} and positional[:1] == [i]
        if (masks or filled) and (new := _inverted(arg.value)) is not None:
            args = list(node.args)
            args[i] = arg.with_changes(value=new)
            yield node.with_changes(args=args)


# Names, and dictionary keys, that attention code mixes up: one read in place of another of its
# family (a test that hands the same array in as queries and keys cannot tell q from k).
FAMILIES = [
    ("queries", "keys", "values"), ("query", "key", "value"), ("q", "k", "v"), ("Q", "K", "V"),
    ("k_new", "v_new"), ("n_q", "n_k"), ("d_k", "d_v"), ("d_model", "d_ff"), ("start", "stop"),
    ("i", "j"), ("src", "tgt"), ("n_src", "n_tgt"), ("src_mask", "tgt_mask", "memory_mask"),
    ("src_lengths", "tgt_lengths"), ("src_ignore", "tgt_ignore"),
    ('"w_q"', '"w_k"', '"w_v"'), ('"b_q"', '"b_k"', '"b_v"'), ('"k"', '"v"'),
]  # fmt: skip
_FAMILY = {member: family for family in FAMILIES for member in family}


def mixed_up(node: cst.CSTNode, present: set[str]) -> Iterable[cst.CSTNode]:
    """A name read (or a string key) replaced by another of its family that the cell also has:
    ``keys`` for ``queries``, ``params["w_v"]`` for ``params["w_k"]``. Only for names the code
    reads (:mod:`coursekit.mutants.generate` says which), not those it binds."""
    text = node.value if isinstance(node, (cst.Name, cst.SimpleString)) else None
    for other in _FAMILY.get(text, ()):
        if other != text and other in present:
            yield node.with_changes(value=other)


# (name, operator) in the order they are tried at each node: the mutants' order is fixed.
OPERATORS: list[tuple[str, Operator]] = [
    ("operator", mutmut.operator_swap_op),
    ("comparison flipped", comparison_flip),
    ("is/in negated", mutmut.operator_keywords),
    ("not/~ dropped", mutmut.operator_remove_unary_ops),
    ("constant", number),
    ("True/False", mutmut.operator_name),
    ("argument dropped or None", argument_dropped),
    ("augmented assignment", mutmut.operator_augmented_assignment),
    ("lambda", mutmut.operator_lambda),
    ("conditional expression", mutmut.operator_if_exp),
    ("twin function", twin_function),
    ("call unwrapped", unwrap_call),
    ("transpose dropped", drop_transpose),
    ("arguments swapped", swap_arguments),
    ("indices swapped", swap_indices),
    ("matmul operands swapped", swap_matmul),
    ("einsum output transposed", einsum_output),
    ("dtype", dtype),
    ("infinity", infinity),
    ("slice", slice_side),
    ("bound off by one", off_by_one),
    ("mask inverted", mask_inverted),
]
# mutmut's operators take only some node types (its own table says which).
_TYPES = {
    mutmut.operator_keywords: cst.CSTNode,
    mutmut.operator_remove_unary_ops: cst.UnaryOperation,
    mutmut.operator_name: cst.Name,
    argument_dropped: cst.Call,
    mutmut.operator_augmented_assignment: cst.AugAssign,
    mutmut.operator_lambda: cst.Lambda,
    mutmut.operator_if_exp: cst.IfExp,
}


def replacements(node: cst.CSTNode) -> Iterable[tuple[str, cst.CSTNode]]:
    """(operator's name, the node that replaces ``node``) for every operator that applies."""
    for name, operator in OPERATORS:
        if isinstance(node, _TYPES.get(operator, cst.CSTNode)):
            for new in operator(node):
                yield name, new


# A statement dropped is replaced by ``pass``: the cell keeps its lines.
def droppable(statement: cst.BaseSmallStatement) -> bool:
    """A statement whose absence is a mistake a learner makes, not a crash: an update of a name
    it reads (``scores = scores / scale``, ``x = x.masked_fill(...)``), a write into an object
    (``scores[~mask] = -inf``), an augmented assignment, a call for its effect, a raise or an
    assert (a check of the input). Binding a new name is not: the next line would fail."""
    if isinstance(statement, (cst.AugAssign, cst.Raise, cst.Assert)):
        return True
    if isinstance(statement, cst.Expr):
        return isinstance(statement.value, cst.Call)
    if isinstance(statement, (cst.Assign, cst.AnnAssign)) and statement.value is not None:
        targets = (
            [t.target for t in statement.targets]
            if isinstance(statement, cst.Assign)
            else [statement.target]
        )
        if any(isinstance(t, (cst.Subscript, cst.Attribute)) for t in targets):
            return True
        bound = {n.value for t in targets for n in _names(t)}
        return bool(bound & {n.value for n in _names(statement.value)})
    return False


def _names(node: cst.CSTNode) -> Iterable[cst.Name]:
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            yield current
        elif not isinstance(current, cst.Attribute):  # x.mean: "mean" is not a name read
            stack.extend(current.children)
        else:
            stack.append(current.value)
