"""Which matrix products a call computes, and on what: the method of tiled attention (every
product reads at most one block of keys) and of a KV cache (the projections read the newest
position only), for NumPy arrays (watched by an ndarray subclass, through every array computed
from them) and torch tensors (watched by a TorchFunctionMode)."""

from __future__ import annotations

import numpy as np

from .checks import fail
from .tamper import require_untampered

# the matrix products of NumPy and PyTorch (and of their array methods and operators)
_PRODUCTS = {
    "matmul", "__matmul__", "__rmatmul__", "dot", "vdot", "inner", "einsum", "tensordot",
    "multi_dot", "mm", "bmm", "mv", "addmm", "baddbmm", "addbmm", "linear", "outer",
}  # fmt: skip


class _ProductLog:
    def __init__(self):
        # (name, the operands' shapes, the result's shape, the operands' storages (tensors))
        self.products: list[tuple[str, list[tuple], tuple, list]] = []

    def add(self, name, operands, result):
        shapes = [tuple(x.shape) for x in operands]
        out = tuple(getattr(result, "shape", ()))
        storages = [_storage(x) for x in operands]
        self.products.append((name, shapes, out, storages))


def _storage(x):
    """Where a tensor's numbers live (a view of W shares W's), None for a NumPy array."""
    return x.untyped_storage().data_ptr() if hasattr(x, "untyped_storage") else None


def _arrays(values):
    """The arrays and tensors among ``values``, also inside lists and tuples (einsum's operands)."""
    found = []
    for value in values:
        if isinstance(value, (list, tuple)):
            found += _arrays(value)
        elif hasattr(value, "shape") and hasattr(value, "dtype"):
            found.append(value)
    return found


def _plain(value):
    if isinstance(value, _Watched):
        return value.view(np.ndarray)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


class _Watched(np.ndarray):
    """A NumPy array whose matrix products, and those of every array computed from it, are logged
    with their operands' shapes (``@``, np.matmul, np.einsum, np.dot, np.tensordot, ...)."""

    _log = None

    def __array_finalize__(self, obj):
        self._log = getattr(obj, "_log", None)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        log = next((x._log for x in inputs if isinstance(x, _Watched)), None)
        plain = [_plain(x) for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(_plain(x) for x in kwargs["out"])
        result = getattr(ufunc, method)(*plain, **kwargs)
        if ufunc.__name__ == "matmul" and method == "__call__":
            log.add("matmul", _arrays(plain), result)
        return _watch(result, log)

    def __array_function__(self, func, types, args, kwargs):
        plain_args = _plain(args)
        plain_kwargs = {k: _plain(v) for k, v in kwargs.items()}
        result = func(*plain_args, **plain_kwargs)
        if func.__name__ in _PRODUCTS:
            self._log.add(func.__name__, _arrays(plain_args), result)
        return _watch(result, self._log)


def _watch(result, log):
    if isinstance(result, (list, tuple)):
        return type(result)(_watch(r, log) for r in result)
    if isinstance(result, np.ndarray) and not isinstance(result, _Watched):
        result = result.view(_Watched)
        result._log = log
    return result


def _run_watched(fn, args, kwargs) -> tuple[object, _ProductLog]:
    """``fn(*args, **kwargs)`` with its array (or tensor) arguments watched: its products logged."""
    log = _ProductLog()
    if any(type(a).__module__.startswith("torch") for a in _arrays(args)):
        from torch.overrides import TorchFunctionMode

        class Watching(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                result = func(*args, **(kwargs or {}))
                name = getattr(func, "__name__", "")
                if name in _PRODUCTS:
                    log.add(name, _arrays([*args, *(kwargs or {}).values()]), result)
                return result

        with Watching():
            return fn(*args, **kwargs), log
    watched = []
    for a in args:
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            a = a.view(_Watched)
            a._log = log
        watched.append(a)
    result = fn(*watched, **kwargs)
    return (np.asarray(result) if isinstance(result, np.ndarray) else result), log


def expect_key_blocks(fn, queries, keys, values, *args, block_size, what, hint=None, **kwargs):
    """``fn(queries, keys, values, *args, block_size=block_size, **kwargs)`` reads the keys and
    values in blocks of at most ``block_size``: no matrix product it computes has an operand or a
    result with more than ``block_size`` keys along any axis. So attention chunked over the
    *queries*, each chunk multiplied by every key, fails, and so does a block size of its own.

    The inputs must make every axis other than the keys' shorter than n_k (``ValueError``
    otherwise): then an axis longer than max(n_q, d_k, d_v, block_size) holds keys. NumPy inputs
    are watched through the arrays computed from them: a function that copies them into plain
    arrays (``np.asarray``) cannot be watched, and fails with a message saying so. Returns
    ``fn``'s result."""
    require_untampered()
    n_k = keys.shape[-2]
    dims = [*queries.shape, *keys.shape[:-2], keys.shape[-1], *values.shape[:-2], values.shape[-1]]
    limit = max([block_size, *dims])
    if n_k <= limit:
        raise ValueError(
            f"expect_key_blocks needs n_k = {n_k} longer than every other axis and the block size "
            f"(the longest is {limit}): choose shapes where an axis of n_k can only be keys"
        )
    result, log = _run_watched(
        fn, (queries, keys, values, *args), {"block_size": block_size, **kwargs}
    )
    if not log.products:
        fail(
            what,
            "the test saw no matrix product computed from the inputs: it watches the products of "
            "the arrays you are given, and copies made with np.asarray or np.array hide them",
            hint or "use the arrays as they are given: queries @ np.swapaxes(keys_block, -1, -2)",
        )
    for name, shapes, out, _ in log.products:
        longest = max(max(s, default=0) for s in [*shapes, out])
        if longest > limit:
            keys_at_once = "all the keys" if longest == n_k else f"{longest} keys"
            fail(
                what,
                f"it computed {name} of shapes {' and '.join(map(str, shapes))} -> {out}: "
                f"{keys_at_once} at once, with block_size = {block_size} (n_k = {n_k})",
                hint
                or "loop over blocks of keys and values, keys[..., start:stop, :] with "
                "stop - start <= block_size, and multiply the queries by one block at a time",
            )
    return result


# ---- a KV cache: the projections read the newest position only --------------------------------


def expect_newest_position_only(fn, x_new, params, *args, what, hint=None, **kwargs):
    """``fn(x_new, params, *args, **kwargs)`` (torch tensors) projects the newest position only:
    every matrix product that reads one of the weight matrices in ``params`` (its 2-D tensors:
    W^Q, W^K, W^V, W^O, or views of them such as W.T) multiplies it by no more positions than
    ``x_new`` holds, one per sequence. A "cache" that keeps the inputs and projects every
    position again at each step fails. Returns ``fn``'s result."""
    require_untampered()
    weights = {_storage(p) for p in params.values() if p.dim() == 2}
    positions = int(np.prod(x_new.shape[:-1]))
    result, log = _run_watched(fn, (x_new, params, *args), kwargs)
    projections = [p for p in log.products if weights & set(p[3])]
    if not projections:
        fail(what, "the test saw no matrix product with the weights W^Q, W^K, W^V, W^O", hint)
    for name, shapes, _, storages in projections:
        for shape, storage in zip(shapes, storages):
            rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
            if storage not in weights and rows > positions:
                fail(
                    what,
                    f"it multiplied a weight matrix by an array of shape {shape} ({name}): {rows} "
                    f"positions, where the step brings {positions} (one per sequence)",
                    hint
                    or "project only the newest position, x_new: the keys and values of "
                    "the earlier positions are in the cache already",
                )
    return result
