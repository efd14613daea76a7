"""Input validation for lesson 13 (linear attention, the delta rules, sparse and gated attention),
shared by the NumPy and PyTorch references. Like ``_checks``, it reads only ``.shape`` and
``.ndim``, so the messages read the same whichever library a learner uses, and it works on
PyTorch's meta device (shapes, no values)."""

from __future__ import annotations

from ._checks import _fmt, broadcast_batch, positive_int, require_ndim, require_same_size


def sequence_inputs(queries, keys, values) -> tuple[int, ...]:
    """queries ``(..., n, d_k)``, keys ``(..., n, d_k)``, values ``(..., n, d_v)``: one query per
    position (a recurrence reads position t's query after writing its key and value). Returns
    the broadcast batch shape."""
    require_ndim("queries", queries, 2, "(..., n, d_k)")
    require_ndim("keys", keys, 2, "(..., n, d_k)")
    require_ndim("values", values, 2, "(..., n, d_v)")
    require_same_size("d_k", "queries", queries, -1, "keys", keys, -1)
    require_same_size("the sequence length n", "queries", queries, -2, "keys", keys, -2)
    require_same_size("the sequence length n", "keys", keys, -2, "values", values, -2)
    return broadcast_batch([("queries", queries), ("keys", keys), ("values", values)], 2)


def per_token(name: str, x, keys, batch: tuple[int, ...]) -> None:
    """beta or log_decay: one number per position, ``(..., n)``, batch axes broadcasting."""
    if x is None:
        return
    require_ndim(name, x, 1, "(..., n)")
    if x.shape[-1] != keys.shape[-2]:
        raise ValueError(
            f"{name} holds one number per position: shape (..., n) with n = {keys.shape[-2]} "
            f"(keys {_fmt(keys.shape)}), got {_fmt(x.shape)}"
        )
    broadcast_batch([("the keys' batch", _Shape(batch + (keys.shape[-2],))), (name, x)], 1)


class _Shape:
    """Something with a ``.shape`` and an ``.ndim``, for checks that need only those."""

    def __init__(self, shape):
        self.shape, self.ndim = tuple(shape), len(shape)


def state_input(name: str, state, keys, values, batch: tuple[int, ...]) -> None:
    """A recurrent state ``(..., d_k, d_v)`` that fits the keys and the values."""
    if state is None:
        return
    require_ndim(name, state, 2, "(..., d_k, d_v)")
    want = (keys.shape[-1], values.shape[-1])
    if tuple(state.shape[-2:]) != want:
        raise ValueError(
            f"{name} must have shape (..., d_k, d_v) = (..., {want[0]}, {want[1]}) for keys "
            f"{_fmt(keys.shape)} and values {_fmt(values.shape)}, got {_fmt(state.shape)}"
        )
    broadcast_batch([("keys", _Shape(batch + (1, 1))), (name, state)], 2)


def delta_inputs(queries, keys, values, beta, log_decay, state) -> tuple[int, ...]:
    """The gated delta rule's inputs, checked against each other: the broadcast batch shape."""
    batch = sequence_inputs(queries, keys, values)
    if beta is None:
        raise ValueError("beta is required: one write strength per position, shape (..., n)")
    per_token("beta", beta, keys, batch)
    per_token("log_decay", log_decay, keys, batch)
    batch = broadcast_batch(
        [("keys", _Shape(batch + (1,))), ("beta", beta)]
        + ([] if log_decay is None else [("log_decay", log_decay)]),
        1,
    )
    state_input("initial_state", state, keys, values, batch)
    return batch


def linear_state(state, keys, values) -> None:
    """Linear attention's state: ``(S, z)``, S ``(..., d_f, d_v)``, z ``(..., d_f)``."""
    if state is None:
        return
    if not isinstance(state, tuple) or len(state) != 2:
        raise ValueError("state must be the pair (S, z) that linear_attention_recurrent returned")
    s, z = state
    require_ndim("state S", s, 2, "(..., d_f, d_v)")
    require_ndim("state z", z, 1, "(..., d_f)")
    if s.shape[-1] != values.shape[-1] or s.shape[-2] != z.shape[-1]:
        raise ValueError(
            f"state S {_fmt(s.shape)} and z {_fmt(z.shape)} do not fit values "
            f"{_fmt(values.shape)}: S is (..., d_f, d_v), z (..., d_f)"
        )


def chunk_size(value) -> int:
    return positive_int("chunk_size", value)


def ut_inputs(keys, beta, log_decay) -> None:
    """One chunk's keys ``(..., C, d_k)``, beta ``(..., C)``, log_decay ``(..., C)`` or None."""
    require_ndim("keys", keys, 2, "(..., C, d_k)")
    batch = tuple(keys.shape[:-2])
    per_token("beta", beta, keys, batch)
    per_token("log_decay", log_decay, keys, batch)


def indexer_inputs(index_queries, index_keys, head_weights) -> None:
    """index_queries ``(..., h_I, n_q, d_I)``, index_keys ``(..., n_k, d_I)`` (one for every
    indexer head), head_weights ``(..., h_I, n_q)``."""
    require_ndim("index_queries", index_queries, 3, "(..., h_I, n_q, d_I)")
    require_ndim("index_keys", index_keys, 2, "(..., n_k, d_I)")
    require_ndim("head_weights", head_weights, 2, "(..., h_I, n_q)")
    require_same_size("d_I", "index_queries", index_queries, -1, "index_keys", index_keys, -1)
    if tuple(head_weights.shape[-2:]) != tuple(index_queries.shape[-3:-1]):
        raise ValueError(
            f"head_weights must have shape (..., h_I, n_q) = (..., "
            f"{index_queries.shape[-3]}, {index_queries.shape[-2]}) for index_queries "
            f"{_fmt(index_queries.shape)}, got {_fmt(head_weights.shape)}"
        )
    broadcast_batch(
        [
            ("index_queries", _Shape(index_queries.shape[:-3])),
            ("index_keys", _Shape(index_keys.shape[:-2])),
            ("head_weights", _Shape(head_weights.shape[:-2])),
        ],
        0,
    )


def top_k_inputs(scores, top_k, mask) -> int:
    require_ndim("scores", scores, 2, "(..., n_q, n_k)")
    top_k = positive_int("top_k", top_k)
    if mask is not None:
        broadcast_batch([("scores", scores), ("mask", mask)], 0)
    return top_k


def sparse_inputs(queries, keys, values, indices, valid) -> None:
    """queries ``(..., n_q, d_k)``, keys ``(..., n_k, d_k)``, values ``(..., n_k, d_v)``, and
    the selected key positions ``indices`` ``(..., n_q, k)`` (``valid`` the same shape)."""
    require_ndim("queries", queries, 2, "(..., n_q, d_k)")
    require_ndim("keys", keys, 2, "(..., n_k, d_k)")
    require_ndim("values", values, 2, "(..., n_k, d_v)")
    require_ndim("indices", indices, 2, "(..., n_q, k)")
    require_same_size("d_k", "queries", queries, -1, "keys", keys, -1)
    require_same_size("n_k", "keys", keys, -2, "values", values, -2)
    require_same_size("n_q", "queries", queries, -2, "indices", indices, -2)
    if valid is not None and tuple(valid.shape[-2:]) != tuple(indices.shape[-2:]):
        raise ValueError(
            f"valid must have the shape of indices, (..., n_q, k) = {_fmt(indices.shape)}, "
            f"got {_fmt(valid.shape)}"
        )
    broadcast_batch(
        [("queries", queries), ("keys", keys), ("values", values), ("indices", indices)], 2
    )


GATED_PARAM_NAMES = ("w_q", "w_k", "w_v", "w_g", "w_o")


def gated_params(x, params, num_heads: int) -> tuple[int, int]:
    """Gated attention's weights: w_q, w_k ``(d_model, h d_k)``, w_v ``(d_model, h d_v)``, w_o
    ``(h d_v, d_model)``, and the gate's w_g ``(d_model, h)`` (one gate per head) or
    ``(d_model, h d_v)`` (one per head and channel). Returns ``(d_k, d_v)``."""
    positive_int("num_heads", num_heads)
    require_ndim("x", x, 2, "(..., n, d_model)")
    missing = [name for name in GATED_PARAM_NAMES if name not in params]
    if missing:
        raise ValueError(f"params lacks {', '.join(missing)}: it needs {GATED_PARAM_NAMES}")
    d_model = x.shape[-1]
    for name in GATED_PARAM_NAMES:
        require_ndim(name, params[name], 2, "(rows, columns)")
        rows = params[name].shape[0]
        if name != "w_o" and rows != d_model:
            raise ValueError(
                f"{name} must have d_model = {d_model} rows (x {_fmt(x.shape)}), got "
                f"{_fmt(params[name].shape)}"
            )
    widths = {name: params[name].shape[1] for name in ("w_q", "w_v")}
    if any(width % num_heads for width in widths.values()):
        raise ValueError(f"w_q and w_v must split into {num_heads} heads, got widths {widths}")
    d_k, d_v = widths["w_q"] // num_heads, widths["w_v"] // num_heads
    expected = {"w_k": (d_model, num_heads * d_k), "w_o": (num_heads * d_v, d_model)}
    for name, shape in expected.items():
        if tuple(params[name].shape) != shape:
            raise ValueError(
                f"{name} must have shape {_fmt(shape)}, got {_fmt(params[name].shape)}"
            )
    if params["w_g"].shape[1] not in (num_heads, num_heads * d_v):
        raise ValueError(
            f"w_g must have shape (d_model, h) = ({d_model}, {num_heads}) for one gate per head, "
            f"or (d_model, h d_v) = ({d_model}, {num_heads * d_v}) for one per channel, got "
            f"{_fmt(params['w_g'].shape)}"
        )
    return d_k, d_v
