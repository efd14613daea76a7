"""The grader's defences one by one, without running nbgrader (seconds): the screening of every
lesson, the repair of graded cells, the guard, the sandbox's policy, the check helpers and the
feedback filter. autograde_tests/hostile/ shows them working together through real nbgrader."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import textwrap
import types

import nbformat
import numpy as np
import pytest
import torch

from coursekit.course.lessons import ROOT, all_lessons
from coursekit.course.mistakes import all_alternatives, all_mistakes, fill_solutions, plant
from coursekit.course.reading import source_to_notebook
from coursekit.grading import integrity
from coursekit.grading.feedback import NOT_SHOWN, REDACTED, HideHiddenTests

pytestmark = pytest.mark.unit

LESSONS = all_lessons()


def _reference(lesson) -> integrity.Reference:
    source = source_to_notebook(lesson.source)
    release = nbformat.read(lesson.student_notebook, as_version=4)
    return integrity.Reference.from_notebooks(lesson.assignment, lesson.name, source, release)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda item: item.assignment)
def test_honest_notebooks_of_every_lesson_pass_the_screening(lesson):
    """Solved, blank, every planted mistake and every alternative answer: nothing to note (no false
    positives)."""
    ref = _reference(lesson)
    source = source_to_notebook(lesson.source)
    honest = {"blank": ref.release, "solved": fill_solutions(ref.release, source)}
    for m in all_mistakes() + all_alternatives():
        if m.lesson == lesson.assignment:
            honest[m.student] = plant(ref.release, source, m)
    for name, nb in honest.items():
        assert integrity.screen(nb, ref) == [], (
            f"{lesson.assignment} {name}: {integrity.screen(nb, ref)}"
        )
    trusted = set(ref.trusted)  # lesson 11 needs torch and Triton, no NumPy
    assert ref.graded_functions and "expect_close" in trusted and trusted & {"np", "torch"}


CODE = {  # a cell a student adds -> the kinds of finding it must raise
    "np.allclose = lambda *a, **k: True": {"monkeypatch"},
    "import builtins\nbuiltins.print = None": {"monkeypatch"},
    "expect_close = print": {"rebinds-helper"},
    "import os\nos._exit(0)": {"exit"},
    "exit()": {"exit"},
    "open('../../gradebook.db').read()": {"files"},
    "import sqlite3": {"files"},
    "import subprocess\nsubprocess.run(['ls'])": {"processes"},
    "!ls ..": {"ipython"},
    "get_ipython().events.register('post_run_cell', print)": {"ipython"},
    "import sys\nsys._getframe(1).f_globals": {"introspection"},
    "exec('x = 1')": {"dynamic-code"},
    "getattr(np, 'all' + 'close')": {"dynamic-code"},
    "print('test_softmax: passed 2/2')": {"fake-output"},
    "from attention_ref.np import soft_lookup": {"reference-answer"},
    "def f():\n    import attention_ref.np as r\n    return r.dot_scores": {"reference-answer"},
    "try:\n    pass\nexcept KeyboardInterrupt:\n    pass": {"interrupt"},
    # IPython's history (In, _ih, _i<N>, Out): where the running test cell's code would be
    "print(In[-1][::-1])": {"ipython-history"},
    "print(_ih[3], _i, _ii, _i7)": {"ipython-history"},
    "x = Out[2]": {"ipython-history"},
    "import __main__\nprint(__main__._ih)": {"introspection", "ipython-history"},
    "print(locals()['_iii'])": {"introspection", "ipython-history"},
    "get_ipython().history_manager.input_hist_raw": {"ipython", "ipython-history"},
    "for _ in range(3):\n    In_total = 1\nprint('In short')": set(),
    "%timeit np.ones(3)": set(),
    "print('the forward pass is done')": set(),
    "import os\nprint(os.path.join('a', 'b'))": set(),
}


@pytest.mark.parametrize("code", list(CODE))
def test_the_screening_names_what_a_cell_does(code):
    lesson = next(item for item in LESSONS if item.assignment == "lesson01")
    ref = _reference(lesson)
    nb = nbformat.from_dict(json.loads(json.dumps(ref.release)))
    nb.cells.insert(3, nbformat.v4.new_code_cell(code))
    kinds = {f.kind for f in integrity.scan_code(nb, ref)}
    assert kinds == CODE[code]


def test_repair_puts_graded_cells_back_so_that_nbgrader_can_read_them():
    from nbgrader.nbgraderformat import MetadataValidator

    lesson = LESSONS[0]
    ref = _reference(lesson)
    nb = nbformat.from_dict(json.loads(json.dumps(ref.release)))
    tests = ref.test_ids
    del nb.cells[
        [c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.cells].index(
            tests[0]
        )
    ]
    solution = next(
        c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")
    )
    del nb.cells[nb.cells.index(solution)]
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade_id") == tests[1]:
            meta.update(schema_version=1, points=100, grade=False)
    nb.cells.insert(2, nbformat.v4.new_code_cell("pass"))
    nb.cells[2].metadata["nbgrader"] = {
        "grade": True,
        "grade_id": "bonus",
        "points": 50,
        "solution": False,
        "locked": False,
        "schema_version": 3,
    }
    kinds = {f.kind for f in integrity.structure(nb, ref)}
    assert {
        "deleted-test-cell",
        "deleted-exercise-cell",
        "edited-cell-metadata",
        "foreign-graded-cell",
    } <= kinds
    repaired = integrity.repair(nb, ref)
    MetadataValidator().validate_nb(repaired)  # stock nbgrader would stop the whole class here
    ids = [c.metadata["nbgrader"]["grade_id"] for c in repaired.cells if "nbgrader" in c.metadata]
    assert ids == [c.grade_id for c in ref.cells]
    nbformat.validate(repaired)


@pytest.mark.parametrize(
    "content, kind",
    [
        (b"", "empty-file"),
        (b'{"cells": [', "malformed-notebook"),
        (b"[1, 2]", "malformed-notebook"),
    ],
)
def test_unreadable_files_are_invalid(tmp_path, content, kind):
    (tmp_path / "x.ipynb").write_bytes(content)
    nb, found = integrity.read_submission(tmp_path, "x")
    assert nb is None and [f.kind for f in found] == [kind] and found[0].severity == "invalid"


def test_missing_renamed_and_linked_notebooks_are_invalid(tmp_path):
    assert integrity.read_submission(tmp_path, "x")[1][0].kind == "missing-notebook"
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "x (1).ipynb")
    found = integrity.read_submission(tmp_path, "x")[1][0]
    assert found.kind == "renamed-notebook" and "x (1).ipynb" in found.message
    (tmp_path / "link").symlink_to("/etc/hostname")
    assert integrity.read_submission(tmp_path, "x")[1][0].kind == "symlink"


def test_the_guard_puts_back_what_was_patched():
    import attention_ref.np as ref
    from coursekit.grading import guard

    guard.install()
    assert json.loads(guard.check())["tampered"] == []
    allclose, assert_close, code = np.allclose, torch.testing.assert_close, ref.softmax.__code__
    try:
        np.allclose = lambda *a, **k: True
        torch.testing.assert_close = lambda *a, **k: None
        ref.softmax.__code__ = ref.dot_scores.__code__
        report = json.loads(guard.check())
    finally:
        np.allclose, torch.testing.assert_close, ref.softmax.__code__ = allclose, assert_close, code
    assert any("numpy.allclose" in t for t in report["tampered"])
    assert any("torch.testing.assert_close" in t for t in report["tampered"])
    assert any("code of attention_ref.np.softmax" in t for t in report["tampered"])
    np.allclose = lambda *a, **k: True
    json.loads(guard.check())  # restores
    assert np.allclose is allclose


def test_the_guard_trusts_what_loads_and_skips_a_module_that_fails_to(tmp_path, monkeypatch):
    """The names a lesson imports are trusted before any submitted code runs; one whose module
    fails to load in the sandbox with more than an ImportError is left untrusted, and the grading
    goes on (lesson 13 imports `transformers` for a demo: trusting it stopped every grading)."""
    from coursekit.grading import guard

    (tmp_path / "_fails_to_load.py").write_text("raise RuntimeError('no cache directory here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    guard.install()
    guard.trust({"np": ["numpy", None], "broken": ["_fails_to_load", "anything"]})
    assert guard._state["trusted"].get("np") is np and "broken" not in guard._state["trusted"]


def test_the_guard_accepts_what_the_check_helpers_record_as_imports_come():
    """The check helpers keep their own records in the library's globals; the guard, which fails a
    test during which a library global is rebound, must not count that as tampering."""
    from attention_ref import testing
    from coursekit.grading import guard

    guard.install()
    testing.expect_close(np.ones(2), np.ones(2), "a check before an import")
    with _library_module("attention_ref._guard_probe"):
        testing.expect_close(np.ones(2), np.ones(2), "a check after it")
        assert json.loads(guard.check())["tampered"] == []


@contextlib.contextmanager
def _library_module(name: str):
    """A module of the library imported for the duration (as if by ``import name``); afterwards
    gone from sys.modules and from the tamper check's records (later checks would otherwise find
    its functions missing, that is, replaced)."""
    from attention_ref.testing import tamper

    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        yield module
    finally:
        del sys.modules[name]
        for key in [key for key in tamper._ORIGINALS if key[0] == name]:
            del tamper._ORIGINALS[key]


def test_the_check_helpers_refuse_to_run_on_replaced_originals():
    import attention_ref.np as ref
    from attention_ref import testing

    original = np.allclose
    np.allclose = lambda *a, **k: True
    try:
        with pytest.raises(AssertionError, match="numpy.allclose was replaced"):
            testing.expect_close(np.ones(2), np.zeros(2), "x")
    finally:
        np.allclose = original
    namespace = {"__name__": "__main__", "ref": ref}
    exec(
        "def softmax(x, axis=-1):\n    import attention_ref.np as r\n    return r.softmax(x, "
        "axis)\n"
        "def helper(x):\n    return ref.dot_scores(x, x)\ndef dot_scores(q, k):\n    return "
        "helper(q)\n",
        namespace,
    )
    with pytest.raises(AssertionError, match="uses its softmax"):
        testing.expect_own_function(namespace["softmax"], "softmax")
    with pytest.raises(AssertionError, match="dot_scores"):
        testing.expect_own_function(namespace["dot_scores"], "dot_scores")
    with pytest.raises(AssertionError, match="comes from attention_ref"):
        testing.expect_own_function(ref.softmax, "softmax")


def test_the_sandbox_refuses_what_grading_never_needs(tmp_path):
    course = tmp_path / "course"
    (course / "submitted" / "me").mkdir(parents=True)
    (course / "gradebook.db").write_text("grades")
    (course / "solutions").mkdir()
    (course / "solutions" / "answers.md").write_text("answers")
    work = course / "autograded" / "me"
    work.mkdir(parents=True)
    (work / "data.txt").write_text("mine")
    script = textwrap.dedent(f"""
        import os, sys, json, sqlite3, subprocess, ctypes
        sys.path.insert(0, {str(ROOT)!r})
        from coursekit.grading.sandbox import make_audit_hook
        os.chdir({str(work)!r})
        protected, writable = [{str(course)!r}], [{str(work)!r}, {str(tmp_path / "tmp")!r}]
        sys.addaudithook(make_audit_hook(protected, [{str(work)!r}], writable, []))
        tries = {{
            "read own": lambda: open("data.txt").read(),
            "write own": lambda: open("out.txt", "w").write("x"),
            "read gradebook": lambda: open("../../gradebook.db").read(),
            "read solutions": lambda: open("../../solutions/answers.md").read(),
            "list course": lambda: os.listdir("../.."),
            "read notebook": lambda: open("graded.ipynb", "w") and open("graded.ipynb").read(),
            "write course": lambda: open("../../gradebook.db", "a").write("x"),
            "remove": lambda: os.remove("../../gradebook.db"),
            "sqlite": lambda: sqlite3.connect("../../gradebook.db"),
            "process": lambda: subprocess.run(["true"]),
            "kill parent": lambda: os.kill(os.getppid(), 0),
            "native code": lambda: ctypes.CDLL(None),
            "symlink": lambda: os.symlink("../../gradebook.db", "gb"),
        }}
        out = {{}}
        for name, attempt in tries.items():
            try:
                attempt()
                out[name] = "allowed"
            except PermissionError:
                out[name] = "refused"
        print(json.dumps(out))
        """)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out.pop("read own") == out.pop("write own") == "allowed"
    assert set(out.values()) == {"refused"}, out
    assert (course / "gradebook.db").read_text() == "grades"


def test_feedback_blanks_hidden_tests_out_of_every_output():
    nb = nbformat.v4.new_notebook()
    test = nbformat.v4.new_code_cell(
        "expect_close(f(1), 2, 'f of 1')\n### BEGIN HIDDEN TESTS\n"
        "expect_close(f(12345), 67890, 'secret case')\n### END HIDDEN TESTS"
    )
    test.metadata["nbgrader"] = {
        "grade": True,
        "grade_id": "t",
        "points": 1,
        "solution": False,
        "locked": True,
    }
    test.outputs = [
        nbformat.v4.new_output(
            "stream", text="leaked: expect_close(f(12345), 67890, 'secret case')\n"
        )
    ]
    mine = nbformat.v4.new_code_cell("print(stolen)")
    mine.outputs = [
        nbformat.v4.new_output(
            "execute_result",
            data={"text/plain": "expect_close(f(12345), 67890, 'secret case')"},
            execution_count=1,
        )
    ]
    reversed_test = nbformat.v4.new_output("stream", text=test.source[::-1])
    test.outputs.append(reversed_test)  # printed by the learner's code while the test ran
    error = nbformat.v4.new_output("error", ename="AssertionError", evalue="secret case: 1 != 2")
    test.outputs.append(error)
    nb.cells = [test, mine]
    out, _ = HideHiddenTests().preprocess(nb, {})
    text = json.dumps(out)
    assert "12345" not in text and "54321" not in text and REDACTED in text
    assert "expect_close(f(1), 2, 'f of 1')" in text  # the visible test stays
    assert [o.output_type for o in out.cells[0].outputs] == ["error"]  # the test's own message
    assert NOT_SHOWN in out.cells[0].source


def test_test_cells_leave_nothing_in_ipythons_history():
    """Graded as GuardedExecute grades (test cells with store_history=False, the guard's check
    after each), a later cell finds neither a test cell's code nor its result nor its printed
    output anywhere in IPython's history. In a fresh process: IPython's shell is a singleton."""
    script = r"""
import json
from IPython.core.interactiveshell import InteractiveShell
from coursekit.grading import guard
shell = InteractiveShell.instance()
guard.install(shell=shell)
guard.check()
cells = [("x = 1\nx", False), ("print('SECRET-PRINT')\n'SECRET-RESULT'", True), ("y = 2", False)]
for source, test in cells:
    shell.run_cell(source, store_history=not test)
    assert json.loads(guard.check(test_cell=test))["tampered"] == []
history = shell.history_manager
seen = [shell.user_ns["In"], shell.user_ns["_ih"], shell.user_ns["Out"], history.output_hist,
        history.output_hist_reprs, dict(history.outputs), history.input_hist_raw,
        {k: v for k, v in shell.user_ns.items() if k.startswith("_")}, shell.displayhook._]
print(json.dumps([repr(s) for s in seen]))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = done.stdout.strip().splitlines()[-1]
    assert "x = 1" in seen and "y = 2" in seen  # the learner's own cells stay, with results
    assert "SECRET" not in seen, seen


def test_the_check_helpers_watch_library_modules_imported_or_grown_later():
    """The library's functions are recorded incrementally (a module's namespace is scanned again
    only when the module is new or its namespace grew): a module imported after the first check,
    and a function added to a module that was still being imported, are both watched."""
    from attention_ref import testing

    testing.expect_close(np.ones(2), np.ones(2), "a first check: the library is recorded")
    with _library_module("attention_ref._imported_late") as late:
        exec("def f(x):\n    return x\n", vars(late))
        testing.expect_close(np.ones(2), np.ones(2), "a check after the import")
        exec("def g(x):\n    return x\n", vars(late))  # the module's namespace grows
        testing.expect_close(np.ones(2), np.ones(2), "a check after it grew")
        for name in ("f", "g"):
            original = getattr(late, name).__code__
            getattr(late, name).__code__ = (lambda x: 0).__code__
            try:
                replaced = f"code of attention_ref._imported_late.{name} was replaced"
                with pytest.raises(AssertionError, match=replaced):
                    testing.expect_close(np.ones(2), np.ones(2), "x")
            finally:
                getattr(late, name).__code__ = original
        testing.expect_close(np.ones(2), np.ones(2), "the originals are back")
