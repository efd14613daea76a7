"""Each student's server started on a port it really listens on, and ready only when it answers.

JupyterHub's LocalProcessSpawner (6.1) chooses a server's port by binding port 0 and closing the
socket, then starts the server, which binds the port a few seconds later -- a minute when a class
starts together on a few cores. Meanwhile the port is free for anyone: another student's server
given the same number (a class of 30 starting at once draws a pair in about 3 % of starts, since
the kernel hands out the 14,000 odd ports of its ephemeral range), a kernel's ZMQ port chosen the
same way, any service on a random port. The server that loses the race exits (the hub's
single-user servers never try another port), and the hub waits for *any* answer below 500 at the
server's ``/api``: the winner's 404 marks the loser's server ready, and the student's requests
go to somebody else's server, which answers 404 to each (``/user/NAME/assignments/fetch``).

:class:`ClassSpawner` draws ports below the kernel's ephemeral range (ports.py: no kernel's socket
lands there), keeps those it has chosen and not yet seen bound out of the next draws, waits for
the student's own server (200 at ``/user/NAME/api``, which no other server answers), and when
the server exits because something else holds its port, starts it again on another one. A
server that exits for any other reason fails its start as before.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

from jupyterhub.spawner import LocalProcessSpawner
from jupyterhub.utils import url_path_join
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from coursekit.classroom import ports

ATTEMPTS = 5  # ports tried before a start fails: one lost race is rare, five in a row never seen
POLL_SECONDS = 0.5


class PortTaken(RuntimeError):
    """The server exited while another process listens on the port it was given."""


def listening(ip: str, port: int) -> bool:
    """Does anything accept connections at ip:port?"""
    try:
        socket.create_connection((ip, port), timeout=5).close()
    except OSError:
        return False
    return True


async def answers_200(url: str) -> bool:
    try:
        response = await AsyncHTTPClient().fetch(url, raise_error=False, request_timeout=30)
    except (TimeoutError, OSError, HTTPClientError):
        return False  # not listening yet, or too busy to answer: ask again
    return response.code == 200


async def wait_for_own_server(
    url: str, ip: str, port: int, exited: Callable[[], Awaitable[int | None]]
) -> None:
    """Return once ``url`` (the server's own /api) answers 200; raise :class:`PortTaken` if the
    process exits while another one listens on its port, RuntimeError if it exits otherwise."""
    while True:
        if await answers_200(url):
            return
        status = await exited()
        if status is not None:
            if listening(ip, port):
                raise PortTaken(f"port {port} was taken by another process (exit status {status})")
            raise RuntimeError(f"the server exited with status {status} before it answered {url}")
        await asyncio.sleep(POLL_SECONDS)


class ClassSpawner(LocalProcessSpawner):
    """LocalProcessSpawner whose start returns only when the student's own server answers."""

    # ports this hub chose and has not yet seen bound: one hub process, one set for every spawner
    _chosen: set[int] = set()

    def _fresh_port(self) -> int:
        port = ports.free_port(self._chosen)
        self._chosen.add(port)
        return port

    async def start(self):
        for attempt in range(1, ATTEMPTS + 1):
            self.port = self._fresh_port()
            try:
                ip, port = await super().start()
                url = f"http://{ip}:{port}{url_path_join(self.server.base_url, 'api')}"
                await wait_for_own_server(url, ip, port, self.poll)
                return ip, port
            except PortTaken as lost:
                self.log.warning(
                    "%s's server lost its port (try %d of %d): %s; starting it on another port",
                    self.user.name,
                    attempt,
                    ATTEMPTS,
                    lost,
                )
            finally:
                self._chosen.discard(self.port)
        raise RuntimeError(f"{self.user.name}'s server lost its port {ATTEMPTS} times in a row")
