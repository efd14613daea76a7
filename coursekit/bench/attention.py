"""Attention on the CPU: the course's implementations against F.scaled_dot_product_attention and its
backends, timed in turns in one run; and the peak memory of Eq. (1) against tiled attention."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

from coursekit.bench.report import Config, Table, fmt_bytes, interleaved_best, progress, verdict

BUILT_IN = "F.scaled_dot_product_attention (its own choice)"


def sdpa_backends():
    """(label, backend) for each backend of F.scaled_dot_product_attention this PyTorch knows."""
    try:
        from torch.nn.attention import SDPBackend
    except ImportError:  # older PyTorch: the automatic choice only
        return []
    names = ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")
    return [
        (name.lower(), getattr(SDPBackend, name)) for name in names if hasattr(SDPBackend, name)
    ]


def sdpa_with(backend):
    """F.scaled_dot_product_attention restricted to one backend (RuntimeError where it cannot
    run)."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    def run(q, k, v):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v)

    return run


def _openblas():
    """(get_num_threads, set_num_threads) of NumPy's bundled OpenBLAS, or None where it has none."""
    import ctypes
    import glob

    import numpy as np

    found = glob.glob(
        os.path.join(
            os.path.dirname(np.__file__), os.pardir, "numpy.libs", "libscipy_openblas*.so*"
        )
    )
    if not found:
        return None
    blas = ctypes.CDLL(found[0])  # already loaded by NumPy: the same library, not a second copy
    for suffix in ("64_", "_64_", ""):
        if hasattr(blas, f"scipy_openblas_set_num_threads{suffix}"):
            return (
                getattr(blas, f"scipy_openblas_get_num_threads{suffix}"),
                getattr(blas, f"scipy_openblas_set_num_threads{suffix}"),
            )
    return None


@contextmanager
def openblas_threads(n: int):
    """NumPy's bundled OpenBLAS limited to ``n`` threads inside the block (nothing changes where
    NumPy has no bundled OpenBLAS). A batched product of small matrices calls the BLAS once per
    matrix, and on 2 shared cores waking a second BLAS thread for each call can cost more than it
    saves: the benchmark shows NumPy both ways."""
    blas = _openblas()
    if blas is None:
        yield
        return
    get, set_ = blas
    before = get()
    set_(n)
    try:
        yield
    finally:
        set_(before)


def _built_in_candidates(tq, tk, tv) -> tuple[dict, list[str]]:
    """F.scaled_dot_product_attention, by its own choice and by each backend that runs here."""
    import torch.nn.functional as F

    candidates = {BUILT_IN: lambda: F.scaled_dot_product_attention(tq, tk, tv)}
    missing = []
    for label, backend in sdpa_backends():
        run = sdpa_with(backend)
        try:
            run(tq, tk, tv)
        except RuntimeError:
            missing.append(label)
            continue
        candidates[f"F.scaled_dot_product_attention [{label}]"] = lambda run=run: run(tq, tk, tv)
    return candidates, missing


def _one_blas_thread(fn):
    def run():
        with openblas_threads(1):
            return fn()

    return run


def _course_candidates(cfg: Config, q, k, v, tq, tk, tv) -> dict:
    """The course's own attention: lesson 2's Eq. (1) (the tuned path beside the reference,
    attention_ref.{np,pt}.sdpa_tuned, tested equal to it) and lesson 9's tiled attention."""
    import attention_ref.np as rnp
    import attention_ref.pt as rpt
    from attention_ref.np import sdpa_tuned as tuned_np
    from attention_ref.pt import sdpa_tuned as tuned_pt

    block = cfg.cpu_block_size
    return {
        "reference NumPy (lesson 2)": lambda: tuned_np.scaled_dot_product_attention(q, k, v),
        "reference NumPy (lesson 2), 1 BLAS thread": _one_blas_thread(
            lambda: tuned_np.scaled_dot_product_attention(q, k, v)
        ),
        "reference PyTorch (lesson 2)": lambda: tuned_pt.scaled_dot_product_attention(tq, tk, tv),
        f"tiled NumPy (lesson 9, block {block})": lambda: rnp.tiled_attention(
            q, k, v, block_size=block
        ),
        f"tiled NumPy (lesson 9, block {block}), 1 BLAS thread": _one_blas_thread(
            lambda: rnp.tiled_attention(q, k, v, block_size=block)
        ),
        f"tiled PyTorch (lesson 9, block {block})": lambda: rpt.tiled_attention(
            tq, tk, tv, block_size=block
        ),
    }


def bench_attention_cpu(cfg: Config) -> Table:
    import numpy as np
    import torch

    b, h, n, d = cfg.attention_shape
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((b, h, n, d), dtype=np.float32) for _ in range(3))
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    candidates, missing = _built_in_candidates(tq, tk, tv)
    want = candidates[BUILT_IN]().numpy()
    ours = _course_candidates(cfg, q, k, v, tq, tk, tv)
    for label, fn in ours.items():  # each is checked before it is timed
        np.testing.assert_allclose(np.asarray(fn()), want, rtol=1e-4, atol=1e-5, err_msg=label)
    candidates.update(ours)
    with torch.inference_mode():
        best = interleaved_best(candidates, cfg.attention_repeat)
    base = best[BUILT_IN]
    table = Table(
        f"Attention on the CPU: B={b} h={h} n={n} d={d} float32, {torch.get_num_threads()} threads "
        f"(best of {cfg.attention_repeat}, interleaved in one run)",
        ["implementation", "ms", "x built-in", "target", ""],
    )
    for label, seconds in best.items():
        row = [label, f"{seconds * 1e3:.1f}", f"{seconds / base:.2f}"]
        if label.startswith("reference NumPy (lesson 2)"):
            row += ["<= 2.5x", verdict(seconds <= 2.5 * base)]
        table.rows.append(row)
    if missing:
        table.notes.append("backends that cannot run here: " + ", ".join(missing))
    table.notes.append(
        "reference rows: lesson 2's Eq. (1) by attention_ref.{np,pt}.sdpa_tuned (a few heads at "
        "a time, the numbers of the plain reference the hidden tests use)"
    )
    blas = _openblas()
    table.notes.append(
        f"NumPy's OpenBLAS runs {blas[0]() if blas else '?'} threads by default; PyTorch "
        "computes with MKL and its own threads"
    )
    return table


def bench_memory(cfg: Config) -> Table:
    import numpy as np

    import attention_ref.np as rnp
    from attention_ref.profiling import peak_memory

    d = cfg.memory_d
    table = Table(
        f"Peak memory, NumPy float32, one head of d = {d} (tracemalloc; inputs Q, K, V not "
        "counted)",
        [
            "n",
            "inputs MiB",
            "naive MiB",
            "naive s",
            f"tiled MiB (block {cfg.block_size})",
            "tiled s",
            "tiled / inputs",
            "target",
            "",
        ],
    )
    rng = np.random.default_rng(0)
    for n in progress(cfg.memory_sizes, "peak memory"):
        q, k, v = (rng.standard_normal((1, n, d), dtype=np.float32) for _ in range(3))
        inputs = q.nbytes + k.nbytes + v.nbytes
        start = time.perf_counter()
        naive_out, naive = peak_memory(rnp.scaled_dot_product_attention, q, k, v)
        naive_s = time.perf_counter() - start
        del naive_out
        start = time.perf_counter()
        _, tiled = peak_memory(rnp.tiled_attention, q, k, v, block_size=cfg.block_size)
        tiled_s = time.perf_counter() - start
        table.rows.append(
            [
                f"{n:,}",
                fmt_bytes(inputs),
                fmt_bytes(naive),
                f"{naive_s:.1f}",
                fmt_bytes(tiled),
                f"{tiled_s:.1f}",
                f"{tiled / inputs:.2f}",
                "<= 2x",
                verdict(tiled <= 2 * inputs),
            ]
        )
    table.notes.append(
        f"the n x n float32 scores alone are {fmt_bytes(cfg.memory_sizes[-1] ** 2 * 4)} MiB "
        f"at n = {cfg.memory_sizes[-1]:,}"
    )
    return table
