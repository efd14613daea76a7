"""nbgrader preprocessors that make ``nbgrader autograde`` safe for a real class.

nbgrader_config.py puts them into nbgrader's own pipeline, so the stock commands get them too:

* :class:`ScreenSubmission` (first in the sanitizing pass): screens the submitted notebook
  (coursekit.grading.integrity) and repairs its graded cells, so that nothing a student does to
  cell metadata can stop the run for everybody (stock nbgrader aborts the whole class on one cell
  with a changed ``schema_version``) and a deleted test cell is put back and graded.
* :class:`GuardedExecute` (replaces nbgrader's Execute): runs the notebook in the sandbox kernel
  (coursekit.grading.sandbox); after every cell it has the guard (coursekit.grading.guard) put
  back anything the tests rely on that the cell changed -- a test cell after which something had
  to be put back earns nothing. When a cell kills the kernel (``os._exit``, ``exit()``, a
  crash), ignores the timeout's interrupt, or breaks the guard, the kernel is replaced and the
  notebook is run again without that cell, so the rest is graded; stock nbgrader drops the whole
  submission. Test cells run without IPython's input history (``store_history=False``), and the
  guard puts the output history back after each: their code -- the hidden tests -- is never in
  ``In``, ``_ih``, ``_i<N>`` or the history manager, nor their results in ``Out``, for the
  learner's code to read (a function a test calls, or a later cell).
  Cells the lesson marks as skipped when grading (coursekit.course.skipped: demonstrations
  that no grade depends on) are not run: which they are is read from the course's source
  notebook by grade_id, and only a cell whose source is the course's own (OverwriteCells put it
  back) is skipped, so a submission that tags or renames its cells gains nothing.
* :class:`HoldForReview` (after SaveAutoGrades): records what was found in the autograded
  notebook's metadata (``coursekit.findings``) and, when something needs review, holds the
  submission's points in the gradebook: every grade gets manual score 0 and "needs manual
  grading", and the notebook is flagged. ``make accept LESSON=... STUDENT=...`` releases it.
"""

from __future__ import annotations

import ast
import contextlib
import json
from pathlib import Path

from nbclient.client import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Integer

from coursekit.course import skipped
from coursekit.course.cells import grade_id, is_graded, is_test
from coursekit.grading import integrity
from coursekit.grading.holds import hold, is_accepted, release
from coursekit.grading.integrity import META, Finding
from coursekit.grading.sandbox import SandboxKernelManager


def _reference(config, resources) -> integrity.Reference | None:
    info = resources.get("nbgrader", {})
    coursedir = CourseDirectory(config=config)
    root = Path(coursedir.root)
    try:
        return integrity.Reference.from_course(
            root,
            info["assignment"],
            info["notebook"],
            coursedir.source_directory,
            coursedir.release_directory,
        )
    except (KeyError, OSError):
        return None


class ScreenSubmission(NbGraderPreprocessor):
    """Screen and repair the submitted notebook before nbgrader sanitizes it."""

    def preprocess(self, nb, resources):
        ref = _reference(self.config, resources)
        if ref is None:
            self.log.warning(
                "coursekit: no source notebook to screen %s against", resources.get("nbgrader")
            )
            return nb, resources
        findings = integrity.screen(nb, ref)
        if not any(f.severity == "invalid" for f in findings):
            nb = integrity.repair(nb, ref)
        for finding in findings:
            self.log.warning("coursekit: %s", finding)
        nb.metadata[META] = {"findings": [f.to_dict() for f in findings]}
        return nb, resources


def _error(ename: str, evalue: str) -> NotebookNode:
    return NotebookNode(
        output_type="error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"]
    )


def _not_run_note() -> NotebookNode:
    return NotebookNode(output_type="stream", name="stdout", text=skipped.NOTE)


class _CellRejected(Exception):
    def __init__(self, index: int, reason: str):
        super().__init__(reason)
        self.index, self.reason = index, reason


_REASONS = {
    "died": (
        "KernelDied",
        "the kernel died while this cell ran (os._exit, exit(), a crash or the memory "
        "limit); the notebook was run again without this cell",
    ),
    "timeout": (
        "CellTimeoutError",
        "this cell ran past the {timeout} s limit and the kernel did not respond to "
        "the interrupt; the kernel was restarted and the notebook run again without "
        "this cell",
    ),
    "guard": (
        "IntegrityError",
        "after this cell the autograder could no longer check that the tests run "
        "unmodified; the notebook was run again without this cell",
    ),
}


class GuardedExecute(Execute):
    """nbgrader's Execute with the sandbox kernel, the guard, and recovery from dead kernels."""

    max_kernel_restarts = Integer(
        3, help="kernels replaced per notebook before the rest is given up"
    ).tag(config=True)
    startup_timeout = Integer(
        300, help="seconds a new sandboxed kernel may take to answer (nbclient's default is 60)"
    ).tag(config=True)
    setup_timeout = Integer(
        600,
        help="seconds a new kernel may take to import what the lesson's set-up imports and start "
        "the guard, before any submitted code runs (the cell timeout bounds the submission's "
        "cells; on a busy grader importing torch and triton alone can take longer than a cell may)",
    ).tag(config=True)

    def __init__(self, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxKernelManager)
        super().__init__(**kwargs)

    def preprocess(self, nb, resources=None, km=None):
        NotebookClient.__init__(self, nb, km)
        self.shutdown_kernel = (
            "immediate"  # a graded kernel has nothing to save; a stuck one is killed
        )
        self._check_assign_resources(resources)
        ref = _reference(self.config, resources or {})
        self._trusted = ref.trusted if ref else {}
        self._skipped = ref.skipped if ref else {}
        for problem in ref.skip_refused if ref else []:
            self.log.warning("coursekit: every cell is run, none skipped: %s", problem)
        self._findings = [
            Finding.from_dict(f) for f in nb.metadata.get(META, {}).get("findings", [])
        ]
        rejected: dict[int, str] = {}
        self._sandbox = ""
        while True:
            try:
                self._run(rejected)
                break
            except _CellRejected as problem:
                ename, evalue = _REASONS[problem.reason]
                evalue = evalue.format(timeout=self.timeout)
                self.nb.cells[problem.index].outputs.append(_error(ename, evalue))
                rejected[problem.index] = problem.reason
                self._note(
                    "kernel-restarted" if problem.reason != "guard" else "guard-broken",
                    "review" if problem.reason == "guard" else "note",
                    evalue,
                    problem.index,
                )
                if len(rejected) > self.max_kernel_restarts:
                    self._give_up(problem.index)
                    break
        self.set_widgets_metadata()
        self.resources.setdefault(META, {})["findings"] = [
            f.to_dict() for f in dict.fromkeys(self._findings)
        ]
        self.resources[META]["sandbox"] = self._sandbox
        return self.nb, self.resources

    def on_cell_executed(self, **kwargs):
        super().on_cell_executed(**kwargs)
        payload = kwargs["execute_reply"].get("content", {}).get("payload", [])
        # exit()/quit() reply normally and end the kernel a moment later: blame the right cell
        self._asked_exit = any(
            p.get("source") == "ask_exit" and not p.get("keepkernel") for p in payload
        )

    def _label(self, index: int) -> str:
        return grade_id(self.nb.cells[index]) or f"cell {index + 1}"

    def _note(self, kind: str, severity: str, message: str, index: int) -> None:
        self._findings.append(Finding(kind, severity, message, self._label(index)))

    def _give_up(self, after: int) -> None:
        for cell in self.nb.cells[after + 1 :]:
            if cell.cell_type == "code" and cell.source.strip():
                cell.outputs = [
                    _error(
                        "NotRun",
                        f"not run: the kernel had to be replaced more than "
                        f"{self.max_kernel_restarts} times",
                    )
                ]

    @contextlib.contextmanager
    def _waiting(self, seconds: int):
        """nbclient waits this long for the replies asked for inside (not the cell timeout)."""
        cell_timeout, self.timeout = self.timeout, seconds
        try:
            yield
        finally:
            self.timeout = cell_timeout

    def _guard(self, expression: str) -> dict | None:
        """Evaluate a guard call in the kernel as a user expression (no input transformer
        applies); None when it failed or gave no answer in time."""
        msg_id = self.kc.execute(
            "", silent=True, store_history=False, user_expressions={"guard": expression}
        )
        reply = self.wait_for_reply(msg_id)
        try:
            result = reply["content"]["user_expressions"]["guard"]
            return json.loads(ast.literal_eval(result["data"]["text/plain"]))
        except (TypeError, KeyError, ValueError, SyntaxError):
            return None

    def _run(self, rejected: dict[int, str]) -> None:
        guard = "__import__('coursekit.grading.guard').grading.guard"
        with self.setup_kernel():
            # which sandbox graded the notebook: the report says it for every run
            self._sandbox = getattr(self.km, "sandbox_description", type(self.km).__name__)
            trusted = json.dumps(json.dumps(self._trusted))
            with self._waiting(self.setup_timeout):  # nothing submitted has run yet
                info = self.wait_for_reply(self.kc.kernel_info())
                ready = info and self._guard(
                    f"{guard}.trust(__import__('json').loads({trusted})) or '{{}}'"
                )
                first = self._guard(f"{guard}.check()") if ready is not None else None
            token = first.get("token") if first else None
            if token is None:
                raise RuntimeError(
                    "the grading sandbox did not start its guard (coursekit.grading.sandbox): "
                    "it failed, or gave no answer within GuardedExecute.setup_timeout "
                    f"({self.setup_timeout} s)"
                )
            self.nb.metadata["language_info"] = info["content"]["language_info"]
            for index, cell in enumerate(self.nb.cells):
                if cell.cell_type != "code" or index in rejected:
                    continue
                if self._skipped.get(grade_id(cell)) == cell.source:
                    cell.outputs = [_not_run_note()]  # the feedback says why it shows nothing
                    continue
                # A test cell is kept out of IPython's history (In, _ih, _i, _i<N>: its source,
                # hidden tests included; Out, _: what it gave, put back by the guard), so that
                # no code of the learner's, in this cell or a later one, can read it there.
                test = is_test(cell)
                try:
                    self._asked_exit = False
                    self.execute_cell(cell, index, store_history=not test)
                    if self._asked_exit:
                        raise DeadKernelError("the cell asked the kernel to exit")
                    report = self._guard(f"{guard}.check(test_cell={test})")
                except DeadKernelError:
                    raise _CellRejected(index, "died") from None
                except CellTimeoutError:
                    raise _CellRejected(index, "timeout") from None
                if report is None or report.get("token") != token:
                    raise _CellRejected(index, "guard")
                self._after_cell(index, cell, report)

    def _after_cell(self, index: int, cell, report: dict) -> None:
        graded = is_graded(cell)
        if report.get("tampered"):
            what = "; ".join(report["tampered"][:5])
            self._note(
                "tampering", "review", f"changed what the tests rely on (put back): {what}", index
            )
            if graded:
                cell.outputs.append(
                    _error(
                        "IntegrityError",
                        f"the tests' helpers were changed while this test "
                        f"ran ({what}); it earns no points",
                    )
                )
        for what in report.get("blocked", []):
            self._note("sandbox-refused", "review", f"the sandbox refused {what}", index)
        for output in cell.get("outputs", []):
            if output.get("output_type") != "error":
                continue
            if output.get("ename") == "MemoryError" or "can't allocate memory" in str(
                output.get("evalue", "")
            ):
                self._note("memory-limit", "note", "ran out of the kernel's memory limit", index)
            elif output.get("ename") == "CellTimeoutError" and "restarted" not in output.get(
                "evalue", ""
            ):
                self._note(
                    "timeout", "note", f"interrupted after the {self.timeout} s limit", index
                )
            elif output.get("ename") == "SystemExit":
                self._note("system-exit", "note", "raised SystemExit (sys.exit)", index)


class HoldForReview(NbGraderPreprocessor):
    """Record the findings in the autograded notebook and hold the points of a suspicious one."""

    def preprocess(self, nb, resources):
        findings = [Finding.from_dict(f) for f in resources.get(META, {}).get("findings", [])]
        info = resources["nbgrader"]
        coursedir = CourseDirectory(config=self.config)
        folder = coursedir.format_path(
            coursedir.submitted_directory, info["student"], info["assignment"]
        )
        path = Path(folder) / f"{info['notebook']}.ipynb"
        accepted = is_accepted(Path(coursedir.root), info["assignment"], info["student"], path)
        held = integrity.worst(findings) in ("invalid", "review") and not accepted
        sandbox = resources.get(META, {}).get("sandbox", "")
        nb.metadata[META] = {
            "findings": [f.to_dict() for f in findings],
            "accepted": accepted,
            "sandbox": sandbox,
        }
        with Gradebook(info["db_url"]) as gradebook:
            try:
                if held:
                    hold(gradebook, info["assignment"], info["notebook"], info["student"])
                    self.log.warning("coursekit: points of %s held for review", info["student"])
                elif release(gradebook, info["assignment"], info["notebook"], info["student"]):
                    self.log.warning(
                        "coursekit: the hold on %s was released (nothing to review now)",
                        info["student"],
                    )
            except MissingEntry:
                self.log.error("coursekit: no gradebook entry for %s", info)
        return nb, resources
