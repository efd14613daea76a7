"""JupyterHub for the class in course.toml and roster.csv (beside this file).

    make hub                      # = python -m coursekit.classroom up (as root)

Everything it sets, and why, is in coursekit/classroom/hubconfig.py; CLASSROOM_COURSE names
another course.toml, HUB_IP and HUB_PORT change the address.
"""

from coursekit.classroom import hubconfig, settings

c = get_config()  # noqa: F821 -- provided by traitlets when JupyterHub loads this file

hubconfig.configure(c, settings.load())
