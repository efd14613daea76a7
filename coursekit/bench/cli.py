"""The command line of ``make bench`` (``python -m coursekit.bench``): every section, printed as
tables."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from coursekit import bench
from coursekit.bench.lessons import selected_lessons
from coursekit.bench.report import TINY, Config, Table, machine_line
from coursekit.course.nbgrader_cli import nbgrader_env

SECTIONS = ("lessons", "attention", "memory", "grading", "gpu", "experiments")
# Sections run only when named (--only): the experiments' record takes an hour and rewrites files.
DEFAULT = ("lessons", "attention", "memory", "grading", "gpu")


def run(sections: tuple[str, ...], cfg: Config, experiments: tuple[str, ...] = ()) -> list[Table]:
    # nbclient's kernel and `make` find this environment's python first, as under `make bench`
    os.environ["PATH"] = nbgrader_env()["PATH"]
    tables: list[Table] = []

    def experiments_table():  # imported here: it needs yaml, which a bare GPU machine lacks
        from coursekit.bench.experiments import bench_experiments

        chosen = selected_lessons(dataclasses.replace(cfg, lessons=True))
        return [bench_experiments(chosen, experiments)]

    steps = {
        "lessons": lambda: [bench.bench_lessons(cfg)],
        "attention": lambda: [bench.bench_attention_cpu(cfg)],
        "memory": lambda: [bench.bench_memory(cfg)],
        "grading": lambda: [bench.bench_grading(cfg)],
        "gpu": lambda: bench.bench_gpu(cfg),
        "experiments": experiments_table,
    }
    for section in sections:
        print(f"  measuring: {section} ...", file=sys.stderr, flush=True)
        tables.extend(steps[section]())
    return tables


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m coursekit.bench", description=bench.__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--only",
        default=",".join(DEFAULT),
        help=f"comma-separated sections to run, of {', '.join(SECTIONS)} (default: all but "
        "experiments, which reruns the lessons' experiments over seeds and conditions and "
        "rewrites their records: name it)",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="executions of each lesson; the best counts"
    )
    parser.add_argument(
        "--lessons",
        default="",
        help="comma-separated lessons to execute (e.g. lesson12); default: every lesson",
    )
    parser.add_argument(
        "--experiments",
        default="",
        help="with --only experiments: comma-separated experiment names to rerun (default: all)",
    )
    parser.add_argument(
        "--tiny", action="store_true", help="toy sizes, no lessons: checks that the code runs"
    )
    args = parser.parse_args(argv)
    sections = tuple(s.strip() for s in args.only.split(",") if s.strip())
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    names = tuple(n.strip() for n in args.lessons.split(",") if n.strip())
    cfg = TINY if args.tiny else Config(repeat=max(1, args.repeat), lesson_names=names)
    selected_lessons(cfg)  # an unknown lesson fails here, before any measuring
    print(machine_line(), flush=True)
    chosen = tuple(n.strip() for n in args.experiments.split(",") if n.strip())
    tables = run(sections, cfg, chosen)
    print()
    print("\n\n".join(table.render() for table in tables))
    print("\nBook build times: `make bench-book` (full build, no-op rebuild, one lesson edited).")
