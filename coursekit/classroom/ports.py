"""Ports for the class's servers, away from the ones the kernel hands out by itself.

Every process that binds port 0 (a notebook kernel's five ZMQ ports, Dask's dashboards, the test
suite's own servers) gets a port from the kernel's ephemeral range (``ip_local_port_range``,
32768-60999 on Linux), and so does a port chosen by binding port 0 and closing it. A port chosen
that way for a server that binds it later can be taken meanwhile by any of them. Ports below the
ephemeral range are handed out to nobody who did not ask for that very number: the class's hub,
proxy, formgrader and students' servers take theirs there, checked free when chosen.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10000  # below: the ports that well-known services are configured on
TRIES = 200


def ephemeral_range(path: Path = RANGE_FILE) -> tuple[int, int]:
    """The kernel's range for port 0 (Linux's default where the file cannot be read)."""
    try:
        low, high = (int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(taken: set[int] | frozenset[int] = frozenset(), draw=random.randrange) -> int:
    """A port of 127.0.0.1 that nothing listens on, not in ``taken``, below the ephemeral range
    (above it where the range starts too low to leave room); port 0's choice if none is found."""
    low, high = ephemeral_range()
    start, stop = (LOWEST, low) if low - LOWEST >= 1000 else (high + 1, 65536)
    for _ in range(TRIES):
        port = draw(start, stop)
        if port not in taken and bindable(port):
            return port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
