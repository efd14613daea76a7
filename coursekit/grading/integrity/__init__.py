"""Screen a submission before it is graded: is it the right notebook, intact, and free of code
that tampers with grading?

Three layers, each giving :class:`Finding` s with a severity:

* ``invalid`` -- nothing can be graded (no notebook, an empty or malformed file, a renamed
  notebook, another assignment's notebook, a symbolic link): the submission scores 0 and the
  finding says what to do;
* ``review`` -- the notebook is graded, but the code does something no solution needs and that
  could tamper with grading (monkeypatching numpy/torch/builtins/the course's check helpers,
  exiting the kernel, reading or writing files, frame introspection, dynamic code, IPython
  hooks, printing fake test results, using the reference library's answer): its points are
  held (0 in the gradebook, flagged) until an instructor accepts it;
* ``note`` -- something the grader repaired or that explains a score (a deleted or edited test
  cell put back, changed cell metadata restored, a cell that timed out): points as earned.

:func:`read_submission` checks the folder and the file, :func:`screen` the notebook against the
lesson (:class:`Reference`). The code scan compares with the released notebook, so that the
lesson's own code (its imports, plots, prints) is never a finding.
"""

from __future__ import annotations

from coursekit.grading.integrity.findings import META, SEVERITIES, Finding, worst
from coursekit.grading.integrity.reference import RefCell, Reference, which_lesson
from coursekit.grading.integrity.scan import scan_code, screen
from coursekit.grading.integrity.submission import read_submission, repair, structure

__all__ = [
    "META",
    "SEVERITIES",
    "Finding",
    "RefCell",
    "Reference",
    "read_submission",
    "repair",
    "scan_code",
    "screen",
    "structure",
    "which_lesson",
    "worst",
]
