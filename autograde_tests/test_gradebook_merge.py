"""The course's gradebook after a merge that was killed: the next merge starts from the
gradebook as it is, never from what the killed one left beside its copy."""

import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from coursekit.grading import gradebook

pytestmark = pytest.mark.unit

# A merge killed mid-transaction, in a child: it changes its copy with a cache so small that
# SQLite writes the old pages to the copy's journal at once, then dies without a clean-up.
KILLED_MERGE = """
import os, signal, sqlite3, sys
copy = sqlite3.connect(sys.argv[1], isolation_level=None)
copy.execute("pragma cache_size=2")
copy.execute("begin")
copy.execute("delete from student")
copy.execute("insert into student (id) values ('killed')")
os.kill(os.getpid(), signal.SIGKILL)
"""


def _students(path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("select id from student")}


@pytest.fixture
def course_gradebook(tmp_path):
    main = tmp_path / gradebook.FILENAME
    with gradebook.open_gradebook(main):  # nbgrader's tables
        pass
    with sqlite3.connect(main) as db:  # pages enough that the killed merge's journal holds many
        db.executemany(
            "insert into student (id, first_name) values (?, ?)",
            [(f"s{n:04d}", "x" * 100) for n in range(2000)],
        )
    return main


def test_a_merge_after_a_killed_one_keeps_what_was_merged_in_between(course_gradebook):
    main = course_gradebook
    copy = main.with_name(main.name + ".merging")
    gradebook._copy_database(main, copy)
    killed = subprocess.run([sys.executable, "-c", KILLED_MERGE, str(copy)])
    assert killed.returncode == -signal.SIGKILL
    journal = copy.with_name(copy.name + "-journal")
    assert journal.exists(), "the killed merge left no journal: this test shows nothing"

    with sqlite3.connect(main) as db:  # a later batch, merged by the resumed run
        db.execute("insert into student (id) values ('merged-since')")
    gradebook.replace_gradebook(main, lambda gb: gb.add_student("merged-now"))

    students = _students(main)
    assert {"merged-since", "merged-now", "s0000", "s1999"} <= students
    assert "killed" not in students and len(students) == 2002
    assert not journal.exists() and not copy.exists()


def test_the_copy_keeps_who_may_read_the_gradebook(course_gradebook):
    os.chmod(course_gradebook, 0o640)
    gradebook.replace_gradebook(course_gradebook, lambda gb: gb.add_student("new"))
    assert course_gradebook.stat().st_mode & 0o777 == 0o640
