"""The one kind of process a grading kernel may start: the GPU assembler inside Triton's wheel.

Lesson 11's tests compile the learner's Triton kernels for a GPU (attention_ref.flash.compiler):
Triton lowers a kernel to PTX in the kernel's own process, then runs ``ptxas`` (for sm_80) or
``ptxas-blackwell`` (for sm_90 and later), both shipped in ``triton/backends/nvidia/bin/``, to
assemble the PTX and report registers and spills. The sandbox's audit hook refuses every other
process; this module says whether a process start is exactly such a call:

* the program is one of those two files of the installed Triton, by real path (a variable such as
  ``TRITON_PTXAS_PATH`` set by a submission cannot point it at another program);
* every argument is one of the flags Triton passes, a GPU name, or a file; the files (the PTX in,
  the cubin out) must then pass the hook's own check for writing, so ptxas can touch nothing
  the kernel itself could not.

The tools are found without importing Triton (importing it decides, once per process, whether
kernels are interpreted: attention_ref.flash.runtime).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re

TOOLS = ("ptxas", "ptxas-blackwell")
_FLAGS = {"-v", "-lineinfo", "-suppress-debug-info", "-g", "--fmad=false", "--version"}
_FLAGS |= {"--regAllocOptLevel=2"}
_WITH_VALUE = {"--opt-level": re.compile(r"[0-3]"), "-o": None}  # None: the value is a file
_GPU_NAME = re.compile(r"--gpu-name=sm_\d{2,3}a?")


@functools.cache
def bundled_tools() -> frozenset[str]:
    """Real paths of the assemblers in the installed Triton's wheel (empty: no Triton)."""
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return frozenset()
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    folder = os.path.join(spec.submodule_search_locations[0], "backends", "nvidia", "bin")
    found = (os.path.realpath(os.path.join(folder, tool)) for tool in TOOLS)
    return frozenset(path for path in found if os.path.isfile(path))


def _argv(event: str, args: tuple) -> tuple[str | None, list[str]] | None:
    """(program, argv) of a process-start audit event; None for an event of another shape."""
    if event == "subprocess.Popen" and len(args) >= 3:
        executable, argv, cwd = args[0], args[1], args[2]
        if cwd is not None or isinstance(argv, (str, bytes)):
            return None  # a shell string or another folder: not how Triton calls ptxas
        argv = [os.fsdecode(a) for a in argv]
        return (os.fsdecode(executable) if executable is not None else None), argv
    if event == "os.posix_spawn" and len(args) >= 2:
        return os.fsdecode(args[0]), [os.fsdecode(a) for a in args[1]]
    return None


def assembler_files(event: str, args: tuple) -> list[str] | None:
    """The files of a permitted assembler call (for the hook to check as writes), or None when
    ``event`` starts anything else."""
    parsed = _argv(event, args)
    if parsed is None or not parsed[1]:
        return None
    program, argv = parsed
    tools = bundled_tools()
    if os.path.realpath(argv[0]) not in tools or (
        program is not None and os.path.realpath(program) not in tools
    ):
        return None
    files, rest = [], argv[1:]
    while rest:
        arg = rest.pop(0)
        if arg in _WITH_VALUE:
            if not rest:
                return None
            value, pattern = rest.pop(0), _WITH_VALUE[arg]
            if pattern is None:
                files.append(value)
            elif not pattern.fullmatch(value):
                return None
        elif arg in _FLAGS or _GPU_NAME.fullmatch(arg):
            continue
        elif arg.startswith("-"):
            return None  # a flag Triton does not pass
        else:
            files.append(arg)
    return files
