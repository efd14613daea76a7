"""make mutants [LESSON=lessonNN]: mutation testing of the graded exercises, lesson by lesson.

    python -m coursekit.mutants lesson01 lesson02      # those lessons (none named: every lesson)
    python -m coursekit.mutants lesson01 --cell softmax  # one exercise
    python -m coursekit.mutants lesson01 --list        # the mutants, without running them

Prints, per lesson, the mutants, how many the tests killed, how many are triaged as equivalent,
the survivors left, and the score (killed / (mutants - equivalent)), then each survivor as a
diff with its cell and line; records what it found in each lesson's mutants.yml (--no-write:
not). Exits 1 while a survivor is left or a lesson is below the goal.
"""

from __future__ import annotations

import os

# One thread each: the children run side by side on the cores (and threads that a fork copies
# mid-work can hang it). Set before numpy or torch is imported anywhere in this process.
for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from tqdm import tqdm  # noqa: E402

from coursekit.course.lessons import all_lessons, lesson, missing_requirement  # noqa: E402
from coursekit.course.sources import source_to_notebook  # noqa: E402
from coursekit.mutants import triage as triage_file  # noqa: E402
from coursekit.mutants.execution import LessonBroken, run_lesson  # noqa: E402
from coursekit.mutants.generate import diff  # noqa: E402
from coursekit.mutants.plan import exercises  # noqa: E402
from coursekit.mutants.report import WHAT_TO_DO, Tally, md_line, survivor, table, tally  # noqa: E402


def _arguments(argv):
    parser = argparse.ArgumentParser(
        prog="python -m coursekit.mutants",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("lessons", nargs="*", help="e.g. lesson01 (none: every lesson)")
    parser.add_argument("--cell", action="append", help="only this answer cell (repeatable)")
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="mutants run at once (default: 2, or the cores if fewer)",
    )
    parser.add_argument("--no-write", action="store_true", help="leave mutants.yml as it is")
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    return parser.parse_args(argv)


def _list(item, todo) -> None:
    for exercise in todo:
        print(
            f"{item.assignment} {exercise.cell}: {len(exercise.mutants)} mutants, "
            f"tests {', '.join(exercise.tests) or 'none'}"
        )
        for mutant in exercise.mutants:
            print(f"  line {mutant.line} ({mutant.operator})")
            print("\n".join(f"    {line}" for line in diff(mutant)))


def _survivors(item, todo, counts) -> list[str]:
    text = item.source.read_text(encoding="utf-8")
    out = []
    for exercise in todo:
        for result in counts[exercise.cell].survivors:
            line = md_line(text, exercise.source, result.mutant.line)
            where = f"{item.source.relative_to(item.root)}:{line}"
            out.append(survivor(result, where))
        for result in counts[exercise.cell].contradicted:
            out.append(
                f"{exercise.cell}: triaged as equivalent, yet killed ({result.by}): "
                f"remove its entry\n" + "\n".join(f"    {d}" for d in diff(result.mutant))
            )
    return out


def _record(item, todo, counts, triage, whole: bool) -> list[str]:
    """Each exercise's record into the triage; unused entries out. Returns notices."""
    ran = {e.cell for e in todo}
    keys = {m.key for e in todo for m in e.mutants}
    notices = [
        f"{item.assignment}: dropped an equivalent entry that names no mutant now: "
        f"{e['cell']}: {e['line']!r} -> {e['mutant']!r}"
        for e in triage.unused(keys, ran)
    ]
    triage.equivalent = [e for e in triage.equivalent if e not in triage.unused(keys, ran)]
    for exercise in todo:
        triage.records[exercise.cell] = counts[exercise.cell].record(exercise.graded)
    if whole:  # answers that are no longer in the lesson
        triage.records = {c: r for c, r in triage.records.items() if c in ran}
    return notices


def mutate_lesson(item, options) -> tuple[Tally, float]:
    nb = source_to_notebook(item.source)
    only = set(options.cell) if options.cell else None
    todo = exercises(nb, only)
    if options.list:
        _list(item, todo)
        return Tally(), 0.0
    triage = triage_file.read(item.source.parent)
    started = time.monotonic()
    total = sum(len(e.mutants) for e in todo)
    with tqdm(
        total=total,
        desc=item.assignment,
        unit="mutant",
        file=sys.stderr,
        mininterval=1.0,
        dynamic_ncols=True,
    ) as bar:
        results = run_lesson(item, nb, todo, options.jobs, lambda result: bar.update(1))
    seconds = time.monotonic() - started
    counts = {e.cell: tally(results[e.cell], triage) for e in todo}
    lesson_count = Tally()
    for count in counts.values():
        lesson_count += count
    for block in _survivors(item, todo, counts):
        print(block)
    if not options.no_write:
        for notice in _record(item, todo, counts, triage, whole=only is None):
            print(notice)
        triage_file.write(item.source.parent, triage, [e.cell for e in exercises(nb)])
    return lesson_count, seconds


def main(argv=None) -> int:
    options = _arguments(argv)
    items = [lesson(name) for name in options.lessons] or all_lessons()
    rows, failed = [], False
    for item in items:
        why = missing_requirement(item.assignment)
        if why:
            print(f"skipped: {why}")
            continue
        try:
            count, seconds = mutate_lesson(item, options)
        except LessonBroken as broken:
            print(f"{broken}: fix the lesson first", file=sys.stderr)
            failed = True
            continue
        rows.append((item.assignment, count, seconds))
    if options.list:
        return 0
    print(table(rows))
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {options.jobs} at once")
    if any(count.survivors for _, count, _ in rows):
        print(WHAT_TO_DO)
    failed |= any(count.survivors or count.score < 0.95 for _, count, _ in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
