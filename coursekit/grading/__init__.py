"""Production grading of untrusted notebooks with nbgrader.

integrity/      screening: the right notebook, intact, and no code that tampers with grading
                (findings, the lesson as reference, the submitted file, the code scan and its rules)
sandbox.py      the kernel that runs submissions (limits, audit hook); guard.py inside it
autograder.py   nbgrader preprocessors: screen and repair, guarded execution, holds for review
holds.py        held for review, released, accepted: the one definition
feedback.py     feedback that never shows hidden tests
tempcourse.py   a temporary copy of the course to grade a few notebooks in (make check, tests)
results.py      what grading gave each student: the one reader of graded results
classgrade.py   a whole class on every core (make autograde), over gradebook.py (copies,
                merges, atomic changes), ledger.py (what is graded, digests) and report.py
"""
