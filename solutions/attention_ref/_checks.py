"""Input validation shared by the NumPy and PyTorch references.

Both backends expose ``.shape`` and ``.ndim``, so every check here works on either and the
error messages read the same whichever library a learner uses.
"""

from __future__ import annotations


def _fmt(shape) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def require_ndim(name: str, x, at_least: int, layout: str) -> None:
    """Raise ValueError unless ``x`` has at least ``at_least`` dimensions."""
    if x.ndim < at_least:
        raise ValueError(
            f"{name} must have shape {layout} (at least {at_least} dims), got shape {_fmt(x.shape)}"
        )


def require_same_size(what: str, a_name: str, a, a_axis: int, b_name: str, b, b_axis: int) -> None:
    """Raise ValueError unless ``a.shape[a_axis] == b.shape[b_axis]``."""
    if a.shape[a_axis] != b.shape[b_axis]:
        raise ValueError(
            f"{what} differs: {a_name} has shape {_fmt(a.shape)} ({a.shape[a_axis]}) but "
            f"{b_name} has shape {_fmt(b.shape)} ({b.shape[b_axis]})"
        )


def broadcast_batch(names_and_arrays: list[tuple[str, object]], core_dims: int) -> tuple[int, ...]:
    """Check that the leading (batch) dimensions broadcast; return the broadcast batch shape.

    The last ``core_dims`` dimensions of each array are its own (e.g. ``n_q, d_k``), the rest
    are batch dimensions, which follow NumPy's broadcasting rules.
    """
    batches = [tuple(a.shape[: a.ndim - core_dims]) for _, a in names_and_arrays]
    width = max(len(b) for b in batches)
    out = [1] * width
    for batch in batches:
        for i, size in enumerate((1,) * (width - len(batch)) + batch):
            if size != 1 and out[i] not in (1, size):
                listing = ", ".join(f"{n} {_fmt(a.shape)}" for n, a in names_and_arrays)
                raise ValueError(f"batch dimensions do not broadcast: {listing}")
            if size != 1:
                out[i] = size
    return tuple(out)


def require_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")


# ---- the shape contract of each function, shared by both backends ------------------------


def scores_inputs(queries, keys) -> None:
    """queries ``(..., n_q, d_k)`` and keys ``(..., n_k, d_k)``."""
    require_ndim("queries", queries, 2, "(..., n_q, d_k)")
    require_ndim("keys", keys, 2, "(..., n_k, d_k)")
    require_same_size("d_k", "queries", queries, -1, "keys", keys, -1)
    broadcast_batch([("queries", queries), ("keys", keys)], core_dims=2)


def weighted_sum_inputs(weights, values) -> None:
    """weights ``(..., n_q, n_k)`` and values ``(..., n_k, d_v)``."""
    require_ndim("weights", weights, 2, "(..., n_q, n_k)")
    require_ndim("values", values, 2, "(..., n_k, d_v)")
    require_same_size("n_k", "weights", weights, -1, "values", values, -2)
    broadcast_batch([("weights", weights), ("values", values)], core_dims=2)


def keys_values_inputs(keys, values) -> None:
    """keys ``(..., n_k, d_k)`` and values ``(..., n_k, d_v)``: one value per key."""
    require_ndim("keys", keys, 2, "(..., n_k, d_k)")
    require_ndim("values", values, 2, "(..., n_k, d_v)")
    require_same_size("n_k", "keys", keys, -2, "values", values, -2)


def kernel_regression_inputs(x_query, x_keys, y_values, bandwidth) -> None:
    """x_query ``(..., n_q)``, x_keys ``(..., n_k)``, y_values ``(..., n_k)``."""
    require_positive("bandwidth", bandwidth)
    require_ndim("x_query", x_query, 1, "(..., n_q)")
    require_ndim("x_keys", x_keys, 1, "(..., n_k)")
    require_ndim("y_values", y_values, 1, "(..., n_k)")
    require_same_size("n_k", "x_keys", x_keys, -1, "y_values", y_values, -1)


def mask_fits(mask, scores_shape: tuple, scores_layout: str = "(..., n_q, n_k)") -> None:
    """A boolean mask must broadcast to the attention scores (True = may attend)."""
    shape = tuple(mask.shape)
    fits = len(shape) <= len(scores_shape) and all(
        m in (1, s) for m, s in zip(shape[::-1], tuple(scores_shape)[::-1])
    )
    if not fits:
        raise ValueError(
            f"mask of shape {_fmt(shape)} does not broadcast to the attention "
            f"scores {scores_layout} = {_fmt(scores_shape)}"
        )


def additive_inputs(queries, keys, W_q, W_k, w_v) -> None:
    """Additive attention: W_q (d_q, d_h), W_k (d_k, d_h), w_v (d_h,)."""
    scores_layout = [("queries", queries, "(..., n_q, d_q)"), ("keys", keys, "(..., n_k, d_k)")]
    for name, arr, layout in scores_layout:
        require_ndim(name, arr, 2, layout)
    require_ndim("W_q", W_q, 2, "(d_q, d_h)")
    require_ndim("W_k", W_k, 2, "(d_k, d_h)")
    require_ndim("w_v", w_v, 1, "(d_h,)")
    require_same_size("d_q", "queries", queries, -1, "W_q", W_q, 0)
    require_same_size("d_k", "keys", keys, -1, "W_k", W_k, 0)
    require_same_size("d_h (the hidden width)", "W_q", W_q, 1, "W_k", W_k, 1)
    require_same_size("d_h (the hidden width)", "W_q", W_q, 1, "w_v", w_v, 0)
    broadcast_batch([("queries", queries), ("keys", keys)], core_dims=2)


MHA_PARAM_NAMES = ("w_q", "w_k", "w_v", "w_o")


def multi_head_inputs(query, key, value, params, num_heads: int) -> None:
    """query ``(..., n_q, d_model)``, key ``(..., n_k, d_model)``, value ``(..., n_k, d_model)``.

    ``params`` holds ``w_q``, ``w_k`` ``(d_model, h * d_k)``, ``w_v`` ``(d_model, h * d_v)`` and
    ``w_o`` ``(h * d_v, d_model)``, and optionally the biases ``b_q``, ``b_k``, ``b_v``, ``b_o``.
    """
    if not isinstance(num_heads, int) or isinstance(num_heads, bool) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive integer, got {num_heads!r}")
    missing = [name for name in MHA_PARAM_NAMES if name not in params]
    if missing:
        raise ValueError(f"params lacks {', '.join(missing)}: it needs w_q, w_k, w_v and w_o")
    require_ndim("query", query, 2, "(..., n_q, d_model)")
    require_ndim("key", key, 2, "(..., n_k, d_model)")
    require_ndim("value", value, 2, "(..., n_k, d_model)")
    require_same_size("n_k", "key", key, -2, "value", value, -2)
    for name, x, w in (("query", query, "w_q"), ("key", key, "w_k"), ("value", value, "w_v")):
        require_ndim(w, params[w], 2, "(d_model, h * d)")
        require_same_size("d_model", name, x, -1, w, params[w], 0)
    require_same_size("h * d_k", "w_q", params["w_q"], 1, "w_k", params["w_k"], 1)
    require_ndim("w_o", params["w_o"], 2, "(h * d_v, d_model)")
    require_same_size("h * d_v", "w_v", params["w_v"], 1, "w_o", params["w_o"], 0)
    for w in ("w_q", "w_v"):
        if params[w].shape[1] % num_heads:
            raise ValueError(
                f"{w} has {params[w].shape[1]} output columns, not a multiple of "
                f"num_heads = {num_heads}: every head needs the same width"
            )
    broadcast_batch([("query", query), ("key", key), ("value", value)], core_dims=2)


def heads_input(x, num_heads: int) -> None:
    """split_heads: ``x`` ``(..., n, h * d)`` with a last axis divisible by ``num_heads``."""
    if not isinstance(num_heads, int) or isinstance(num_heads, bool) or num_heads < 1:
        raise ValueError(f"num_heads must be a positive integer, got {num_heads!r}")
    require_ndim("x", x, 2, "(..., n, h * d)")
    if x.shape[-1] % num_heads:
        raise ValueError(
            f"x has shape {_fmt(x.shape)}: its last axis ({x.shape[-1]}) does not split "
            f"into num_heads = {num_heads} equal heads"
        )


def sequence_lengths(src_lengths, tgt_lengths) -> None:
    """transformer_masks: one source length and one target length per pair of the batch (1-D)."""
    for name, lengths in (("src_lengths", src_lengths), ("tgt_lengths", tgt_lengths)):
        if lengths.ndim != 1:
            raise ValueError(
                f"{name} must be 1-D (one length per sequence), got shape {_fmt(lengths.shape)}"
            )
    if src_lengths.shape[0] != tgt_lengths.shape[0]:
        raise ValueError(
            f"a batch has one source and one target per pair: src_lengths has shape "
            f"{_fmt(src_lengths.shape)} but tgt_lengths has shape {_fmt(tgt_lengths.shape)}"
        )


def ffn_params(params) -> tuple[str, ...]:
    """The FFN's parameter names, after checking that ``params`` has them all."""
    names = ("w_1", "b_1", "w_2", "b_2")
    missing = [name for name in names if name not in params]
    if missing:
        raise ValueError(f"params lacks {', '.join(missing)}: the FFN needs w_1, b_1, w_2 and b_2")
    return names


def ffn_inputs(x, params) -> None:
    """x ``(..., n, d_model)``, w_1 ``(d_model, d_ff)``, b_1 ``(d_ff,)``, w_2 ``(d_ff, d_model)``,
    b_2 ``(d_model,)``."""
    require_ndim("x", x, 1, "(..., n, d_model)")
    require_ndim("w_1", params["w_1"], 2, "(d_model, d_ff)")
    require_ndim("w_2", params["w_2"], 2, "(d_ff, d_model)")
    require_ndim("b_1", params["b_1"], 1, "(d_ff,)")
    require_ndim("b_2", params["b_2"], 1, "(d_model,)")
    require_same_size("d_model", "x", x, -1, "w_1", params["w_1"], 0)
    require_same_size("d_ff", "w_1", params["w_1"], 1, "w_2", params["w_2"], 0)
    require_same_size("d_ff", "w_1", params["w_1"], 1, "b_1", params["b_1"], -1)
    require_same_size("d_model", "w_2", params["w_2"], 1, "b_2", params["b_2"], -1)
    require_same_size("d_model", "x", x, -1, "w_2", params["w_2"], 1)


# ---- lesson 8: layer normalization, encoder and decoder layers, stacks --------------------

LAYER_PARTS = {
    "encoder": ("self_attn", "norm_1", "ffn", "norm_2"),
    "decoder": ("self_attn", "norm_1", "cross_attn", "norm_2", "ffn", "norm_3"),
}


def layer_norm_inputs(x, gamma, beta, eps: float) -> None:
    """x ``(..., d_model)``, gamma and beta ``(d_model,)``, eps > 0."""
    require_ndim("x", x, 1, "(..., d_model)")
    require_ndim("gamma", gamma, 1, "(d_model,)")
    require_ndim("beta", beta, 1, "(d_model,)")
    require_same_size("d_model", "x", x, -1, "gamma", gamma, -1)
    require_same_size("d_model", "x", x, -1, "beta", beta, -1)
    require_positive("eps", eps)


def norm_params(norm) -> None:
    """A LayerNorm's parameters: ``{"gamma", "beta"}`` (and optionally ``"eps"``)."""
    missing = [name for name in ("gamma", "beta") if name not in norm]
    if missing:
        raise ValueError(f"norm lacks {', '.join(missing)}: a LayerNorm needs gamma and beta")


def layer_params(params, kind: str) -> None:
    """An encoder or decoder layer's nested parameter dict has every sub-layer's part."""
    needed = LAYER_PARTS[kind]
    missing = [name for name in needed if name not in params]
    if missing:
        raise ValueError(
            f"params lacks {', '.join(missing)}: a{'n' if kind == 'encoder' else ''} "
            f"{kind} layer needs {', '.join(needed)}"
        )


def stack_layers(layers) -> list:
    """A stack's parameters: a sequence of layer dicts (one dict is one layer, not a stack)."""
    if hasattr(layers, "keys"):
        raise ValueError(
            "layers must be a list of layer parameter dicts, one per layer; "
            f"got one dict with keys {', '.join(map(str, layers.keys()))}"
        )
    return list(layers)


# ---- lesson 9: efficient attention ------------------------------------------------------


def block_size(value) -> None:
    """A block size is a positive integer (how many keys one tile holds)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"block_size must be a positive integer, got {value!r}")


def tiled_inputs(queries, keys, values, mask, block: int) -> tuple[int, ...]:
    """queries ``(..., n_q, d_k)``, keys ``(..., n_k, d_k)``, values ``(..., n_k, d_v)``, a mask
    that broadcasts to the scores ``(..., n_q, n_k)``; returns the broadcast batch shape."""
    block_size(block)
    scores_inputs(queries, keys)
    keys_values_inputs(keys, values)
    batch = broadcast_batch([("queries", queries), ("keys", keys), ("values", values)], core_dims=2)
    if mask is not None:
        mask_fits(mask, batch + (queries.shape[-2], keys.shape[-2]))
    return batch


def merge_inputs(out_a, lse_a, out_b, lse_b) -> None:
    """Two partial attention results over disjoint key sets: outputs ``(..., n_q, d_v)`` of the same
    shape, and their log-sum-exps ``(..., n_q)``."""
    require_ndim("out_a", out_a, 2, "(..., n_q, d_v)")
    if tuple(out_a.shape) != tuple(out_b.shape):
        raise ValueError(
            f"out_a has shape {_fmt(out_a.shape)} but out_b has shape {_fmt(out_b.shape)}: "
            "partial results of the same queries must have the same shape"
        )
    for name, lse in (("lse_a", lse_a), ("lse_b", lse_b)):
        if tuple(lse.shape) != tuple(out_a.shape[:-1]):
            raise ValueError(
                f"{name} must have shape (..., n_q) = {_fmt(out_a.shape[:-1])}, "
                f"got {_fmt(lse.shape)}"
            )
