"""Answer-equivalent callables, found by running them: for each graded exercise of a lesson, the
functions of the solved notebook (defined before the exercise) and of the course library that
return the exercise's answer on the inputs its tests give.

    python -m coursekit.mutants.equivalents lesson13            # what each exercise has
    python -m coursekit.mutants.equivalents lesson13 --write    # into the library's table
    make equivalents LESSON=lesson13                            # the same, written

The lesson's cells run in one namespace as grading runs them (as ``make mutants`` does). At each
exercise a forked child runs the answer, then the test cells it reaches with the graded
function replaced by a recorder (a notebook function that calls it): the first calls' arguments
and results are the test inputs. Then every candidate whose signature accepts those arguments
runs on copies of them, each in a child of its own with a time limit; one whose results equal the
answer's on every recorded call (np.allclose, structure by structure) is an *equivalent*. Those
the model answer itself reaches are dropped: the exercise allows them. The table,
``solutions/attention_ref/equivalents/<lesson>.json``, carries a hash of the lesson's graded
cells; ``autograde_tests/test_equivalents.py`` fails while it is older than they are. (A function
added to the library later is found when the tables are made again: ``make equivalents``.)
``attention_ref.testing.expect_own_function`` refuses a graded function that reaches one.
"""

from __future__ import annotations

import os

# Run as a command: one thread each (the forked children run side by side, and threads a fork
# copies mid-work can hang it) and no figures, set before numpy or torch is imported. Only then:
# a process that imports this module (a test) would hand both to every child it starts after,
# a book's kernels among them, which then draw no figures.
if __name__ == "__main__":
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_variable, "1")
    os.environ.setdefault("MPLBACKEND", "Agg")

import argparse  # noqa: E402
import copy  # noqa: E402
import hashlib  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from coursekit.course.cells import grade_id, is_test  # noqa: E402
from coursekit.course.lessons import ROOT, SOLUTIONS, all_lessons, lesson  # noqa: E402
from coursekit.course.reading import source_to_notebook  # noqa: E402
from coursekit.mutants.execution import _workdir, run_cell  # noqa: E402
from coursekit.mutants.forks import Forks  # noqa: E402
from coursekit.mutants.plan import exercises, graded_cells  # noqa: E402

TABLES = ROOT / SOLUTIONS / "attention_ref" / "equivalents"
CALLS = 3  # the test calls recorded per graded function
LIMIT = 10.0  # seconds a candidate may take on all recorded calls
# library modules whose functions are no answer to an exercise (checks, figures, kernels' tools)
_NOT_CANDIDATES = ("attention_ref.testing", "attention_ref.figures", "attention_ref.viewer",
                   "attention_ref.flash", "attention_ref._", "attention_ref.hints",
                   "attention_ref.equivalents", "attention_ref.experiments")  # fmt: skip


def library_functions() -> dict[str, object]:
    """The course library's public functions, as ``module.name``, from every module imported."""
    found = {}
    for name, module in sorted(sys.modules.items()):
        if not name.startswith("attention_ref") or name.startswith(_NOT_CANDIDATES) or not module:
            continue
        for attr, value in vars(module).items():
            if (
                isinstance(value, types.FunctionType)
                and not attr.startswith("_")
                and value.__module__ == name
            ):
                found[f"{name}.{attr}"] = value
    return found


def lesson_hash(nb) -> str:
    """A hash of the cells grading runs: the table is current while it holds. (A function added
    to the library later may be a new equivalent of an earlier exercise: after adding library
    functions, run ``make equivalents`` for every kept lesson.)"""
    digest = hashlib.sha256(b"equivalents 1")
    for cell in graded_cells(nb):
        digest.update(b"\0" + cell.source.encode("utf-8"))
    return digest.hexdigest()[:16]


# ---- what the tests call the graded function with ---------------------------------------------


def _functions_of(source: str, cell: str, namespace: dict) -> list[str]:
    """The functions the answer cell defined (their code was compiled from that cell)."""
    return [
        name
        for name, value in namespace.items()
        if isinstance(value, types.FunctionType)
        and value.__code__.co_filename == f"<cell {cell}>"
        and not name.startswith("_")
    ]


def _record_calls(namespace: dict, functions: list[str], exercise) -> dict[str, list]:
    """Run the tests with each graded function recording its first calls: {name: [(args,
    kwargs, result)]} (copies, taken as the call came and went)."""
    calls: dict[str, list] = {name: [] for name in functions}

    def recorder(name, original):
        def record(args, kwargs):
            try:
                given = copy.deepcopy((args, kwargs))
            except Exception:  # noqa: BLE001 -- an argument that cannot be copied: not recorded
                given = None
            result = original(*args, **kwargs)
            if given is not None and len(calls[name]) < CALLS:
                try:
                    calls[name].append((*given, copy.deepcopy(result)))
                except Exception:  # noqa: BLE001
                    pass
            return result

        return record

    for name in functions:
        namespace[f"__record_{name}"] = recorder(name, namespace[name])
        run_cell(f"def {name}(*args, **kwargs):\n    return __record_{name}(args, kwargs)\n",
                 f"recorder {name}", namespace)  # fmt: skip
    for cell in exercise.segment:
        if grade_id(cell) in exercise.tests or not is_test(cell):
            run_cell(cell.source, grade_id(cell) or "(code)", namespace)
    return calls


# ---- which candidates give the same results ---------------------------------------------------


def same(a, b) -> bool:
    """Whether two results are the same answer: arrays and tensors by shape and np.allclose,
    containers item by item, numbers by closeness, everything else by ==."""
    if hasattr(a, "detach") and hasattr(a, "shape"):
        a = a.detach().cpu().float().numpy() if str(a.dtype) == "torch.bfloat16" else a
        a = a.detach().cpu().numpy() if hasattr(a, "detach") else a
    if hasattr(b, "detach") and hasattr(b, "shape"):
        b = b.detach().cpu().float().numpy() if str(b.dtype) == "torch.bfloat16" else b
        b = b.detach().cpu().numpy() if hasattr(b, "detach") else b
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype.kind in "OUS" or b.dtype.kind in "OUS":
            return False
        return bool(np.allclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=True))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (int, float, np.number)) and isinstance(b, (int, float, np.number)):
        if isinstance(a, bool) != isinstance(b, bool):
            return False
        return bool(np.isclose(float(a), float(b), rtol=1e-5, atol=1e-8, equal_nan=True))
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # noqa: BLE001 -- an object whose == cannot say
        return False


def _accepts(candidate, calls) -> bool:
    try:
        signature = inspect.signature(candidate)
    except (TypeError, ValueError):
        return False
    for args, kwargs, _ in calls:
        try:
            signature.bind(*args, **kwargs)
        except TypeError:
            return False
    return True


def _arrays_in(args, kwargs) -> list:
    return [x for x in (*args, *kwargs.values()) if hasattr(x, "shape") and hasattr(x, "dtype")]


def _leading(args, kwargs) -> tuple:
    """The leading axes every array argument shares (the batch, and maybe the positions)."""
    shapes = [tuple(x.shape) for x in _arrays_in(args, kwargs)]
    if len(shapes) < 2:
        return ()
    common = []
    for sizes in zip(*shapes):
        if len(set(sizes)) > 1:
            break
        common.append(sizes[0])
    return tuple(common[: min(len(s) for s in shapes) - 1])


def _stack(results: list, batch: tuple):
    first = results[0]
    if isinstance(first, (tuple, list)):
        return type(first)(_stack([r[i] for r in results], batch) for i in range(len(first)))
    if hasattr(first, "detach"):
        import torch

        return torch.stack(list(results)).reshape(*batch, *first.shape)
    return np.stack([np.asarray(r) for r in results]).reshape(*batch, *np.shape(first))


def _per_item(candidate, args, kwargs, depth: int):
    """The candidate called on each item of the first ``depth`` shared axes (a function written
    for one sequence, looped over a batch), the results stacked back."""
    batch = _leading(args, kwargs)[:depth]
    results = []
    for index in np.ndindex(*batch):
        pick = lambda x: x[index] if hasattr(x, "shape") and hasattr(x, "dtype") else x  # noqa: E731
        results.append(candidate(*map(pick, args), **{k: pick(v) for k, v in kwargs.items()}))
    return _stack(results, batch)


def _gives_the_answer(candidate, calls) -> bool:
    """In a child: the candidate on copies of every recorded call, compared with the answer's;
    called whole, or (a function written for one sequence) on each item of the batch."""
    import warnings

    warnings.simplefilter("ignore")
    depths = range(0, min(len(_leading(a, k)) for a, k, _ in calls) + 1)
    for depth in depths:
        if all(_answers(candidate, call, depth) for call in calls):
            return True
    return False


def _answers(candidate, call, depth: int) -> bool:
    args, kwargs, expected = call
    args, kwargs = copy.deepcopy((args, kwargs))
    try:
        if depth:
            if np.prod(_leading(args, kwargs)[:depth]) > 64:
                return False
            return same(_per_item(candidate, args, kwargs, depth), expected)
        return same(candidate(*args, **kwargs), expected)
    except Exception:  # noqa: BLE001 -- a candidate that fails on the inputs is no answer
        return False


def _candidates(before: dict, namespace: dict, functions: list[str]) -> dict[str, object]:
    """The notebook's functions defined before the exercise, and the library's functions."""
    found = {
        name: value
        for name, value in before.items()
        if isinstance(value, types.FunctionType)
        and value.__module__ == "__main__"
        and name not in functions
        and not name.startswith("__record")
    }
    found.update(library_functions())
    return found


def _reached_by_answer(namespace: dict, functions: list[str]) -> set[str]:
    """The notebook's and the library's functions the model answer reaches (allowed)."""
    from attention_ref.testing.ownership import library_functions_used, names_used

    reached = set()
    for name in functions:
        fn = namespace[name]
        reached |= library_functions_used(fn)
        reached |= {n for n in names_used(fn) if isinstance(namespace.get(n), types.FunctionType)}
    return reached


def _equivalents_in_child(namespace, exercise, before, jobs) -> dict:
    """In a child forked at the exercise: {function: sorted equivalents} for its functions."""
    run_cell(exercise.source, exercise.cell, namespace)
    functions = _functions_of(exercise.source, exercise.cell, namespace)
    originals = {name: namespace[name] for name in functions}
    allowed = _reached_by_answer(namespace, functions)
    calls = _record_calls(namespace, functions, exercise)
    namespace.update(originals)
    candidates = _candidates(before, namespace, functions)
    found: dict[str, list[str]] = {name: [] for name in functions}
    for name in functions:
        if not calls[name]:
            continue
        todo = {
            c: f for c, f in candidates.items() if c not in allowed and _accepts(f, calls[name])
        }

        def done(key, answer, seconds, name=name):
            if answer is True:
                found[name].append(key)

        forks = Forks(jobs, done)
        for key, candidate in todo.items():
            forks.submit(key, lambda c=candidate: _gives_the_answer(c, calls[name]), LIMIT)
        forks.drain()
    return {"functions": functions, "equivalents": sorted({e for v in found.values() for e in v})}


def find(item, jobs: int = 2) -> dict[str, dict]:
    """{answer cell: {"functions": [...], "equivalents": [...]}} of one lesson."""
    nb = source_to_notebook(item.source)
    by_position = {e.position: e for e in exercises(nb)}
    namespace, results = {"__name__": "__main__"}, {}
    folder = os.getcwd()
    with tempfile.TemporaryDirectory(prefix=f"equivalents-{item.assignment}-") as workdir:
        os.chdir(_workdir(item, Path(workdir)))
        try:
            for position, cell in enumerate(graded_cells(nb)):
                if position in by_position:
                    exercise = by_position[position]
                    before = dict(namespace)
                    forks = Forks(1, lambda key, answer, seconds: results.update({key: answer}))
                    forks.submit(exercise.cell, lambda: _equivalents_in_child(
                        namespace, exercise, before, jobs), limit=1800)  # fmt: skip
                    forks.drain()
                if position >= max(by_position, default=-1):
                    break
                run_cell(cell.source, grade_id(cell) or f"code cell {position}", namespace)
        finally:
            os.chdir(folder)
    return results


def table_path(assignment: str) -> Path:
    return TABLES / f"{assignment}.json"


def write(item, found: dict) -> None:
    nb = source_to_notebook(item.source)
    data = {"graded": lesson_hash(nb), "exercises": found}
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    table_path(item.assignment).write_text(text, encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit.mutants.equivalents",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("lessons", nargs="*", help="e.g. lesson13 (none: every lesson)")
    parser.add_argument("--write", action="store_true", help="write the library's tables")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    options = parser.parse_args(argv)
    items = [lesson(name) for name in options.lessons] or all_lessons()
    failed = False
    for item in items:
        started = time.monotonic()
        found = find(item, options.jobs)
        for cell, entry in found.items():
            if entry.get("status"):  # the child timed out or crashed
                print(f"{item.assignment} {cell}: {entry['status']}")
                failed = True
            elif entry["equivalents"]:
                print(f"{item.assignment} {cell} ({', '.join(entry['functions'])}): "
                      f"{', '.join(entry['equivalents'])}")  # fmt: skip
        print(f"{item.assignment}: {len(found)} exercises, {time.monotonic() - started:.0f} s")
        if options.write and not failed:
            write(item, found)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
