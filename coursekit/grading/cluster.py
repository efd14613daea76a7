"""Where class grading runs its batches: Dask's distributed scheduler.

* **This machine** (the default): a ``LocalCluster`` with one worker per core (at most 8).
  A batch is an ``nbgrader autograde`` subprocess that the task waits for, so the workers are
  threads of this process (measured on 2 cores: as fast as worker processes, without their
  seconds of start-up); ``processes=True`` gives worker processes instead.
* **A cluster** (``--scheduler tcp://HOST:8786``, or Dask's own ``DASK_SCHEDULER_ADDRESS``):
  an existing Dask scheduler whose workers see the course folder at the same path (a shared
  filesystem, as a class hub's home volume) and run this course's environment. Before anything
  is graded, :func:`probe` asks every worker whether it sees the course as the client does.

Dask reruns the batches of a worker that dies on another worker; :meth:`Dispatch.reruns` reads
from the scheduler's own event log which batches that happened to (coursekit.grading.batch says
why a rerun counts nothing twice). Dask's dashboard is linked when the scheduler has one.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from coursekit.grading.batch import (
    BatchResult,
    BatchSpec,
    CourseNotVisible,
    config_digest,
    course_visible,
    grade_batch,
)
from coursekit.grading.tempcourse import GradingError

CONNECT_SECONDS = 20  # to reach a scheduler
WORKERS_SECONDS = 60  # for a first worker to join it
# Dask's background work that serves only its dashboard and diagnostics. With Dask's defaults an
# idle cluster on this machine took 6 % of a core while it waited on nbgrader (1.8 % with these):
# CPU the grading kernels need.
QUIET_LOCAL_CLUSTER = {
    "distributed.worker.profile.enabled": False,  # stack samples, 100 a second
    "distributed.admin.tick.interval": "1s",  # the event loop's health check (default 20 ms)
    "distributed.admin.system-monitor.interval": "5s",  # CPU and memory plots (default 0.5 s)
}


@dataclass
class Cluster:
    client: object  # distributed.Client
    workers: int  # batches graded at once: the workers' threads
    where: str  # for the report, e.g. "the Dask cluster at tcp://10.0.0.5:8786"
    dashboard: str = ""  # Dask's dashboard, when the scheduler serves one

    def describe(self) -> str:
        return f"{self.where}" + (f" (dashboard: {self.dashboard})" if self.dashboard else "")


def add_cluster_arguments(parser) -> None:
    """--workers, --scheduler and --processes: where a command grades (argparse)."""
    parser.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="grade on the Dask cluster of this scheduler, e.g. tcp://HOST:8786, whose workers "
        "see the course folder (default: $DASK_SCHEDULER_ADDRESS, else this machine)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        help="on this machine: batches graded at once (default: one per core, <= 8)",
    )
    parser.add_argument(
        "--processes",
        action="store_true",
        help="on this machine: Dask worker processes instead of threads",
    )


def scheduler_address(given: str | None = None) -> str | None:
    """``given``, else Dask's own configuration (``DASK_SCHEDULER_ADDRESS``), else None."""
    import dask

    return given or dask.config.get("scheduler-address", None) or None


def _connect(address: str):
    from distributed import Client
    from distributed.comm.addressing import get_address_host_port

    try:
        # a malformed address first, by Dask's own parser: a Client made with one would wait
        # 40 s when it is garbage-collected
        get_address_host_port(address)
        client = Client(address, timeout=CONNECT_SECONDS, set_as_default=False)
    except (OSError, ValueError, TypeError) as problem:
        raise GradingError(
            f"cannot reach the Dask scheduler at {address!r} "
            f"(--scheduler or DASK_SCHEDULER_ADDRESS): {problem}"
        ) from None
    try:
        client.wait_for_workers(1, timeout=WORKERS_SECONDS)
    except TimeoutError:
        client.close()
        raise GradingError(
            f"no Dask worker joined the scheduler at {address} in {WORKERS_SECONDS} s: start "
            f"some with `dask worker {address}` on machines that see the course folder"
        ) from None
    return client


def _dashboard(client) -> str:
    services = client.scheduler_info(n_workers=0).get("services", {})
    return client.dashboard_link if "dashboard" in services else ""


@contextmanager
def open_cluster(
    address: str | None = None, workers: int | None = None, processes: bool = False
) -> Iterator[Cluster]:
    """A Dask client on the cluster at ``address``, or on a LocalCluster of ``workers``."""
    import dask
    from distributed import Client, LocalCluster

    if address:
        if workers:
            raise GradingError(
                f"--workers sizes a cluster on this machine; the Dask cluster at {address} "
                "has its own workers"
            )
        client = _connect(address)
        try:
            threads = sum(client.nthreads().values())
            yield Cluster(client, threads, f"the Dask cluster at {address}", _dashboard(client))
        finally:
            client.close()
        return
    n = workers or min(os.cpu_count() or 1, 8)
    # Threads: one worker in this process, still over TCP so that its HTTP server (health,
    # metrics) listens on 127.0.0.1 too. No dashboard (2 s of start-up, for what the progress bar
    # shows), so nobody reads the workers' statistical profiles (no stack sampling) or the system
    # monitor's plots, nor needs the event loop's health measured 50 times a second.
    with dask.config.set(QUIET_LOCAL_CLUSTER):
        local = LocalCluster(
            n_workers=n if processes else 1,
            threads_per_worker=1 if processes else n,
            processes=processes,
            protocol="tcp://",
            host="127.0.0.1",  # every port of it: free ones on the loopback interface
            dashboard_address=None,
            scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
        )
    kind = "processes" if processes else "threads"
    with local, Client(local, set_as_default=False) as client:
        yield Cluster(client, n, f"a Dask cluster on this machine ({n} {kind})")


def probe(cluster: Cluster, course, folder, bubblewrap: bool = False) -> None:
    """Fail, naming the workers and why, unless every worker sees the course folder as the
    client does, can write in ``folder`` and (``bubblewrap``) can run grading kernels in
    bubblewrap; run before anything is graded."""
    digest = config_digest(course)
    try:
        answers = cluster.client.run(course_visible, str(course), digest, str(folder), bubblewrap)
    except Exception as problem:  # e.g. a worker without coursekit cannot unpickle the probe
        raise GradingError(
            f"the Dask workers of {cluster.where} could not run the course check "
            f"({type(problem).__name__}: {problem}); every worker needs this course's environment"
        ) from None
    blind = {worker: why for worker, why in sorted(answers.items()) if why}
    if blind:
        raise GradingError(
            f"every Dask worker must see the course folder {course} (a shared filesystem); "
            + "; ".join(f"worker {w} cannot: {why}" for w, why in blind.items())
            + ". Nothing was graded."
        )


class Dispatch:
    """The batches of one run on a cluster: submitted as Dask tasks, handed back as they finish
    (:meth:`results`), calling ``tick`` about twice a second meanwhile (the progress bar)."""

    def __init__(self, cluster: Cluster, tick=None):
        from distributed import as_completed

        self.cluster = cluster
        self.tick = tick or (lambda: None)
        self.specs: dict[str, BatchSpec] = {}  # by task key
        self.run = uuid.uuid4().hex[:8]  # keys unique on a cluster that grades several courses
        self.pending = as_completed(loop=cluster.client.loop)  # not a default client: ours

    def submit(self, spec: BatchSpec) -> None:
        key = f"grade-{spec.lesson.assignment}-{self.run}-batch-{spec.number}"
        self.specs[key] = spec
        self.pending.add(self.cluster.client.submit(grade_batch, spec, key=key, pure=False))

    def results(self) -> Iterator[BatchResult]:
        """Each batch's result once, in the order they finish; :meth:`submit` may add more."""
        while not self.pending.is_empty():
            if not self.pending.has_ready():
                self.tick()
                time.sleep(0.5)
                continue
            for future in self.pending.next_batch(block=False):
                yield self._result(future)
        self.tick()

    def _result(self, future) -> BatchResult:
        """The task's BatchResult, after which the cluster forgets it (a key still held is
        recomputed when its worker dies: the batch graded again for nothing)."""
        try:
            return self._outcome(future)
        finally:
            future.release()

    def _outcome(self, future) -> BatchResult:
        """A batch that killed its workers comes back as ungraded (the caller grades its students
        one by one); anything else that went wrong stops the run."""
        from distributed import KilledWorker

        spec = self.specs[future.key]
        try:
            return future.result()
        except KilledWorker as killed:
            return BatchResult(
                spec.number,
                list(spec.students),
                [],
                returncode=-9,
                log_tail=f"the Dask workers grading it died, one after another: {killed}",
            )
        except CourseNotVisible as problem:
            raise GradingError(f"{problem}. Every worker must see the course folder.") from None
        except Exception as problem:
            raise GradingError(
                f"batch {spec.number} ({', '.join(spec.students)}) could not run on "
                f"{self.cluster.where}: {type(problem).__name__}: {problem}"
            ) from None

    def reruns(self) -> dict[int, list[str]]:
        """{batch number: workers lost while they held it}: Dask gave those batches to another
        worker -- those it was grading, and those it had graded but whose result the client had
        not collected yet. From the scheduler's own event log ("remove-worker" events)."""
        numbers = {key: spec.number for key, spec in self.specs.items()}
        lost: dict[int, list[str]] = {}
        for _, event in self.cluster.client.get_events("all"):
            if not isinstance(event, dict) or event.get("action") != "remove-worker":
                continue
            held = {*event.get("processing-tasks", ()), *event.get("lost-computed-tasks", ())}
            for key in sorted(held & numbers.keys()):
                lost.setdefault(numbers[key], []).append(event.get("worker", "a worker"))
        return lost
