"""make mutants [LESSON=lessonNN]: mutation testing of the graded exercises, lesson by lesson.

    python -m coursekit.mutants lesson01 lesson02      # those lessons (none named: every lesson)
    python -m coursekit.mutants lesson01 --cell softmax  # one exercise
    python -m coursekit.mutants lesson01 --list        # the mutants, without running them
    python -m coursekit.mutants lesson04 --counters-only  # the counter-answers alone (seconds)

Prints, per lesson, the mutants, how many the tests killed, how many are triaged as equivalent,
the survivors left, and the score (killed / (mutants - equivalent)), then each survivor as a
diff with its cell and line; beside them the lesson's method clauses and the counter-answers
planted for them (mistakes.yml, kind: method or numeric: coursekit/mutants/counters.py), run
against the same tests, and how many were caught. Records what it found in each lesson's
mutants.yml (--no-write: not). Exits 1 while a survivor or an uncaught counter-answer is left or
a lesson is below the goal.
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
from coursekit.course.reading import source_to_notebook  # noqa: E402
from coursekit.mutants import counters as counter_file  # noqa: E402
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
    parser.add_argument(
        "--counters-only",
        action="store_true",
        help="run the counter-answers alone; the mutants' records are left as they are",
    )
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


def _record_counters(item, todo, caught, planted, triage) -> list[str]:
    """Each exercise's counter-answers into its record (which must exist). Returns notices."""
    notices = []
    for exercise in todo:
        if exercise.cell not in planted:
            triage.records.get(exercise.cell, {}).pop("method", None)
            continue
        if exercise.cell not in triage.records:
            notices.append(f"{item.assignment} {exercise.cell}: no record of its mutants yet: "
                           "run make mutants without --counters-only first")  # fmt: skip
            continue
        hash_ = counter_file.graded(exercise, planted[exercise.cell])
        triage.records[exercise.cell]["method"] = caught[exercise.cell].record(hash_)
    return notices


def _uncaught(item, results) -> list[str]:
    """Each counter-answer the tests did not catch, named with what it is."""
    return [
        f"{r.mutant.cell}: the counter-answer {r.mutant.before} ({r.mutant.operator}) keeps full "
        "marks: add a test of its method clause that fails on it (docs/writing-lessons.md)"
        + (f"\n    (it raised: {r.by})" if r.by else "")
        for r in results
        if not r.killed
    ]


def _split(results, todo) -> tuple[dict, dict]:
    """Each exercise's results: the mutants', and the counter-answers' (operator marked)."""
    mutants, counters = {}, {}
    for exercise in todo:
        mine = results.get(exercise.cell, [])
        counters[exercise.cell] = [r for r in mine if r.mutant.operator.startswith("counter")]
        mutants[exercise.cell] = [r for r in mine if not r.mutant.operator.startswith("counter")]
    return mutants, counters


def _run(item, nb, todo, planted, options):
    extra = {e.cell: counter_file.as_mutants(e, planted[e.cell]) for e in todo if e.cell in planted}
    if options.counters_only:
        todo = [e for e in todo if e.cell in planted]
        for exercise in todo:
            exercise.__dict__["mutants"] = []  # its cached list of mutants: none this time
    total = sum(len(e.mutants) for e in todo) + sum(len(m) for m in extra.values())
    with tqdm(
        total=total,
        desc=item.assignment,
        unit="mutant",
        file=sys.stderr,
        mininterval=1.0,
        dynamic_ncols=True,
    ) as bar:
        results = run_lesson(item, nb, todo, options.jobs, lambda r: bar.update(1), extra)
    return todo, *_split(results, todo)


def mutate_lesson(item, options) -> tuple[Tally, counter_file.Caught, float]:
    nb = source_to_notebook(item.source)
    only = set(options.cell) if options.cell else None
    todo = exercises(nb, only)
    if options.list:
        _list(item, todo)
        return Tally(), counter_file.Caught(), 0.0
    triage = triage_file.read(item.source.parent)
    planted = counter_file.counter_answers(item)
    started = time.monotonic()
    todo, results, counter_results = _run(item, nb, todo, planted, options)
    seconds = time.monotonic() - started
    counts = {e.cell: tally(results[e.cell], triage) for e in todo}
    caught = {cell: counter_file.Caught(len(rs), sum(r.killed for r in rs))
              for cell, rs in counter_results.items()}  # fmt: skip
    lesson_count, lesson_caught = Tally(), counter_file.Caught()
    for cell in counts:
        lesson_count += counts[cell]
        lesson_caught.counter_answers += caught[cell].counter_answers
        lesson_caught.caught += caught[cell].caught
    if not options.counters_only:
        for block in _survivors(item, todo, counts):
            print(block)
    for line in _uncaught(item, [r for rs in counter_results.values() for r in rs]):
        print(line)
    if not options.no_write:
        notices = [] if options.counters_only else _record(item, todo, counts, triage, only is None)
        notices += _record_counters(item, todo, caught, planted, triage)
        for notice in notices:
            print(notice)
        triage_file.write(item.source.parent, triage, [e.cell for e in exercises(nb)])
    return lesson_count, lesson_caught, seconds


def main(argv=None) -> int:
    options = _arguments(argv)
    items = [lesson(name) for name in options.lessons] or all_lessons()
    rows, methods, failed = [], [], False
    for item in items:
        why = missing_requirement(item.assignment)
        if why:
            print(f"skipped: {why}")
            continue
        try:
            count, caught, seconds = mutate_lesson(item, options)
        except LessonBroken as broken:
            print(f"{broken}: fix the lesson first", file=sys.stderr)
            failed = True
            continue
        rows.append((item.assignment, count, seconds))
        methods.append((item.assignment, counter_file.method_clauses(item), caught))
    if options.list:
        return 0
    if not options.counters_only:
        print(table(rows))
    print(counter_file.table(methods))
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {options.jobs} at once")
    if any(count.survivors for _, count, _ in rows) and not options.counters_only:
        print(WHAT_TO_DO)
    if not options.counters_only:
        failed |= any(count.survivors or count.score < 0.95 for _, count, _ in rows)
    failed |= any(c.caught < c.counter_answers for _, _, c in methods)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
