"""A student's server is ready only when it answers as itself, and starts again on another port
when something took its port before it could bind it (coursekit/classroom/spawner.py).

Real processes on 127.0.0.1, no hub and no accounts: a squatter answers 404 to everything on a
port, as another student's server would; the "student's server" is a small HTTP server that
binds the port it is given a moment after it starts and exits if it cannot, as
jupyterhub-singleuser does (it never tries another port)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.server
import socket
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from jupyterhub.spawner import LocalProcessSpawner
from jupyterhub.utils import wait_for_http_server
from traitlets.config import Config
from traitlets.utils.importstring import import_item

from coursekit.classroom import hubconfig, ports, spawner

from .test_classroom_settings import _class

pytestmark = pytest.mark.unit


def _run(coroutine):
    """asyncio.run in a thread of its own: a browser test's Playwright, still open in this
    worker, keeps an event loop running in the main thread, where asyncio.run refuses to start."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


BASE = "/user/student/"
SERVER = """
import http.server, os, sys, time
time.sleep(0.3)  # a server that starts slowly: its port is free for anyone meanwhile
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == sys.argv[2] + "api" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
try:
    server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Answer)
except OSError:
    sys.exit(1)  # "address already in use": jupyterhub-singleuser gives up the same way
server.serve_forever()
"""


class Squatter(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # another student's server: /user/student/... is not its
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def squatter():
    server = http.server.HTTPServer(("127.0.0.1", 0), Squatter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


class LocalSpawner(spawner.ClassSpawner):
    """ClassSpawner with the hub's parts a test has no use for left out: the command is SERVER,
    run as this account, told its port on the command line."""

    server = SimpleNamespace(base_url=BASE)  # the hub's record of the server (a property there)

    def get_env(self):
        return {}

    def get_args(self):
        return [str(self.port), BASE]

    def make_preexec_fn(self, name):
        return None


def _spawner() -> LocalSpawner:
    return LocalSpawner(
        cmd=[sys.executable, "-c", SERVER],
        user=SimpleNamespace(name="student"),
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_hub_runs_the_class_spawner(tmp_path, monkeypatch):
    monkeypatch.setattr(hubconfig, "PROXY", Path(sys.executable))  # any file that exists
    c = Config()
    hubconfig.configure(c, _class(tmp_path, "username,role\nann,student\n"))
    assert c.JupyterHub.spawner_class == "coursekit.classroom.spawner.ClassSpawner"
    loaded = import_item(c.JupyterHub.spawner_class)
    assert issubclass(loaded, LocalProcessSpawner)


def test_another_servers_404_is_the_stock_hubs_ready_and_not_ours(squatter):
    """What broke a class of 30: the student's server lost its port to another server, whose 404
    at /user/student/api the stock hub takes for the student's server being up."""
    process = _spawner()
    process.port = squatter
    ip, port = _run(LocalProcessSpawner.start(process))  # started as the stock hub would
    url = f"http://{ip}:{port}{BASE}api"
    assert _run(wait_for_http_server(url, timeout=30)).status == 404  # "ready"
    with pytest.raises(spawner.PortTaken, match=f"port {squatter} was taken"):
        _run(spawner.wait_for_own_server(url, ip, port, process.poll))


def test_a_server_that_fails_alone_fails_its_start():
    process = _spawner()
    process.cmd = [sys.executable, "-c", "import sys; sys.exit(3)"]
    with pytest.raises(RuntimeError, match="exited with status 3"):
        _run(process.start())


def test_a_lost_port_is_given_up_for_another(squatter, monkeypatch):
    """The first port drawn is the squatter's: the server exits, and starts again elsewhere."""
    draws = iter([squatter, _free_port()])
    monkeypatch.setattr(spawner.ports, "free_port", lambda taken: next(draws))
    process = _spawner()
    try:
        ip, port = _run(process.start())
        assert port != squatter and process.proc.poll() is None
        assert spawner.listening(ip, port) and not spawner.ClassSpawner._chosen
    finally:
        process.proc.kill()
        process.proc.wait()


def test_ports_chosen_and_not_yet_bound_are_not_drawn_again(squatter):
    """The hub's own choice: a port nothing listens on, none it chose for a server still
    starting, below the range that port 0 (every kernel's ZMQ socket) draws from."""
    free = _free_port()
    draws = iter([4001, squatter, free])
    assert ports.free_port({4001}, draw=lambda start, stop: next(draws)) == free
    low, _ = ports.ephemeral_range()
    chosen = {ports.free_port() for _ in range(20)}
    assert all(ports.LOWEST <= port < low and ports.bindable(port) for port in chosen)


def test_the_ephemeral_range_is_read_or_linuxs_default(tmp_path):
    (tmp_path / "range").write_text("20000\t30000\n")
    assert ports.ephemeral_range(tmp_path / "range") == (20000, 30000)
    assert ports.ephemeral_range(tmp_path / "missing") == (32768, 60999)
