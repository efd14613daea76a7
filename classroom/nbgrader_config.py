"""nbgrader on the hub: the course's id, its exchange and the size of a submission.

Every server the hub starts (students', instructors', formgrader's) has this folder on its
JUPYTER_CONFIG_PATH; the course folder's own nbgrader_config.py (the repository's) still decides
how the course is graded. Values come from course.toml (or $CLASSROOM_COURSE).
"""

import getpass

from coursekit.classroom import settings

c = get_config()  # noqa: F821 -- provided by traitlets when nbgrader loads this file

room = settings.load()
c.CourseDirectory.course_id = room.course_id
c.Exchange.root = str(room.exchange)
# A submission (or a file in it) above the limit is refused with "Directory size is too big".
c.CourseDirectory.max_file_size = room.max_file_size_kb
c.CourseDirectory.max_dir_size = room.max_dir_size_kb
if getpass.getuser() == room.grader:  # formgrader, and make autograde in the grader's terminal
    c.CourseDirectory.root = str(room.folder)
