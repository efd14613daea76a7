"""Tooling around the course: derive every edition of a lesson from its one source.

    solutions/<lesson>/<name>.md  (jupytext MyST, solved, with nbgrader metadata and hidden tests)
      -> solutions/<lesson>/<name>.ipynb   sources.py   what nbgrader reads (git-ignored)
      -> notebooks/<lesson>/<name>.ipynb   release.py   student edition (committed, drift-tested)
      -> book/lessons/<name>.ipynb         book.py      the book's page (git-ignored)
      -> work/<lesson>/<name>.ipynb        workspace.py the learner's own copy (never overwritten)

grading.py runs nbgrader on a temporary course (self-check and the chain tests);
selfcheck.py prints a learner's scores.
"""
