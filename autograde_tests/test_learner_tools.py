"""What a learner runs besides the notebooks: `make lab`'s workspace and `make check`."""

from __future__ import annotations

import json
import re
import shutil
import sys

import nbformat
import pytest

from coursekit.course.lessons import all_lessons
from coursekit.course.mistakes import fill_solutions, lesson_mistakes
from coursekit.course.sources import source_to_notebook
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
    assert workspace.sync_workspace(course_root) == messages  # said again, nothing written twice
    assert len(list(mine.parent.glob("*.ipynb"))) == 2


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
    table = selfcheck.report(result)
    assert "test_softmax_stable" in table and "FAILED" in table and "subtract the maximum" in table
    assert f"{result.score:g} / {result.max_score:g}" in table
    assert "_ref" not in table and "default_rng" not in table, "hidden test code must not be shown"
    assert mine.read_bytes() == before, "the learner's notebook is read, never changed"

    # The learner fixes the softmax, starts lesson 2 and checks both (`make check`): the two are
    # graded side by side, each in its own private course, and reported in course order. Lesson
    # 1's course is reused as it was made (no new release, no new gradebook), and the new
    # notebook is what gets graded.
    course = course_root / selfcheck.COURSES / LESSON.assignment
    release = LESSON.in_course(course).student_notebook
    made = release.stat().st_mtime_ns, (course / "gradebook.db").stat().st_ino
    nbformat.write(fill_solutions(student, solved), mine)
    second = _copy_lesson(SECOND, course_root)
    shutil.copy2(second.student_notebook, _learners_copy(second, course_root))
    capsys.readouterr()
    selfcheck.main([LESSON.assignment, SECOND.assignment], root=course_root)
    printed = capsys.readouterr().out
    first_report, second_report = printed.split(f"{SECOND.assignment} ({SECOND.name})")
    assert re.search(r"total\s+(\d+) / \1\b", first_report), first_report
    assert "FAILED" not in first_report
    assert re.search(r"total\s+0 / [1-9]", second_report) and "NotImplementedError" in second_report
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
