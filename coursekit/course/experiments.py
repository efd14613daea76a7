"""The experiments whose conclusions a lesson's text draws from trained models or random draws:
declared in ``solutions/<lesson>/experiments.yml``, recorded over seeds and conditions in
``attention_ref/experiments/<lesson>.json`` (``make bench BENCH_FLAGS="--only experiments"``),
checked here from the sources alone.

A declaration (one entry under ``experiments:``)::

    - name: ablations                  # the record's key; the lesson reads the record by it
      cell: ablation_helpers           # grade_id of the lesson cell that defines what `run` calls
      library: [attention_ref.pt.model]  # library modules it runs (their source is hashed)
      seeds: [1, 2, 3, 4, 5]           # at least MIN_SEEDS
      run: ablation_accuracies(seed)   # code ending in an expression, run once per seed and
                                       # condition with `seed` bound: {quantity: value}
      quantities:
        paper: {what: the unchanged model's held-out accuracy, format: "{:.0%}"}
      conclusions:                     # what the text concludes, as a predicate over one run
      - says: the unchanged model reverses every held-out sequence
        holds: paper >= 0.99

The runner executes, in a fresh kernel per condition (numerics.CONDITIONS: pinned and unpinned
kernels, one and two threads), every cell grading runs up to ``cell`` (and ``cell`` itself,
skipped when grading or not), then runs ``run`` once per seed, as the body of a function of
``seed`` (what it binds stays inside; it reads the lesson's names). A record is *current* while
its hash holds: the hash of ``cell``, of every earlier statement that binds a name it or ``run``
reads (followed back through what those statements read; comments and layout do not count), of
the library modules named, and of the declaration's ``run``, ``seeds`` and ``cell``. A
conclusion *holds* when its predicate is true in every run of the record. :func:`problems` says
what is not so (autograde_tests/test_experiments.py).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from coursekit.course.cells import grade_id
from coursekit.course.lessons import Lesson
from coursekit.course.names import binds, changes, imported, parse, read_before_bound, reads
from coursekit.course.numerics import CONDITIONS
from coursekit.course.skipped import is_skipped

VERSION = "1"  # raised when how a run is made changes: every record is then stale
MIN_SEEDS = 5
SPEC = "experiments.yml"
RECORDS = Path("solutions") / "attention_ref" / "experiments"
# What a conclusion's predicate may call besides the run's quantities.
SAFE = {f.__name__: f for f in (abs, all, any, len, max, min, round, set, sorted, sum)}


@dataclass
class Conclusion:
    says: str  # the text's claim, in words
    holds: str  # a Python expression over one run's quantities


@dataclass
class Declared:
    """One experiment as its lesson declares it."""

    name: str
    cell: str
    run: str
    seeds: list[int]
    quantities: dict[str, dict]
    conclusions: list[Conclusion]
    library: list[str] = field(default_factory=list)


def spec_path(item: Lesson) -> Path:
    return item.source.parent / SPEC


def record_path(item: Lesson) -> Path:
    return item.root / RECORDS / f"{item.assignment}.json"


def declared(item: Lesson) -> list[Declared]:
    """The experiments ``item`` declares (none without an experiments.yml)."""
    path = spec_path(item)
    if not path.exists():
        return []
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    found = []
    for entry in data.get("experiments") or []:
        conclusions = [Conclusion(**c) for c in entry.pop("conclusions", None) or []]
        found.append(Declared(conclusions=conclusions, **entry))
    return found


def lessons_with_experiments(items: list[Lesson]) -> list[Lesson]:
    return [item for item in items if spec_path(item).exists()]


def prelude(nb, cell: str) -> list:
    """The code cells a run executes first: those grading runs up to ``cell``, and ``cell``."""
    chosen = []
    for c in nb.cells:
        if c.get("cell_type") != "code":
            continue
        if grade_id(c) == cell:
            return chosen + [c]
        if not is_skipped(c):
            chosen.append(c)
    raise LookupError(f"no code cell with grade_id {cell!r}")


def schedule(nb, chosen: list[Declared]) -> list[tuple[object, list[Declared]]]:
    """One kernel's walk through the lesson for the ``chosen`` experiments: every cell grading
    runs and each experiment's cell, in order, each with the experiments to run once it has run
    (their ``prelude`` is what comes before), up to the last of those cells."""
    by_cell = {}
    for experiment in chosen:
        by_cell.setdefault(experiment.cell, []).append(experiment)
    walk, left = [], set(by_cell)
    for c in nb.cells:
        if not left:
            break
        if c.get("cell_type") != "code" or (is_skipped(c) and grade_id(c) not in by_cell):
            continue
        walk.append((c, by_cell.get(grade_id(c), [])))
        left.discard(grade_id(c))
    if left:
        raise LookupError(f"no code cell with grade_id {sorted(left)}")
    return walk


def relevant_code(cells: list, extra: str = "") -> list[str]:
    """The code of ``cells`` (a prelude, in order) that the last one and ``extra`` depend on: the
    last cell whole, then each earlier top-level statement that binds or changes a name they read,
    followed back through what that statement reads; each as ``ast.unparse`` writes it, so that a
    comment, a blank line or an unrelated import elsewhere in a cell changes nothing."""
    trees = [parse(c.source) or ast.Module(body=[], type_ignores=[]) for c in cells]
    modules = frozenset().union(*(imported(t) for t in trees))
    needed = _from_outside(trees[-1]) | _from_outside(parse(extra) or ast.Module([], []))
    chosen = [ast.unparse(trees[-1])]
    statements = [stmt for tree in trees[:-1] for stmt in tree.body]
    for stmt in reversed(statements):
        alone = ast.Module(body=[stmt], type_ignores=[])
        if (binds([stmt]) | set(changes(alone, modules))) & needed:
            chosen.append(ast.unparse(stmt))
            needed |= _from_outside(alone)
    return chosen[::-1]


def _from_outside(tree: ast.Module) -> set[str]:
    """The names a cell reads before it binds them itself: those an earlier cell must bind."""
    return {name for name, _ in read_before_bound(tree.body, reads(tree.body))}


def run_function(run: str, name: str = "_experiment_run") -> str:
    """``run`` (code whose last statement is an expression) as the source of a function of
    ``seed`` returning that expression: what it binds stays inside, the lesson's names are
    read."""
    tree = ast.parse(run)
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        raise ValueError(f"run must end with an expression (the run's quantities): {run!r}")
    tree.body[-1] = ast.Return(tree.body[-1].value)
    body = ast.unparse(tree).replace("\n", "\n    ")
    return f"def {name}(seed):\n    {body}\n"


def module_source(name: str) -> str:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        raise LookupError(f"no library module {name!r}")
    return Path(spec.origin).read_text(encoding="utf-8")


def experiment_hash(nb, experiment: Declared) -> str:
    """What a record of ``experiment`` was made against (see the module's doc)."""
    digest = hashlib.sha256(VERSION.encode())
    parts = [experiment.cell, experiment.run, json.dumps(experiment.seeds)]
    parts += relevant_code(prelude(nb, experiment.cell), experiment.run)
    parts += [module_source(name) for name in experiment.library]
    for text in parts:
        digest.update(b"\0" + text.encode("utf-8"))
    return digest.hexdigest()[:16]


def read_records(item: Lesson) -> dict:
    """``{experiment: record}`` of the lesson (empty when it has none yet)."""
    path = record_path(item)
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8")).get("experiments", {})


def write_record(item: Lesson, name: str, record: dict) -> Path:
    """Put ``record`` under ``name`` in the lesson's record file, the others left as they are;
    one run per line, so that a diff shows which runs changed."""
    records = read_records(item) | {name: record}
    lines = {}  # a placeholder for each run -> the run on one line
    shown = {}
    for key, entry in records.items():
        marks = [f"@@run {key} {i}@@" for i in range(len(entry["runs"]))]
        lines |= {f'"{m}"': json.dumps(run, sort_keys=True) for m, run in zip(marks, entry["runs"])}
        shown[key] = entry | {"runs": marks}
    text = json.dumps({"lesson": item.assignment, "experiments": shown}, indent=1, sort_keys=True)
    for mark, line in lines.items():
        text = text.replace(mark, line)
    path = record_path(item)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def failed_runs(record: dict, conclusion: Conclusion) -> list[str]:
    """The runs of ``record`` in which ``conclusion`` does not hold, one line each."""
    failed = []
    for run in record["runs"]:
        try:
            held = eval(conclusion.holds, {"__builtins__": SAFE}, dict(run["values"]))  # noqa: S307
        except Exception as error:  # noqa: BLE001 -- a predicate that cannot be read fails
            held = f"{type(error).__name__}: {error}"
        if held is not True:
            kernels = "pinned" if run["pinned"] else "unpinned"
            failed.append(f"seed {run['seed']}, {kernels}, {run['threads']} threads: {held}")
    return failed


def _record_problems(experiment: Declared, record: dict, current: str) -> list[str]:
    found = []
    if record.get("hash") != current:
        found.append("stale: the cells or library it runs changed since it was recorded")
    made = {(run["seed"], run["pinned"], run["threads"]) for run in record["runs"]}
    missing = [
        f"seed {seed}, {c.label}"
        for c in CONDITIONS
        for seed in experiment.seeds
        if (seed, c.pinned, c.threads) not in made
    ]
    if missing:
        found.append(f"not every seed under every condition (missing: {'; '.join(missing[:4])})")
    for run in record["runs"]:
        if set(run["values"]) != set(experiment.quantities):
            found.append(f"seed {run['seed']}: quantities {sorted(run['values'])}")
            break
    for conclusion in experiment.conclusions:
        failed = failed_runs(record, conclusion)
        if failed:
            found.append(
                f"{conclusion.says!r} ({conclusion.holds}) fails in {len(failed)} of "
                f"{len(record['runs'])} runs: {'; '.join(failed[:4])}"
            )
    return found


def problems(item: Lesson) -> list[str]:
    """What is wrong with the lesson's declared experiments and their record (see the doc)."""
    from coursekit.course.reading import source_to_notebook

    nb = source_to_notebook(item.source)
    records, found = read_records(item), []
    for experiment in declared(item):
        where = f"{item.assignment} {experiment.name}"
        if len(set(experiment.seeds)) < MIN_SEEDS or not experiment.conclusions:
            found.append(f"{where}: needs >= {MIN_SEEDS} seeds and at least one conclusion")
        unnamed = [q for q in experiment.quantities if not q.isidentifier()]
        if unnamed:
            found.append(f"{where}: quantities a predicate cannot name: {unnamed}")
        try:
            current = experiment_hash(nb, experiment)
        except LookupError as error:
            found.append(f"{where}: {error}")
            continue
        if experiment.name not in records:
            found.append(f"{where}: not recorded yet")
            continue
        found += [
            f"{where}: {p}" for p in _record_problems(experiment, records[experiment.name], current)
        ]
    unknown = set(records) - {e.name for e in declared(item)}
    found += [f"{item.assignment} {name}: recorded but not declared" for name in sorted(unknown)]
    return found
