"""Production grading of untrusted notebooks with nbgrader.

integrity.py    screening: the right notebook, intact, and no code that tampers with grading
sandbox.py      the kernel that runs submissions (limits, audit hook); guard.py inside it
autograder.py   nbgrader preprocessors: screen and repair, guarded execution, holds for review
feedback.py     feedback that never shows hidden tests
tempcourse.py   a temporary copy of the course to grade a few notebooks in (make check, tests)
classgrade.py   a whole class on every core, with a report (make autograde)
"""
