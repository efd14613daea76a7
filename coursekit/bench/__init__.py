"""``make bench``: the numbers that show the course is fast, printed as tables.

Numbers, not timed tests: every row shows what was measured next to its target, and nothing
fails when a target is missed (a shared or slower machine moves the numbers). The sections:

  lessons    each solved lesson executed top to bottom by nbclient (hidden tests included), and
             the whole course, next to the floor: a notebook that only imports numpy, torch
             and matplotlib. Targets: whole course <= 60 s, no lesson above 6x the floor.
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
             peak GPU memory; lesson 11's Triton kernel (compiled, never interpreted) in the same
             tables, its throughput against FlashAttention's at n = 8k (moonshot: >= 0.5x), and its
             backward kernel against FlashAttention's backward (TFLOP/s). Elsewhere the section
             says "no GPU on this machine". On any machine: lesson 11's reference kernels
             compiled for sm_80 and sm_90 (registers, spills, shared memory; no GPU needed).
  experiments  (only when named: ``--only experiments``) every experiment a lesson declares in
             ``solutions/<lesson>/experiments.yml`` rerun over its seeds with the CPU kernels
             pinned and unpinned, one thread and two; each run's numbers written to the lesson's
             record, ``attention_ref/experiments/<lesson>.json`` (coursekit.bench.experiments).

The book's build times are measured separately by ``make bench-book`` (it rebuilds the book).
``python -m coursekit.bench --only attention,memory`` runs some sections; ``--tiny`` runs every
section on toy sizes (the smoke test does that).
"""

from coursekit.bench.attention import bench_attention_cpu, bench_memory
from coursekit.bench.gpu import bench_gpu
from coursekit.bench.grading import bench_grading, class_grading_target, parse_rate
from coursekit.bench.lessons import bench_lessons
from coursekit.bench.report import TINY, Config, Table

__all__ = [
    "TINY",
    "Config",
    "Table",
    "bench_attention_cpu",
    "bench_gpu",
    "bench_grading",
    "bench_lessons",
    "bench_memory",
    "class_grading_target",
    "parse_rate",
]
