"""Run work in forked children of this process, a few at a time, each with a time limit.

A child starts from a copy of this process's memory (the lesson's namespace as the cells left it,
its random generators' states included), so every mutant meets the same state, and nothing it
does reaches the parent or the next mutant. The child sends a small JSON answer through a pipe;
a child that runs past its limit is killed, and one that dies without answering crashed.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

TIMEOUT, CRASHED = "timeout", "crashed"


@dataclass
class _Child:
    key: object
    pipe: int
    deadline: float
    started: float
    chunks: list


class Forks:
    """``submit(key, work, limit)`` runs ``work()`` (which returns a JSON-able value) in a child;
    ``done(key, answer, seconds)`` is called with it, or with ``{"status": "timeout"}`` or
    ``{"status": "crashed"}``, as each child ends. At most ``jobs`` children at once."""

    def __init__(self, jobs: int, done: Callable[[object, dict, float], None]):
        self.jobs, self.done, self.children = max(1, jobs), done, {}

    def submit(self, key, work: Callable[[], object], limit: float) -> None:
        while len(self.children) >= self.jobs:
            self._wait()
        sys.stdout.flush()  # or the child would inherit, and write, what the parent has buffered
        sys.stderr.flush()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the caller's code
            os.close(read)
            _run_child(work, write)
        os.close(write)
        now = time.monotonic()
        self.children[pid] = _Child(key, read, now + limit, now, [])

    def drain(self) -> None:
        while self.children:
            self._wait()

    def _wait(self) -> None:
        now = time.monotonic()
        soonest = min(child.deadline for child in self.children.values())
        pipes = {child.pipe: pid for pid, child in self.children.items()}
        ready, _, _ = select.select(list(pipes), [], [], max(0.0, soonest - now))
        for pipe in ready:
            pid = pipes[pipe]
            chunk = os.read(pipe, 1 << 16)
            if chunk:
                self.children[pid].chunks.append(chunk)
            else:
                self._finish(pid, _answer(self.children[pid].chunks))
        now = time.monotonic()
        for pid, child in list(self.children.items()):
            if child.deadline <= now:
                os.kill(pid, signal.SIGKILL)
                self._finish(pid, {"status": TIMEOUT})

    def _finish(self, pid: int, answer: dict) -> None:
        child = self.children.pop(pid)
        os.close(child.pipe)
        os.waitpid(pid, 0)
        self.done(child.key, answer, time.monotonic() - child.started)


def _answer(chunks: list) -> dict:
    try:
        return json.loads(b"".join(chunks))
    except ValueError:  # it died (a segfault, os._exit) before it could answer
        return {"status": CRASHED}


def _run_child(work: Callable[[], object], pipe: int) -> None:
    """In the child: output to /dev/null, the answer to the pipe, then exit at once (no atexit
    handlers, no flushing of buffers the parent will flush itself)."""
    status = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        answer = json.dumps(work()).encode()
        while answer:
            answer = answer[os.write(pipe, answer) :]
        status = 0
    finally:
        os._exit(status)
