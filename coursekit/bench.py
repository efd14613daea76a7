"""``make bench``: the numbers that show the course is fast, printed as tables.

Numbers, not timed tests: every row shows what was measured next to its target, and nothing
fails when a target is missed (a shared or slower machine moves the numbers). The sections:

  lessons    each solved lesson executed top to bottom by nbclient (hidden tests included), and
             the whole course, next to the floor: a notebook that only imports numpy, torch
             and matplotlib. Targets: whole course <= 60 s, no lesson above 4x the floor.
  attention  lesson 2's reference attention (NumPy and PyTorch) and lesson 9's tiled attention
             against F.scaled_dot_product_attention (and each of its backends this machine has)
             on the CPU, B=8 h=8 n=512 d=64 float32, timed interleaved in one run.
             Target: NumPy reference <= 2.5x the built-in.
  memory     peak memory (tracemalloc) of naive vs tiled NumPy attention at n = 4k, 8k, 16k.
             Target: tiled <= 2x the size of its inputs.
  grading    notebooks per minute when a class of 100 is autograded on this machine: the
             class-grading command's own report (``make grade-class``), when the repository has it.
  gpu        where CUDA is present: tiled PyTorch attention against F.scaled_dot_product_attention
             and its backends at n = 1k ... 16k, throughput at n = 8k (moonshot: >= 0.5x) and
             peak GPU memory. Elsewhere the section says "no GPU on this machine".

The book's build times are measured separately by ``make bench-book`` (it rebuilds the book).
``python -m coursekit.bench --only attention,memory`` runs some sections; ``--tiny`` runs every
section on toy sizes (the smoke test does that).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .lessons import ROOT, all_lessons

SECTIONS = ("lessons", "attention", "memory", "grading", "gpu")
FLOOR_SOURCE = "import numpy\nimport torch\nimport matplotlib.pyplot as plt"
CLASS_SIZE = 100
GRADING_TARGETS = ("grade-class",)  # Makefile targets that grade a class of CLASS and report notebooks per minute
RATE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*notebooks?\s*(?:/|per)\s*min", re.IGNORECASE)
MiB = 2 ** 20


@dataclass
class Config:
    repeat: int = 1  # executions of each lesson (the best counts)
    floor_runs: int = 2  # executions of the floor notebook (the best counts)
    lessons: bool = True  # False: the floor notebook only
    attention_shape: tuple[int, int, int, int] = (8, 8, 512, 64)  # B, h, n, d
    attention_repeat: int = 9
    memory_sizes: tuple[int, ...] = (4096, 8192, 16384)
    memory_d: int = 64
    block_size: int = 64  # NumPy tiled attention (d = 64: a block of scores is the size of one input)
    cpu_block_size: int = 128  # for the CPU timing
    gpu_sizes: tuple[int, ...] = (1024, 2048, 4096, 8192, 16384)
    gpu_throughput_n: int = 8192
    gpu_memory_sizes: tuple[int, ...] = (4096, 8192, 16384)
    gpu_shape: tuple[int, int, int] = (1, 8, 64)  # B, h, d
    gpu_block_sizes: tuple[int, ...] = (256, 1024, 4096)  # the best one is used
    gpu_repeat: int = 5
    grading: bool = True


TINY = Config(floor_runs=1, lessons=False, attention_shape=(1, 2, 32, 8), attention_repeat=2, memory_sizes=(64, 128),
              memory_d=8, block_size=16, cpu_block_size=16, gpu_sizes=(32, 64), gpu_throughput_n=64,
              gpu_memory_sizes=(64,), gpu_shape=(1, 2, 8), gpu_block_sizes=(16, 32), gpu_repeat=2,
              grading=False)


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        cells = [self.headers] + self.rows
        widths = [max(len(row[i]) for row in cells if i < len(row)) for i in range(len(self.headers))]

        def line(row):
            first, *rest = row
            return "  " + first.ljust(widths[0]) + "".join("  " + c.rjust(w) for c, w in zip(rest, widths[1:]))

        out = [self.title, line(self.headers), "  " + "-" * (sum(widths) + 2 * (len(widths) - 1))]
        out += [line(row + [""] * (len(self.headers) - len(row))) for row in self.rows]
        out += [f"  {note}" for note in self.notes]
        return "\n".join(out)


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def fmt_bytes(n: float) -> str:
    """Bytes in MiB, with enough digits to tell small sizes apart."""
    mib = n / MiB
    return f"{mib:,.0f}" if mib >= 100 else f"{mib:.1f}" if mib >= 1 else f"{mib:.3f}"


def progress(iterable, desc: str, total: int | None = None, show: bool = True):
    """A progress bar on stderr (tqdm), or the bare iterable where tqdm is missing (a bare GPU
    machine has numpy and torch, not the course's tools)."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, desc=desc, total=total, leave=False, file=sys.stderr, disable=not show)


# ---- lessons --------------------------------------------------------------------------------


def execute_seconds(nb, cwd: Path) -> float:
    """Wall time of nbclient running ``nb`` top to bottom in a fresh kernel (start-up included)."""
    import nbclient

    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(cwd)}})
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


def floor_notebook():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(FLOOR_SOURCE))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def bench_lessons(cfg: Config) -> Table:
    from .sources import source_to_notebook

    lessons = all_lessons() if cfg.lessons else []
    jobs = [("floor", None)] * max(cfg.floor_runs, cfg.repeat) + [(item.assignment, item) for item in lessons
                                                      for _ in range(cfg.repeat)]
    seconds: dict[str, float] = {}
    for name, item in progress(jobs, "executing notebooks"):
        nb = floor_notebook() if item is None else source_to_notebook(item.source)
        took = execute_seconds(nb, ROOT if item is None else item.source.parent)
        seconds[name] = min(seconds.get(name, float("inf")), took)
    floor = seconds["floor"]
    table = Table("Lesson execution (nbclient, solved lessons incl. hidden tests)",
                  ["notebook", "seconds", "x floor", "target", ""])
    table.rows.append(["floor: imports numpy, torch, matplotlib", f"{floor:.1f}", "1.00", "", ""])
    for item in lessons:
        s = seconds[item.assignment]
        table.rows.append([f"{item.assignment} {item.name}", f"{s:.1f}", f"{s / floor:.2f}", "<= 4x",
                           verdict(s <= 4 * floor)])
    if lessons:
        total = sum(seconds[item.assignment] for item in lessons)
        table.rows.append([f"whole course ({len(lessons)} lessons, one after another)", f"{total:.1f}",
                           f"{total / floor:.2f}", "<= 60 s", verdict(total <= 60)])
    if cfg.repeat > 1:
        table.notes.append(f"best of {cfg.repeat} executions each")
    return table


# ---- attention on the CPU ---------------------------------------------------------------------


def sdpa_backends():
    """(label, backend) for each backend of F.scaled_dot_product_attention this PyTorch knows."""
    try:
        from torch.nn.attention import SDPBackend
    except ImportError:  # older PyTorch: the automatic choice only
        return []
    names = ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")
    return [(name.lower(), getattr(SDPBackend, name)) for name in names if hasattr(SDPBackend, name)]


def sdpa_with(backend):
    """F.scaled_dot_product_attention restricted to one backend (RuntimeError where it cannot run)."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    def run(q, k, v):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v)

    return run


def interleaved_best(candidates: dict, repeat: int, sync=None, show: bool = True) -> dict[str, float]:
    """Best wall time of each candidate (label -> zero-argument function), the candidates taking
    turns in every round so that a busy moment of the machine hits them all alike."""
    best = {label: float("inf") for label in candidates}
    for fn in candidates.values():  # warm-up: first calls allocate and pick kernels
        fn()
    if sync:
        sync()
    for _ in progress(range(repeat), "timing rounds", show=show):
        for label, fn in candidates.items():
            start = time.perf_counter()
            fn()
            if sync:
                sync()
            best[label] = min(best[label], time.perf_counter() - start)
    return best


def _openblas():
    """(get_num_threads, set_num_threads) of NumPy's bundled OpenBLAS, or None where it has none."""
    import ctypes
    import glob

    import numpy as np

    found = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "libscipy_openblas*.so*"))
    if not found:
        return None
    blas = ctypes.CDLL(found[0])  # already loaded by NumPy: the same library, not a second copy
    for suffix in ("64_", "_64_", ""):
        if hasattr(blas, f"scipy_openblas_set_num_threads{suffix}"):
            return (getattr(blas, f"scipy_openblas_get_num_threads{suffix}"),
                    getattr(blas, f"scipy_openblas_set_num_threads{suffix}"))
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


def bench_attention_cpu(cfg: Config) -> Table:
    import numpy as np
    import torch
    import torch.nn.functional as F

    import attention_ref.np as rnp
    import attention_ref.pt as rpt

    b, h, n, d = cfg.attention_shape
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((b, h, n, d), dtype=np.float32) for _ in range(3))
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    want = F.scaled_dot_product_attention(tq, tk, tv)
    candidates = {"F.scaled_dot_product_attention (its own choice)": lambda: F.scaled_dot_product_attention(tq, tk, tv)}
    missing = []
    for label, backend in sdpa_backends():
        run = sdpa_with(backend)
        try:
            run(tq, tk, tv)
        except RuntimeError:
            missing.append(label)
            continue
        candidates[f"F.scaled_dot_product_attention [{label}]"] = lambda run=run: run(tq, tk, tv)
    def one_blas_thread(fn):
        def run():
            with openblas_threads(1):
                return fn()
        return run

    ours = {
        "reference NumPy (lesson 2)": lambda: rnp.scaled_dot_product_attention(q, k, v),
        "reference NumPy (lesson 2), 1 BLAS thread": one_blas_thread(lambda: rnp.scaled_dot_product_attention(q, k, v)),
        "reference PyTorch (lesson 2)": lambda: rpt.scaled_dot_product_attention(tq, tk, tv),
        f"tiled NumPy (lesson 9, block {cfg.cpu_block_size})":
            lambda: rnp.tiled_attention(q, k, v, block_size=cfg.cpu_block_size),
        f"tiled NumPy (lesson 9, block {cfg.cpu_block_size}), 1 BLAS thread":
            one_blas_thread(lambda: rnp.tiled_attention(q, k, v, block_size=cfg.cpu_block_size)),
        f"tiled PyTorch (lesson 9, block {cfg.cpu_block_size})":
            lambda: rpt.tiled_attention(tq, tk, tv, block_size=cfg.cpu_block_size),
    }
    for label, fn in ours.items():  # each is checked before it is timed
        got = fn()
        np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-4, atol=1e-5, err_msg=label)
    candidates.update(ours)
    with torch.inference_mode():
        best = interleaved_best(candidates, cfg.attention_repeat)
    base = best["F.scaled_dot_product_attention (its own choice)"]
    table = Table(f"Attention on the CPU: B={b} h={h} n={n} d={d} float32, {torch.get_num_threads()} threads "
                  f"(best of {cfg.attention_repeat}, interleaved in one run)",
                  ["implementation", "ms", "x built-in", "target", ""])
    for label, seconds in best.items():
        row = [label, f"{seconds * 1e3:.1f}", f"{seconds / base:.2f}"]
        if label.startswith("reference NumPy (lesson 2)"):
            row += ["<= 2.5x", verdict(seconds <= 2.5 * base)]
        table.rows.append(row)
    if missing:
        table.notes.append("backends that cannot run here: " + ", ".join(missing))
    blas = _openblas()
    table.notes.append(f"NumPy's OpenBLAS runs {blas[0]() if blas else '?'} threads by default; PyTorch "
                       "computes with MKL and its own threads")
    return table


# ---- peak memory -------------------------------------------------------------------------------


def bench_memory(cfg: Config) -> Table:
    import numpy as np

    import attention_ref.np as rnp
    from attention_ref.profiling import peak_memory

    d = cfg.memory_d
    table = Table(f"Peak memory, NumPy float32, one head of d = {d} (tracemalloc; inputs Q, K, V not counted)",
                  ["n", "inputs MiB", "naive MiB", "naive s", f"tiled MiB (block {cfg.block_size})", "tiled s",
                   "tiled / inputs", "target", ""])
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
        table.rows.append([f"{n:,}", fmt_bytes(inputs), fmt_bytes(naive), f"{naive_s:.1f}",
                           fmt_bytes(tiled), f"{tiled_s:.1f}", f"{tiled / inputs:.2f}", "<= 2x",
                           verdict(tiled <= 2 * inputs)])
    table.notes.append(f"the n x n float32 scores alone are {fmt_bytes(cfg.memory_sizes[-1] ** 2 * 4)} MiB "
                       f"at n = {cfg.memory_sizes[-1]:,}")
    return table


# ---- class grading ------------------------------------------------------------------------------


def class_grading_target(root: Path = ROOT) -> str | None:
    """The Makefile target that autogrades a class and reports notebooks per minute, if any."""
    makefile = (root / "Makefile").read_text(encoding="utf-8")
    return next((t for t in GRADING_TARGETS if re.search(rf"^{re.escape(t)}\s*:", makefile, re.MULTILINE)), None)


def parse_rate(output: str) -> float | None:
    """The last "N notebooks/minute" (or "notebooks per minute") in a command's output."""
    found = RATE.findall(output)
    return float(found[-1]) if found else None


def bench_grading(cfg: Config, root: Path = ROOT) -> Table:
    table = Table(f"Autograding a class of {CLASS_SIZE} on this machine", ["measure", "value"])
    target = class_grading_target(root) if cfg.grading else None
    if target is None:
        why = "not run (--tiny)" if not cfg.grading else "n/a (class grading not on main yet)"
        table.rows.append(["notebooks per minute", why])
        return table
    command = ["make", "--no-print-directory", target, f"CLASS={CLASS_SIZE}"]  # its report ends with the rate
    print(f"  running `{' '.join(command)}` (minutes; its progress bar follows)", file=sys.stderr, flush=True)
    start = time.perf_counter()
    # its report (stdout) is parsed; its progress bar (stderr) shows as it runs
    result = subprocess.run(command, cwd=root, stdout=subprocess.PIPE, text=True, check=False)
    took = time.perf_counter() - start
    rate = parse_rate(result.stdout)
    if result.returncode != 0 or rate is None:
        table.rows.append(["notebooks per minute", f"n/a (`{' '.join(command)}` exited {result.returncode}, "
                                                   "no 'notebooks/minute' in its output)"])
    else:
        table.rows.append(["notebooks per minute", f"{rate:.1f}"])
    table.rows.append(["wall time of the command", f"{took:.0f} s"])
    table.notes.append(f"from `{' '.join(command)}` (its own report, parsed)")
    return table


# ---- GPU ----------------------------------------------------------------------------------------


def bench_gpu(cfg: Config, device=None) -> list[Table]:
    """Tiled PyTorch attention against F.scaled_dot_product_attention on ``device`` (default: cuda).

    Runs on any device (the smoke test runs it on the CPU with toy sizes); peak memory is only
    measured on CUDA.
    """
    import torch
    import torch.nn.functional as F

    import attention_ref.pt as rpt
    from attention_ref.profiling import peak_memory

    if device is None:
        if not torch.cuda.is_available():
            return [Table("GPU: tiled PyTorch attention vs F.scaled_dot_product_attention, n = 1k ... 16k",
                          ["status"], rows=[["no GPU on this machine (torch.cuda.is_available() is False)"]])]
        device = torch.device("cuda")
    device = torch.device(device)
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else None
    dtype = torch.float16 if cuda else torch.float32
    b, h, d = cfg.gpu_shape
    name = torch.cuda.get_device_name(device) if cuda else str(device)
    gen = torch.Generator(device=device).manual_seed(0)

    def inputs(n):
        return tuple(torch.randn(b, h, n, d, generator=gen, device=device, dtype=dtype) for _ in range(3))

    # the tiled attention's block size: the fastest of a few at the throughput size
    q, k, v = inputs(cfg.gpu_throughput_n)
    with torch.inference_mode():
        block_times = interleaved_best({bs: (lambda bs=bs: rpt.tiled_attention(q, k, v, block_size=bs,
                                                                               half_products=cuda))
                                        for bs in cfg.gpu_block_sizes}, cfg.gpu_repeat, sync, show=False)
    block = min(block_times, key=block_times.get)

    implementations = {"F.sdpa (its own choice)": F.scaled_dot_product_attention}
    for label, backend in sdpa_backends():
        implementations[f"F.sdpa [{label}]"] = sdpa_with(backend)
    implementations[f"tiled PyTorch (block {block})"] = (
        lambda q, k, v: rpt.tiled_attention(q, k, v, block_size=block, half_products=cuda))
    if cuda:  # the exact variant: every product in float32 from float32 copies of the inputs
        implementations[f"tiled PyTorch (block {block}), float32 products"] = (
            lambda q, k, v: rpt.tiled_attention(q, k, v, block_size=block))
    implementations["reference PyTorch (lesson 2)"] = rpt.scaled_dot_product_attention

    timing = Table(f"GPU: {name}, torch {torch.__version__}, {str(dtype)[6:]}, B={b} h={h} d={d} "
                   f"(ms, best of {cfg.gpu_repeat})", ["implementation"] + [f"n={n:,}" for n in cfg.gpu_sizes])
    times: dict[str, dict[int, float]] = {label: {} for label in implementations}
    for n in progress(cfg.gpu_sizes, "GPU sizes"):
        q, k, v = inputs(n)
        want = F.scaled_dot_product_attention(q, k, v)
        runnable = {}
        for label, fn in implementations.items():
            try:
                with torch.inference_mode():
                    got = fn(q, k, v)
                torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)
                runnable[label] = lambda fn=fn: fn(q, k, v)
            except torch.cuda.OutOfMemoryError:
                times[label][n] = "out of memory"
            except AssertionError:
                times[label][n] = "wrong result"
            except RuntimeError as error:  # e.g. a backend that does not support these inputs
                times[label][n] = f"n/a: {str(error).splitlines()[0][:30]}"
            finally:
                if cuda:
                    torch.cuda.empty_cache()
        with torch.inference_mode():
            for label, seconds in interleaved_best(runnable, cfg.gpu_repeat, sync, show=False).items():
                times[label][n] = seconds
        del q, k, v, want
    for label, by_n in times.items():
        timing.rows.append([label] + [f"{by_n[n] * 1e3:.2f}" if isinstance(by_n.get(n), float)
                                      else str(by_n.get(n, "")) for n in cfg.gpu_sizes])
    if cuda:
        timing.notes.append("tiled PyTorch runs its two products in float16 (tensor cores: half_products=True), "
                            "its softmax statistics in float32")
    timing.notes.append("block sizes tried for the tiled attention (ms at n = "
                        f"{cfg.gpu_throughput_n:,}): " + ", ".join(f"{bs}: {t * 1e3:.2f}" for bs, t in block_times.items()))

    n = cfg.gpu_throughput_n
    ours, theirs = times[f"tiled PyTorch (block {block})"].get(n), times["F.sdpa (its own choice)"].get(n)
    throughput = Table(f"GPU throughput at n = {n:,}: tiled PyTorch against F.scaled_dot_product_attention",
                       ["measure", "value", "target", ""])
    if isinstance(ours, float) and isinstance(theirs, float):
        ratio = theirs / ours
        flops = 4 * b * h * n * n * d  # two matrix products of 2 n^2 d FLOPs per head
        throughput.rows.append(["tiled throughput / built-in throughput", f"{ratio:.2f}", ">= 0.5x (moonshot)",
                                verdict(ratio >= 0.5)])
        throughput.rows.append(["tiled TFLOP/s", f"{flops / ours / 1e12:.1f}", "", ""])
        throughput.rows.append(["built-in TFLOP/s", f"{flops / theirs / 1e12:.1f}", "", ""])
    else:
        throughput.rows.append(["tiled throughput / built-in throughput", f"n/a ({ours}, {theirs})", "", ""])
    tables = [timing, throughput]

    memory = Table(f"GPU peak memory (torch.cuda.max_memory_allocated, MiB), {str(dtype)[6:]}, B={b} h={h} d={d}",
                   ["n", "inputs", "reference (lesson 2)", f"tiled (block {block})", "F.sdpa"])
    for n in progress(cfg.gpu_memory_sizes, "GPU memory"):
        q, k, v = inputs(n)
        row = [f"{n:,}", fmt_bytes(3 * q.numel() * q.element_size())]
        for fn in (rpt.scaled_dot_product_attention,
                   lambda q, k, v: rpt.tiled_attention(q, k, v, block_size=block, half_products=cuda),
                   F.scaled_dot_product_attention):
            if not cuda:
                row.append("n/a (not CUDA)")
                continue
            try:
                with torch.inference_mode():
                    out, peak = peak_memory(fn, q, k, v)
                del out
                row.append(fmt_bytes(peak))
            except torch.cuda.OutOfMemoryError:
                row.append("out of memory")
            finally:
                torch.cuda.empty_cache()
        memory.rows.append(row)
        del q, k, v
    tables.append(memory)
    return tables


# ---- main ---------------------------------------------------------------------------------------


def machine_line() -> str:
    import torch

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (f"Machine: {os.cpu_count()} CPU cores, torch {torch.__version__} ({torch.get_num_threads()} threads), "
            f"{gpu}; load average {load:.1f} when the benchmark started")


def run(sections: tuple[str, ...], cfg: Config) -> list[Table]:
    # nbclient's kernel and `make` find this environment's python first, as under `make bench`
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    tables: list[Table] = []
    steps = {"lessons": lambda: [bench_lessons(cfg)], "attention": lambda: [bench_attention_cpu(cfg)],
             "memory": lambda: [bench_memory(cfg)], "grading": lambda: [bench_grading(cfg)],
             "gpu": lambda: bench_gpu(cfg)}
    for section in sections:
        print(f"  measuring: {section} ...", file=sys.stderr, flush=True)
        tables.extend(steps[section]())
    return tables


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m coursekit.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"comma-separated sections to run (default: all of {', '.join(SECTIONS)})")
    parser.add_argument("--repeat", type=int, default=1, help="executions of each lesson; the best counts")
    parser.add_argument("--tiny", action="store_true", help="toy sizes, no lessons: checks that the code runs")
    args = parser.parse_args(argv)
    sections = tuple(s.strip() for s in args.only.split(",") if s.strip())
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    cfg = TINY if args.tiny else Config(repeat=max(1, args.repeat))
    print(machine_line(), flush=True)
    tables = run(sections, cfg)
    print()
    print("\n\n".join(table.render() for table in tables))
    print("\nBook build times: `make bench-book` (full build, no-op rebuild, one lesson edited).")


if __name__ == "__main__":
    main()
