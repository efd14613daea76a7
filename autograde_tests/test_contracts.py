"""Exercise contracts (coursekit.course.contracts): every clause an exercise's text states names a
test that checks it and a planted mistake that proves the test can fail. Fast: no kernel, no
nbgrader; the chain tests prove that each mistake fails exactly its ``fails`` cells."""

from __future__ import annotations

import textwrap

import jupytext
import nbformat
import pytest
import yaml

from coursekit.course import contracts
from coursekit.course.lessons import all_lessons

pytestmark = pytest.mark.unit

RULE = "=" * 70


def test_every_exercise_of_every_lesson_has_a_complete_contract():
    """One report of every problem of every lesson: `python -m coursekit.course.contracts
    --check` prints the same, and `python -m coursekit.course.contracts lessonNN` shows a
    lesson's contracts exercise by exercise."""
    found = contracts.report(all_lessons())
    assert not found, f"incomplete exercise contracts:\n{RULE}\n{found}\n{RULE}"


def test_planted_mistakes_and_alternatives_name_what_their_lesson_has():
    """Passes while contracts are still missing: a mistake's cell, old text and failed tests are
    checked before any grading."""
    found = {}
    for lesson in all_lessons():
        _, problems = contracts.planted_problems(lesson, contracts.Cells.of(lesson))
        if problems:
            found[lesson.assignment] = problems
    assert not found, f"planted mistakes that name what their lesson lacks: {found}"


def _cell(kind: str, name: str, source: str) -> nbformat.NotebookNode:
    """A cell of a lesson: "exercise" (autograded answer), "test" (graded), "manual" (a
    free-text answer a person grades)."""
    meta = {
        "exercise": {"solution": True, "grade": False, "locked": False},
        "test": {"solution": False, "grade": True, "locked": True, "points": 1},
        "manual": {"solution": True, "grade": True, "locked": False, "points": 1},
    }[kind]
    meta = {"grade_id": name, "schema_version": 3, "task": False, **meta}
    make = nbformat.v4.new_markdown_cell if kind == "manual" else nbformat.v4.new_code_cell
    return make(source, metadata={"nbgrader": meta})


SOLVED = "    ### BEGIN SOLUTION\n    return {}\n    ### END SOLUTION"
CELLS = [
    nbformat.v4.new_markdown_cell("# Lesson 1 — A small lesson\n\n**Exercise 1.** Write `double`."),
    _cell("exercise", "double", "def double(x):\n" + SOLVED.format("2 * x")),
    _cell("test", "test_double", "assert double(2) == 4"),
    _cell("test", "test_double_dtype", "assert double(2.0) == 4.0"),
    nbformat.v4.new_markdown_cell("**Exercise 2.** Write `halve`, raising ValueError on None."),
    _cell("exercise", "halve", "def halve(x):\n" + SOLVED.format("x / 2")),
    _cell("test", "test_halve", "assert halve(4) == 2"),
    _cell("manual", "why_halve", "Why?\n\n=== BEGIN MARK SCHEME ===\nBecause.\n"),
]
MISTAKES = """\
everyday: [double-adds]
mistakes:
- {name: double-adds, cell: double, old: 2 * x, new: 2 + x, fails: [test_double]}
- {name: double-int, cell: double, old: 2 * x, new: 2 * int(x), fails: [test_double_dtype]}
- {name: halve-floor, cell: halve, old: x / 2, new: x // 2, fails: [test_halve]}
"""
CONTRACTS = """\
contracts:
- cell: double
  clauses:
  - clause: returns twice its argument
    tests: [test_double]
    mistakes: [double-adds]
  - clause: keeps a float a float
    tests: [test_double_dtype]
    mistakes: [double-int]
- cell: halve
  clauses:
  - clause: returns half its argument, a float
    tests: [test_halve]
    mistakes: [halve-floor]
"""


def small_course(tmp_path, contracts_text: str = CONTRACTS, mistakes_text: str = MISTAKES):
    """A course of one lesson under ``tmp_path``: two exercises, three tests, a free-text
    answer, its planted mistakes and their contracts; returns the lesson."""
    folder = tmp_path / "solutions" / "lesson01"
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.from_dict(c) for c in CELLS])
    jupytext.write(nb, folder / "small_lesson.md", fmt="md:myst")
    (folder / "mistakes.yml").write_text(mistakes_text + contracts_text, encoding="utf-8")
    (lesson,) = all_lessons(tmp_path)
    return lesson


def test_a_complete_contract_has_no_problems_and_reads_exercise_by_exercise(tmp_path):
    lesson = small_course(tmp_path)
    assert contracts.lesson_problems(lesson) == []
    assert contracts.report([lesson]) == ""
    (double, halve) = contracts.load_contracts(lesson)
    assert double.cell == "double" and [c.tests for c in double.clauses] == [
        ("test_double",),
        ("test_double_dtype",),
    ]
    shown = contracts.describe(lesson)
    assert "lesson01: Lesson 1 — A small lesson" in shown
    assert "  * keeps a float a float\n      tests:    test_double_dtype\n" in shown
    assert "mistake:  halve-floor" in shown and shown.endswith("no problems")


def _problems(tmp_path, contracts_text: str, mistakes_text: str = MISTAKES) -> str:
    lesson = small_course(tmp_path, contracts_text, mistakes_text)
    return "\n".join(contracts.lesson_problems(lesson))


def test_a_lesson_without_contracts_names_its_exercises(tmp_path):
    found = _problems(tmp_path, "")
    assert found == (
        "no `contracts:` in solutions/lesson01/mistakes.yml: its exercises (double, halve) need"
        " one each"
    )


BROKEN = {  # an edit to CONTRACTS -> what the check must say
    "an exercise without a contract": (
        CONTRACTS.split("- cell: halve")[0],
        [
            "exercise `halve` has no contract",
            "planted mistake `halve-floor` (in `halve`) serves no clause",
            "test `test_halve` checks no clause",
        ],
    ),
    "a contract for a test cell": (
        CONTRACTS + "- cell: test_halve\n  clauses: [{clause: x, tests: [test_halve],"
        " mistakes: [halve-floor]}]\n",
        ["contract for `test_halve`: it is a graded test cell; contracts are for autograded"],
    ),
    "a contract for the free-text answer": (
        CONTRACTS + "- cell: why_halve\n  clauses: [{clause: x, tests: [test_halve],"
        " mistakes: [halve-floor]}]\n",
        ["contract for `why_halve`: it is a markdown cell that is neither an exercise nor a test"],
    ),
    "a misspelt cell": (
        CONTRACTS.replace("cell: halve", "cell: halv"),
        ["`halv` is not an exercise of the lesson (did you mean `halve`?)"],
    ),
    "a misspelt test": (
        CONTRACTS.replace("tests: [test_halve]", "tests: [test_halv]"),
        ["`test_halv` is not a graded test cell of the lesson (did you mean `test_halve`?)"],
    ),
    "a misspelt mistake": (
        CONTRACTS.replace("mistakes: [halve-floor]", "mistakes: [halve-flor]"),
        ["`halve-flor` is not a planted mistake of the lesson (did you mean `halve-floor`?)"],
    ),
    "a mistake planted in another exercise": (
        CONTRACTS.replace("mistakes: [halve-floor]", "mistakes: [halve-floor, double-adds]"),
        ["mistake `double-adds` is planted in `double`, not in this exercise"],
    ),
    "a mistake none of whose failures is the clause's test": (
        CONTRACTS.replace("mistakes: [double-adds]", "mistakes: [double-adds, double-int]"),
        ["mistake `double-int` fails ['test_double_dtype'], none of the clause's tests"],
    ),
    "a test before its exercise": (
        CONTRACTS.replace("tests: [test_halve]", "tests: [test_halve, test_double]"),
        ["test `test_double` comes before the exercise it is said to check"],
    ),
    "a clause with no test and no mistake": (
        CONTRACTS.replace("[test_halve]\n    mistakes: [halve-floor]", "[]\n    mistakes: []"),
        ["clause 'returns half its argument, a float': names no test", "names no planted mistake"],
    ),
    "two contracts for one exercise": (
        CONTRACTS + CONTRACTS.split("\n", 1)[1].split("- cell: halve")[0],
        ["`double` has 2 contracts; give it one"],
    ),
}


@pytest.mark.parametrize("edit", list(BROKEN))
def test_each_kind_of_gap_is_named_with_its_lesson_cell_and_name(tmp_path, edit):
    text, expected = BROKEN[edit]
    found = _problems(tmp_path, text)
    for sentence in expected:
        assert sentence in found, f"{edit}: {sentence!r} not in:\n{found}"


MALFORMED = {  # a contracts: section -> what the check must say
    "contracts: {cell: double}\n": "`contracts:` must be a list of contracts",
    "contracts:\n- double\n": "contract 1: a contract is a mapping with ['cell', 'clauses']",
    "contracts:\n- {cell: double}\n": "contract 1 (cell 'double'): unknown fields [] or missing"
    " ['clauses']",
    "contracts:\n- {cell: double, clauses: []}\n": "`clauses` must be a non-empty list",
    "contracts:\n- {cell: double, clause: [], clauses: [{}]}\n": "unknown fields ['clause']",
    "contracts:\n- cell: double\n  clauses: [{clause: '', tests: [t], mistakes: [m]}]\n": (
        "clause 1: `clause` must say what the exercise promises, not ''"
    ),
    "contracts:\n- cell: double\n  clauses: [{clause: x, tests: test_double, mistakes: [m]}]\n": (
        "`tests` must be a list of names, e.g. [name], not 'test_double'"
    ),
    "contracts:\n- cell: double\n  clauses: [{clause: x, test: [a], mistakes: [m]}]\n": (
        "unknown fields ['test'] or missing ['tests']"
    ),
}


@pytest.mark.parametrize("text", list(MALFORMED), ids=range(len(MALFORMED)))
def test_a_malformed_entry_is_reported_and_refused_by_the_loader(tmp_path, text):
    lesson = small_course(tmp_path, text)
    assert MALFORMED[text] in _problems(tmp_path / "again", text)
    with pytest.raises(ValueError, match="malformed contracts"):
        contracts.load_contracts(lesson)


def test_every_problem_of_every_lesson_is_reported_at_once(tmp_path):
    """Two lessons, a problem in each: one report, lesson by lesson, both named."""
    first = small_course(tmp_path / "a", CONTRACTS.replace("[test_halve]", "[test_halv]"))
    second = small_course(tmp_path / "b", "")
    found = contracts.report([first, second])
    first_part, second_part = found.split("\n\n")
    assert first_part.startswith("lesson01 (3 problems):") and "`test_halv` is not" in first_part
    assert second_part.startswith("lesson01 (1 problem):") and "no `contracts:`" in second_part


def test_a_misspelt_section_of_mistakes_yml_is_refused(tmp_path):
    found = _problems(tmp_path, CONTRACTS.replace("contracts:", "contract:"))
    assert "unknown sections ['contract']" in found


def test_the_command_prints_a_lesson_and_checks_the_course(capsys):
    lesson = all_lessons()[0].assignment
    assert contracts.main([lesson]) == 0
    assert capsys.readouterr().out.startswith(f"{lesson}: Lesson 1")
    status = contracts.main(["--check", lesson])
    out = capsys.readouterr().out
    assert (status, bool(contracts.report(all_lessons()[:1]))) in {(0, False), (1, True)}, out
    with pytest.raises(SystemExit):
        contracts.main(["lesson99"])


def test_the_small_lesson_is_read_as_the_course_reads_lessons(tmp_path):
    cells = contracts.Cells.of(small_course(tmp_path))
    assert list(cells.exercises) == ["double", "halve"]
    assert list(cells.tests) == ["test_double", "test_double_dtype", "test_halve"]
    assert list(cells.others) == ["why_halve"]
    assert yaml.safe_load(textwrap.dedent(CONTRACTS))["contracts"][0]["cell"] == "double"


PLANTED = {  # an edit to MISTAKES -> what the check must say (the chain would find it only when
    # it grades that mistake, under make test-mistakes)
    "a cell that does not exist": (
        MISTAKES.replace("cell: halve,", "cell: halv,"),
        "mistake `halve-floor`: `halv` is not a solution cell of the lesson (did you mean `halve`",
    ),
    "a test cell as the cell": (
        MISTAKES.replace("cell: halve,", "cell: test_halve,"),
        "mistake `halve-floor`: `test_halve` is not a solution cell",
    ),
    "an old text not in the cell": (
        MISTAKES.replace("old: x / 2", "old: x / 3"),
        "mistake `halve-floor`: its `old` text is not in `halve`: 'x / 3'",
    ),
    "a misspelt test": (
        MISTAKES.replace("fails: [test_halve]", "fails: [test_halv]"),
        "mistake `halve-floor`: fails `test_halv` is not a graded test cell of the lesson",
    ),
    "a test before the cell": (
        MISTAKES.replace("fails: [test_halve]", "fails: [test_halve, test_double]"),
        "mistake `halve-floor`: fails `test_double`, which runs before `halve`",
    ),
    "a mistake that fails nothing": (
        MISTAKES.replace("fails: [test_halve]", "fails: []"),
        "mistake `halve-floor`: fails no test (or changes nothing): an alternative answer?",
    ),
    "two mistakes of one name": (
        MISTAKES.replace("name: double-int", "name: double-adds"),
        "two mistakes are called `double-adds`",
    ),
    "a misspelt section": (MISTAKES.replace("everyday:", "everday:"), "unknown sections"),
}


@pytest.mark.parametrize("edit", list(PLANTED))
def test_each_kind_of_bad_mistake_is_named_before_any_grading(tmp_path, edit):
    text, expected = PLANTED[edit]
    found = _problems(tmp_path, CONTRACTS, text)
    assert expected in found, f"{edit}: {expected!r} not in:\n{found}"


def test_an_alternative_answer_for_a_cell_that_does_not_exist_is_named(tmp_path):
    lesson = small_course(tmp_path)
    (lesson.source.parent / "alternatives.yml").write_text(
        "alternatives:\n- {name: double-shift, cell: doubel, source: 'def double(x): ...'}\n",
        encoding="utf-8",
    )
    found = contracts.lesson_problems(lesson)
    assert found == [
        "alternative `double-shift`: `doubel` is not a solution cell of the lesson"
        " (did you mean `double`?)"
    ]


# ---- method clauses and their counter-answers --------------------------------------------------

METHOD_MISTAKES = MISTAKES + (
    "- {name: halve-by-loop, cell: halve, old: x / 2, new: 'x * 0.5', fails: [test_halve],\n"
    "   kind: method}\n"
)
METHOD_CONTRACTS = CONTRACTS.replace(
    "  - clause: returns half its argument, a float\n",
    "  - clause: returns half its argument, a float\n    method: true\n",
)


def test_a_method_clause_needs_a_counter_answer(tmp_path):
    found = _problems(tmp_path / "a", METHOD_CONTRACTS)
    assert "a method clause needs a counter-answer among its mistakes" in found
    with_counter = METHOD_CONTRACTS.replace("[halve-floor]", "[halve-floor, halve-by-loop]")
    assert _problems(tmp_path / "b", with_counter, METHOD_MISTAKES) == ""
    lesson = small_course(tmp_path / "c", with_counter, METHOD_MISTAKES)
    (_, halve) = contracts.load_contracts(lesson)
    assert halve.clauses[0].method
    shown = contracts.describe(lesson)
    assert "returns half its argument, a float  (method)" in shown
    assert "mistake:  halve-by-loop (method)" in shown


def test_a_counter_answer_of_an_unknown_kind_and_a_bad_method_flag_are_refused(tmp_path):
    bad_kind = METHOD_MISTAKES.replace("kind: method", "kind: methd")
    assert "has kind 'methd'; a planted mistake's kind is one of" in _problems(
        tmp_path / "a", CONTRACTS, bad_kind
    )
    bad_flag = METHOD_CONTRACTS.replace("method: true", "method: yes please")
    assert "`method` must be true or false" in _problems(tmp_path / "b", bad_flag)
