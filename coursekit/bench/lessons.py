"""Each solved lesson executed top to bottom by nbclient, next to the floor (a notebook that only
imports numpy, torch and matplotlib)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from coursekit.bench.report import Config, Table, progress, verdict
from coursekit.course.lessons import ROOT, all_lessons, lesson

FLOOR_SOURCE = "import numpy\nimport torch\nimport matplotlib.pyplot as plt"
KEEP_BUILDS = "ATTENTION_REF_KEEP_BUILDS"  # attention_ref's flash compiler reads it
# How many floors a solved lesson may take, the same bound for every lesson: the course promises
# that each executes top to bottom within 6x the floor on one thread (the heaviest train models
# in the book and import a large library: lesson 13 transformers' Qwen3-Next, lesson 15
# TransformerLens, about a floor by itself).
TARGET_FLOORS = 6


def execute_seconds(nb, cwd: Path, *, keep_going: bool = False) -> float:
    """Wall time of nbclient running ``nb`` top to bottom in a fresh kernel (start-up included).
    A cell that raises stops the run, unless ``keep_going``: then its error is left in its
    outputs and the next cell runs."""
    import nbclient

    client = nbclient.NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        allow_errors=keep_going,
        resources={"metadata": {"path": str(cwd)}},
    )
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


def floor_notebook():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(FLOOR_SOURCE))
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    return nb


def rounds(floor_runs: int, repeat: int, lessons: list) -> list[tuple]:
    """The executions in order, (name, lesson or None for the floor): round after round, each
    with the floor first, so that a floor and the lessons compared with it run side by side
    (load on a shared machine drifts within minutes). The floor runs at least ``repeat`` times."""
    jobs = []
    for r in range(max(floor_runs, repeat)):
        jobs.append(("floor", None))
        if r < repeat:
            jobs.extend((item.assignment, item) for item in lessons)
    return jobs


def selected_lessons(cfg: Config) -> list:
    """The lessons ``cfg`` names (every lesson if it names none; a clear error for an unknown
    name), or none when ``cfg.lessons`` is False."""
    if not cfg.lessons:
        return []
    return [lesson(name) for name in cfg.lesson_names] if cfg.lesson_names else all_lessons()


def bench_lessons(cfg: Config) -> Table:
    from coursekit.course.reading import source_to_notebook

    # Lesson 11's kernels' builds kept for the next execution, as make lab's and the book's
    # kernels keep them (attention_ref's flash compiler): the first round pays for them.
    os.environ.setdefault(KEEP_BUILDS, "1")
    lessons = selected_lessons(cfg)
    jobs = rounds(cfg.floor_runs, cfg.repeat, lessons)
    seconds: dict[str, float] = {}
    first: dict[str, float] = {}
    for name, item in progress(jobs, "executing notebooks"):
        nb = floor_notebook() if item is None else source_to_notebook(item.source)
        took = execute_seconds(nb, ROOT if item is None else item.source.parent)
        seconds[name] = min(seconds.get(name, float("inf")), took)
        first.setdefault(name, took)
    floor = seconds["floor"]
    table = Table(
        "Lesson execution (nbclient, solved lessons incl. hidden tests)",
        ["notebook", "seconds", "x floor", "target", "", "first round, x floor"],
    )
    table.rows.append(
        ["floor: imports numpy, torch, matplotlib", f"{floor:.1f}", "1.00", "", "", "1.00"]
    )
    for item in lessons:
        s = seconds[item.assignment]
        table.rows.append(
            [
                f"{item.assignment} {item.name}",
                f"{s:.1f}",
                f"{s / floor:.2f}",
                f"<= {TARGET_FLOORS}x",
                verdict(s <= TARGET_FLOORS * floor),
                f"{first[item.assignment] / first['floor']:.2f}",
            ]
        )
    if lessons and not cfg.lesson_names:
        total = sum(seconds[item.assignment] for item in lessons)
        table.rows.append(
            [
                f"whole course ({len(lessons)} lessons, one after another)",
                f"{total:.1f}",
                f"{total / floor:.2f}",
                "<= 60 s",
                verdict(total <= 60),
                "",
            ]
        )
    if cfg.repeat > 1:
        table.notes.append(
            f"best of {cfg.repeat} executions each, in rounds: the floor, then the lessons"
        )
    table.notes.append(
        "first round: each notebook's first execution here, beside the first floor (lesson 11 "
        "compiles its kernels then, unless an earlier run kept their builds)"
    )
    return table
