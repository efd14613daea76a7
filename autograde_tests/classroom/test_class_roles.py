"""Who reaches what on the class's hub, over plain HTTP: PAM checks each account's own
password; instructors reach formgrader (the grader account's service), students get 403 there
and have no formgrader of their own."""

from __future__ import annotations

import pytest

from .hubclient import logged_in as _logged_in

pytestmark = [pytest.mark.hub, pytest.mark.accounts]


def test_only_instructors_reach_formgrader(test_class, hub):
    student, instructor = test_class.name("b"), test_class.name("i")
    formgrader = f"{hub.url}services/{test_class.room.course_id}/formgrader/manage_assignments"

    _, status = _logged_in(hub.url, student, "not the password")
    assert status == 403
    _, status = _logged_in(hub.url, test_class.room.grader, "anything")
    assert status == 403  # the grader account is nobody's login

    session, status = _logged_in(hub.url, student, test_class.passwords[student])
    assert status == 302
    answer = session.get(formgrader, timeout=60)
    assert answer.status_code == 403, answer.url
    hub.start_server(student)
    hub.wait_ready(student)
    assert session.get(f"{hub.url}user/{student}/formgrader", timeout=60).status_code == 404

    session, _ = _logged_in(hub.url, instructor, test_class.passwords[instructor])
    answer = session.get(formgrader, timeout=120)
    assert answer.status_code == 200 and "Manage Assignments" in answer.text
