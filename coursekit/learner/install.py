"""What the first ``make lab`` says while it installs: one plain line, then progress.

The first ``make lab`` installs some 175 packages into ``.venv``, which takes minutes; it used to
show two echoed shell pipelines and then nothing for two minutes. The Makefile runs uv through
this module instead (``python -m coursekit.learner.install EXTRAS -- UV-COMMAND ...``): it says
what is being installed and how big it is, runs uv, and prints uv's few summary lines ("Resolved",
"Prepared", "Installed") and, every so often, how far the download has come (what uv has put into
its cache since it started), but not uv's list of every package installed. If uv fails, all it
printed is shown. Standard library only: it runs before anything else is installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

# What the learners' set took when measured (README, "What the first make lab installs"; a test
# keeps the two the same): packages, download in MB, size in .venv in GB.
LEARNER_SET = (175, 637, 2.6)
EVERY = 15.0  # seconds between two progress lines
_SUMMARY = ("Resolved ", "Prepared ", "Installed ", "Uninstalled ", "Audited ", "Bytecode ")
COMPILING = "  compiling their Python files to bytecode (a minute or two; later imports are faster)"


def announce(extras: str) -> str:
    """The plain line that says what is installing, and how big it is."""
    if extras == "learner":
        count, download, size = LEARNER_SET
        return (
            f"Installing what the lessons need into .venv, once: about {count} packages, a "
            f"download of about {download} MB, {size} GB on disk (PyTorch and Triton are most of "
            "it). A few minutes; later starts take seconds."
        )
    return (
        f"Installing the course's packages ({extras}: the lessons' set and the tools to test, "
        "grade and run a class) into .venv: a few minutes the first time."
    )


def _folder_bytes(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def _cache_folder(uv: str) -> Path | None:
    try:
        found = subprocess.run([uv, "cache", "dir"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(found.stdout.strip()) if found.returncode == 0 and found.stdout.strip() else None


def _progress(cache: Path | None, done: threading.Event, say) -> None:
    """Every EVERY seconds until ``done``: the time so far and, while uv downloads, what it has
    put into its cache (nothing worth saying when every package was there already)."""
    start, before = time.monotonic(), _folder_bytes(cache) if cache else 0
    while not done.wait(EVERY):
        seconds = time.monotonic() - start
        fetched = (_folder_bytes(cache) - before) / 2**20 if cache else 0
        what = f": {fetched:,.0f} MB fetched and unpacked so far" if fetched >= 10 else ""
        say(f"  ... {seconds:.0f} s{what}")


def run(extras: str, command: list[str], say=print) -> int:
    """Run uv's install ``command``, saying what it does; its exit status."""
    say(announce(extras))
    done = threading.Event()
    watcher = threading.Thread(
        target=_progress, args=(_cache_folder(command[0]), done, say), daemon=True
    )
    watcher.start()
    printed = []
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        for line in process.stdout:
            printed.append(line.rstrip("\n"))
            if line.startswith(_SUMMARY) or line.lower().startswith(("error", "warning")):
                say(f"  {line.strip()}")
            if line.startswith("Installed ") and "--compile-bytecode" in command:
                say(COMPILING)
        status = process.wait()
    finally:
        done.set()
    if status:
        say("\n".join(["uv failed; all it printed:", *printed]))
    return status


def main(argv: list[str]) -> int:
    if "--" not in argv or argv.index("--") != 1 or len(argv) < 3:
        print(
            "usage: python -m coursekit.learner.install EXTRAS -- UV-COMMAND ...", file=sys.stderr
        )
        return 2
    return run(argv[0], argv[2:], say=lambda text: print(text, flush=True))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
