"""One spelling for operations that NumPy, PyTorch and the standard library let a copier write in
several, for the similarity report (coursekit.grading.normalise runs it before fingerprinting).

copydetect sets names aside, so ``np.matmul(a, b)`` reads as ``V.V(V, V)`` and ``a @ b`` as
``V @ V``: a find-and-replace of operators by their functions (``np.add``, ``torch.mul``,
``operator.truediv``, ``x.div(y)``), of array functions by their methods (``np.sum(x, axis)``,
``x.sum(axis)``), of ``dict(a=1)`` for ``{'a': 1}`` or of ``x -= m`` for ``x = x - m`` cuts
every k-gram it touches without changing a number the code computes. :class:`Spellings` writes
each of them one way:

* a call of an operator's function (module-level, ``operator``'s, or a tensor's method with one
  argument) as the operator: ``+ - * / // % ** @``, comparisons, ``& | ^``, unary ``- ~``,
  ``np.square(x)`` as ``x ** 2``;
* an array function of NumPy or PyTorch whose first argument is the array as that array's
  method (``np.sum(x, axis=0)`` -> ``x.sum(axis=0)``);
* ``np.expand_dims(x, -1)``, ``x.unsqueeze(-1)`` as ``x[..., None]`` (and axis 0 as ``x[None]``);
* ``dict(a=1, b=2)`` as ``{'a': 1, 'b': 2}``;
* ``x op= y`` as ``x = x op y``, and ``f(x, out=x)`` as a statement as ``x = f(x)``;
* ``a, b = c, d`` (no target read on the right) as two assignments;
* ``if not c: A else: B`` as ``if c: B else: A``;
* the operands of a chain of ``+``, ``*``, ``&`` or ``|`` in one order.

None of it is executed: it is only what is compared.
"""

from __future__ import annotations

import ast
import copy

_BINARY = {
    ast.Add: ("add",),
    ast.Sub: ("sub", "subtract"),
    ast.Mult: ("mul", "multiply"),
    ast.Div: ("truediv", "true_divide", "divide", "div"),
    ast.FloorDiv: ("floordiv", "floor_divide"),
    ast.Mod: ("mod", "remainder", "fmod"),
    ast.Pow: ("pow", "power", "float_power"),
    ast.MatMult: ("matmul",),
    ast.BitAnd: ("and_", "logical_and", "bitwise_and"),
    ast.BitOr: ("or_", "logical_or", "bitwise_or"),
    ast.BitXor: ("xor", "logical_xor", "bitwise_xor"),
}
_COMPARE = {
    ast.Lt: ("lt", "less"),
    ast.LtE: ("le", "less_equal"),
    ast.Gt: ("gt", "greater"),
    ast.GtE: ("ge", "greater_equal"),
    ast.Eq: ("eq", "equal"),
    ast.NotEq: ("ne", "not_equal"),
}
_UNARY = {ast.USub: ("neg", "negative"), ast.Invert: ("invert", "logical_not", "bitwise_not")}
SYNONYMS = {"asarray": "array", "asanyarray": "array", "as_tensor": "tensor", "amax": "max",
            "amin": "min", "swapdims": "swapaxes", "transpose_": "transpose", "moveaxis": "movedim",
            "clip": "clamp", "absolute": "abs"}  # fmt: skip
BUILTIN_TYPES = {"float64": "float", "double": "float", "int64": "int", "bool_": "bool"}
BINARY = {name: op for op, names in _BINARY.items() for name in names}
COMPARE = {name: op for op, names in _COMPARE.items() for name in names}
UNARY = {name: op for op, names in _UNARY.items() for name in names}
MODULES = {"np", "numpy", "torch", "F", "operator", "math"}  # and what the code imports as them
ARRAY_METHODS = {
    "sum", "mean", "max", "min", "prod", "std", "var", "cumsum", "cumprod", "argmax", "argmin",
    "amax", "amin", "transpose", "reshape", "swapaxes", "swapdims", "squeeze", "flatten",
    "clip", "clamp", "round", "abs", "exp", "log", "sqrt", "sort", "argsort", "topk", "gather",
    "permute", "repeat", "take", "any", "all", "softmax", "log_softmax", "dot", "diagonal",
    "trace", "triu", "tril", "masked_fill", "flip", "roll", "nonzero", "count_nonzero",
    "astype", "type", "to", "view", "expand", "broadcast_to", "movedim", "moveaxis",
}  # fmt: skip
_COMMUTATIVE = (ast.Add, ast.Mult, ast.BitAnd, ast.BitOr)


def modules_of(tree: ast.AST) -> set[str]:
    """The names :data:`MODULES` are known by in ``tree``: theirs and the aliases imported."""
    found = set(MODULES)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                root = (getattr(node, "module", None) or alias.name).split(".")[0]
                if root in {"numpy", "torch", "operator", "math"}:
                    found.add(alias.asname or alias.name.split(".")[0])
    return found


def _operation(call: ast.Call, modules: set[str]) -> ast.expr | None:
    """``call`` as an operator, when it is an operator's function (see the module)."""
    func, args = call.func, call.args
    if (
        call.keywords
        or not isinstance(func, ast.Attribute)
        or any(isinstance(a, ast.Starred) for a in args)
    ):
        return None
    on_module = isinstance(func.value, ast.Name) and func.value.id in modules
    operands = args if on_module else [func.value, *args]  # np.add(a, b) or a.add(b)
    name = func.attr
    if len(operands) == 2 and name in BINARY:
        return ast.BinOp(operands[0], BINARY[name](), operands[1])
    if len(operands) == 2 and name in COMPARE:
        return ast.Compare(operands[0], [COMPARE[name]()], [operands[1]])
    if len(operands) == 1 and name in UNARY:
        return ast.UnaryOp(UNARY[name](), operands[0])
    if len(operands) == 1 and name == "square":
        return ast.BinOp(operands[0], ast.Pow(), ast.Constant(2))
    if len(operands) == 1 and name == "reciprocal":
        return ast.BinOp(ast.Constant(1), ast.Div(), operands[0])
    return None


def _new_axis(call: ast.Call, modules: set[str]) -> ast.expr | None:
    """``np.expand_dims(x, -1)`` / ``x.unsqueeze(-1)`` as ``x[..., None]`` (axis 0: ``x[None]``)."""
    func = call.func
    if call.keywords or not isinstance(func, ast.Attribute):
        return None
    if func.attr == "expand_dims" and isinstance(func.value, ast.Name) and len(call.args) == 2:
        array, axis = call.args
    elif func.attr == "unsqueeze" and len(call.args) == 1:
        array, axis = func.value, call.args[0]
    else:
        return None
    value = _integer(axis)
    if value is None or not -4 <= value <= 3:
        return None
    none, every = ast.Constant(None), ast.Slice()
    if value == 0:
        return ast.Subscript(array, none, ast.Load())
    if value > 0:
        index = [every] * value + [none]
    else:
        index = [ast.Constant(Ellipsis), none] + [every] * (-value - 1)
    return ast.Subscript(array, ast.Tuple(index, ast.Load()), ast.Load())


def _full(part: ast.expr) -> bool:
    return isinstance(part, ast.Slice) and not (part.lower or part.upper or part.step)


def _integer(node: ast.expr | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _integer(node.operand)
        return None if inner is None else -inner
    return None


def _torch_spelling(call: ast.Call) -> ast.expr | None:
    """``x.size(-1)`` as ``x.shape[-1]``, ``x.reshape(-1)`` / ``x.view(-1)`` as ``x.flatten()``,
    ``torch.div(a, b, rounding_mode='floor')`` as ``a // b``."""
    func, args = call.func, call.args
    if not isinstance(func, ast.Attribute):
        return None
    if func.attr == "size" and len(args) == 1 and not call.keywords:
        shape = ast.Attribute(func.value, "shape", ast.Load())
        return ast.Subscript(shape, args[0], ast.Load())
    if func.attr in ("reshape", "view") and len(args) == 1 and _integer(args[0]) == -1:
        return ast.Call(ast.Attribute(func.value, "flatten", ast.Load()), [], [])
    floor = [k for k in call.keywords if k.arg == "rounding_mode"]
    if func.attr == "div" and len(args) == 2 and len(call.keywords) == 1 and floor:
        if isinstance(floor[0].value, ast.Constant) and floor[0].value.value == "floor":
            return ast.BinOp(args[0], ast.FloorDiv(), args[1])
    return None


def _transposed(call: ast.Call) -> ast.expr | None:
    """``w.transpose(0, 1)`` (a matrix's transpose) as ``w.T``."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "transpose" and not call.keywords:
        if [_integer(a) for a in call.args] == [0, 1]:
            return ast.Attribute(func.value, "T", ast.Load())
    return None


def _last_item(call: ast.Call) -> ast.expr | None:
    """``x.squeeze(-1)`` as ``x[..., 0]`` (what it is when the last axis has one entry)."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "squeeze" and len(call.args) == 1:
        if not call.keywords and _integer(call.args[0]) == -1:
            index = ast.Tuple([ast.Constant(Ellipsis), ast.Constant(0)], ast.Load())
            return ast.Subscript(func.value, index, ast.Load())
    return None


def _reduction(call: ast.Call, modules: set[str]) -> ast.expr | None:
    """``np.add.reduce(x, ...)`` as ``x.sum(...)`` (``multiply``: ``prod``, ...)."""
    func = call.func
    names = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}
    if (
        isinstance(func, ast.Attribute)
        and func.attr == "reduce"
        and isinstance(func.value, ast.Attribute)
        and func.value.attr in names
        and call.args
    ):
        method = ast.Attribute(call.args[0], names[func.value.attr], ast.Load())
        return ast.Call(method, call.args[1:], call.keywords)
    return None


def _synonym(call: ast.Call) -> ast.Call:
    """One name for synonyms (``np.asarray``: ``np.array``), the two axes of ``swapaxes`` and of
    a two-axis ``transpose`` in one order."""
    func = call.func
    if isinstance(func, ast.Attribute):
        func.attr = SYNONYMS.get(func.attr, func.attr)
        axes = [_integer(a) for a in call.args[-2:]]
        swap = func.attr == "swapaxes" or (func.attr == "transpose" and len(call.args) >= 2)
        if swap and len(call.args) >= 2 and None not in axes and axes[0] > axes[1]:
            call.args[-2:] = call.args[-2:][::-1]
    return call


def _as_method(call: ast.Call, modules: set[str]) -> ast.expr | None:
    """``np.sum(x, axis=0)`` as ``x.sum(axis=0)`` (functions of :data:`ARRAY_METHODS`)."""
    func = call.func
    if not (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id in modules
        and func.attr in ARRAY_METHODS
        and call.args
        and not isinstance(call.args[0], ast.Starred)
    ):
        return None
    method = ast.Attribute(call.args[0], func.attr, ast.Load())
    return ast.Call(method, call.args[1:], call.keywords)


def _relu(call: ast.Call) -> ast.expr | None:
    """``np.maximum(0, x)``, ``x.clamp(min=0)``, ``np.clip(x, 0, None)``, ``F.relu(x)`` as
    ``relu(x)``."""
    func, args = call.func, call.args
    zero = [a for a in args if isinstance(a, ast.Constant) and a.value == 0]
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name == "relu" and len(args) == 1 and not call.keywords:
        inner = args[0]
    elif name == "relu" and not args and isinstance(func, ast.Attribute):
        inner = func.value
    elif name == "maximum" and len(args) == 2 and len(zero) == 1 and not call.keywords:
        inner = args[1] if args[0] is zero[0] else args[0]
    elif name in ("clamp", "clip") and isinstance(func, ast.Attribute) and not args:
        keys = {k.arg: k.value for k in call.keywords}
        low = keys.get("min")
        if set(keys) != {"min"} or not (isinstance(low, ast.Constant) and low.value == 0):
            return None
        inner = func.value
    else:
        return None
    return ast.Call(ast.Name("relu", ast.Load()), [inner], [])


def _listed(call: ast.Call) -> ast.Call:
    """A list among the arguments written as a tuple (``np.concatenate([a, b])``)."""
    call.args = [ast.Tuple(a.elts, ast.Load()) if isinstance(a, ast.List) else a for a in call.args]
    return call


def _shape_first(call: ast.Call) -> ast.Call:
    """``np.zeros(shape=s)`` as ``np.zeros(s)`` (``ones``, ``empty``, ``full`` too)."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("zeros", "ones", "empty", "full"):
        shape = [k for k in call.keywords if k.arg in ("shape", "size")]
        if shape and not call.args:
            call.args = [shape[0].value]
            call.keywords = [k for k in call.keywords if k is not shape[0]]
    return call


def _dict_literal(call: ast.Call) -> ast.expr | None:
    """``dict(a=1, b=2)`` as ``{'a': 1, 'b': 2}``."""
    if (
        isinstance(call.func, ast.Name)
        and call.func.id == "dict"
        and not call.args
        and call.keywords
        and all(k.arg for k in call.keywords)
    ):
        pairs = sorted((k.arg, k.value) for k in call.keywords)  # as visit_Dict orders them
        return ast.Dict([ast.Constant(k) for k, _ in pairs], [v for _, v in pairs])
    return None


def in_key_order(node: ast.Dict) -> ast.Dict:
    """The entries of a dict literal in the order of their keys, when all are constants."""
    if node.keys and all(isinstance(k, ast.Constant) for k in node.keys):
        pairs = sorted(zip(node.keys, node.values, strict=True), key=lambda p: repr(p[0].value))
        node.keys, node.values = [k for k, _ in pairs], [v for _, v in pairs]
    return node


def _operands(node: ast.expr, op: type) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, op):
        return _operands(node.left, op) + _operands(node.right, op)
    return [node]


class Spellings(ast.NodeTransformer):
    """Rewrites a parsed cell (or a submission's cells, one by one) as the module says."""

    def __init__(self, modules: set[str]):
        self.modules = modules

    def visit_Call(self, node):
        self.generic_visit(node)
        node = _shape_first(_listed(_synonym(node)))
        for rewrite in (_operation, _new_axis, _reduction, _as_method):
            found = rewrite(node, self.modules)
            if isinstance(found, ast.BinOp):
                return self.visit_BinOp(found)
            if found is not None:
                return _synonym(found) if isinstance(found, ast.Call) else found
        for rewrite in (_dict_literal, _last_item, _relu, _transposed, _torch_spelling):
            found = rewrite(node)
            if found is not None:
                return found
        return node

    def visit_Dict(self, node):
        self.generic_visit(node)
        return in_key_order(node)

    def visit_Attribute(self, node):
        """``np.float64`` as ``float``, ``np.int64`` as ``int`` (NumPy's defaults)."""
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id in self.modules:
            if node.attr in BUILTIN_TYPES:
                return ast.Name(BUILTIN_TYPES[node.attr], ast.Load())
        return node

    def visit_Subscript(self, node):
        """``x[..., :, None]`` as ``x[..., None]`` (the ellipsis takes the full slice in),
        ``x[None, :]`` as ``x[None]`` (a full slice at the end, with no ellipsis before it,
        selects everything anyway),
        ``x[0::2]`` as ``x[::2]``."""
        self.generic_visit(node)
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        for part in parts:
            if isinstance(part, ast.Slice) and _integer(part.lower) == 0 and part.lower:
                part.lower = None
        if isinstance(index, ast.Tuple) and index.elts:
            out = []
            for part in parts:
                after_ellipsis = out and isinstance(out[-1], ast.Constant) and out[-1].value is ...
                if not (after_ellipsis and _full(part) and part is not parts[-1]):
                    out.append(part)
            ellipsis = any(isinstance(p, ast.Constant) and p.value is ... for p in out)
            while len(out) > 1 and _full(out[-1]) and not ellipsis:
                out.pop()
            index.elts = out
            if len(out) == 1 and not isinstance(out[0], ast.Slice):
                node.slice = out[0]
        return node

    def visit_BinOp(self, node):
        if not getattr(node, "_respelled", False):
            self.generic_visit(node)
        node._respelled = True
        op = type(node.op)
        if op not in _COMMUTATIVE:
            return node
        parts = sorted(_operands(node, op), key=ast.dump)
        out = parts[0]
        for part in parts[1:]:
            out = ast.BinOp(out, op(), part)
            out._respelled = True
        return out

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        load = copy.deepcopy(node.target)
        for child in ast.walk(load):
            if hasattr(child, "ctx"):
                child.ctx = ast.Load()
        return ast.Assign([node.target], self.visit(ast.BinOp(load, node.op, node.value)))

    def visit_Expr(self, node):
        self.generic_visit(node)
        call = node.value
        if isinstance(call, ast.Call):
            out = [k for k in call.keywords if k.arg == "out"]
            if len(out) == 1 and isinstance(out[0].value, ast.Name):
                call.keywords = [k for k in call.keywords if k.arg != "out"]
                target = ast.Name(out[0].value.id, ast.Store())
                return ast.Assign([target], call)
        return node

    def visit_Assign(self, node):
        self.generic_visit(node)
        if len(node.targets) > 1 and all(isinstance(t, ast.Name) for t in node.targets):
            if isinstance(node.value, ast.Constant):  # lo = hi = 1.0
                return [ast.Assign([t], copy.deepcopy(node.value)) for t in node.targets]
        target, value = node.targets[0], node.value
        if (
            len(node.targets) == 1
            and isinstance(target, ast.Tuple)
            and isinstance(value, ast.Tuple)
            and len(target.elts) == len(value.elts)
            and all(isinstance(t, (ast.Name, ast.Subscript)) for t in target.elts)
        ):
            bound = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            read = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
            if not bound & read:
                return [ast.Assign([t], v) for t, v in zip(target.elts, value.elts, strict=True)]
        return node

    def visit_If(self, node):
        self.generic_visit(node)
        test = node.test
        if node.orelse and isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            node.test, node.body, node.orelse = test.operand, node.orelse, node.body
        return node


def respell(tree: ast.AST, modules: set[str] | None = None) -> ast.AST:
    """``tree`` with every spelling of :class:`Spellings` written one way."""
    return Spellings(modules_of(tree) if modules is None else modules).visit(tree)
