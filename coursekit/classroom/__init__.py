"""Running the course for a class on one server: JupyterHub, nbgrader's exchange and formgrader.

    classroom/course.toml, classroom/roster.csv   the class (read by settings.py; plain data that
                                                  any other deployment can read too)
    settings.py      course.toml + roster -> a Classroom, with clear errors for bad input
    accounts.py      system accounts from the roster (private homes, own passwords)
    coursefolder.py  the grader's course folder (a copy of this repository) and the exchange
    hubconfig.py     what classroom/jupyterhub_config.py sets: roles, the formgrader service, ports
    reach.py         can every account reach what its server runs? (checked before setup)
    hubprocess.py    start, wait for and stop a hub (make hub, the tests)
    leftovers.py     what a hub stopped without its clean-up left running, stopped at the next start
    __main__.py      python -m coursekit.classroom up | setup | remove

A layer above course/ and grading/: it may import them, and nothing but tests and commands
imports it. Class grading stays what it is (make autograde in the grader's course folder).
"""
