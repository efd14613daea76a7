"""The operating-system boundary around a grading kernel: bubblewrap (Linux namespaces).

:class:`coursekit.grading.sandbox.SandboxKernelManager` starts every grading kernel inside a
:class:`Box` unless the instructor accepted the weaker Python-only sandbox. Inside, the kernel has

* **no network**: a network namespace of its own (a loopback with nothing listening); it talks to
  the grader over Unix sockets (Jupyter's ``ipc`` transport) in a folder bound into the box;
* **no other processes**: a PID namespace of its own (the grader, other kernels, other users'
  processes are neither visible in ``/proc`` nor reachable by signals);
* **an unprivileged uid**: when the grader is root, a uid of its own per kernel (from a pool
  of ids no account uses, claimed with a lock for the kernel's lifetime), so that the
  process limit counts this kernel alone and no file of the grader is its own; otherwise a uid
  mapping (a user namespace), so that it runs with no capabilities outside the box;
* **a filesystem of its own**: a fresh root that holds only the read-only environment (``/usr``,
  the Python installation and its virtual environment, the reference library and coursekit,
  which the kernel imports), a private ``/tmp`` (its home) and a private working folder at the
  path of the notebook's folder, both in memory with a size limit, and read-only copies of the
  files handed in beside the notebook. The solutions, the gradebook, the notebooks (the one
  being graded holds the hidden tests), the other submissions, the grader's home and the rest of
  the course are not there at all.

Memory, CPU time, file size and the number of processes are limited in the kernel process itself
(coursekit.grading.sandbox), as before; the Python-level defences run inside the box too.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

BWRAP = "bwrap"
SETPRIV = "setpriv"
INSTALL_HINT = "install bubblewrap (as root: `make sandbox`, or `apt-get install bubblewrap`)"
ACCEPT_HINT = (
    "to grade with the Python-only sandbox instead (weaker: the kernel runs as the grading user, "
    "sees the whole filesystem and the network below Python), pass --python-only-sandbox to "
    "classgrade, or --SandboxKernelManager.sandbox=python-only to nbgrader"
)
FIRST_UID = 1_600_000_000  # the root grader's pool of kernel uids: far above any account's
POOL = 4096
INNER_UID = 1000  # the kernel's uid inside its user namespace, when the grader is not root
SOCKET_PATH_MAX = 100  # sun_path holds 107 bytes; "<folder>/k-ipc-5" must fit
TMP_SIZE = 512 * 2**20  # the kernel's /tmp (its home) and working folder live in memory
WORK_SIZE = 256 * 2**20
MAX_FILES = 256  # files handed in beside the notebook that the box shows
# Read from the host's /etc: what the dynamic loader, time zones and fonts need; nothing else.
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "fonts", "alternatives")
CPU_TOPOLOGY = "/sys/devices/system/cpu"


BUBBLEWRAP = "bubblewrap"  # the values of SandboxKernelManager.sandbox
PYTHON_ONLY = "python-only"
PYTHON_ONLY_FLAG = f"--SandboxKernelManager.sandbox={PYTHON_ONLY}"


class Unavailable(RuntimeError):
    """Bubblewrap cannot run here, and the instructor has not accepted the Python-only sandbox."""


def nbgrader_flags(python_only: bool) -> list[str]:
    """The nbgrader flags for the sandbox chosen: none for bubblewrap (the default), which must
    then be able to run here (:class:`Unavailable` says why not and what to do)."""
    if python_only:
        return [PYTHON_ONLY_FLAG]
    reason = unavailable()
    if reason:
        raise Unavailable(f"refusing to grade: {reason}. To fix it, {INSTALL_HINT}; {ACCEPT_HINT}")
    return []


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


@functools.cache
def unavailable() -> str | None:
    """Why a kernel cannot be started in bubblewrap on this machine (None: it can). Tried once
    per process: a box with every namespace the grading box uses, running ``true``."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap needs Linux namespaces; this is {sys.platform}"
    if shutil.which(BWRAP) is None:
        return "bubblewrap (bwrap) is not installed"
    if _is_root() and shutil.which(SETPRIV) is None:
        return (
            "setpriv (util-linux) is not installed: a root grader needs it to drop to a kernel uid"
        )
    probe = [BWRAP, *_namespaces(), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
    probe += ["--perms", "1777", "--size", str(2**20), "--tmpfs", "/tmp"]  # bubblewrap >= 0.7
    if _is_root():
        probe += [SETPRIV, "--reuid", str(FIRST_UID), "--regid", str(FIRST_UID), "--clear-groups"]
    try:
        result = subprocess.run(
            [*probe, "true"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap could not be started: {error}"
    if result.returncode != 0:
        why = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "no message"
        return f"bubblewrap cannot make a sandbox here ({why}); user namespaces may be disabled"
    return None


def _namespaces() -> list[str]:
    """Every namespace but the user namespace (a root grader changes uid with setpriv instead:
    a user namespace made by root would map the kernel to root outside the box)."""
    shared = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    shared += ["--unshare-cgroup-try", "--die-with-parent"]
    if _is_root():
        return shared
    return [*shared, "--unshare-user", "--uid", str(INNER_UID), "--gid", str(INNER_UID)]


def describe() -> str:
    """What a kernel graded here runs in, as the report says it."""
    if _is_root():
        return "bubblewrap (own uid per kernel, no network, own PID namespace)"
    return "bubblewrap (uid mapping, no network, own PID namespace)"


# ---------------------------------------------------------------- a uid per kernel (root)


def _lock_folder() -> Path:
    """Where the uid claims live: root's own folder, never one another user could prepare."""
    for base in (Path("/run"), Path(tempfile.gettempdir())):
        folder = base / "coursekit-kernel-uids"
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
        except OSError:
            continue
        info = folder.lstat()
        if folder.is_dir() and not folder.is_symlink() and info.st_uid == os.geteuid():
            return folder
    raise Unavailable("no private folder for the kernel uids' locks in /run or the temp folder")


def claim_uid() -> tuple[int, int]:
    """A uid no other live kernel has, and the descriptor whose lock holds it (close it to give
    the uid back; the lock also ends with the process)."""
    import fcntl

    folder = _lock_folder()
    start = os.getpid() % POOL
    for step in range(POOL):
        uid = FIRST_UID + (start + step) % POOL
        fd = os.open(folder / f"{uid}.lock", os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return uid, fd
    raise Unavailable(f"all {POOL} kernel uids are in use")


# ---------------------------------------------------------------- the box


def environment_folders() -> list[str]:
    """The folders of this Python and its environment, symbolic links followed: the prefixes,
    the interpreter's folder, the library folders (sysconfig) and what links at a prefix's top
    point to (a virtual environment may share its site-packages, share/ or etc/ with another by
    a link, as the class's environment does: coursekit/classroom/environment.py)."""
    import sysconfig

    found = [sys.base_prefix, sys.prefix, sys.exec_prefix, str(Path(sys.executable).parent)]
    found += [p for p in sysconfig.get_paths().values() if Path(p).exists()]
    for prefix in {sys.prefix, sys.base_prefix}:
        found += [str(p) for p in Path(prefix).iterdir() if p.is_symlink()]
    return sorted({os.path.realpath(p) for p in found})


def _environment_paths() -> list[Path]:
    """What the kernel imports from: the Python installation, its virtual environment, and the
    two packages of this repository it needs (coursekit, the reference library) -- not the
    repository around them."""
    paths = {Path(p).resolve() for p in environment_folders()} | set(_packages())
    return sorted(p for p in paths if not any(q != p and q in p.parents for q in paths))


def _packages() -> list[Path]:
    """The folders of coursekit and the reference library as this process imports them (the
    grader's copy of the course may hold its own coursekit, found before the installed one)."""
    import importlib.util

    found = []
    for package in ("coursekit", "attention_ref"):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise Unavailable(f"cannot find the {package} package to put into the grading box")
        found.append(Path(spec.submodule_search_locations[0]).resolve())
    return found


def _handed_in(cwd: Path) -> list[Path]:
    """Files beside the notebook a kernel may read (data the student handed in): no notebooks
    (the one being graded holds the hidden tests), no links (they could point anywhere), at
    most MAX_FILES (each is a mount in the box)."""
    found = []
    for path in sorted(cwd.rglob("*")) if cwd.is_dir() else []:
        if path.is_symlink() or any((cwd / p).is_symlink() for p in path.relative_to(cwd).parents):
            continue
        if path.is_file() and path.suffix != ".ipynb" and ".ipynb_checkpoints" not in path.parts:
            found.append(path)
    return found[:MAX_FILES]


def _fontlist() -> Path | None:
    """The grader's matplotlib font cache: copied in, it saves every kernel building its own."""
    home = Path(os.path.expanduser("~"))
    folders = [os.environ.get("MPLCONFIGDIR"), os.environ.get("XDG_CACHE_HOME")]
    candidates = [Path(folders[0])] if folders[0] else []
    candidates += [Path(folders[1] or home / ".cache") / "matplotlib"]
    for folder in candidates:
        found = sorted(folder.glob("fontlist-v*.json")) if folder.is_dir() else []
        if found:
            return found[-1]
    return None


@dataclass
class Box:
    """One kernel's sandbox: a host folder (owned by the kernel) for the connection file and the
    kernel's sockets, and the command that starts the kernel inside bubblewrap."""

    folder: Path
    cwd: Path  # the notebook's folder: the kernel's working folder (private, in memory)
    uid: int | None = None  # the kernel's uid when the grader is root
    _lock: int | None = field(default=None, repr=False)

    @classmethod
    def create(cls, cwd: Path) -> Box:
        nbgrader_flags(python_only=False)  # refuses, saying why, where bubblewrap cannot run
        uid, lock = claim_uid() if _is_root() else (None, None)
        base = "/tmp" if os.access("/tmp", os.W_OK) else tempfile.gettempdir()
        _sweep(Path(base))
        folder = Path(tempfile.mkdtemp(prefix=f"ck-{os.getpid()}-", dir=base))
        box = cls(folder, Path(cwd).resolve(), uid, lock)
        if len(str(box.ipc_prefix)) + 3 > SOCKET_PATH_MAX:
            box.close()
            raise Unavailable(f"{folder}: too long a path for the kernel's sockets; set TMPDIR")
        box._write_accounts()
        if uid is not None:
            os.chown(folder, uid, uid)
        return box

    @property
    def connection_file(self) -> Path:
        return self.folder / "k.json"

    @property
    def ipc_prefix(self) -> Path:
        """Jupyter's ``ip`` for the ipc transport: the sockets are ``<prefix>-<port>``."""
        return self.folder / "k-ipc"

    @property
    def home(self) -> str:
        return "/tmp/home"

    def _write_accounts(self) -> None:
        """/etc/passwd and /etc/group of the box: root and the kernel's own account, so that
        getpass, pwd and the like name the kernel's uid without seeing the host's accounts."""
        uid = self.uid if self.uid is not None else INNER_UID
        (self.folder / "passwd").write_text(
            f"root:x:0:0:root:/root:/bin/false\nstudent:x:{uid}:{uid}::{self.home}:/bin/false\n"
        )
        (self.folder / "group").write_text(f"root:x:0:\nstudent:x:{uid}:\n")

    def command(self, argv: list[str], env: dict[str, str]) -> list[str]:
        """``argv`` (the kernel's command) run in the box with exactly the environment ``env``
        (HOME, TMPDIR and the caches pointed into the box)."""
        if self.uid is not None:  # after the connection file was written by the grader
            for path in self.folder.iterdir():
                os.chown(path, self.uid, self.uid, follow_symlinks=False)
        env = {**env, **self.environment()}
        args = [BWRAP, *_namespaces(), *self._filesystem(), "--chdir", str(self.cwd)]
        args += ["--clearenv"] + [a for k, v in sorted(env.items()) for a in ("--setenv", k, v)]
        if self.uid is not None:
            uid = str(self.uid)
            args += [SETPRIV, "--reuid", uid, "--regid", uid, "--clear-groups", "--no-new-privs"]
        return [*args, "--", *argv]

    def environment(self) -> dict[str, str]:
        home = self.home
        return {
            "HOME": home,
            "TMPDIR": "/tmp",
            "USER": "student",
            "LOGNAME": "student",
            "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "MPLCONFIGDIR": f"{home}/.cache/matplotlib",
            "XDG_CACHE_HOME": f"{home}/.cache",
            "XDG_CONFIG_HOME": f"{home}/.config",
            "IPYTHONDIR": f"{home}/.ipython",
            # the kernel imports the same coursekit and library as the grader: in the box their
            # parent folders hold nothing else
            "PYTHONPATH": os.pathsep.join(str(p.parent) for p in _packages()),
        }

    def _filesystem(self) -> list[str]:
        """The box's mounts, in order (a later mount hides what is below it): a fresh root,
        /proc, /dev and an in-memory /tmp of its own, the read-only environment (which may live
        under /tmp), the sockets' folder, the working folder in memory."""
        args = ["--proc", "/proc", "--dev", "/dev", *_devices()]
        args += ["--perms", "1777", "--size", str(TMP_SIZE), "--tmpfs", "/tmp"]
        args += ["--perms", "0777", "--dir", self.home, *self._home_files()]
        args += ["--ro-bind", "/usr", "/usr"]
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            top = Path("/") / name
            if top.is_symlink():
                args += ["--symlink", os.readlink(top), str(top)]
            elif top.is_dir():
                args += ["--ro-bind", str(top), str(top)]
        for name in ETC:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        args += ["--ro-bind", str(self.folder / "passwd"), "/etc/passwd"]
        args += ["--ro-bind", str(self.folder / "group"), "/etc/group"]
        for path in _environment_paths():
            args += _parents(path) + ["--ro-bind", str(path), str(path)]
        args += _parents(self.folder) + ["--bind", str(self.folder), str(self.folder)]
        args += _parents(self.cwd) + ["--perms", "1777", "--size", str(WORK_SIZE)]
        args += ["--tmpfs", str(self.cwd)] + self._work_files()
        return args

    def _home_files(self) -> list[str]:
        fontlist = _fontlist()
        if fontlist is None:
            return []
        cache = f"{self.home}/.cache/matplotlib"
        return ["--perms", "0777", "--dir", f"{self.home}/.cache", "--perms", "0777", "--dir"] + [
            cache,
            "--ro-bind",
            str(fontlist),
            f"{cache}/{fontlist.name}",
        ]

    def _work_files(self) -> list[str]:
        args = []
        for path in _handed_in(self.cwd):
            for parent in reversed(path.relative_to(self.cwd).parents[:-1]):
                args += ["--perms", "0755", "--dir", str(self.cwd / parent)]
            args += ["--ro-bind", str(path), str(path)]
        return args

    def close(self) -> None:
        """Remove the folder and give the uid back (after the kernel has ended)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def _sweep(base: Path) -> None:
    """Remove the folders of boxes whose grader was killed (they hold a connection file and
    sockets): ck-<pid>-* of a process that is gone, made by this user."""
    for folder in base.glob("ck-*-*"):
        pid, owner = folder.name.split("-")[1], folder.lstat().st_uid
        ours = owner == os.geteuid() or (_is_root() and FIRST_UID <= owner < FIRST_UID + POOL)
        if not pid.isdigit() or folder.is_symlink() or not ours:
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:
            pass  # alive, another user's


def _parents(path: Path) -> list[str]:
    """Make each folder above ``path`` in the box readable by the kernel (bubblewrap would make
    them 0700 when the host's folder is, e.g. /root above a Python installed by pyenv)."""
    args = []
    for parent in reversed(Path(path).parents[:-1]):
        args += ["--perms", "0755", "--dir", str(parent)]
    return args


def _devices() -> list[str]:
    """The CPU topology (numpy, torch and OpenBLAS size their thread pools from it) and GPUs, if
    the machine has any: the kernel may use CUDA as it may outside the box (the driver reads
    /sys)."""
    args = []
    for device in sorted(Path("/dev").glob("nvidia*")):
        args += ["--dev-bind", str(device), str(device)]
    return args + ["--ro-bind-try", *(["/sys"] * 2 if args else [CPU_TOPOLOGY] * 2)]
