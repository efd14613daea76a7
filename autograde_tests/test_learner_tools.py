"""What a learner runs besides the notebooks: `make lab`'s workspace and `make check`."""

from __future__ import annotations

import json
import re
import shutil
import sys

import nbformat
import pytest

from coursekit.course.cells import grade_id, is_solution
from coursekit.course.lessons import all_lessons
from coursekit.course.mistakes import fill_solutions, lesson_mistakes
from coursekit.course.reading import source_to_notebook
from coursekit.learner import selfcheck, workspace

LESSON, SECOND = all_lessons()[:2]


def _copy_lesson(lesson, root):
    """Copy ``lesson``'s source and student edition into the course at ``root``: it, there."""
    for path in (lesson.source, lesson.student_notebook):
        target = root / path.relative_to(lesson.root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return lesson.in_course(root)


def _learners_copy(lesson, root):
    """Where the learner's own copy of ``lesson`` is in the course at ``root`` (its folder made)."""
    mine = root / "work" / lesson.assignment / f"{lesson.name}.ipynb"
    mine.parent.mkdir(parents=True, exist_ok=True)
    return mine


@pytest.fixture
def course_root(tmp_path):
    """A minimal copy of the course: config, one lesson's source and its student edition."""
    _copy_lesson(LESSON, tmp_path)
    shutil.copy2(LESSON.root / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    return tmp_path


@pytest.mark.unit
def test_workspace_never_overwrites_the_learners_copy(course_root):
    mine = course_root / "work" / LESSON.assignment / f"{LESSON.name}.ipynb"
    assert workspace.sync_workspace(course_root) == [
        f"new lesson: work/{LESSON.assignment}/{LESSON.name}.ipynb"
    ]
    copied, edition = (json.loads(p.read_text()) for p in (mine, LESSON.student_notebook))
    # the Python version JupyterLab would write (opening the notebook changes nothing), else as is
    assert copied["metadata"]["language_info"].pop("version") == sys.version.split()[0]
    assert copied == edition

    mine.write_text(mine.read_text().replace("YOUR CODE HERE", "my answer"))
    answered = mine.read_bytes()
    assert workspace.sync_workspace(course_root) == []  # a rerun: nothing to do
    assert mine.read_bytes() == answered

    # The course publishes a newer edition of the lesson: the learner's file stays as it is.
    edition = course_root / LESSON.student_notebook.relative_to(LESSON.root)
    edition.write_text(edition.read_text().replace("Lesson 1", "Lesson 1 (revised)"))
    messages = workspace.sync_workspace(course_root)
    assert mine.read_bytes() == answered
    assert len(messages) == 1 and "was kept" in messages[0]
    beside = [p for p in mine.parent.glob("*.ipynb") if p != mine]
    assert len(beside) == 1 and "revised" in beside[0].read_text()
    assert beside[0].name.startswith("newer-edition-")  # apart from the learner's file at once
    assert workspace.sync_workspace(course_root) == messages  # said again, nothing written twice
    assert len(list(mine.parent.glob("*.ipynb"))) == 2

    # The learner carries their answer over and makes the newer edition theirs: nothing more to say.
    moved = beside[0].read_text().replace("YOUR CODE HERE", "my answer")
    beside[0].unlink()
    mine.write_text(moved)
    assert workspace.sync_workspace(course_root) == []
    assert [p.name for p in mine.parent.glob("*.ipynb")] == [mine.name]


@pytest.mark.chain
def test_selfcheck_grades_the_learners_copy_without_showing_hidden_tests(course_root, capsys):
    # the planted mistake's own record says which tests it fails (the softmax's stability test,
    # and the lesson's later exercises that are built on the learner's softmax)
    (overflow,) = [m for m in lesson_mistakes(LESSON.assignment) if m.name == "softmax-overflow"]
    student = nbformat.read(LESSON.student_notebook, as_version=4)
    solved = source_to_notebook(LESSON.source)
    overflowing = fill_solutions(student, solved, {overflow.cell: (overflow.old, overflow.new)})
    mine = _learners_copy(LESSON, course_root)
    nbformat.write(overflowing, mine)
    before = mine.read_bytes()

    result = selfcheck.check(LESSON.assignment, root=course_root)
    assert result.failed == overflow.fails
    table = selfcheck.report(result, root=course_root)
    assert "test_softmax_stable" in table and "FAILED" in table and "subtract the maximum" in table
    assert f"{result.score:g} / {result.max_score:g}" in table
    # one error per failed cell: nbgrader adds the execute reply's own when no output names it
    assert not [c.message for c in result.cells if c.message.count("Error: ") > 1]
    assert "_ref" not in table and "default_rng" not in table, "hidden test code must not be shown"
    assert mine.read_bytes() == before, "the learner's notebook is read, never changed"

    # The learner fixes the softmax, answers lesson 2's first exercise and checks both (`make
    # check`): the two are graded side by side, each in its own private course, and reported in
    # course order, then summed up. Lesson 1's course is reused as it was made (no new release,
    # no new gradebook), and the new notebook is what gets graded.
    course = course_root / selfcheck.COURSES / LESSON.assignment
    release = LESSON.in_course(course).student_notebook
    made = release.stat().st_mtime_ns, (course / "gradebook.db").stat().st_ino
    nbformat.write(fill_solutions(student, solved), mine)
    second = _copy_lesson(SECOND, course_root)
    edition = nbformat.read(second.student_notebook, as_version=4)
    assert selfcheck.examine(SECOND.assignment, course_root).state == "no copy"
    nbformat.write(edition, _learners_copy(second, course_root))
    assert selfcheck.examine(SECOND.assignment, course_root).state == "not started"
    first_answer = next(c for c in source_to_notebook(second.source).cells if is_solution(c))
    for cell in edition.cells:
        if grade_id(cell) == grade_id(first_answer):
            cell.source = first_answer.source
    nbformat.write(edition, _learners_copy(second, course_root))
    capsys.readouterr()
    selfcheck.main([LESSON.assignment, SECOND.assignment], root=course_root)
    printed = capsys.readouterr().out
    assert printed.startswith(selfcheck.SAVE_FIRST) and "2 lessons to grade" in printed
    first_report, second_report = printed.split(f"{SECOND.assignment} ({SECOND.name})")
    assert re.search(r"total\s+(\d+) / \1\b", first_report), first_report
    assert "FAILED" not in first_report and "all passed" in second_report
    assert "not attempted" in second_report and "NotImplementedError" not in second_report
    assert re.search(r"overall\s+\d+ / \d+\s+\(2 of 2 lessons started", second_report)
    assert (release.stat().st_mtime_ns, (course / "gradebook.db").stat().st_ino) == made

    # A changed lesson (here: its source) makes the course afresh, release and gradebook.
    source = course_root / LESSON.source.relative_to(LESSON.root)
    source.write_text(source.read_text() + "\nA sentence added to the lesson.\n")
    selfcheck._private_course(course, LESSON.in_course(course_root), course_root, print)
    assert "A sentence added to the lesson." in release.read_text()


@pytest.mark.make
def test_make_lab_serves_jupyterlab_on_the_learners_copy(tmp_path):
    """`make lab` starts a real JupyterLab on work/ (here headless, on a free local port)."""
    import socket
    import subprocess
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    flags = f"--no-browser --ip=127.0.0.1 --port={port} --IdentityProvider.token=test-token"
    server = subprocess.Popen(
        ["make", "lab", f"LAB_FLAGS={flags}"],
        cwd=LESSON.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        # Generous: on a fresh clone `make lab` first regenerates notebooks/ (nbgrader, all
        # lessons).
        deadline, contents = time.time() + 300, None
        while time.time() < deadline and contents is None:
            try:
                url = f"http://127.0.0.1:{port}/api/contents/{LESSON.assignment}?token=test-token"
                contents = json.loads(urllib.request.urlopen(url, timeout=2).read())
            except OSError:
                assert server.poll() is None, server.stdout.read()
                time.sleep(0.5)
        assert contents is not None, "JupyterLab did not answer within 300 s"
        names = [item["name"] for item in contents["content"]]
        assert f"{LESSON.name}.ipynb" in names, names
    finally:
        import os
        import signal

        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


@pytest.mark.unit
def test_make_check_says_what_failed_where_and_sums_up():
    from coursekit.grading.results import CellResult, NotebookResult
    from coursekit.learner import summary

    def test_cell(name, source, line):
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": name}
        trace = [f"AssertionError: {name} failed", "", f"\x1b[0;32mCell In[4], line {line}\x1b[0m"]
        cell.outputs = [nbformat.v4.new_output("error", ename="AssertionError", evalue="x",
                                               traceback=trace)]  # fmt: skip
        return cell

    demo = nbformat.v4.new_code_cell("plt.imshow(causal_mask(6))")
    demo.outputs = [nbformat.v4.new_output("error", ename="NameError", evalue="name 'x' is not "
                                           "defined", traceback=[])]  # fmt: skip
    hidden = "check(1)\n### BEGIN HIDDEN TESTS\ncheck(2)\n### END HIDDEN TESTS"
    broken = nbformat.v4.new_code_cell("def swiglu(x):\n    return (x")
    broken.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "swiglu"}
    broken.outputs = [nbformat.v4.new_output("error", ename="SyntaxError", evalue="incomplete "
                                             "input (1.py, line 2)", traceback=[])]  # fmt: skip
    graded = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("## 2. The causal mask\n\nText."),
        test_cell("test_hidden", hidden, 3), test_cell("test_visible", hidden, 1), demo,
        nbformat.v4.new_markdown_cell("## SwiGLU"), broken,
    ])  # fmt: skip
    cells = [
        CellResult("test_hidden", 0, 2, "AssertionError: the hidden case"),
        CellResult("test_visible", 0, 3, "AssertionError: the visible case"),
        CellResult("test_blank", 0, 5, "NotImplementedError: "),
        CellResult("test_done", 4, 4),
        CellResult("test_swiglu", 0, 1, "NameError: name 'swiglu' is not defined"),
    ]
    review = ("[review] processes: socket.create_connection (opens network connections) (cell 61: "
              "socket.create_connection((host, 443), timeout=2) in a copied cell of the real "
              "model's download)")  # fmt: skip
    found = summary.LessonCheck(
        LESSON, 14, NotebookResult("you", LESSON, "graded", 4, 14, cells, findings=[review])
    )
    summary.read_graded(found, graded)
    assert found.hidden == {"test_hidden"}
    assert found.others == [  # numbered as the grader's notes number cells: all of them, from 1
        "cell 4, in \"2. The causal mask\": NameError: name 'x' is not defined",
        'swiglu, in "SwiGLU": SyntaxError: incomplete input (1.py, line 2)',
    ]
    table = summary.lesson_table(found)
    assert "FAILED in a hidden test (the visible ones passed)" in table
    assert re.search(r"test_visible\s+0 / 3\s+FAILED\n", table) and "the visible case" in table
    assert re.search(r"test_blank\s+0 / 5\s+not attempted\n", table)
    assert "NotImplementedError" not in table and "cell 4, in" in table
    notes = table.split("Notes from the grader:\n")[1].split()
    assert " ".join(notes) == review  # over lines, every word whole
    assert re.search(
        r"NameError: name 'swiglu' is not defined\n\s+\(the cell that defines "
        r"swiglu raised before it did: swiglu, in \"SwiGLU\",\n\s+listed below",
        table,
    )
    never = summary.LessonCheck(SECOND, 10, state="not started")
    total = summary.summary([found, never])
    assert "3 failed, of which 1 in hidden tests, 1 not attempted" in total
    assert re.search(rf"{SECOND.assignment}\s+- / 10\s+not started", total)
    assert re.search(r"overall\s+4 / 24\s+\(1 of 2 lessons started: 4 / 14 of theirs\)", total)


@pytest.mark.unit
def test_a_learner_installs_what_lab_check_and_the_book_need_and_no_more():
    import tomllib

    extras = tomllib.loads((LESSON.root / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    learner = {re.split(r"[<>=!~\[ ;]", spec, maxsplit=1)[0] for spec in extras["learner"]}
    assert {"jupyterlab", "nbgrader", "jupyter-book", "triton"} <= learner  # torch: everyone's
    assert not learner & {"pytest", "playwright", "jupyterhub", "dask", "ruff", "hypothesis"}
    assert "attention-course[learner]" in extras["course"]  # an instructor's set holds it
    makefile = (LESSON.root / "Makefile").read_text()
    for target in ("lab: notebooks |", "check:", "notebooks/%.ipynb: solutions/%.md |"):
        (line,) = [x for x in makefile.splitlines() if x.startswith(target)]
        assert "$(LEARNER_STAMP)" in line and "$(STAMP)" not in line, line


@pytest.mark.unit
def test_make_lab_puts_the_tutors_rules_beside_the_learners_work(tmp_path):
    (tmp_path / "work").mkdir()
    workspace.place_tutor_notes(tmp_path)
    placed = (tmp_path / "work" / "AGENTS.md").read_text()
    root = (LESSON.root / "AGENTS.md").read_text()
    for rules in (placed, root):
        for rule in ("Never write a solution", "Never reveal hidden tests", "solutions/",
                     "Explain", "Ask", "Point", "Review the learner's code"):  # fmt: skip
            assert rule in rules, rule
    lines = workspace.notices([f"new lesson: work/{LESSON.assignment}/{LESSON.name}.ipynb"])
    assert LESSON.assignment in lines[0] and "Save" in lines[-1] and "make check" in lines[-1]


@pytest.mark.unit
def test_make_checks_estimate_for_lessons_side_by_side_waits_for_the_longest(tmp_path):
    """Two lessons on two cores take as long as the longer one at least (the estimate of
    2026-12-07 said 13 s for two that took 22 s)."""
    (tmp_path / selfcheck.COURSES).mkdir(parents=True)
    times = {LESSON.assignment: {"grade": 20.0}, SECOND.assignment: {"grade": 12.0}}
    (tmp_path / selfcheck.TIMES).write_text(json.dumps(times))
    both = [selfcheck.LessonCheck(item, 10) for item in (LESSON, SECOND)]
    assert selfcheck._estimate(both, 2, tmp_path).endswith(
        ": about 20 s, as the last checks took here."
    )
    assert "about 32 s" in selfcheck._estimate(both, 1, tmp_path)
    assert "first check" in selfcheck._estimate(both[:1], 1, tmp_path / "elsewhere")


@pytest.mark.unit
def test_the_first_install_says_what_and_how_big_then_progress_not_the_package_list(tmp_path):
    from coursekit.learner import install

    fake_uv = tmp_path / "uv"  # answers `uv cache dir`, then installs as uv prints it
    cache = tmp_path / "cache"
    fake_uv.write_text(
        f"#!{sys.executable}\n"
        "import sys, time, pathlib\n"
        f"if sys.argv[1:] == ['cache', 'dir']: print({str(cache)!r}); sys.exit(0)\n"
        "print('Resolved 175 packages in 1.2s', flush=True)\n"
        f"pathlib.Path({str(cache)!r}).mkdir(exist_ok=True)\n"
        f"pathlib.Path({str(cache)!r}, 'torch.whl').write_bytes(bytes(30 * 2**20))\n"
        "time.sleep(0.5)\n"
        "print('Prepared 170 packages in 0.5s')\n"
        "print('Installed 175 packages in 0.1s')\n"
        "print(' + torch==2.13.0')\n"
        "sys.exit(int(sys.argv[1]))\n"
    )
    fake_uv.chmod(0o755)
    said = []
    install.EVERY = 0.2
    assert install.run("learner", [str(fake_uv), "0", "--compile-bytecode"], say=said.append) == 0
    assert said[0] == install.announce("learner") and "175 packages" in said[0] and "MB" in said[0]
    assert [s.strip() for s in said if s.strip().startswith(("Resolved", "Installed"))] == [
        "Resolved 175 packages in 1.2s", "Installed 175 packages in 0.1s"]  # fmt: skip
    assert any(re.fullmatch(r"  \.\.\. \d+ s: 30 MB fetched and unpacked so far", s) for s in said)
    assert not any("torch==" in s for s in said)  # not uv's list of every package
    assert said[said.index("  Installed 175 packages in 0.1s") + 1] == install.COMPILING
    said.clear()
    assert install.run("learner", [str(fake_uv), "3"], say=said.append) == 3
    assert said[-1].startswith("uv failed; all it printed:") and "+ torch==2.13.0" in said[-1]
    readme = (LESSON.root / "README.md").read_text()
    count, download, size = install.LEARNER_SET
    assert f"{count} packages, a download of {download} MB and {size} GB in `.venv`" in readme


def _cells_by_id(path):
    return {c.get("id"): c for c in json.loads(path.read_text())["cells"]}


def _answer(nb: dict, grade: str) -> dict:
    return next(
        c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == grade
    )


@pytest.mark.unit
def test_make_upgrade_carries_the_answers_into_the_newer_edition_and_keeps_the_file(course_root):
    from coursekit.learner import upgrade

    workspace.sync_workspace(course_root)
    mine = course_root / "work" / LESSON.assignment / f"{LESSON.name}.ipynb"
    nb = json.loads(mine.read_text())
    _answer(nb, "dot_scores")["source"] = (
        "def dot_scores(queries, keys):\n    return queries @ keys.T"
    )
    _answer(nb, "softmax")["source"] = "def softmax(x, axis=-1):\n    return x  # mine"
    _answer(nb, "kernel_regression")["source"] = "def kernel_regression(a, b, c):\n    return a"
    scratch = nbformat.v4.new_code_cell("print('my own check')")
    scratch["id"] = "my-scratch"
    follows = nb["cells"][9]["id"]  # the learner's cell after the cell after dot_scores' answer
    nb["cells"].insert(10, json.loads(json.dumps(scratch)))
    mine.write_text(json.dumps(nb))
    before = mine.read_bytes()

    # The course's newer edition: a sentence changed, softmax gone (renamed), a signature changed.
    edition_path = course_root / LESSON.student_notebook.relative_to(LESSON.root)
    edition = json.loads(edition_path.read_text())
    edition["cells"][0]["source"] = "# Lesson 1 (revised)\n"
    _answer(edition, "softmax")["metadata"]["nbgrader"]["grade_id"] = "stable_softmax"
    stub = _answer(edition, "kernel_regression")
    stub["source"] = "".join(stub["source"]).replace("bandwidth=1.0", "bandwidth=0.5")
    edition_path.write_text(json.dumps(edition))
    (notice,) = workspace.sync_workspace(course_root)
    assert f"`make upgrade LESSON={LESSON.assignment}`" in workspace.notices([notice])[0]

    assert upgrade.main([LESSON.assignment], course_root) == 0
    old = mine.with_name(f"{LESSON.name}.old.ipynb")
    assert old.read_bytes() == before  # the learner's file, kept as it was
    new = json.loads(mine.read_text())
    assert new["cells"][0]["source"] == "# Lesson 1 (revised)\n"
    assert "".join(_answer(new, "dot_scores")["source"]).endswith("queries @ keys.T")
    assert (
        "".join(_answer(new, "kernel_regression")["source"])
        == "def kernel_regression(a, b, c):\n    return a"
    )
    assert "NotImplementedError" in "".join(_answer(new, "weighted_sum")["source"])  # not started
    assert "NotImplementedError" in "".join(_answer(new, "stable_softmax")["source"])
    ids = [c.get("id") for c in new["cells"]]
    assert ids[ids.index(follows) + 1] == "my-scratch"
    nbformat.validate(nbformat.reads(mine.read_text(), as_version=4))
    assert [p.name for p in sorted(mine.parent.glob("*.ipynb"))] == sorted([mine.name, old.name])
    assert workspace.sync_workspace(course_root) == []  # make lab: nothing more to say

    def said(*args):
        import contextlib
        import io

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            upgrade.main(list(args), course_root)
        return out.getvalue()

    # What it told: carried, not started, changed first line, not carried.
    mine.write_bytes(before)
    (course_root / "work" / ".editions.json").write_text(json.dumps(
        {f"{LESSON.assignment}/{LESSON.name}.ipynb": "older"}))  # fmt: skip
    text = said(LESSON.assignment)
    assert "carried over: dot_scores, kernel_regression" in text
    assert (
        "and 1 cell(s) you added" in text and "not started, the new stub kept: weighted_sum" in text
    )
    changed = "`def kernel_regression(x_query, x_keys, y_values, bandwidth=0.5):`"
    assert f"kernel_regression: the new stub's is {changed}" in text
    kept = f"your code stays in {LESSON.name}.old-2.ipynb"
    assert f"NOT carried (the new edition has no such exercise; {kept}): softmax" in text
    assert "is the course's current edition already" in said(LESSON.assignment)
    assert "every lesson in work/ is the course's current edition" in said()


@pytest.mark.unit
def test_make_labs_log_says_once_that_an_old_tab_asks_for_gone_kernels():
    import logging

    from coursekit.learner import lablog

    gone = lablog.GoneKernels()

    def shown(message, *args):
        record = logging.LogRecord("ServerApp", logging.WARNING, "x", 1, message, args, None)
        return record.getMessage() if gone.filter(record) else None

    kernel = "0b0c5f9e-1111-2222-3333-444455556666"
    assert (
        shown("404 GET /api/kernels/%s (127.0.0.1): Kernel does not exist: %s", kernel, kernel)
        == lablog.SAID
    )
    assert shown("wrote error: 'Kernel does not exist: %s'", kernel) is None  # once only
    assert shown("404 GET /api/sessions/abc (u@127.0.0.1) 2.1ms referer=None") is None
    other = "404 GET /api/contents/lesson01.ipynb (127.0.0.1): No such file or directory"
    assert shown(other) == other  # every other warning as before
    assert shown("Kernel died: %s", kernel) == f"Kernel died: {kernel}"
    assert lablog.transport_flags("/home/me/.local/share/jupyter/runtime") == [
        "--KernelManager.transport=ipc"]  # fmt: skip
    assert lablog.transport_flags("/Users/" + "x" * 60 + "/Library/Jupyter/runtime") == []
