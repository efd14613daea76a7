"""The hub's REST API and the students' servers over plain HTTP, as the load test drives them."""

from __future__ import annotations

import time

import requests

from coursekit.classroom.hubprocess import Hub


def logged_in(hub_url: str, user: str, password: str) -> tuple[requests.Session, int]:
    """A session logged in to the hub through its login form, and the form's answer."""
    session = requests.Session()
    session.get(f"{hub_url}hub/login", timeout=30)
    answer = session.post(
        f"{hub_url}hub/login",
        data={"username": user, "password": password, "_xsrf": session.cookies.get("_xsrf")},
        allow_redirects=False,
        timeout=60,
    )
    return session, answer.status_code


class HubClient:
    def __init__(self, hub: Hub, token: str):
        self.hub, self.token = hub, token
        self.api = f"{hub.url}hub/api"
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"token {token}"
        # one session for a whole class's threads at once
        self.session.mount("http://", requests.adapters.HTTPAdapter(pool_maxsize=64))

    @property
    def url(self) -> str:
        return self.hub.url

    def user(self, name: str) -> dict:
        answer = self.session.get(f"{self.api}/users/{name}", timeout=30)
        answer.raise_for_status()
        return answer.json()

    def start_server(self, name: str) -> None:
        answer = self.session.post(f"{self.api}/users/{name}/server", timeout=60)
        assert answer.status_code in (201, 202, 400), answer.text  # 400: already running

    def wait_ready(self, name: str, timeout: float = 900) -> float:
        """Seconds until ``name``'s server is ready."""
        began = time.monotonic()
        while time.monotonic() - began < timeout:
            server = self.user(name).get("servers", {}).get("")
            if server and server.get("ready"):
                return time.monotonic() - began
            time.sleep(1)
        raise TimeoutError(f"{name}'s server is not ready after {timeout} s")

    def user_token(self, name: str) -> str:
        answer = self.session.post(
            f"{self.api}/users/{name}/tokens", json={"note": "load test"}, timeout=30
        )
        answer.raise_for_status()
        return answer.json()["token"]


class StudentClient:
    """One student's own server, with a token of theirs (no browser)."""

    def __init__(self, hub_url: str, name: str, token: str):
        self.name = name
        self.base = f"{hub_url}user/{name}"
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"token {token}"

    def assignments(self, action: str, course: str, assignment: str) -> dict:
        answer = self.session.post(
            f"{self.base}/assignments/{action}",
            data={"course_id": course, "assignment_id": assignment},
            timeout=300,
        )
        answer.raise_for_status()
        return answer.json()

    def put_notebook(self, path: str, notebook: dict) -> None:
        answer = self.session.put(
            f"{self.base}/api/contents/{path}",
            json={"type": "notebook", "format": "json", "content": notebook},
            timeout=60,
        )
        answer.raise_for_status()

    def get_notebook(self, path: str) -> dict:
        answer = self.session.get(f"{self.base}/api/contents/{path}", timeout=60)
        answer.raise_for_status()
        return answer.json()["content"]

    def status(self) -> int:
        return self.session.get(f"{self.base}/api/status", timeout=30).status_code
