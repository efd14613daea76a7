"""The experiments' record (coursekit/course/experiments.py): every conclusion a lesson's text
draws from a trained model or a random draw holds in every run of its record (seeds x pinned
and unpinned CPU kernels x one and two threads), and the record is as current as the cells and
library it measures. Checked from the sources and the records alone (seconds); making the
record is ``make bench BENCH_FLAGS="--only experiments --lessons lessonNN"`` (minutes).
"""

from __future__ import annotations

import platform

import jupytext
import nbformat
import pytest

from attention_ref import experiments as reader
from coursekit.course import experiments
from coursekit.course.lessons import all_lessons
from coursekit.course.numerics import CONDITIONS
from coursekit.course.reading import KERNELSPEC

pytestmark = pytest.mark.unit

WITH_EXPERIMENTS = experiments.lessons_with_experiments(all_lessons())


def _write_lesson(nb, folder) -> None:
    """A tiny lesson source (solutions/<lesson>/tiny.md), as the course's sources are written."""
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    jupytext.write(nb, folder / "tiny.md", fmt="md:myst")


def test_every_record_is_current_and_every_conclusion_holds_in_every_run():
    found = {item.assignment: p for item in WITH_EXPERIMENTS if (p := experiments.problems(item))}
    assert not found, (
        f"experiments: {found}. Rerun a lesson's (niced, minutes): make bench "
        'BENCH_FLAGS="--only experiments --lessons lessonNN"; a conclusion that fails in some '
        "run is not the lesson's to state: rewrite it as what the record shows"
    )


def test_every_record_belongs_to_a_lesson_that_declares_it():
    declared = {item.assignment for item in WITH_EXPERIMENTS}
    stray = sorted(p.stem for p in reader.RECORDS.glob("*.json") if p.stem not in declared)
    assert not stray, f"records of lessons with no experiments.yml: {stray}"


HELPER = """\
def noisy_mean(seed):
    draws = np.random.default_rng(seed).normal(size=400)
    where = [os.environ.get(name) for name in ("ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS")]
    return {"mean": float(draws.mean()), "positive": bool(draws.mean() > -1), "where": where}"""

SPEC = """\
experiments:
- name: draws
  cell: noisy_mean
  seeds: [1, 2, 3, 4, 5]
  run: noisy_mean(seed)
  quantities:
    mean: {what: the mean of 400 standard normal draws, format: "{:.2f}"}
    positive: {what: whether it is above -1}
    where: {what: the kernel's ATEN_CPU_CAPABILITY and OMP_NUM_THREADS}
  conclusions:
  - says: the mean of 400 draws is within 0.3 of 0
    holds: abs(mean) < 0.3
"""


def tiny_lesson(tmp_path, helper: str = HELPER):
    folder = tmp_path / "solutions" / "lesson01"
    folder.mkdir(parents=True, exist_ok=True)
    meta = {"grade": False, "grade_id": "noisy_mean", "locked": True, "schema_version": 3}
    meta |= {"solution": False, "task": False}
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import os\nimport numpy as np\nunrelated = 3"),
        nbformat.v4.new_code_cell("other = 1"),
        nbformat.v4.new_code_cell(helper, metadata={"nbgrader": meta}),
    ])  # fmt: skip
    _write_lesson(nb, folder)
    (folder / "experiments.yml").write_text(SPEC)
    (item,) = all_lessons(tmp_path)
    return item


def fake_runs(values) -> list[dict]:
    """A run of every seed under every condition, each giving ``values(seed)``."""
    return [
        {"seed": s, "pinned": c.pinned, "threads": c.threads, "seconds": 0.1, "values": values(s)}
        for c in CONDITIONS
        for s in (1, 2, 3, 4, 5)
    ]


def record_for(item, runs) -> dict:
    from coursekit.course.reading import source_to_notebook

    (declared,) = experiments.declared(item)
    current = experiments.experiment_hash(source_to_notebook(item.source), declared)
    return {
        "hash": current,
        "seeds": [1, 2, 3, 4, 5],
        "quantities": declared.quantities,
        "runs": runs,
    }


def test_a_record_is_stale_when_the_cells_it_runs_change_and_only_then(tmp_path):
    item = tiny_lesson(tmp_path)
    runs = fake_runs(lambda s: {"mean": 0.01 * s, "positive": True, "where": []})
    experiments.write_record(item, "draws", record_for(item, runs))
    assert experiments.problems(item) == []
    source = item.source.read_text()
    item.source.write_text(source.replace("other = 1", "other = 2"))  # a cell it does not read
    assert experiments.problems(item) == []
    item.source.write_text(source.replace("unrelated = 3", "unrelated = 4"))  # beside np, unread
    assert experiments.problems(item) == []
    item.source.write_text(source.replace("import numpy as np", "import numpy as np  # a comment"))
    assert experiments.problems(item) == []
    item.source.write_text(source.replace("import numpy as np", "import numpy.random as np"))
    assert any("stale" in p for p in experiments.problems(item))
    item.source.write_text(source.replace("size=400", "size=500"))
    assert any("stale" in p for p in experiments.problems(item))


def test_a_conclusion_must_hold_in_every_run_under_every_condition(tmp_path):
    item = tiny_lesson(tmp_path)
    runs = fake_runs(lambda s: {"mean": 0.5 if s == 3 else 0.0, "positive": True, "where": []})
    runs[-1]["values"]["mean"] = 0.4
    experiments.write_record(item, "draws", record_for(item, runs))
    (found,) = experiments.problems(item)
    assert "fails in 5 of 20 runs" in found and "seed 3, pinned, 1 threads" in found
    experiments.write_record(item, "draws", record_for(item, runs[:-1]))  # one run missing
    assert any("not every seed under every condition" in p for p in experiments.problems(item))


def test_the_lesson_reads_the_spread_and_places_its_own_run(tmp_path, monkeypatch):
    item = tiny_lesson(tmp_path)
    runs = fake_runs(lambda s: {"mean": 0.1 * s - 0.3, "positive": s != 2, "where": []})
    experiments.write_record(item, "draws", record_for(item, runs))
    monkeypatch.setattr(reader, "RECORDS", experiments.record_path(item).parent)
    reader._load.cache_clear()
    draws = reader.experiment("lesson01", "draws")
    assert draws.spread("mean") == "mean 0.00 (range -0.20 to 0.20)"
    assert draws.place("mean", 0.5) == "above every one of the record's 20 runs"
    assert draws.place("mean", 0.05) == "within the record's range, above 12 of its 20 runs"
    assert draws.counts("positive") == [(True, 16), (False, 4)]
    assert "5 seeds (1, 2, 3, 4, 5) under 4 conditions" in draws.describe()
    with pytest.raises(LookupError, match="records no quantity 'median'"):
        draws.values("median")
    reader._load.cache_clear()


def test_a_run_is_the_body_of_a_function_of_the_seed():
    assert experiments.run_function("a = seed + 1\n{'a': a}") == (
        "def _experiment_run(seed):\n    a = seed + 1\n    return {'a': a}\n"
    )
    with pytest.raises(ValueError, match="must end with an expression"):
        experiments.run_function("a = seed")


@pytest.mark.bench
def test_the_bench_records_every_seed_under_every_condition_in_a_kernel(tmp_path):
    from coursekit.bench.experiments import bench_experiments

    item = tiny_lesson(tmp_path)
    table = bench_experiments([item], show=False)
    record = experiments.read_records(item)["draws"]
    assert len(record["runs"]) == 20 and experiments.problems(item) == []
    by_seed = {}
    for run in record["runs"]:
        by_seed.setdefault(run["seed"], set()).add(run["values"]["mean"])
    assert all(len(values) == 1 for values in by_seed.values()), "NumPy's draws: one value per seed"
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    for run in record["runs"]:  # each kernel ran under its condition
        pinned = "avx2" if run["pinned"] and x86 else None
        assert run["values"]["where"] == [pinned, str(run["threads"])], run
    assert "20 of 20 runs" in table.render()


@pytest.mark.bench
def test_quotes_are_checked_under_a_condition_other_than_the_books(tmp_path):
    """coursekit.bench.quotes runs a lesson under one condition and lists what its text quotes
    that no cell printed there, and the cells that raised."""
    from coursekit.bench.quotes import missing_quotes
    from coursekit.course.numerics import Condition

    folder = tmp_path / "solutions" / "lesson01"
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import os\nprint('threads', os.environ['OMP_NUM_THREADS'])"),
        nbformat.v4.new_markdown_cell('With threads 2 <!-- from output: "threads 2" -->'),
        nbformat.v4.new_code_cell("1 / 0"),
    ])  # fmt: skip
    _write_lesson(nb, folder)
    (item,) = all_lessons(tmp_path)
    _, found = missing_quotes(item, Condition(pinned=False, threads=2))
    assert len(found) == 1 and "ZeroDivisionError" in found[0]
    _, found = missing_quotes(item, Condition(pinned=True, threads=1))
    assert len(found) == 2 and "no earlier cell printed 'threads 2'" in found[1]
