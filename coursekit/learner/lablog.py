"""What the learner's own JupyterLab (``make lab``) logs: no warning per kernel, no 404 flood.

Every kernel started over TCP logged "Kernel is running over TCP without encryption" (ipykernel):
kernels on the learner's own machine can talk to the server over Unix sockets instead, where no
other machine can reach them, and then nothing is said. ``python -m coursekit.learner.lablog``
prints the flag that asks for them (``make lab`` passes it to JupyterLab) where the socket paths
fit: a Unix socket's path has at most 104 bytes on macOS, 108 on Linux, and Jupyter puts them in
its runtime folder; where that folder's path is too long, TCP stays (and so does the warning).

Restart ``make lab`` with a notebook still open in the browser, and the tab keeps asking the new
server for the kernels and sessions of the old one: each request was three warnings (the 404, the
error it wrote, the access line), 36 lines in 12 s, above and below the course's notices. Those
404s are expected and say nothing about the course. :class:`GoneKernels` (a logging filter that
classroom/solo-lab/jupyter_server_config.json puts on the server's console) replaces the first one
with one plain line saying what happened and what to do, and drops the rest of them; every other
warning and error, another 404 included, is logged as before.
"""

from __future__ import annotations

import logging
import re
import sys

# A 404 for a kernel or a session that does not exist (the server's three lines for one request)
GONE = re.compile(
    r"(404 \w+ /api/(kernels|sessions)/[\w-]+"
    r"|Kernel does not exist: [\w-]+|wrote error: 'Kernel does not exist: [\w-]+'"
    r"|Session not found|wrote error: 'Session not found)"
)
SAID = (
    "make lab: a browser tab from before this start asks for kernels that are gone; reload the tab "
    "(its notebooks come back with new kernels). Such requests are not logged again."
)


class GoneKernels(logging.Filter):
    """Once: the plain line instead of a gone kernel's 404; after it, nothing for them."""

    def __init__(self, name: str = "") -> None:
        super().__init__(name)
        self.said = False

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 -- a record that cannot be read is not ours to drop
            return True
        if not GONE.search(message):
            return True
        if self.said:
            return False
        self.said = True
        record.msg, record.args = SAID, ()
        return True


# kernel-<36-character id>-ipc-<port>, after the runtime folder and a slash; 104 on macOS
SOCKET_NAME, SOCKET_PATH_MAX = len("/kernel--ipc-99999") + 36, 104


def transport_flags(runtime_dir: str | None = None) -> list[str]:
    """``--KernelManager.transport=ipc`` where the kernels' socket paths fit, else nothing."""
    if sys.platform == "win32":
        return []
    if runtime_dir is None:
        from jupyter_core.paths import jupyter_runtime_dir

        runtime_dir = jupyter_runtime_dir()
    if len(runtime_dir.encode()) + SOCKET_NAME >= SOCKET_PATH_MAX:
        return []
    return ["--KernelManager.transport=ipc"]


if __name__ == "__main__":
    print(" ".join(transport_flags()))
