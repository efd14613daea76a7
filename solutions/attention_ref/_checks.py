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


# ---- lesson 12: attention as today's open models run it ----------------------------------


def positive_int(name: str, value) -> int:
    """``value`` as an int, or a ValueError naming it: a count of heads, layers, slots, ..."""
    if type(value).__name__ == "bool" or not hasattr(value, "__index__") or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def heads_per_group(num_heads: int, num_kv_heads: int) -> int:
    """``h / g``, with a ValueError naming both when ``g`` does not divide ``h``."""
    positive_int("num_heads", num_heads)
    positive_int("num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads:
        raise ValueError(
            f"{num_heads} query heads cannot be shared out among {num_kv_heads} key/value heads: "
            "the number of query heads must be a multiple of the number of key/value heads"
        )
    return num_heads // num_kv_heads


def grouped_inputs(queries, keys, values) -> tuple[int, tuple[int, ...]]:
    """queries ``(..., h, n_q, d_k)``, keys ``(..., g, n_k, d_k)``, values ``(..., g, n_k, d_v)``
    with ``g`` dividing ``h``: returns ``h / g`` and the broadcast batch shape."""
    require_ndim("queries", queries, 3, "(..., h, n_q, d_k)")
    require_ndim("keys", keys, 3, "(..., g, n_k, d_k)")
    require_ndim("values", values, 3, "(..., g, n_k, d_v)")
    require_same_size("d_k", "queries", queries, -1, "keys", keys, -1)
    require_same_size("n_k", "keys", keys, -2, "values", values, -2)
    require_same_size("the number of key/value heads", "keys", keys, -3, "values", values, -3)
    if queries.shape[-3] % keys.shape[-3]:
        raise ValueError(
            f"queries have {queries.shape[-3]} heads (shape {_fmt(queries.shape)}), keys "
            f"{keys.shape[-3]} (shape {_fmt(keys.shape)}): the number of query heads must be a "
            "multiple of the number of key/value heads"
        )
    batch = broadcast_batch([("queries", queries), ("keys", keys), ("values", values)], 3)
    return queries.shape[-3] // keys.shape[-3], batch


def grouped_mask_shape(mask_shape: tuple, num_heads: int, group: int) -> tuple:
    """The shape that views a mask ``(..., h or 1, n_q, n_k)`` as ``(..., g or 1, h/g or 1, n_q,
    n_k)``, to go with queries viewed as ``(..., g, h/g, n_q, d_k)``; a mask of fewer than 3
    dimensions broadcasts as it is."""
    if len(mask_shape) < 3:
        return tuple(mask_shape)
    *batch, heads, n_q, n_k = mask_shape
    if heads == 1:
        return (*batch, 1, 1, n_q, n_k)
    return (*batch, num_heads // group, group, n_q, n_k)


def projection_heads(name: str, weight, num_heads: int) -> int:
    """A projection ``(d_model, h * d)`` whose columns split into ``num_heads`` heads: ``d``."""
    require_ndim(name, weight, 2, "(d_model, h * d)")
    if weight.shape[1] % num_heads:
        raise ValueError(
            f"{name} has {weight.shape[1]} output columns, not a multiple of num_heads = "
            f"{num_heads}: every head needs the same width"
        )
    return weight.shape[1] // num_heads


def window_sizes(n: int, window: int, num_sinks: int = 0) -> None:
    """A mask of ``n`` positions (n >= 0), a window of at least one key (the query's own), and
    ``num_sinks >= 0`` first positions kept besides it."""
    if type(n).__name__ == "bool" or not hasattr(n, "__index__") or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    positive_int("window", window)
    if type(num_sinks).__name__ == "bool" or not hasattr(num_sinks, "__index__") or num_sinks < 0:
        raise ValueError(f"num_sinks must be a non-negative integer, got {num_sinks!r}")


def cache_step_inputs(q, k_new, v_new, cache_k, cache_v) -> None:
    """One decoding step: q ``(..., h, 1, d_k)``, the new key ``(..., g, 1, d_k)`` and value
    ``(..., g, 1, d_v)``, and a cache whose keys/values have the new ones' head and feature
    widths."""
    require_ndim("q", q, 3, "(..., h, 1, d_k)")
    for name, x in (("k_new", k_new), ("v_new", v_new)):
        require_ndim(name, x, 3, "(..., g, 1, d)")
        if x.shape[-2] != 1:
            raise ValueError(
                f"{name} holds one new position: shape (..., g, 1, d), got {_fmt(x.shape)}"
            )
    for name, new, cached in (("keys", k_new, cache_k), ("values", v_new, cache_v)):
        if cached is not None and (
            tuple(cached.shape[:-2]) != tuple(new.shape[:-2]) or cached.shape[-1] != new.shape[-1]
        ):
            raise ValueError(
                f"the cache holds {name} of shape {_fmt(cached.shape)}, the new ones have shape "
                f"{_fmt(new.shape)}: the batch, the heads and the width must agree"
            )


MLA_PARAM_NAMES = ("w_dkv", "w_uk", "w_uv", "w_q", "w_qr", "w_kr", "w_o")


def mla_params(params, num_heads: int) -> tuple[int, int, int, int]:
    """Multi-head latent attention's weights, checked against each other: w_dkv ``(d_model,
    d_c)``, w_uk and w_uv ``(d_c, h * d_h)``, w_q ``(d_model, h * d_h)``, w_qr ``(d_model, h *
    d_r)``, w_kr ``(d_model, d_r)``, w_o ``(h * d_h, d_model)``. Returns ``(d_model, d_c, d_h,
    d_r)``."""
    positive_int("num_heads", num_heads)
    missing = [name for name in MLA_PARAM_NAMES if name not in params]
    if missing:
        raise ValueError(
            f"params lacks {', '.join(missing)}: it needs {', '.join(MLA_PARAM_NAMES)}"
        )
    for name in MLA_PARAM_NAMES:
        require_ndim(name, params[name], 2, "(rows, columns)")
    d_model, d_c = params["w_dkv"].shape
    d_h = projection_heads("w_q", params["w_q"], num_heads)
    d_r = projection_heads("w_qr", params["w_qr"], num_heads)
    expected = {
        "w_uk": (d_c, num_heads * d_h), "w_uv": (d_c, num_heads * d_h),
        "w_q": (d_model, num_heads * d_h), "w_qr": (d_model, num_heads * d_r),
        "w_kr": (d_model, d_r), "w_o": (num_heads * d_h, d_model),
    }  # fmt: skip
    for name, shape in expected.items():
        if tuple(params[name].shape) != shape:
            raise ValueError(
                f"{name} must have shape {_fmt(shape)} (d_model = {d_model}, d_c = {d_c}, "
                f"h = {num_heads}, d_h = {d_h}, d_r = {d_r}), got {_fmt(params[name].shape)}"
            )
    if d_r % 2:
        raise ValueError(f"the rotary width d_r must be even (pairs of features), got {d_r}")
    return d_model, d_c, d_h, d_r


def position(value) -> int:
    """A position in a sequence: a non-negative integer."""
    if type(value).__name__ == "bool" or not hasattr(value, "__index__") or value < 0:
        raise ValueError(f"position must be a non-negative integer, got {value!r}")
    return int(value)


def paged_inputs(q, k_pool, v_pool, block_tables, lengths, as_array):
    """paged_attention's arguments: q ``(batch, h, 1, d_k)``, pools ``(num_blocks, block_size,
    g, d)`` of one layout, integer block tables ``(batch, max_blocks)`` naming blocks of the pool,
    lengths ``(batch,)`` that fit in the tables. Returns the tables and lengths as arrays (of the
    caller's library: ``as_array``)."""
    require_ndim("q", q, 4, "(batch, h, 1, d_k)")
    for name, pool in (("k_pool", k_pool), ("v_pool", v_pool)):
        if pool.ndim != 4:
            raise ValueError(
                f"{name} must have shape (num_blocks, block_size, g, d), got {_fmt(pool.shape)}"
            )
    if tuple(k_pool.shape[:3]) != tuple(v_pool.shape[:3]):
        raise ValueError(
            f"k_pool {_fmt(k_pool.shape)} and v_pool {_fmt(v_pool.shape)} differ in blocks or heads"
        )
    require_same_size("d_k", "q", q, -1, "k_pool", k_pool, -1)
    block_tables, lengths = as_array(block_tables), as_array(lengths)
    if (
        block_tables.ndim != 2
        or lengths.shape != (block_tables.shape[0],)
        or q.shape[0] != lengths.shape[0]
    ):
        raise ValueError(
            f"block_tables must be (batch, max_blocks) and lengths (batch,) with batch = "
            f"{q.shape[0]}, "
            f"got {_fmt(block_tables.shape)} and {_fmt(lengths.shape)}"
        )
    # The lengths are read only where that costs nothing: on a GPU, reading them would make the
    # step wait for the device (and on PyTorch's meta device there is nothing to read).
    on_host = getattr(getattr(lengths, "device", None), "type", "cpu") == "cpu"
    if (
        on_host
        and lengths.shape[0]
        and int(lengths.max()) > block_tables.shape[1] * k_pool.shape[1]
    ):
        raise ValueError(
            f"a length of {int(lengths.max())} does not fit in {block_tables.shape[1]} blocks of "
            f"{k_pool.shape[1]} positions"
        )
    return block_tables, lengths
