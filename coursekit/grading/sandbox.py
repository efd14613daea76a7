"""The kernel that runs submissions while grading: ipykernel with limits and guards.

nbgrader_config.py makes nbgrader start every grading kernel with :class:`SandboxKernelManager`,
which launches ``python -m coursekit.grading.sandbox -f CONNECTION_FILE`` (whatever kernel the
submitted notebook names) inside bubblewrap (coursekit.grading.bwrap: no network, a PID
namespace and an unprivileged uid of its own, a filesystem with only the environment and its own
folder), or, where the instructor accepted it, without (``SandboxKernelManager.sandbox =
"python-only"``). Before the kernel serves its first cell, this launcher:

* limits the kernel's memory (``RLIMIT_DATA``, default 4 GiB: an allocation beyond it raises
  ``MemoryError`` in that cell, and the machine is never exhausted; unlike ``RLIMIT_AS`` it does
  not count address space that is only reserved, so ``import torch`` and CUDA are unaffected),
  its CPU time, the size of files it writes, and core dumps; in bubblewrap, also the number of
  processes and threads (``RLIMIT_NPROC``, counted for its own uid);
* pins the number of threads (``COURSE_SANDBOX_THREADS``) so that parallel grading does not
  oversubscribe the cores, and drops environment variables other than the usual ones (the
  grader's secrets, if any, are not visible to submissions);
* imports numpy, torch, matplotlib and the reference library, and snapshots what the tests rely
  on (coursekit.grading.guard);
* installs an audit hook (PEP 578) that refuses, with a PermissionError in the offending cell:
  reading or listing the course directory (the solutions, the gradebook, other students' work,
  any notebook: the one being graded holds the hidden tests) outside the reference library, the
  grader's home folder (but for caches and configuration) and other processes' /proc entries;
  writing anywhere but the submission's own folder and temporary folders; starting processes
  (but for the GPU assembler inside Triton's wheel, called as Triton calls it to compile lesson
  11's kernels: coursekit.grading.compilers); signalling other processes; opening databases or
  network connections; loading native code.

The limits are in the kernel process, so they hold for anything it runs. The audit hook and the
guard run inside the kernel too: they stop the attacks the course's tests exercise at the Python
level, not a determined attacker with arbitrary code (Python's audit hooks are not a security
boundary: a file read or written through a memory map made in C raises no audit event). That is
what the operating-system boundary is for; the hook stays as a second line and as the source of
the findings that hold a submission for review.
"""

from __future__ import annotations

import atexit
import os
import resource
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Enum, Integer, List, Unicode

from coursekit.grading import bwrap, compilers
from coursekit.grading.bwrap import BUBBLEWRAP, PYTHON_ONLY

ENV_MEMORY = "COURSE_SANDBOX_MEMORY_MB"
ENV_CPU = "COURSE_SANDBOX_CPU_SECONDS"
ENV_THREADS = "COURSE_SANDBOX_THREADS"
ENV_PROTECT = "COURSE_SANDBOX_PROTECT"  # os.pathsep-separated folders the kernel may not touch
ENV_ALLOW = "COURSE_SANDBOX_ALLOW"  # ... except these inside them (the library, the tooling)
ENV_PROCESSES = "COURSE_SANDBOX_PROCESSES"  # processes a kernel may start (bubblewrap only)
ENV_AUDIT = "COURSE_SANDBOX_AUDIT"  # "0": no audit hook (tests of the OS boundary alone)
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"  # JupyterLab's: figures drawn as PNG

# Environment variables a kernel keeps (prefixes); everything else is dropped.
_KEEP_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "LC_",
    "TZ",
    "TMP",
    "TEMP",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "PYTHON",
    "VIRTUAL_ENV",
    "CONDA",
    "JPY_",
    "JUPYTER",
    "IPYTHON",
    "MPL",
    "XDG_",
    "CUDA",
    "NVIDIA",
    "LD_LIBRARY_PATH",
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    "COURSE_",
    "NBGRADER_",
)

_PROCESS_EVENTS = {
    "subprocess.Popen",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "pty.spawn",
    "os.startfile",
}
_PATH_WRITE_EVENTS = {
    "os.remove": 1,
    "os.rmdir": 1,
    "os.mkdir": 1,
    "os.chmod": 1,
    "os.chown": 1,
    "os.utime": 1,
    "os.truncate": 1,
    "shutil.rmtree": 1,
    "os.rename": 2,
}
_LIST_EVENTS = {"os.listdir", "os.scandir", "glob.glob"}
_DENIED_EVENTS = {
    "os.symlink",
    "os.link",
    "ctypes.dlopen",
    "ctypes.dlsym",
    "ctypes.call_function",
    "ctypes.cdata",
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.sendmsg",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "sys.addaudithook",
    "sys.remote_exec",
    "sqlite3.enable_load_extension",
}


def _inside(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip(os.sep) + os.sep) for f in folders)


def _resolver():
    """path -> its real absolute path (None for a descriptor, "?" when it cannot be known)."""
    join, realpath, getcwd, fspath = os.path.join, os.path.realpath, os.getcwd, os.fspath

    def resolve(path) -> str | None:
        if isinstance(path, int) or path is None:
            return None
        try:
            path = fspath(path)
            if isinstance(path, bytes):
                path = path.decode(errors="replace")
            return realpath(join(getcwd(), path))
        except (TypeError, ValueError, OSError):
            return "?"

    return resolve


def _path_checks(protected, allowed, writable, refuse):
    """check_read(path, what) and check_write(path, what): refuse what the policy forbids."""
    own_pid = os.getpid()

    def check_read(path: str, what: str) -> None:
        if path == "?" or (_inside(path, protected) and not _inside(path, allowed)):
            refuse(what)
        parts = path.split(os.sep)
        if (
            len(parts) > 3
            and parts[1] == "proc"
            and parts[2].isdigit()
            and int(parts[2]) != own_pid
            and parts[3] not in ("stat", "status")
        ):
            refuse(what)  # another process's environment, command line, memory, files
        if path.endswith(".ipynb") and _inside(path, protected + writable[:1]):
            refuse(what)  # the notebook being graded holds the hidden tests

    def check_write(path: str, what: str) -> None:
        if (
            path == "?"
            or not _inside(path, writable)
            or (_inside(path, protected) and not _inside(path, writable[:1]))
        ):
            refuse(what)

    return check_read, check_write


def _file_events(resolve, check_read, check_write):
    """The hook's part for files: opening, changing and listing paths."""
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def on_open(args: tuple) -> None:
        path = resolve(args[0])
        if path is None:
            return
        mode, flags = args[1], args[2] if len(args) > 2 else 0
        writing = (
            any(c in mode for c in "wax+")
            if isinstance(mode, str)
            else bool((flags or 0) & write_flags)
        )
        what = f"open({args[0]!r}{', ' + repr(mode) if mode else ''})"
        (check_write if writing else check_read)(path, what)

    def on_change(event: str, args: tuple) -> None:
        for arg in args[: _PATH_WRITE_EVENTS[event]]:
            path = resolve(arg)
            if path is not None:
                check_write(path, f"{event}({arg!r})")

    def on_list(event: str, args: tuple) -> None:
        path = resolve(args[0] if args and args[0] is not None else ".")
        if path is not None:
            check_read(path, f"{event}({args[0]!r})")

    return on_open, on_change, on_list


def make_audit_hook(
    protected: list[str], allowed: list[str], writable: list[str], blocked: list[str]
):
    """The audit hook: a closure over its policy, so submitted code cannot reach and relax it."""
    own_pid = os.getpid()

    def refuse(what: str):
        blocked.append(what)
        raise PermissionError(f"not allowed while grading: {what}")

    check_read, check_write = _path_checks(protected, allowed, writable, refuse)
    resolve = _resolver()
    on_open, on_change, on_list = _file_events(resolve, check_read, check_write)

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            on_open(args)
        elif event in _PATH_WRITE_EVENTS:
            on_change(event, args)
        elif event in _LIST_EVENTS:
            on_list(event, args)
        elif event in _PROCESS_EVENTS:
            files = compilers.assembler_files(event, args)
            if files is None:
                refuse(f"starting a process ({event})")
            for name in files:  # ptxas reads and writes only where the kernel itself may write
                check_write(resolve(name), f"{event}: the assembler's file {name!r}")
        elif event in ("os.kill", "os.killpg", "signal.pthread_kill"):
            if event != "os.kill" or not args or args[0] != own_pid:
                refuse(f"{event}{args!r}: signalling another process")
        elif event == "sqlite3.connect":
            if args and args[0] not in (":memory:", b":memory:", ""):
                refuse(f"sqlite3.connect({args[0]!r})")
        elif event in _DENIED_EVENTS:
            refuse(event)

    return hook


def _lower(limit: int, soft: int, hard: int | None = None) -> None:
    """Lower a resource limit (never above what the system already allows)."""
    _, current = resource.getrlimit(limit)
    hard = soft if hard is None else hard
    if current != resource.RLIM_INFINITY:
        soft, hard = min(soft, current), min(hard, current)
    resource.setrlimit(limit, (soft, hard))


def _limits() -> None:
    memory = int(os.environ.get(ENV_MEMORY, "4096"))
    cpu = int(os.environ.get(ENV_CPU, "900"))
    if memory > 0:
        _lower(resource.RLIMIT_DATA, memory * 2**20)
    if cpu > 0:
        _lower(resource.RLIMIT_CPU, cpu, cpu + 10)  # SIGXCPU at the soft limit ends the kernel
    _lower(resource.RLIMIT_CORE, 0)
    _lower(resource.RLIMIT_FSIZE, 256 * 2**20)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails (EFBIG), no kill


def _limit_processes(threads: int) -> None:
    """In bubblewrap the kernel's uid is its own (or its user namespace is): RLIMIT_NPROC then
    counts this kernel's processes and threads alone. It may keep what it has, grow the thread
    pools torch and OpenMP start on first use, and start ENV_PROCESSES more; a fork bomb gets
    EAGAIN. (Not in the Python-only sandbox: there the grader's own processes would count.)"""
    extra = os.environ.get(ENV_PROCESSES)
    if extra is None:
        return
    tasks = len(os.listdir(f"/proc/{os.getpid()}/task"))
    _lower(resource.RLIMIT_NPROC, tasks + 2 * threads + int(extra))


def _environment() -> None:
    for name in list(os.environ):
        if not name.startswith(_KEEP_ENV):
            del os.environ[name]
    # Triton's compile cache (kernels compiled on a GPU machine): a private folder in the
    # temporary folder (the box's own /tmp in bubblewrap), not the grader's ~/.triton
    cache = tempfile.mkdtemp(prefix="triton-cache-")
    atexit.register(shutil.rmtree, cache, True)
    os.environ["TRITON_CACHE_DIR"] = cache
    threads = os.environ.get(ENV_THREADS)
    if threads:
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[name] = threads
    # A test cell that passes prints nothing while graded (attention_ref.testing.display, read
    # when the guard imports the checks): the graded notebook and its feedback stay as they were.
    os.environ["ATTENTION_REF_QUIET_PASSES"] = "1"


def kernel_environment(extra: dict[str, str]) -> dict[str, str]:
    """The environment a grading kernel starts with: the usual variables of this one (not the
    grader's secrets, if any), and ``extra``."""
    return {k: v for k, v in os.environ.items() if k.startswith(_KEEP_ENV)} | extra


def _folders(variable: str) -> list[str]:
    return [os.path.realpath(p) for p in os.environ.get(variable, "").split(os.pathsep) if p]


def _policy(home: str, library: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(protected, allowed, writable) folders of the audit hook, from this kernel's view."""
    cwd = os.path.realpath(os.getcwd())
    # Besides the course: the grader's home (keys, tokens); other processes' /proc entries are
    # refused by the hook itself.
    protected = _folders(ENV_PROTECT) + [home]
    caches = (".cache", ".config/matplotlib", ".matplotlib", ".ipython", ".local/lib")
    caches += (".local/share/jupyter", ".pyenv", ".conda")
    allowed = library + _folders(ENV_ALLOW) + bwrap.environment_folders() + [cwd]
    allowed += [os.path.join(home, p) for p in caches]
    writable = [cwd, os.path.realpath(tempfile.gettempdir()), os.path.join(home, ".cache")]
    return protected, allowed, writable


def main(argv: list[str]) -> None:
    _limits()
    _environment()
    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    app.initialize(argv)
    # Trusted start-up: what the lessons import, then the snapshot the guard compares against.
    import matplotlib.pyplot  # noqa: F401 -- registers the backend's hooks now (inline: its drawing)
    import numpy  # noqa: F401
    import torch

    if os.environ.get(ENV_THREADS):
        torch.set_num_threads(int(os.environ[ENV_THREADS]))
    torch.cuda.is_available()  # loads the GPU driver, if any, before native loading is refused
    from coursekit.grading import guard

    guard.install(shell=app.shell, kernel=app.kernel)
    home = os.path.realpath(os.path.expanduser("~"))
    library = [
        str(Path(sys.modules["attention_ref"].__file__).resolve().parent),
        str(Path(guard.__file__).resolve().parents[1]),  # coursekit itself
    ]
    blocked: list[str] = []
    guard._state["blocked"] = blocked
    _limit_processes(torch.get_num_threads())
    if os.environ.get(ENV_AUDIT, "1") != "0":
        sys.addaudithook(make_audit_hook(*_policy(home, library), blocked))
    app.start()


class SandboxKernelManager(AsyncKernelManager):
    """Starts :mod:`coursekit.grading.sandbox` whatever kernel the notebook asks for (a submission
    could name any kernel in its metadata), with the limits configured here, inside bubblewrap
    (coursekit.grading.bwrap) unless the Python-only sandbox was explicitly accepted."""

    memory_limit_mb = Integer(4096, help="RLIMIT_DATA of a grading kernel, in MiB (0: none)").tag(
        config=True
    )
    cpu_limit_s = Integer(900, help="CPU seconds a grading kernel may use (0: no limit)").tag(
        config=True
    )
    threads = Integer(0, help="threads for torch/BLAS in a grading kernel (0: their default)").tag(
        config=True
    )
    protected_paths = List(
        Unicode(),
        help="folders a grading kernel may not read or write, besides the "
        "course (the folder nbgrader runs in) and this repository",
    ).tag(config=True)
    sandbox = Enum(
        [BUBBLEWRAP, PYTHON_ONLY],
        BUBBLEWRAP,
        help="bubblewrap: every kernel behind an operating-system boundary (no network, own PID "
        "namespace and uid, only the environment and its own folder); grading refuses to start "
        "where it cannot run. python-only: accept the weaker in-process sandbox instead",
    ).tag(config=True)
    max_processes = Integer(
        16, help="processes a grading kernel may start beyond its own threads (bubblewrap only)"
    ).tag(config=True)
    draw_figures = Bool(
        False,
        help="draw each figure a graded notebook makes into its output (and the learner's "
        "feedback), as JupyterLab does. Off: matplotlib's Agg backend, which makes the figures "
        "but never draws them; no test reads a picture, and drawing them was about a fifth of "
        "the time it takes to execute the course's lessons",
    ).tag(config=True)
    audit_hook = Bool(
        True,
        help="the in-process audit hook; the tests turn it off to prove what the "
        "operating-system boundary stops on its own",
    ).tag(config=True)

    def __init__(self, **kwargs):
        kwargs["kernel_name"] = "python3"
        super().__init__(**kwargs)
        self._box: bwrap.Box | None = None

    @property
    def sandbox_description(self) -> str:
        """Which sandbox graded with this manager, as the report says it."""
        if self.sandbox == PYTHON_ONLY:
            return "python-only (accepted by the instructor)"
        return bwrap.describe()

    @property
    def kernel_spec(self) -> KernelSpec:
        if self._kernel_spec is None:
            self._kernel_spec = KernelSpec(
                argv=[sys.executable, "-m", "coursekit.grading.sandbox", "-f", "{connection_file}"],
                display_name="Python 3 (grading sandbox)",
                language="python",
                env=self._spec_env(),
                # bubblewrap's own process would die of a SIGINT sent to the kernel's process
                # group: the kernel is asked to interrupt itself over its control socket instead
                interrupt_mode="message" if self.sandbox == BUBBLEWRAP else "signal",
            )
        return self._kernel_spec

    def _spec_env(self) -> dict[str, str]:
        from coursekit.course.lessons import ROOT

        threads = self.threads or int(os.environ.get(ENV_THREADS, "0") or 0)
        home = os.path.realpath(os.path.expanduser("~"))
        protect = [os.getcwd(), str(ROOT), home, *self.protected_paths]
        env = {
            ENV_MEMORY: str(self.memory_limit_mb),
            ENV_CPU: str(self.cpu_limit_s),
            ENV_PROTECT: os.pathsep.join(protect),
            ENV_AUDIT: "1" if self.audit_hook else "0",
        }
        if threads:
            env[ENV_THREADS] = str(threads)
        # ipykernel keeps a backend it is given (the grader's own MPLBACKEND would reach it too)
        env["MPLBACKEND"] = INLINE_BACKEND if self.draw_figures else "agg"
        if self.sandbox == BUBBLEWRAP:
            env[ENV_PROCESSES] = str(self.max_processes)
        return env

    async def _async_pre_start_kernel(self, **kw):
        """In bubblewrap: a box for this kernel, and the connection over Unix sockets in it (the
        kernel has no network to reach the grader over TCP)."""
        if self.sandbox == BUBBLEWRAP:
            self._close_box()
            self._box = bwrap.Box.create(Path(kw.get("cwd") or os.getcwd()))
            self.transport = "ipc"
            self.connection_file = str(self._box.connection_file)
            self.ip = str(self._box.ipc_prefix)
        return await super()._async_pre_start_kernel(**kw)

    pre_start_kernel = _async_pre_start_kernel  # the asynchronous manager's names for them

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw) -> None:
        """bubblewrap itself starts with nothing of the grader's environment: its processes are
        visible in the box (/proc/1), the kernel gets its own environment with --setenv."""
        if self._box is not None:
            kw["env"] = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        await super()._async_launch_kernel(kernel_cmd, **kw)

    _launch_kernel = _async_launch_kernel

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        cmd = super().format_kernel_cmd(extra_arguments)
        if self._box is None:
            return cmd
        return self._box.command(cmd, kernel_environment(self.kernel_spec.env))

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart:
            self._close_box()

    cleanup_resources = _async_cleanup_resources

    def _close_box(self) -> None:
        if self._box is not None:
            self._box.close()
            self._box = None


if __name__ == "__main__":
    main(sys.argv[1:])
