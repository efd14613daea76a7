"""``make bench BENCH_FLAGS="--only experiments --lessons lesson08"``: rerun every experiment a
lesson declares (``solutions/<lesson>/experiments.yml``, coursekit.course.experiments) over its
seeds, under every condition (CPU kernels pinned and unpinned, one thread and two), and write what
each run gave into the lesson's record, ``attention_ref/experiments/<lesson>.json``.

Each condition gets a fresh kernel started with its environment; the kernel executes the cells
grading runs up to the experiment's cell, sets torch's threads (a lesson may set its own), then
evaluates the experiment's ``run`` once per seed. Expensive (minutes per experiment): run it
niced, never in CI. ``--experiments NAME`` reruns only some of a lesson's experiments.
"""

from __future__ import annotations

import datetime
import json
import platform
import sys
import time

from coursekit.bench.conditions import environment
from coursekit.bench.report import Table, verdict
from coursekit.course import experiments as spec
from coursekit.course.numerics import CONDITIONS, Condition

MARK = "@@experiment-run "
RUN = """\
import json as _json, time as _time
{function}
_start = _time.perf_counter()
_values = _experiment_run({seed})
print({mark!r} + _json.dumps({{"values": _values, "seconds": _time.perf_counter() - _start}},
                             default=lambda o: o.item() if hasattr(o, "item") else str(o)))
"""
THREADS = "import torch as _torch\n_torch.set_num_threads({threads})"


def _code_cell(source: str):
    import nbformat

    return nbformat.v4.new_code_cell(source)


def _execute(client, source: str):
    """Run ``source`` as a new last cell of the client's notebook; the cell, with its outputs."""
    client.nb.cells.append(_code_cell(source))
    index = len(client.nb.cells) - 1
    client.execute_cell(client.nb.cells[index], index)
    _printed(client.nb.cells[index])
    return client.nb.cells[index]


def _printed(cell) -> str:
    text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
    for output in cell.outputs:
        if output.get("output_type") == "error":
            raise RuntimeError(f"{output['ename']}: {output['evalue']}\n{cell.source}")
    return text


def _rounded(value):
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def _run_seeds(client, experiment: spec.Declared, condition: Condition, bar) -> list[dict]:
    """Every seed's run of ``experiment`` in the client's kernel, as the record keeps it."""
    _execute(client, THREADS.format(threads=condition.threads))  # a lesson may set its own
    runs = []
    for seed in experiment.seeds:
        code = RUN.format(function=spec.run_function(experiment.run), seed=seed, mark=MARK)
        cell = _execute(client, code)
        printed = _printed(cell)
        if MARK not in printed:
            raise RuntimeError(
                f"{experiment.name}, seed {seed}: no result printed:\n{printed[-2000:]}"
            )
        made = json.loads(
            printed.rsplit(MARK, 1)[1].splitlines()[0]
        )  # a progress bar may share its line
        if not isinstance(made["values"], dict):
            raise TypeError(f"{experiment.name}: run must give {{quantity: value}}: {made!r}")
        runs.append(
            {"seed": seed, "pinned": condition.pinned, "threads": condition.threads,
             "seconds": round(made["seconds"], 1), "values": _rounded(made["values"])}
        )  # fmt: skip
        bar.update()
    return runs


def run_condition(item, chosen: list, condition: Condition, bar) -> dict[str, list[dict]]:
    """{experiment: every seed's run} of the ``chosen`` experiments of lesson ``item``, in one
    fresh kernel under ``condition``: the lesson's cells in order, each experiment's runs as soon
    as its cell has run (coursekit.course.experiments.schedule)."""
    import nbclient
    import nbformat

    from coursekit.course.reading import source_to_notebook

    source = source_to_notebook(item.source)
    walk = spec.schedule(source, chosen)
    nb = nbformat.v4.new_notebook(metadata=source.metadata)
    client = nbclient.NotebookClient(
        nb, timeout=3600, kernel_name="python3",
        resources={"metadata": {"path": str(item.source.parent)}},
    )  # fmt: skip
    runs = {}
    with environment(condition), client.setup_kernel():
        for cell, then in walk:
            _execute(client, cell.source)
            for experiment in then:
                runs[experiment.name] = _run_seeds(client, experiment, condition, bar)
    return runs


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(total: int, desc: str, show: bool):
    """A progress bar on stderr (tqdm) over ``total`` runs, or one that shows nothing."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, leave=False, file=sys.stderr, disable=not show)


def machine() -> str:
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next(t.split(":", 1)[1].strip() for t in info if t.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, torch {torch.__version__}, {platform.system()} {platform.machine()}"


def record_lesson(item, chosen: list, show: bool = True) -> dict[str, dict]:
    """Run the ``chosen`` experiments of ``item`` under every condition and write their records;
    {experiment: record}."""
    from coursekit.course.reading import source_to_notebook

    nb = source_to_notebook(item.source)
    hashes = {e.name: spec.experiment_hash(nb, e) for e in chosen}
    total = len(CONDITIONS) * sum(len(e.seeds) for e in chosen)
    bar = _bar(total, f"{item.assignment}: {', '.join(e.name for e in chosen)}", show)
    runs = {e.name: [] for e in chosen}
    for condition in CONDITIONS:
        for name, made in run_condition(item, chosen, condition, bar).items():
            runs[name] += made
    bar.close()
    records = {}
    for experiment in chosen:
        records[experiment.name] = {
            "hash": hashes[experiment.name],
            "recorded": datetime.date.today().isoformat(),
            "machine": machine(),
            "seconds": round(sum(run["seconds"] for run in runs[experiment.name])),
            "seeds": experiment.seeds,
            "quantities": experiment.quantities,
            "runs": runs[experiment.name],
        }
        spec.write_record(item, experiment.name, records[experiment.name])
    return records


def summary_rows(experiment: spec.Declared, record: dict) -> list[list[str]]:
    from attention_ref.experiments import Experiment

    shown = Experiment("", experiment.name, record)
    rows = []
    for quantity in experiment.quantities:
        values = shown.values(quantity)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            rows.append([f"  {quantity}", shown.spread(quantity), "", ""])
        else:
            rows.append([f"  {quantity}", f"{len(shown.counts(quantity))} distinct values", "", ""])
    for conclusion in experiment.conclusions:
        failed = spec.failed_runs(record, conclusion)
        held = f"{len(record['runs']) - len(failed)} of {len(record['runs'])} runs"
        rows.append(
            [f"  holds: {conclusion.holds}", conclusion.says[:60], held, verdict(not failed)]
        )
    return rows


def bench_experiments(lessons: list, only: tuple[str, ...] = (), show: bool = True) -> Table:
    """Record every experiment the ``lessons`` declare (``only``: those named) and tabulate."""
    table = Table(
        "Experiments over seeds and conditions (pinned/unpinned kernels, 1 and 2 threads)",
        ["experiment / quantity", "over every run", "conclusion held in", ""],
    )
    for item in spec.lessons_with_experiments(lessons):
        chosen = [e for e in spec.declared(item) if not only or e.name in only]
        if not chosen:
            continue
        start = time.perf_counter()
        records = record_lesson(item, chosen, show)
        table.notes.append(
            f"{item.assignment}: {time.perf_counter() - start:.0f} s wall for "
            f"{len(CONDITIONS)} kernels (its cells, then the runs)"
        )
        for experiment in chosen:
            record = records[experiment.name]
            table.rows.append(
                [f"{item.assignment} {experiment.name}", f"{len(record['runs'])} runs",
                 f"{record['seconds']} s of runs", ""]
            )  # fmt: skip
            table.rows += summary_rows(experiment, record)
    if not table.rows:
        table.notes.append(
            "no lesson chosen declares an experiment (solutions/<lesson>/experiments.yml)"
        )
    table.notes.append(f"records written to {spec.RECORDS}/<lesson>.json; machine: {machine()}")
    return table
