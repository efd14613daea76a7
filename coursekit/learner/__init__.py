"""A learner on their own machine: their copies of the lessons (workspace.py, make lab) and
grading them exactly as an instructor would (selfcheck.py, make check)."""
