"""Tooling around the course, one subpackage per concern: course/ (the course as files), grading/,
publishing/, learner/, classroom/, democlass/ and bench/, each described in its own __init__.py.
Which may import which is drawn once, in the layer drawing checked by
autograde_tests/test_layers.py (the contributors' guide shows it); that test also keeps the tooling
from importing the tests.

One source, every edition (the file that makes each one on the right):

    solutions/<lesson>/<name>.md      jupytext MyST: solved, nbgrader metadata, hidden tests
      -> solutions/<lesson>/<name>.ipynb   what nbgrader reads, git-ignored   course/sources.py
      -> notebooks/<lesson>/<name>.ipynb   student edition, committed         publishing/release.py
      -> book/lessons/<name>.ipynb         the book's page, git-ignored       publishing/book.py
      -> work/<lesson>/<name>.ipynb        the learner's own copy             learner/workspace.py
"""
