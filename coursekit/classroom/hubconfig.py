"""What classroom/jupyterhub_config.py sets: one JupyterHub for one class on one server.

* PAM: the hub checks the system accounts' own passwords (see accounts.py); only the roster may
  log in, and the grader account is not in it.
* Each student's and instructor's own server runs as their account (LocalProcessSpawner, the hub
  runs as root) with the learner's JupyterLab (classroom/learner/: no formgrader, no course list,
  no Create Assignment, no news) and the course's nbgrader settings (classroom/nbgrader_config.py).
* Formgrader is a hub-managed service running as the grader account in the course folder
  (nbgrader's "shared grader account"); only the instructors' group may reach it, everybody
  else gets 403 from the hub. It opens on formgrader's own page: JupyterHub >= 4.1 forbids
  embedding a server's pages in frames (Content-Security-Policy frame-ancestors 'none'), which
  blanks formgrader's JupyterLab panel; we keep that protection and use formgrader in its tab.
* Each server is ready only when it answers as itself: JupyterHub's own spawner takes any answer
  below 500 at the server's port, another student's server's 404 included (spawner.py).
* The hub's internal ports are chosen free once and kept in the state folder, so a restarted
  hub finds the students' servers (which keep running: cleanup_servers is off) where they were.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from coursekit.classroom.accounts import read_record
from coursekit.classroom.ports import free_port  # below the range port 0 draws from
from coursekit.classroom.settings import Classroom, ClassroomError
from coursekit.course.lessons import ROOT

CLASSROOM = ROOT / "classroom"
LEARNER = CLASSROOM / "learner"
PROXY = ROOT / "build" / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy"
BINDIR = Path(sys.executable).parent
INSTRUCTORS, STUDENTS = "instructors", "students"
ADMIN_TOKEN = "CLASSROOM_ADMIN_TOKEN"  # set: a service with this token may manage users (tests)


def refuse_unsafe_address(room: Classroom) -> None:
    """A hub reachable from other machines must not accept a password everyone knows."""
    if not room.loopback and read_record(room.state).get("shared_password"):
        raise ClassroomError(
            f"refusing to serve the hub on {room.ip}: the accounts were made with one shared "
            "password, which anyone on the network could use. Give each account its own password "
            "(python -m coursekit.classroom setup --new-passwords), or serve on 127.0.0.1."
        )


def ports(state: Path) -> dict[str, int]:
    """The hub's, the proxy API's and the formgrader service's ports, chosen once per class."""
    path = state / "ports.json"
    chosen = json.loads(path.read_text()) if path.exists() else {}
    for name in ("hub", "proxy_api", "formgrader"):
        chosen.setdefault(name, free_port(set(chosen.values())))
    state.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(chosen))
    return chosen


def server_environment(
    room: Classroom, config_path: list[Path], bindir: Path = BINDIR
) -> dict[str, str]:
    """What a server the hub starts sees: its Jupyter config folders, the class, the tools."""
    return {
        "JUPYTER_CONFIG_PATH": os.pathsep.join(str(p) for p in config_path),
        "CLASSROOM_COURSE": str(room.source),
        "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
    }


def configure(c, room: Classroom) -> None:
    """Fill the JupyterHub config ``c`` for ``room``."""
    refuse_unsafe_address(room)
    if not PROXY.exists():
        raise ClassroomError(f"{PROXY} is missing: `make hub` installs configurable-http-proxy")
    port = ports(room.state)
    state = room.state
    c.JupyterHub.ip, c.JupyterHub.port = room.ip, room.port
    c.JupyterHub.hub_ip, c.JupyterHub.hub_port = "127.0.0.1", port["hub"]
    c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
    c.ConfigurableHTTPProxy.command = [str(PROXY)]
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{port['proxy_api']}"
    c.ConfigurableHTTPProxy.pid_file = str(state / "proxy.pid")
    c.JupyterHub.cleanup_servers = False  # a restarted hub takes the running servers back
    c.JupyterHub.authenticator_class = "pam"
    c.PAMAuthenticator.open_sessions = False
    c.Authenticator.allowed_users = {m.username for m in room.roster}
    c.JupyterHub.spawner_class = "coursekit.classroom.spawner.ClassSpawner"
    c.Spawner.cmd = [str(BINDIR / "jupyterhub-singleuser")]
    c.Spawner.default_url = "/lab"
    c.Spawner.environment = server_environment(room, [LEARNER, CLASSROOM])
    c.Spawner.start_timeout = c.Spawner.http_timeout = 600  # a class starting at once on few cores
    c.JupyterHub.load_groups = {
        INSTRUCTORS: {"users": room.instructors},
        STUDENTS: {"users": room.students},
    }
    c.JupyterHub.load_roles = _roles(room)
    c.JupyterHub.services = _services(room, port["formgrader"])


def _roles(room: Classroom) -> list[dict]:
    roles = [
        {
            "name": "formgrader",
            "description": f"instructors of {room.course_id}: its formgrader",
            "groups": [INSTRUCTORS],
            "scopes": [
                f"access:services!service={room.course_id}",
                "list:services",
                f"read:services!service={room.course_id}",
            ],
        }
    ]
    if os.environ.get(ADMIN_TOKEN):
        roles.append(
            {
                "name": "classroom-admin",
                "services": ["classroom-admin"],
                "scopes": ["admin:users", "admin:servers", "access:servers", "tokens"],
            }
        )
    return roles


def _services(room: Classroom, port: int) -> list[dict]:
    formgrader = {
        "name": room.course_id,
        "display": True,
        "url": f"http://127.0.0.1:{port}",
        "command": [str(BINDIR / "jupyterhub-singleuser")],
        "user": room.grader,
        "cwd": str(room.folder),
        "environment": {
            **server_environment(room, [CLASSROOM]),
            "JUPYTERHUB_DEFAULT_URL": "/formgrader",
        },
        "oauth_no_confirm": True,
    }
    services = [formgrader]
    if os.environ.get(ADMIN_TOKEN):
        services.append({"name": "classroom-admin", "api_token": os.environ[ADMIN_TOKEN]})
    return services
