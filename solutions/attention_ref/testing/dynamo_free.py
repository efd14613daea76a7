"""Run PyTorch's Python meta kernels without importing its compiler.

Many operations on the ``meta`` device run a Python reference (``torch._refs``) wrapped in
``torch._disable_dynamo``, which turns TorchDynamo off for the call and, to do so, imports
``torch._dynamo`` on the first call: about 900 modules (sympy and Triton among them), 1.2-1.5 s
on a laptop core, paid by every notebook that runs a device check, though no compiler runs
there. Before dynamo is imported no compiler can be tracing, so "turn it off" means "call the
function". ``dynamo_left_unimported()`` fills the wrappers' own cache with exactly that for the
duration of a block and empties it again afterwards, leaving PyTorch as it found it.

A wrapper this walk does not find behaves as before: it imports dynamo (slower, same result).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import types

_CACHE = "__dynamo_disable"  # the attribute torch._compile._disable_dynamo caches its wrapper in


@functools.cache
def _wrapped_references() -> tuple:
    """The functions PyTorch's meta kernels and references wrap in ``torch._disable_dynamo``,
    found by following ``__wrapped__`` and closures from the decomposition tables and the
    reference modules."""
    import torch
    import torch._decomp
    import torch._prims
    import torch._refs
    import torch._refs.fft
    import torch._refs.linalg
    import torch._refs.nn.functional
    import torch._refs.special

    inner = torch._disable_dynamo(lambda: None).__code__  # the code of every such wrapper
    tables = torch._decomp.global_decomposition_table.values()  # meta, pre- and post-autograd
    roots = [kernel for table in tables for kernel in table.values()]
    for module in (torch._refs, torch._refs.fft, torch._refs.linalg, torch._refs.nn.functional,
                   torch._refs.special, torch._prims, torch._decomp.decompositions):  # fmt: skip
        roots += [value for value in vars(module).values() if callable(value)]
    seen, found = set(), []
    while roots:
        item = roots.pop()
        if id(item) in seen or not callable(item):
            continue
        seen.add(id(item))
        code = getattr(item, "__code__", None)
        if code is inner:
            found.append(item.__closure__[code.co_freevars.index("fn")].cell_contents)
        if getattr(item, "__wrapped__", None) is not None:
            roots.append(item.__wrapped__)
        if isinstance(item, types.FunctionType):
            for cell in item.__closure__ or ():
                with contextlib.suppress(ValueError):  # an empty cell
                    roots.append(cell.cell_contents)
    return tuple(found)


@contextlib.contextmanager
def dynamo_left_unimported():
    """Within the block, PyTorch's references run without importing ``torch._dynamo`` (where it
    is imported already, nothing changes)."""
    if "torch._dynamo" in sys.modules:
        yield
        return
    filled = [fn for fn in _wrapped_references() if not hasattr(fn, _CACHE)]
    for fn in filled:
        setattr(fn, _CACHE, fn)
    try:
        yield
    finally:
        for fn in filled:
            if getattr(fn, _CACHE, None) is fn:
                delattr(fn, _CACHE)
