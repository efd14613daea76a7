"""Mutation testing (make mutants, coursekit/mutants/): each triaged lesson's record is current,
and the tool itself makes, runs and names its mutants as it says.

The records are checked from the sources alone (seconds): a lesson's ``mutants.yml`` must have a
record for every answer cell, made against the answer and the tests it reaches as they are now
(their hash), with no survivor left, and each equivalent entry must still name a mutant. Running
the mutants is ``make mutants``'s job (minutes a lesson), not this test's.
"""

from __future__ import annotations

import jupytext
import nbformat
import pytest

from coursekit.course.lessons import all_lessons
from coursekit.course.reading import source_to_notebook
from coursekit.mutants import counters, execution, triage
from coursekit.mutants.generate import mutants_of
from coursekit.mutants.plan import exercises
from coursekit.mutants.report import GOAL, Tally, tally

pytestmark = pytest.mark.unit

# Lessons whose mutants have been triaged: each must keep a current mutants.yml. A lesson joins
# when its first `make mutants LESSON=...` leaves no survivor.
TRIAGED: set[str] = {
    "lesson01",
    "lesson02",
    "lesson03",
    "lesson04",
    "lesson05",
    "lesson06",
    "lesson07",
    "lesson08",
    "lesson09",
    "lesson10",
    "lesson11",
    "lesson12",
    "lesson13",
    "lesson14",
    "lesson15",
}
LESSONS = {item.assignment: item for item in all_lessons()}
WITH_TRIAGE = sorted(
    name for name, item in LESSONS.items() if triage.path(item.source.parent).exists()
)


def test_every_triaged_lesson_has_its_mutants_yml():
    missing = sorted(TRIAGED - set(WITH_TRIAGE))
    assert not missing, f"no mutants.yml for {missing}: run make mutants LESSON=... and triage"


def _stale(name: str) -> list[str]:
    """What is out of date in lesson ``name``'s mutants.yml (nothing: it is current)."""
    item = LESSONS[name]
    found = triage.read(item.source.parent)
    problems, total = [], Tally()
    planted = counters.counter_answers(item)
    for exercise in exercises(source_to_notebook(item.source)):
        record = found.records.get(exercise.cell)
        problems += _stale_counters(exercise, planted.get(exercise.cell), record)
        if record is None:
            problems.append(f"{exercise.cell}: no record (a new exercise?)")
        elif record["graded"] != exercise.graded:
            problems.append(f"{exercise.cell}: the answer or its tests changed since its last run")
        elif record["survived"]:
            problems.append(f"{exercise.cell}: {record['survived']} survivors left")
        else:
            total += Tally(record["mutants"], record["killed"], record["equivalent"])
    if not problems and total.score < GOAL:
        problems.append(f"{total.score:.1%} of the mutants that are not equivalent killed")
    return problems


def _stale_counters(exercise, planted, record) -> list[str]:
    """What is out of date in the record of an exercise's counter-answers."""
    method = (record or {}).get("method")
    if not planted:
        return [f"{exercise.cell}: a record of counter-answers it no longer has"] if method else []
    if method is None or method["graded"] != counters.graded(exercise, planted):
        return [
            f"{exercise.cell}: its counter-answers (kind: method or numeric) or its tests changed"
            " since they were last run (make mutants LESSON=... MUTANTS_FLAGS=--counters-only)"
        ]
    if method["caught"] < method["counter_answers"]:
        return [f"{exercise.cell}: {method['counter_answers'] - method['caught']} counter-answers"
                " keep full marks"]  # fmt: skip
    return []


def test_every_triaged_lessons_record_is_as_current_as_its_exercises():
    stale = {name: problems for name in WITH_TRIAGE if (problems := _stale(name))}
    assert not stale, (
        f"stale mutants.yml: {stale}; run `make mutants LESSON=...` for each and triage what "
        "survives (docs/writing-lessons.md, Mutation testing)"
    )


def test_every_equivalent_entry_names_a_mutant_of_its_lesson():
    unused = {}
    for name in WITH_TRIAGE:
        item = LESSONS[name]
        found = triage.read(item.source.parent)
        cells = {entry["cell"] for entry in found.equivalent}
        nb = source_to_notebook(item.source)
        keys = {m.key for exercise in exercises(nb, cells) for m in exercise.mutants}
        unused.update({name: found.unused(keys, cells)} if found.unused(keys, cells) else {})
    assert not unused, f"equivalent entries that name no mutant now: {unused}"


ATTENTION = '''\
def attention(q, k, v, mask=None):
    """Given: the learner writes what is between the markers."""
    ### BEGIN SOLUTION
    scores = q @ k.swapaxes(-1, -2)
    scores = scores / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    half = v[..., : v.shape[-1] // 2]
    weights = torch.from_numpy(weights).masked_fill(pad, 0.0)
    return weights @ v
    ### END SOLUTION
'''


def test_the_mutants_are_the_mistakes_attention_code_has_in_a_fixed_order():
    made = mutants_of(ATTENTION, "attention")
    assert made == mutants_of(ATTENTION, "attention"), "the same list, in the same order"
    changes = {(m.before, m.after) for m in made}
    expected = [
        ("scores = scores / np.sqrt(q.shape[-1])", "pass"),  # the scale dropped
        ("scores = scores / np.sqrt(q.shape[-1])", "scores = scores / (q.shape[-1])"),
        ("scores = np.where(mask, scores, -np.inf)", "pass"),  # the mask line dropped
        ("scores = np.where(mask, scores, -np.inf)", "scores = np.where(mask, -np.inf, scores)"),
        ("scores = np.where(mask, scores, -np.inf)", "scores = np.where(mask, scores, +np.inf)"),
        ("scores = q @ k.swapaxes(-1, -2)", "scores = q @ (k)"),  # the transpose dropped
        ("scores = q @ k.swapaxes(-1, -2)", "scores = q @ k.swapaxes(-2, -2)"),
        ("weights /= weights.sum(axis=-1, keepdims=True)",
         "weights /= weights.sum(axis=-2, keepdims=True)"),  # the wrong axis
        ("weights /= weights.sum(axis=-1, keepdims=True)",
         "weights /= weights.sum(axis=-1, keepdims=False)"),
        ("weights /= weights.sum(axis=-1, keepdims=True)", "weights /= weights.sum(keepdims=True)"),
        ("weights = np.exp(scores - scores.max(axis=-1, keepdims=True))",
         "weights = np.exp(scores - scores.min(axis=-1, keepdims=True))"),
        ("half = v[..., : v.shape[-1] // 2]", "half = v[..., v.shape[-1] // 2: ]"),  # other half
        ("half = v[..., : v.shape[-1] // 2]", "half = v[..., : (v.shape[-1] // 2) + 1]"),  # one off
        ("weights = torch.from_numpy(weights).masked_fill(pad, 0.0)",
         "weights = torch.from_numpy(weights).masked_fill(~pad, 0.0)"),  # the other convention
        ("return weights @ v", "return v @ weights"),
        ("scores = q @ k.swapaxes(-1, -2)", "scores = k @ k.swapaxes(-1, -2)"),  # q and k mixed up
        ("if mask is not None:", "if mask is None:"),
    ]  # fmt: skip
    missing = [pair for pair in expected if pair not in changes]
    assert not missing, f"mutants not made: {missing}"
    assert all("Given" not in m.before and "def attention" not in m.before for m in made), (
        "only the learner's part of the cell is mutated"
    )


def _cell(kind: str, name: str, source: str) -> nbformat.NotebookNode:
    meta = {"solution": kind == "exercise", "grade": kind == "test", "locked": kind == "test"}
    meta |= {"grade_id": name, "schema_version": 3, "task": False}
    if kind == "test":
        meta["points"] = 1
    return nbformat.v4.new_code_cell(source, metadata={"nbgrader": meta})


COUNT_UP = """\
def count_up(n):
    ### BEGIN SOLUTION
    x = 0
    while x < n:
        x += 1
    return x
    ### END SOLUTION"""


def test_mutants_are_killed_by_their_tests_survive_or_time_out(tmp_path, monkeypatch):
    """A tiny lesson: ``x = 1`` for ``x += 1`` never ends (killed by its limit), ``x = 1``
    for ``x = 0`` returns the same count (a survivor, here triaged as equivalent for n >= 1)."""
    folder = tmp_path / "solutions" / "lesson01"
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import numpy as np"),
        _cell("exercise", "count_up", COUNT_UP),
        _cell("test", "test_count_up", "assert count_up(3) == 3"),
        nbformat.v4.new_code_cell("unrelated = 1"),
    ])  # fmt: skip
    jupytext.write(nb, folder / "tiny.md", fmt="md:myst")
    (lesson,) = all_lessons(tmp_path)
    nb = source_to_notebook(lesson.source)
    (exercise,) = exercises(nb)
    assert exercise.tests == ["test_count_up"] and len(exercise.segment) == 1
    monkeypatch.setattr(execution, "MINIMUM_LIMIT", 0.5)
    reported = []
    results = execution.run_lesson(lesson, nb, [exercise], 2, reported.append)["count_up"]
    assert len(reported) == len(results) == len(exercise.mutants)
    status = {(r.mutant.before, r.mutant.after): r.status for r in results}
    assert status[("x += 1", "x = 1")] == "timeout"
    assert status[("while x < n:", "while x <= n:")] == "killed"
    assert status[("x = 0", "x = 1")] == "survived"
    (folder / "mutants.yml").write_text(
        "equivalent:\n- {cell: count_up, line: x = 0, mutant: x = 1, why: n >= 1 counts alike}\n"
    )
    found = triage.read(folder)
    count = tally(results, found)
    assert count.equivalent == 1 and count.mutants == len(results)
    assert count.killed + count.equivalent + len(count.survivors) == count.mutants
    found.records["count_up"] = count.record(exercise.graded)
    triage.write(folder, found, ["count_up"])
    again = triage.read(folder)
    assert again.records == found.records and again.equivalent == found.equivalent


COUNTERS = """\
mistakes:
- {name: one-too-many, cell: count_up, old: 'while x < n:', new: 'while x <= n:',
   fails: [test_count_up], kind: method}
- {name: by-formula, cell: count_up, old: '    x += 1', new: '    x = n', fails: [test_count_up],
   kind: method}
- {name: plain, cell: count_up, old: 'x = 0', new: 'x = 2', fails: [test_count_up]}
"""


def test_counter_answers_run_beside_the_mutants_and_are_recorded(tmp_path):
    """Counter-answers (kind: method) are run as mutants of their cell; one is caught, the one
    that computes the right count another way is not; a plain mistake is not a counter-answer."""
    folder = tmp_path / "solutions" / "lesson01"
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[
        _cell("exercise", "count_up", COUNT_UP),
        _cell("test", "test_count_up", "assert count_up(3) == 3"),
    ])  # fmt: skip
    jupytext.write(nb, folder / "tiny.md", fmt="md:myst")
    (folder / "mistakes.yml").write_text(COUNTERS, encoding="utf-8")
    (lesson,) = all_lessons(tmp_path)
    nb = source_to_notebook(lesson.source)
    (exercise,) = exercises(nb)
    planted = counters.counter_answers(lesson)
    assert [m.name for m in planted["count_up"]] == ["one-too-many", "by-formula"]
    extra = counters.as_mutants(exercise, planted["count_up"])
    assert extra[0].operator == "counter-answer (method)" and extra[0].before == "one-too-many"
    exercise.__dict__["mutants"] = []  # the counter-answers alone, as --counters-only runs them
    results = execution.run_lesson(lesson, nb, [exercise], 2, lambda r: None, {"count_up": extra})
    assert {r.mutant.before: r.status for r in results["count_up"]} == {
        "one-too-many": "killed",
        "by-formula": "survived",
    }
    caught = counters.Caught(2, 1)
    record = {**Tally(0, 0, 0).record(exercise.graded)}
    record["method"] = caught.record(counters.graded(exercise, planted["count_up"]))
    assert _stale_counters(exercise, planted["count_up"], record) == [
        "count_up: 1 counter-answers keep full marks"
    ]
    record["method"]["caught"] = 2
    assert _stale_counters(exercise, planted["count_up"], record) == []
    assert (
        "or its tests changed since"
        in _stale_counters(exercise, planted["count_up"][:1], record)[0]
    )
    assert "1 counter-answers keep" not in counters.table([("lesson01", 1, caught)])
    assert "<- not all caught" in counters.table([("lesson01", 1, caught)])
