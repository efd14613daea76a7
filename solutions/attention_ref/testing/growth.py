"""A method clause as a law of growth: run a graded call at two or three sizes and check how each
part of its cost (:mod:`cost`) grows with the size.

A threshold at one size is what a wrong method slips under (a whole text made one "chunk" stays
under a byte limit at the size the test picks; a per-step vector of n floats is small at n =
2,048). How a cost grows cannot be dodged that way: multiply-adds like n (a recurrence, chunks of
a fixed size) against n^2 (every pair of positions); a peak that does not grow with n (blockwise)
against one that does (a whole score row kept); lines of code that do not grow with the number of
heads (batched) against ones that do (a loop over them).

    expect_growth(gated_delta_rule_chunked, lambda n: (q[..., :n, :], k[..., :n, :], ...),
                  sizes=(256, 1024), name="n", multiply_adds=1, peak_bytes=1,
                  what="gated_delta_rule_chunked works a chunk of chunk_size at a time")

Each law is the exponent ``e`` of ``size ** e`` the cost may grow like at most (``1``: like n;
``0``: not at all), or a pair ``(low, high)`` for both bounds. The exponent is measured between
the two largest sizes, log(cost ratio) / log(size ratio), and must be within ``slack`` (0.3 by
default) of the bound: with sizes 4x apart, like n^2 is 16x where like n is 4x.
"""

from __future__ import annotations

import math

from .checks import fail
from .cost import Cost, profile_call
from .tamper import require_untampered

_WHAT = {
    "multiply_adds": "multiply-adds",
    "elements": "numbers written (other than by matrix products)",
    "allocated_bytes": "bytes allocated",
    "peak_bytes": "peak memory",
    "kept_bytes": "memory kept after the call",
    "largest_bytes": "largest array",
    "steps": "lines of Python run",
}


def _like(name: str, exponent: float) -> str:
    if math.isinf(exponent):
        return "from nothing"
    if abs(exponent) < 0.05:
        return "not at all"
    if abs(exponent - 1) < 0.05:
        return f"like {name}"
    return f"like {name}^{round(exponent, 1):g}"


def _asked(name: str, low: float, high: float) -> str:
    if low == -math.inf:
        return f"does not grow with {name}" if high == 0 else f"grows at most {_like(name, high)}"
    return f"grows between {_like(name, low)} and {_like(name, high)}"


def _exponent(values: list[int], sizes: list) -> float:
    """The growth exponent between the two largest sizes (inf: from nothing to something)."""
    (a, b), (s, t) = values[-2:], sizes[-2:]
    if a <= 0:
        return 0.0 if b <= 0 else math.inf
    return math.log(max(b, 1e-300) / a) / math.log(t / s)


_MEMORY = {"allocated_bytes", "peak_bytes", "kept_bytes"}


def growth(fn, inputs, sizes, memory: bool = True) -> list[Cost]:
    """The cost of ``fn`` at each size: ``inputs(size)`` gives its positional arguments (a tuple)
    or its keyword arguments (a dict), made before the call is measured. ``memory=False``: NumPy's
    memory is not traced (faster; its bytes stay 0)."""
    costs = []
    for size in sizes:
        made = inputs(size)
        args, kwargs = ((), made) if isinstance(made, dict) else (tuple(made), {})
        costs.append(profile_call(fn, args, kwargs, memory))
    return costs


def _bounds(law) -> tuple[float, float]:
    if isinstance(law, (tuple, list)):
        return float(law[0]), float(law[1])
    return -math.inf, float(law)


def _check_arguments(sizes, laws) -> None:
    unknown = set(laws) - set(_WHAT)
    if unknown or not laws or len(sizes) < 2 or list(sizes) != sorted(set(sizes)):
        raise ValueError(
            f"expect_growth needs ascending sizes (got {sizes}) and laws among {sorted(_WHAT)}"
            f" (got {sorted(laws)})"
        )


def expect_growth(
    fn, inputs, sizes, *, what: str, name: str = "n", hint: str | None = None,
    slack: float = 0.3, **laws
) -> list[Cost]:  # fmt: skip
    """``fn`` run on ``inputs(size)`` at each of ``sizes`` (ascending) grows as ``laws`` say:
    each a field of :class:`Cost` (``multiply_adds``, ``elements``, ``allocated_bytes``,
    ``peak_bytes``, ``kept_bytes``, ``largest_bytes``, ``steps``) = the exponent of the size it
    may grow like at most, or ``(low, high)``. Fails with what grew, by how much, and what the
    exercise asks. Returns the costs (their results in ``.result``)."""
    require_untampered()
    _check_arguments(sizes, laws)
    costs = growth(fn, inputs, sizes, memory=bool(_MEMORY & set(laws)))
    s, t = sizes[-2], sizes[-1]
    for field_name, law in laws.items():
        values = [getattr(c, field_name) for c in costs]
        exponent, (low, high) = _exponent(values, list(sizes)), _bounds(law)
        if low - slack <= exponent <= high + slack:
            continue
        if field_name == "multiply_adds" and not any(c.seen for c in costs):
            problem = ("the test saw none of its operations: it watches the arrays you are "
                       "given, and copies made with np.asarray or np.array hide them")  # fmt: skip
            fail(what, problem, hint or "use the arrays as they are given")
        ratio = "from nothing" if values[-2] <= 0 else f"{values[-1] / values[-2]:.3g}x"
        fail(
            what,
            f"its {_WHAT[field_name]} grew {ratio} when {name} grew {t / s:g}x ({name} = {s} -> "
            f"{t}: {values[-2]:,} -> {values[-1]:,}), {_like(name, exponent)}, where the "
            f"exercise's method {_asked(name, low, high)}",
            hint,
        )
    return costs
