"""Tooling around the course, one subpackage per concern. Layers, lowest first; a module imports
only from its own layer or lower ones, and never from the tests (autograde_tests/test_layers.py):

    course/       the course as files: lessons and their paths, MyST source -> .ipynb, nbgrader's
                  cell metadata and command line, the planted mistakes (data in solutions/)
    grading/      production grading: screening (integrity), the sandbox kernel and its guard,
                  nbgrader preprocessors (autograder), feedback, class grading with its report
                  (its batches on a Dask cluster: cluster, batch)
    publishing/   the student edition (release) and the Jupyter Book (book)
    learner/      a learner's own copies (workspace) and self-check (make check)
    classroom/    a class on one server (make hub): accounts from the roster, the grader's
                  course folder, nbgrader's exchange, JupyterHub's configuration
    democlass/    a synthetic class of solved, blank, mistaken and hostile submissions
                  (make grade-class)
    bench/        make bench and make bench-book
    classroom/    a class on one server (make hub): accounts from classroom/roster.csv, the grader's
                  course folder, nbgrader's exchange, JupyterHub with formgrader as a service;
                  imports course/ and grading/, and only commands and tests import it

One source, every edition (the file that makes each one on the right):

    solutions/<lesson>/<name>.md      jupytext MyST: solved, nbgrader metadata, hidden tests
      -> solutions/<lesson>/<name>.ipynb   what nbgrader reads, git-ignored   course/sources.py
      -> notebooks/<lesson>/<name>.ipynb   student edition, committed         publishing/release.py
      -> book/lessons/<name>.ipynb         the book's page, git-ignored       publishing/book.py
      -> work/<lesson>/<name>.ipynb        the learner's own copy             learner/workspace.py
"""
