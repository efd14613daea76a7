"""The class-grading report: a per-student table, grades.csv and review.md (reports/<lesson>/),
and after a deadline what the class got wrong (coursekit.grading.failures: failures.md, .png) and
how alike its answers are (coursekit.grading.similarity: similarity.html, .csv)."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from coursekit.course.lessons import Lesson
from coursekit.grading import failures
from coursekit.grading import similarity as likeness
from coursekit.grading.points import write_points
from coursekit.grading.results import NotebookResult

REPORTS = "reports"
STATUSES = ("graded", "held", "invalid", "failed")


def notes(result: NotebookResult, width: int = 70) -> str:
    """The kinds of what was found, in a line (notes are left out of a held row: the reasons
    for the hold are what matters)."""
    kinds = [f.kind for f in result.findings if f.severity != "note" or result.status != "held"]
    if result.seconds_late > 0:
        kinds.insert(0, f"late {late_by(result.seconds_late)} (-{result.late_penalty:g})")
    text = ", ".join(dict.fromkeys(kinds))
    return text if len(text) <= width else text[: width - 3] + "..."


def late_by(seconds: float) -> str:
    """How late, in the unit a person reads: 40 min, 5.5 h, 3.2 d."""
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 86400 else f"{seconds / 86400:.1f} d"


@dataclass
class ClassReport:
    lesson: Lesson
    rows: list[NotebookResult]
    graded: int = 0  # notebooks executed by this run
    seconds: float = 0.0
    workers: int = 1
    problems: list[str] = field(default_factory=list)
    where: str = ""  # the Dask cluster that graded the run (coursekit.grading.cluster)
    reruns: list[str] = field(default_factory=list)  # batches Dask gave to another worker
    failures: list[failures.CellFailures] = field(default_factory=list)  # per test cell
    similarity: likeness.SimilarityReport | None = None

    @property
    def per_minute(self) -> float:
        return 60.0 * self.graded / self.seconds if self.seconds else 0.0

    def row(self, student: str) -> NotebookResult:
        return next(r for r in self.rows if r.student == student)

    def table(self) -> str:
        width = max([len(r.student) for r in self.rows] + [7])
        rule = "-" * (width + 40)
        lines = [f"{'student':<{width}}  {'score':>7}  {'tests':>7}  {'status':<8} notes", rule]
        for r in self.rows:
            lines.append(
                f"{r.student:<{width}}  {r.score:>7g}  {r.auto:>7g}  {r.status:<8} {notes(r)}"
            )
        counts = {s: sum(r.status == s for r in self.rows) for s in STATUSES}
        maximum = max((r.max_score for r in self.rows), default=0)
        lines += [
            rule,
            f"{len(self.rows)} submissions of {self.lesson.assignment} (max {maximum:g} points): "
            + ", ".join(f"{n} {s}" for s, n in counts.items() if n),
        ]
        if self.graded:
            lines.append(
                f"graded {self.graded} notebooks in {self.seconds:.0f} s on {self.workers} "
                f"worker(s): {self.per_minute:.1f} notebooks per minute"
            )
        if self.where:
            lines.append(f"on {self.where}")
        lines += [f"rerun: {rerun}" for rerun in self.reruns]
        lines += [f"PROBLEM: {problem}" for problem in self.problems]
        return "\n".join(lines + self.sandboxes())

    def after_deadline(self, pairs: int = 5) -> list[str]:
        """What the class got wrong, and the most similar pairs of answers, for the terminal."""
        lines = failures.summary(self.failures)
        if self.similarity is not None:
            lines.append(self.similarity.summary())
            lines += [
                f"  {p.score:.0%}  {p.first} and {p.second}"
                for p in self.similarity.flagged[:pairs]
            ]
        folder = f"{REPORTS}/{self.lesson.assignment}"
        lines.append(f"see {folder}/failures.md, failures.png and similarity.html")
        return lines

    def sandboxes(self) -> list[str]:
        """Which sandbox graded how many of the notebooks (every run says it)."""
        counts: dict[str, int] = {}
        for r in self.rows:
            if r.sandbox:
                counts[r.sandbox] = counts.get(r.sandbox, 0) + 1
        return [f"graded in {what}: {n} notebook(s)" for what, n in counts.items()]


def _write_csv(path: Path, report: ClassReport) -> None:
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(
            ["student", "status", "score", "autograder_score", "max_score", "failed_tests", "notes"]
            + ["sandbox", "submitted", "hours_late", "late_penalty"]
        )
        for r in report.rows:
            failed = " ".join(c.grade_id for c in r.cells if not c.passed)
            found = "; ".join(str(f) for f in r.findings)
            when = r.submitted.isoformat(sep=" ") + " UTC" if r.submitted else ""
            late = [when, round(r.seconds_late / 3600, 2), r.late_penalty]
            out.writerow(
                [r.student, r.status, r.score, r.auto, r.max_score, failed, found, r.sandbox, *late]
            )


def _review(report: ClassReport) -> list[str]:
    lines = [f"# {report.lesson.assignment}: submissions to review", ""]
    todo = [r for r in report.rows if r.status != "graded"]
    if not todo:
        lines.append("Nothing to review: every submission was graded as handed in.")
    for r in todo:
        lines += [
            f"## {r.student}: {r.status}",
            "",
            f"score {r.score:g} / {r.max_score:g}; the tests gave {r.auto:g}",
            "",
        ]
        lines += [
            f"- **{f.severity}** `{f.kind}`: {f.message}" + (f" -- `{f.where}`" if f.where else "")
            for f in r.findings
        ]
        if r.status == "held":
            lines += [
                "",
                "After reviewing, release the points with "
                f"`make accept LESSON={report.lesson.assignment} STUDENT={r.student}`.",
            ]
        lines.append("")
    lines += [f"Rerun by Dask (counted once): {rerun}" for rerun in report.reruns]
    return lines + [f"**PROBLEM**: {problem}" for problem in report.problems]


def write_tables(course: Path, report: ClassReport) -> Path:
    """grades.csv, review.md and the points per test cell (coursekit.grading.points) in
    reports/<lesson>/ of ``course`` (also after ``make accept`` or a regrade, which change a
    student's status or points but grade nothing); returns that folder."""
    folder = Path(course) / REPORTS / report.lesson.assignment
    folder.mkdir(parents=True, exist_ok=True)
    _write_csv(folder / "grades.csv", report)
    (folder / "review.md").write_text("\n".join(_review(report)) + "\n")
    write_points(folder, report.rows)
    return folder


def write_reports(course: Path, report: ClassReport) -> Path:
    """grades.csv and review.md, what the class got wrong and how alike its answers are, in
    reports/<lesson>/ of ``course``; returns that folder."""
    folder = write_tables(course, report)
    failures.write_reports(folder, report.failures, report.lesson.assignment)
    if report.similarity is not None:
        title = f"{report.lesson.assignment}: the most similar answers"
        likeness.write_reports(folder, report.similarity, title)
    return folder
