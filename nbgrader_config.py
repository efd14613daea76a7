"""nbgrader configuration of the course; stock nbgrader commands work from the repo root.

    nbgrader generate_assignment lesson01      # solutions/lesson01 -> notebooks/lesson01
    nbgrader autograde lesson01                # submitted/<student>/lesson01 -> autograded/
    nbgrader generate_feedback lesson01        # -> feedback/<student>/lesson01
    nbgrader export                            # grades.csv

For a whole class, `make autograde LESSON=lesson01` (python -m coursekit.grading.classgrade) runs
the same pipeline on both cores, screens unreadable submissions first and writes a report.
"""

from pathlib import Path

c = get_config()  # noqa: F821 -- provided by traitlets when nbgrader loads this file

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
]

# A cell may run this long before it is interrupted and the rest of the notebook is graded.
c.ExecutePreprocessor.timeout = 60
c.Execute.timeout = 60

# Feedback shows no hidden tests: neither their code nor tracebacks that quote it.
c.GenerateFeedback.preprocessors = [
    "coursekit.grading.feedback.HideHiddenTests",
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# Lesson sources are MyST markdown (solutions/<lesson>/<name>.md); nbgrader reads .ipynb. Derive
# the notebooks now, so a fresh clone works with stock nbgrader and no make step first.
try:
    from coursekit.course.sources import sync_sources
except ImportError:  # nbgrader run outside the course's environment: use the notebooks as they are
    pass
else:
    sync_sources(Path(__file__).resolve().parent)

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
        "nbgrader.preprocessors.AssignLatePenalties",
        "nbgrader.preprocessors.CheckCellMetadata",
        "coursekit.grading.autograder.HoldForReview",
    ]
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
