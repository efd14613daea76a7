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


def run_condition(item, experiment: spec.Declared, condition: Condition, bar) -> list[dict]:
    """Every seed's run of ``experiment`` in one fresh kernel under ``condition``."""
    import nbclient
    import nbformat

    from coursekit.course.reading import source_to_notebook

    nb = nbformat.v4.new_notebook(metadata=source_to_notebook(item.source).metadata)
    nb.cells = [*spec.prelude(source_to_notebook(item.source), experiment.cell)]
    client = nbclient.NotebookClient(
        nb,
        timeout=3600,
        kernel_name="python3",
        resources={"metadata": {"path": str(item.source.parent)}},
    )
    runs = []
    with environment(condition), client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
            _printed(cell)
        _execute(client, THREADS.format(threads=condition.threads))
        for seed in experiment.seeds:
            code = RUN.format(function=spec.run_function(experiment.run), seed=seed, mark=MARK)
            cell = _execute(client, code)
            line = next(t for t in _printed(cell).splitlines() if t.startswith(MARK))
            made = json.loads(line[len(MARK) :])
            values = made["values"]
            if not isinstance(values, dict):
                raise TypeError(
                    f"{experiment.name}: run must give {{quantity: value}}, got {values!r}"
                )
            runs.append(
                {"seed": seed, "pinned": condition.pinned, "threads": condition.threads,
                 "seconds": round(made["seconds"], 1), "values": _rounded(values)}
            )  # fmt: skip
            bar.update()
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


def record_experiment(item, experiment: spec.Declared, show: bool = True) -> dict:
    """Run ``experiment`` under every condition and write its record; the record."""
    from coursekit.course.reading import source_to_notebook

    current = spec.experiment_hash(source_to_notebook(item.source), experiment)
    start = time.perf_counter()
    total = len(CONDITIONS) * len(experiment.seeds)
    runs = []
    bar = _bar(total, f"{item.assignment} {experiment.name}", show)
    for condition in CONDITIONS:
        runs += run_condition(item, experiment, condition, bar)
    bar.close()
    record = {
        "hash": current,
        "recorded": datetime.date.today().isoformat(),
        "machine": machine(),
        "seconds": round(time.perf_counter() - start),
        "seeds": experiment.seeds,
        "quantities": experiment.quantities,
        "runs": runs,
    }
    spec.write_record(item, experiment.name, record)
    return record


def summary_rows(experiment: spec.Declared, record: dict) -> list[list[str]]:
    rows = []
    for quantity, about in experiment.quantities.items():
        values = [run["values"][quantity] for run in record["runs"]]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            fmt = about.get("format", "{}")
            mean = fmt.format(sum(values) / len(values))
            shown = f"mean {mean}, {fmt.format(min(values))} to {fmt.format(max(values))}"
        else:
            shown = f"{len({json.dumps(v) for v in values})} distinct values"
        rows.append([f"  {quantity}", shown, "", ""])
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
        for experiment in spec.declared(item):
            if only and experiment.name not in only:
                continue
            record = record_experiment(item, experiment, show)
            table.rows.append(
                [f"{item.assignment} {experiment.name}", f"{len(record['runs'])} runs",
                 f"{record['seconds']} s", ""]
            )  # fmt: skip
            table.rows += summary_rows(experiment, record)
    if not table.rows:
        table.notes.append(
            "no lesson chosen declares an experiment (solutions/<lesson>/experiments.yml)"
        )
    table.notes.append(f"records written to {spec.RECORDS}/<lesson>.json; machine: {machine()}")
    return table
