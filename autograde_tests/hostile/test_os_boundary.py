"""What the operating-system boundary (bubblewrap) stops, and what each layer stops on its own.

The attacks of coursekit.democlass.badsubmissions.OS_KINDS use no construct the screening scan
knows. Each attempt prints an ``ATTACK`` line with what it got. In the hostile class (graded as
a class is: bubblewrap and the audit hook) every attempt must fail inside the kernel with an
operating-system error, the rest of the notebook be graded (test_bad_submissions.py: full
marks, held), and the bait be untouched. The same attempts are then graded twice more, all in
one notebook, in courses of their own: in bubblewrap without the audit hook (what the boundary
stops on its own) and in the Python-only sandbox (what the audit hook stops on its own); the
table of defences in docs/grading-defences.md is this test's table (printed with ``-s``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from coursekit.democlass import badsubmissions
from coursekit.grading import classgrade, integrity
from coursekit.grading import tempcourse as grading

from ..sandboxes import require_bubblewrap
from .conftest import EXTRA, LESSON, VICTIM_TEXT

pytestmark = [pytest.mark.chain, pytest.mark.hostile, pytest.mark.bubblewrap]

OS_KINDS = badsubmissions.OS_KINDS
# The messages of operating-system errors (errno's words), as Python or torch report them.
OS_ERROR = re.compile(
    r"No such file or directory|Permission denied|Read-only file system|Connection refused|"
    r"Network is unreachable|Resource temporarily unavailable|Cannot assign requested address|"
    r"not allowed while grading|\[Errno \d+\]"
)
LAYERS = {  # layer: nbgrader flags
    "OS boundary alone": ["--SandboxKernelManager.audit_hook=False"],
    "Python-only sandbox": ["--SandboxKernelManager.sandbox=python-only"],
}


def attacks(course: Path, student: str) -> list[dict]:
    """The ATTACK lines the student's graded notebook printed."""
    graded = LESSON.in_course(course).autograded(student)
    lines = [
        line
        for cell in nbformat.read(graded, 4).cells
        for output in cell.get("outputs", [])
        for line in output.get("text", "").splitlines()
    ]
    return [json.loads(line[len("ATTACK ") :]) for line in lines if line.startswith("ATTACK ")]


def stopped(attempt: dict) -> bool:
    """Did the attempt fail with an operating-system error? Listing /proc "works" in a PID
    namespace of its own, but shows no process of the grader: only the box's init."""
    if attempt["target"] == "/proc":
        pids = attempt["detail"].split()
        return len(pids) <= 3 and all(int(pid) < 10 for pid in pids)
    return attempt["outcome"] == "error" and bool(OS_ERROR.search(attempt["detail"]))


def _outputs(course: Path, student: str) -> str:
    graded = LESSON.in_course(course).autograded(student)
    return "".join(
        json.dumps(output)
        for cell in nbformat.read(graded, 4).cells
        for output in cell.get("outputs", [])
    )


def test_the_scan_knows_no_construct_of_these_attacks(hostile):
    ref = integrity.Reference.from_course(hostile.course, LESSON.assignment, LESSON.name)
    for kind in OS_KINDS:
        nb = badsubmissions.kind(kind).build(hostile.materials).notebook
        assert integrity.screen(nb, ref) == [], kind
        found = {f.kind for f in hostile.report.row(kind).findings}
        assert found == {"sandbox-refused"}, f"{kind}: {found}"


@pytest.mark.parametrize("kind", OS_KINDS)
def test_every_attempt_fails_with_an_os_error_and_the_bait_is_untouched(hostile, kind):
    require_bubblewrap()
    tried = attacks(hostile.course, kind)
    assert tried, f"{kind} printed no ATTACK line: it did not run as designed"
    for attempt in tried:
        assert stopped(attempt), f"{kind} got through: {attempt}"
    targets, bait = hostile.materials.targets, hostile.bait
    assert Path(targets.victim).read_text() == VICTIM_TEXT
    assert not Path(targets.new_file).exists()
    assert bait.connections == [], "a kernel connected to the server on 127.0.0.1"
    assert bait.secret not in _outputs(hostile.course, kind), "the grader's secret leaked"
    assert hostile.report.row(kind).sandbox.startswith("bubblewrap")


# In each layer's course one student hands in every OS kind's attempts in one notebook (one
# kernel instead of one per kind: a kernel's start is most of such a notebook's cost); the hostile
# class above grades each kind on its own.
TOGETHER = "os-kinds"


@pytest.fixture(scope="module")
def layers(hostile, tmp_path_factory) -> dict[str, dict[str, list[dict]]]:
    """{layer: {kind: its attempts}}: the OS kinds graded in bubblewrap without the audit hook,
    and in the Python-only sandbox, each layer in a course of its own."""
    require_bubblewrap()
    out = {}
    for layer, flags in LAYERS.items():
        course = grading.make_course(tmp_path_factory.mktemp("layer"), [LESSON])
        targets = hostile.bait.targets(course, other=TOGETHER)
        stuff = badsubmissions.materials(course, LESSON, targets=targets)
        submission = badsubmissions.together(stuff, OS_KINDS)
        badsubmissions.write(
            LESSON.in_course(course).submitted(TOGETHER).parent, LESSON, submission
        )
        report = classgrade.grade_class(course, LESSON, extra=EXTRA + flags, progress=False)
        assert report.problems == [], report.problems
        tried = attacks(course, TOGETHER)
        out[layer] = {kind: [a for a in tried if a["attack"] == kind] for kind in OS_KINDS}
        out[layer]["bait"] = [
            {"victim changed": Path(targets.victim).read_text() != VICTIM_TEXT},
            {"new file": Path(targets.new_file).exists()},
        ]
    _print_table(out)
    return out


def _print_table(out: dict) -> None:
    print("\nattempt (kind, method, target) | " + " | ".join(LAYERS))
    for kind in OS_KINDS:
        for i, attempt in enumerate(out[next(iter(LAYERS))][kind]):
            cells = []
            for layer in LAYERS:
                other = out[layer][kind][i] if i < len(out[layer][kind]) else {}
                cells.append("stopped" if other and stopped(other) else "GOT THROUGH")
            what = f"{kind}, {attempt['method']}, {attempt['target'][-40:]}"
            print(f"{what} | " + " | ".join(cells))


def test_the_os_boundary_alone_stops_every_attempt(layers):
    for kind in OS_KINDS:
        tried = layers["OS boundary alone"][kind]
        assert tried and all(stopped(a) for a in tried), f"{kind}: {tried}"
    assert layers["OS boundary alone"]["bait"] == [{"victim changed": False}, {"new file": False}]


def test_what_the_python_only_sandbox_stops_and_what_it_does_not(layers):
    """The table of docs/grading-defences.md says this: the audit hook refuses what it sees at the
    Python level (file reads and writes in the course and the grader's home, other processes'
    environment, connections, processes) and nothing done natively (a memory map made by torch);
    it lets a kernel list every process of the machine."""
    python = layers["Python-only sandbox"]
    for kind in OS_KINDS:
        for attempt in python[kind]:
            native = attempt["method"] == "native"
            listing = attempt["target"] == "/proc"
            assert stopped(attempt) != (native or listing), f"{kind}: {attempt}"
    assert python["bait"] == [{"victim changed": True}, {"new file": True}]
