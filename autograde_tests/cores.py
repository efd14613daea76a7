"""Each pytest-xdist worker gets its share of the cores for torch's and the BLAS's threads.

PyTorch and NumPy's OpenBLAS start a thread per core for every product, and their threads wait
for each other by spinning. Two workers on 2 cores ran 4 such threads, and on a machine with
other work each small product waited for a thread that was not running: lesson 9's greedy
decoding test took 26 s and 13 CPU-seconds with 2 threads at load 5, 0.6 s with 1. So on a
worker the thread counts are the cores over the workers, at least 1, set in the environment
before NumPy and torch are imported (autograde_tests/__init__.py calls this first): the
processes the tests start (nbgrader, grading kernels, Dask workers) inherit them. One pytest
process alone keeps the libraries' defaults, and a count set by hand is kept.
"""

from __future__ import annotations

import os

VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def threads_per_worker(environ=os.environ) -> int | None:
    """The cores this process may use over the number of workers, or None outside pytest-xdist."""
    workers = environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not environ.get("PYTEST_XDIST_WORKER") or not workers:
        return None
    affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere every core
    cores = len(affinity(0)) if affinity else os.cpu_count() or 1
    return max(1, cores // max(1, int(workers)))


def share_the_cores(environ=os.environ) -> None:
    """On a worker, the thread counts of VARIABLES that are not set already."""
    threads = threads_per_worker(environ)
    if threads is None:
        return
    for name in VARIABLES:
        environ.setdefault(name, str(threads))
