"""nbgrader configuration of the course; stock nbgrader commands work from the repo root.

    nbgrader generate_assignment lesson01      # solutions/lesson01 -> notebooks/lesson01
    nbgrader autograde lesson01                # submitted/<student>/lesson01 -> autograded/
    nbgrader generate_feedback lesson01        # -> feedback/<student>/lesson01
    nbgrader export                            # grades.csv

For a whole class, `make autograde LESSON=lesson01` (python -m coursekit.grading.classgrade) runs
the same pipeline on both cores, screens unreadable submissions first and writes a report.

Grading fails closed: run from a Python where the course's defences (coursekit) cannot load,
autograde and generate_feedback refuse and say why (refuse_to_grade below), unless
COURSE_GRADE_WITHOUT_SANDBOX=1 accepts stock nbgrader for trusted notebooks.
"""

import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821 -- provided by traitlets when nbgrader loads this file

# The one setting that lets autograde and generate_feedback run when the course's defences cannot
# load: stock nbgrader then runs submitted code with the grader's rights, and feedback shows the
# hidden tests. Its name says so on purpose.
GRADE_WITHOUT_SANDBOX = "COURSE_GRADE_WITHOUT_SANDBOX"

c.CourseDirectory.course_id = "attention-course"
# The solved lessons are nbgrader's "source"; the student edition is its "release".
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
# The .md is the lesson's source text, not a file for students; the notebook derived from it is.
c.CourseDirectory.ignore = [
    ".ipynb_checkpoints",
    "*.pyc",
    "__pycache__",
    "feedback",
    "*.md",
    "mistakes.yml",
    "alternatives.yml",
    "mutants.yml",
    "experiments.yml",
]

# A cell may run this long before it is interrupted and the rest of the notebook is graded.
c.ExecutePreprocessor.timeout = 60
c.Execute.timeout = 60


def warn_once(text: str) -> None:
    """``text`` on stderr once in this process: nbgrader loads this file up to five times a
    command. (The mark is this process's id, so a command it starts warns for itself.)"""
    if os.environ.get("COURSE_CONFIG_WARNED") != str(os.getpid()):
        os.environ["COURSE_CONFIG_WARNED"] = str(os.getpid())
        print(f"WARNING: {text}", file=sys.stderr)


def refuse_to_grade(config, reason: str) -> None:
    """Make autograde and generate_feedback stop, before they start a kernel or write a file, with
    a message that says what is missing, how to fix it and which setting overrides it.

    The course's defences are gone here, so this cannot live in coursekit (and a temporary course
    holds this file without the repository around it). It fills the two converters' exporter slot
    with an exporter that refuses as nbgrader creates it: after finding the submissions, before
    anything is executed or written; from the formgrader too, whose API shows the message as the
    command's log. The commands that run no submitted code (generate_assignment, db, export,
    list, release, collect) go on: they move files and read or write the gradebook, and stopping
    them would keep instructors from their grades without protecting anyone. (validate runs a
    notebook as the person who runs it, never in the sandbox, with or without coursekit.)
    """
    from nbconvert.exporters import Exporter
    from nbgrader.converters.base import NbGraderException

    risk = {
        "Autograde": ("autograde", "run the submitted notebooks with your rights and no limits"),
        "GenerateFeedback": ("generate_feedback", "show the hidden tests in the feedback"),
    }
    course = Path(__file__).resolve().parent
    install = course if (course / "pyproject.toml").exists() else "<the course's repository>"

    class RefuseWithoutDefences(Exporter):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            command, what = risk.get(type(self.parent).__name__, ("grading", "grade unprotected"))
            message = (
                f"nbgrader {command} refused: {reason}\n"
                f"  Without them, {command} would {what}.\n"
                "  Fix: run nbgrader with the course's Python (`make autograde LESSON=...`, "
                "`make feedback LESSON=...`, or .venv/bin/nbgrader after `make`), or install the "
                f"course into this Python: {sys.executable} -m pip install -e {install}\n"
                f"  Override (trusted notebooks only): {GRADE_WITHOUT_SANDBOX}=1 grades with "
                "stock nbgrader, without screening, sandbox, guard or holds, and its feedback "
                "shows the hidden tests."
            )
            self.log.error(message)
            raise NbGraderException(message)

    config.Autograde.exporter_class = RefuseWithoutDefences
    config.GenerateFeedback.exporter_class = RefuseWithoutDefences


try:  # the defences themselves, not only the package's name: a broken import fails here
    from coursekit.course.sources import sync_sources
    from coursekit.grading import autograder, deadlines, feedback  # noqa: F401
except Exception as error:  # noqa: BLE001 -- an error here must not make nbgrader drop this file
    # (traitlets ignores a config file that raises, and nbgrader would grade as stock nbgrader)
    reason = (
        f"the course's grading defences (coursekit: screening, sandbox kernel, guard, holds, "
        f"feedback without hidden tests) cannot be loaded in {sys.executable}: "
        f"{type(error).__name__}: {error}"
    )
    if os.environ.get(GRADE_WITHOUT_SANDBOX) == "1":
        warn_once(
            f"{reason}. {GRADE_WITHOUT_SANDBOX}=1: grading with stock nbgrader, no screening, "
            "no sandbox, no guard, no holds; feedback shows the hidden tests."
        )
    else:
        warn_once(
            f"{reason}. autograde and generate_feedback refuse until it loads, and the lesson "
            "notebooks are not regenerated from their sources; other commands go on."
        )
        refuse_to_grade(c, reason)
else:
    # Lesson sources are MyST markdown (solutions/<lesson>/<name>.md); nbgrader reads .ipynb.
    # Derive the notebooks now, so a fresh clone works with stock nbgrader and no make step first.
    try:
        sync_sources(Path(__file__).resolve().parent)
    except Exception as error:  # noqa: BLE001 -- keep the defences below; say what went wrong
        warn_once(
            "the lesson notebooks were not regenerated from their sources: "
            f"{type(error).__name__}: {error}"
        )

    # Feedback shows no hidden tests: neither their code nor tracebacks that quote it; their
    # results only after the due date (course.toml), as the policy in feedback.py says.
    c.GenerateFeedback.preprocessors = [
        "coursekit.grading.feedback.ReleaseByPolicy",
        "coursekit.grading.feedback.HideHiddenTests",
        "nbgrader.preprocessors.GetGrades",
        "coursekit.grading.feedback.WithholdScores",
        "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    ]

    # Grading untrusted notebooks (coursekit/grading/: autograder.py, sandbox.py, guard.py,
    # integrity.py): screen and repair each submission first; run it in a sandbox kernel (memory
    # limit, no access to the course's files, no processes) with a guard that undoes tampering with
    # what the tests rely on; survive kernels that die or hang; hold the points of suspicious
    # submissions.
    c.Autograde.sanitize_preprocessors = [
        "coursekit.grading.autograder.ScreenSubmission",
        "nbgrader.preprocessors.ClearOutput",
        "nbgrader.preprocessors.DeduplicateIds",
        "nbgrader.preprocessors.OverwriteKernelspec",
        "nbgrader.preprocessors.OverwriteCells",
        "nbgrader.preprocessors.CheckCellMetadata",
    ]
    c.Autograde.autograde_preprocessors = [
        "coursekit.grading.autograder.GuardedExecute",
        "nbgrader.preprocessors.IgnorePattern",
        "nbconvert.preprocessors.ClearMetadataPreprocessor",
        "nbgrader.preprocessors.LimitOutput",
        "nbgrader.preprocessors.SaveAutoGrades",
        "coursekit.grading.deadlines.ApplyDeadlines",
        "nbgrader.preprocessors.AssignLatePenalties",
        "nbgrader.preprocessors.CheckCellMetadata",
        "coursekit.grading.autograder.HoldForReview",
    ]
    # Late work: classroom/course.toml's due dates, extensions and late policy, written into the
    # gradebook and applied by nbgrader's own AssignLatePenalties (coursekit/grading/deadlines.py).
    c.AssignLatePenalties.plugin_class = "coursekit.grading.deadlines.CoursePenalty"
    c.SandboxKernelManager.memory_limit_mb = 4096  # RLIMIT_DATA of a grading kernel
    c.SandboxKernelManager.cpu_limit_s = 900
    # Figures are made but not drawn while grading (matplotlib's Agg backend): no test reads a
    # picture, and drawing was a fifth of executing the lessons. True puts the learners' figures
    # into the graded notebooks and their feedback, at that cost.
    c.SandboxKernelManager.draw_figures = False
    # Every grading kernel behind an operating-system boundary (coursekit/grading/bwrap.py: no
    # network, own PID namespace and uid, only the environment and its own folder). Where
    # bubblewrap cannot run, grading refuses to start; "python-only" (or the command-line flag
    # --SandboxKernelManager.sandbox=python-only) accepts the weaker in-process sandbox instead.
    c.SandboxKernelManager.sandbox = "bubblewrap"
