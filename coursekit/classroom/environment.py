"""An environment every account of the class can run: the project's, reachable by all.

The hub starts each student's server, kernels and formgrader as that account, so the Python they
run must be readable and executable by every account. A class server installs it where everyone
can (/usr, /opt). This machine's interpreter may live where others cannot enter (pyenv under
/root, 0700): then the interpreter and its standard library (not its site-packages) are copied to
build/classroom/python, with its library path made relative ($ORIGIN, by patchelf), and
build/classroom/venv is a virtual environment of that interpreter whose site-packages, share/
and etc/ are the project's .venv's: one install of every pinned package serves both, and
`make install` updates both. Its bin/ holds the same console scripts, started by its own python.

    python -m coursekit.classroom.environment      # (re)build it; make hub and make test do
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from coursekit.course.lessons import ROOT

CLASS_ENV = ROOT / "build" / "classroom"
CLASS_VENV = CLASS_ENV / "venv"
VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"


def reachable_by_all(path: Path) -> bool:
    """Can an account that is neither the owner nor in the group read ``path``?"""
    path = path.resolve()
    folders_ok = all(os.stat(p).st_mode & stat.S_IXOTH for p in path.parents)
    return folders_ok and bool(os.stat(path).st_mode & stat.S_IROTH)


def _interpreter(base: Path, dest: Path) -> Path:
    """``base``'s bin/ and lib/ (without site-packages) copied to ``dest``, runpath relative."""
    if dest.exists():
        shutil.rmtree(dest)

    def skip(folder: str, names: list[str]) -> list[str]:
        return ["site-packages"] if Path(folder).name == VERSION else []

    for part in ("bin", "lib"):
        shutil.copytree(base / part, dest / part, symlinks=True, ignore=skip)
    binary = dest / "bin" / VERSION
    if shutil.which("patchelf") is None:
        raise SystemExit("patchelf is needed to relocate Python (apt-get install patchelf)")
    subprocess.run(["patchelf", "--set-rpath", "$ORIGIN/../lib", str(binary)], check=True)
    return binary


def _scripts(source: Path, bin_dir: Path) -> None:
    """The project's console scripts, each started by this environment's python."""
    python = bin_dir / "python"
    for script in sorted(source.iterdir()):
        target = bin_dir / script.name
        if target.exists() or target.is_symlink() or script.name.startswith(("python", "activ")):
            continue
        head = script.read_bytes()[:256] if script.is_file() else b""
        if head.startswith(b"#!") and b"python" in head.split(b"\n", 1)[0]:
            body = script.read_bytes().split(b"\n", 1)[1]
            target.write_bytes(b"#!" + bytes(python) + b"\n" + body)
            target.chmod(0o755)
        else:
            target.symlink_to(script.resolve())


def build(project: Path = Path(sys.prefix), dest: Path = CLASS_ENV) -> Path:
    """Make ``dest``/venv from the project's environment ``project``; return the venv."""
    base = Path(sys.base_prefix).resolve()
    interpreter = base / "bin" / VERSION
    if not reachable_by_all(interpreter) or not reachable_by_all(base / "lib" / VERSION / "os.py"):
        interpreter = _interpreter(base, dest / "python")
    venv = dest / "venv"
    if venv.exists():
        shutil.rmtree(venv)
    (venv / "bin").mkdir(parents=True)
    (venv / "lib").mkdir()
    (venv / "pyvenv.cfg").write_text(
        f"home = {interpreter.parent}\ninclude-system-site-packages = false\n"
        f"version = {'.'.join(map(str, sys.version_info[:3]))}\n"
    )
    for name in ("python", "python3", VERSION):
        (venv / "bin" / name).symlink_to(interpreter)
    (venv / "lib" / VERSION).mkdir()
    (venv / "lib" / VERSION / "site-packages").symlink_to(
        project / "lib" / VERSION / "site-packages"
    )
    for shared in ("share", "etc"):
        (venv / shared).symlink_to(project / shared)
    _scripts(project / "bin", venv / "bin")
    # make (in the grader's copy of the repository) sees this environment exactly as up to date
    # as the project's: the same stamp, with the same time.
    stamp = project / ".installed-stamp"
    if stamp.exists():
        (venv / stamp.name).touch()
        os.utime(venv / stamp.name, ns=(stamp.stat().st_atime_ns, stamp.stat().st_mtime_ns))
    for path in (dest, *dest.parents):
        if path == ROOT:
            break
        path.chmod(path.stat().st_mode | 0o755)
    return venv


if __name__ == "__main__":
    print(build())
