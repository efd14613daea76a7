"""Lesson 11's kernels compiled for a GPU on any machine, by Triton's own compiler (no GPU needed).

Triton's interpreter (``TRITON_INTERPRET=1``, what lesson 11 runs on a CPU) executes a kernel as
Python with NumPy: it accepts code that the compiler, which turns the same kernel into GPU code,
refuses (``break``, ``print``, a NumPy call on a block). The compiler itself needs no GPU: given a
target (``GPUTarget("cuda", 90, 32)``: an H100) it lowers a kernel to Triton's IRs, LLVM IR and PTX
in this process, and the ``ptxas`` that ships inside Triton's wheel assembles the PTX into a
cubin and reports what the kernel needs per thread (``ptxas -v``): registers, spills, stack.

compile_kernel(kernel, types, constants, arch)   one kernel for one GPU: a :class:`Build`
expect_compiles(kernel, name, types, constants)  a test: compiles for sm_80 and sm_90, or fails
                                                 with the compiler's message and the line
builds_table(builds)                             registers, spills, shared memory, as text

In a process where kernels are interpreted, ``@triton.jit`` made each kernel (and Triton's own
library of ``@triton.jit`` functions, ``tl.max`` among them) an interpreted function. The compiler
needs compiled ones: :func:`_compiler_view` rebuilds them from their Python source and, for the
time of one compile, puts back everything of ``triton.language`` as it was when this module was
imported (the interpreter leaves some of it patched after a run, in Triton 3.9).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import inspect
import io
import json
import re
import resource
import sys
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path

import triton
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.errors import CompilationError
from triton.runtime.jit import JITFunction

try:
    from triton.runtime.interpreter import InterpretedFunction
except ImportError:  # pragma: no cover -- every Triton 3.x has it
    InterpretedFunction = ()

ARCHS = {"sm_80": 80, "sm_90": 90}  # A100 and H100: what lesson 11's kernels must build for
GPU_NAMES = {"sm_80": "A100", "sm_90": "H100"}
# held from import time: a notebook that rebinds triton.compile changes nothing here
_COMPILE = triton.compile


def _language_state() -> dict:
    """{(owner, name): value} of everything in triton.language's modules and classes."""
    found = {}
    for module_name, module in list(sys.modules.items()):
        if not module_name.startswith("triton.language") or module is None:
            continue
        for name, value in list(vars(module).items()):
            found[module, name] = value
            if isinstance(value, type) and value.__module__.startswith("triton.language"):
                for attr, member in list(vars(value).items()):
                    found[value, attr] = member
    return found


_PRISTINE = _language_state()  # before any kernel ran in the interpreter
_ABSENT = object()


class _Converter:
    """Interpreted functions -> compilable JITFunctions, with their globals converted too."""

    def __init__(self):
        self.made: dict[int, JITFunction] = {}
        self.keep: list = []  # the converted objects, so that their ids stay theirs

    def __call__(self, kernel):
        if isinstance(kernel, JITFunction):
            return kernel
        if not isinstance(kernel, InterpretedFunction):
            raise TypeError(f"not a Triton kernel: {type(kernel).__name__}")
        if id(kernel) not in self.made:
            self.keep.append(kernel)
            fn = kernel.fn
            if fn.__module__.startswith("triton"):  # Triton's own: its module is converted whole
                self.made[id(kernel)] = JITFunction(fn, **kernel.kwargs)
            else:
                self.made[id(kernel)] = self._own(kernel)
        return self.made[id(kernel)]

    def _own(self, kernel) -> JITFunction:
        """A notebook's function: a copy that sees compilable versions of the helpers it names."""
        fn = kernel.fn
        scope = dict(fn.__globals__)
        copy = types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
        copy.__module__, copy.__qualname__ = fn.__module__, fn.__qualname__
        copy.__kwdefaults__ = fn.__kwdefaults__
        made = JITFunction(copy, **kernel.kwargs)
        made.source_function = fn  # where errors point: the notebook's own cell
        self.made[id(kernel)] = made
        for name in _names(fn.__code__):
            if isinstance(scope.get(name), InterpretedFunction):
                scope[name] = self(scope[name])
        return made


def _names(code: types.CodeType) -> set[str]:
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _names(const)
    return found


_LIBRARY = _Converter()  # Triton's own functions never change: converted once per process


def _compilable(value):
    """What a compiling process would hold in place of ``value``: Triton's ``@jit`` functions
    compiled, and a tensor method that forwards to one (``x.max(1)``) that function itself."""
    if isinstance(value, InterpretedFunction):
        return _LIBRARY(value)
    if isinstance(value, types.FunctionType) and value.__qualname__.endswith(
        "_tensor_member_fn.<locals>.wrapper"
    ):
        for cell in value.__closure__ or ():
            if isinstance(cell.cell_contents, InterpretedFunction):
                return _LIBRARY(cell.cell_contents)
    return value


@contextlib.contextmanager
def _compiler_view():
    """triton.language as the compiler expects it, for the duration of a compile."""
    changed = []
    for (owner, name), value in _PRISTINE.items():
        now = vars(owner).get(name, _ABSENT)
        value = _compilable(value)
        if now is not value:
            changed.append((owner, name, now))
            setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, now in reversed(changed):
            if now is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, now)


@dataclass(frozen=True)
class Build:
    """What the compiler made of one kernel for one GPU."""

    kernel: str
    arch: str  # "sm_80", "sm_90"
    registers: int  # per thread (ptxas -v)
    spill_stores: int  # bytes per thread written to local memory because registers ran out
    spill_loads: int
    stack: int  # bytes of stack frame per thread
    shared: int  # bytes of shared memory per program (Triton's allocation)
    num_warps: int
    ptx_lines: int
    ptxas: str  # ptxas's own report
    settings: str = ""  # the tl.constexpr values it was compiled with, e.g. "D=64, BLOCK=64"
    seconds: float = 0.0  # CPU seconds the compile took (ptxas included)

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads

    def line(self) -> str:
        return (
            f"{self.kernel} for {self.arch} ({GPU_NAMES.get(self.arch, self.arch)}; "
            f"{self.settings}): {self.registers} registers per thread, {self.spills} bytes of "
            f"spills, {self.shared:,} bytes of shared memory, {self.num_warps} warps "
            f"({self.ptx_lines:,} lines of PTX)"
        )


_PTXAS = {
    "registers": re.compile(r"Used (\d+) registers"),
    "spill_stores": re.compile(r"(\d+) bytes spill stores"),
    "spill_loads": re.compile(r"(\d+) bytes spill loads"),
    "stack": re.compile(r"(\d+) bytes stack frame"),
}


def parse_ptxas(log: str) -> dict[str, int]:
    """registers, spill_stores, spill_loads, stack from ``ptxas -v``'s report (0 when absent)."""
    found = {}
    for key, pattern in _PTXAS.items():
        match = pattern.search(log)
        found[key] = int(match.group(1)) if match else 0
    if not _PTXAS["registers"].search(log):
        raise ValueError(f"no register count in ptxas's report:\n{log}")
    return found


_BUILDS: dict[tuple, Build] = {}  # this process's compiles, by kernel source and settings


def compile_kernel(
    kernel, types_: tuple, constants: tuple, arch: str = "sm_90", cache: Path | None = None
) -> Build:
    """Compile ``kernel`` for ``arch`` ("sm_80", "sm_90"): its first parameters have the Triton
    types ``types_`` ("*fp16", "i32", "fp32", ...), the others (its ``tl.constexpr`` ones) the
    values ``constants``, in order. Raises :class:`triton.compiler.errors.CompilationError` (or
    the compiler's other errors) where the compiler refuses the kernel.

    Each kernel is compiled once per process. ``cache``, a folder, keeps the reports of kernels
    that compiled across processes too (``make bench`` and the reference tests keep the
    reference kernels' there): a report is found again only for the same source of the kernel
    and every function it calls, the same settings and the same Triton."""
    if arch not in ARCHS:
        raise ValueError(f"arch {arch!r}: lesson 11 compiles for {', '.join(ARCHS)}")
    converter = _Converter()
    with _compiler_view():
        jit = converter(kernel)
        signature, constexprs = _signature(jit, types_, constants)
        key = (jit.cache_key, tuple(signature.items()), tuple(constexprs.items()), arch)
        if key not in _BUILDS:
            _BUILDS[key] = _cached(key, cache) or _build(jit, signature, constexprs, arch)
            _keep(key, cache, _BUILDS[key])
    return _BUILDS[key]


def _cache_file(key: tuple, cache: Path) -> Path:
    schema = tuple(f.name for f in dataclasses.fields(Build))  # a report of another shape: anew
    digest = hashlib.sha256(repr((key, triton.__version__, schema)).encode()).hexdigest()[:24]
    return Path(cache) / f"{key[0][:8]}-{digest}.json"


def _cached(key: tuple, cache: Path | None) -> Build | None:
    if cache is None or not _cache_file(key, cache).is_file():
        return None
    try:
        return Build(**json.loads(_cache_file(key, cache).read_text(encoding="utf-8")))
    except (ValueError, TypeError):
        return None  # unreadable: compile again


def _keep(key: tuple, cache: Path | None, build: Build) -> None:
    if cache is not None:
        Path(cache).mkdir(parents=True, exist_ok=True)
        _cache_file(key, cache).write_text(json.dumps(dataclasses.asdict(build)), encoding="utf-8")


def _signature(jit: JITFunction, types_: tuple, constants: tuple) -> tuple[dict, dict]:
    names = list(jit.arg_names)
    if len(names) != len(types_) + len(constants):
        raise TypeError(
            f"{jit.__name__} takes {len(names)} parameters ({', '.join(names)}); the launcher "
            f"passes {len(types_) + len(constants)}: keep the exercise's signature"
        )
    constexprs = dict(zip(names[len(types_) :], constants, strict=True))
    signature = dict(zip(names, types_, strict=False)) | {n: "constexpr" for n in constexprs}
    return signature, constexprs


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (ptxas)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _build(jit: JITFunction, signature: dict, constexprs: dict, arch: str) -> Build:
    log, started = io.StringIO(), _cpu_seconds()
    with knobs.nvidia.scope(), knobs.compilation.scope(), knobs.cache.scope():
        knobs.nvidia.dump_ptxas_log = True  # ptxas -v's report, printed by Triton: captured
        knobs.compilation.always_compile = True
        with tempfile.TemporaryDirectory(prefix="triton-compile-check-") as folder:
            # the compiler writes every stage to a cache folder: one of our own in the temporary
            # folder (writable in the grading sandbox, unlike ~/.triton), removed after the
            # compile (never read back: each compile is fresh, so that ptxas runs and reports)
            knobs.cache.dir = folder
            with contextlib.redirect_stdout(log):
                compiled = _COMPILE(
                    ASTSource(fn=jit, signature=signature, constexprs=constexprs),
                    target=GPUTarget("cuda", ARCHS[arch], 32),
                    options={"enable_fp_fusion": True},  # Triton 3.9's default for a launch
                )
    report = parse_ptxas(log.getvalue())
    return Build(
        kernel=jit.__name__,
        arch=arch,
        shared=int(compiled.metadata.shared),
        num_warps=int(compiled.metadata.num_warps),
        ptx_lines=compiled.asm["ptx"].count("\n"),
        ptxas=log.getvalue().strip(),
        settings=", ".join(f"{name}={value}" for name, value in constexprs.items()),
        seconds=round(_cpu_seconds() - started, 3),
        **report,
    )


# ---- what a learner reads when the compiler refuses -------------------------------------------


def _innermost(error: BaseException) -> BaseException:
    """The compiler's own error, under the ones that wrap it at each call of a helper."""
    seen = set()
    while id(error) not in seen:
        seen.add(id(error))
        inner = error.__cause__ or error.__context__
        if not isinstance(inner, CompilationError):
            break
        error = inner
    return error


def _where(error: CompilationError, kernel) -> str:
    """'line N of the cell that defines F' for the function whose source the error quotes."""
    node = getattr(error, "node", None)
    if node is None or not hasattr(node, "lineno"):
        return ""
    for fn in _functions(kernel):
        try:
            lines, start = inspect.getsourcelines(fn)
        except (OSError, TypeError):
            continue
        first_def = next(i for i, line in enumerate(lines) if line.lstrip().startswith("def "))
        if error.src and lines[first_def].strip() in error.src.splitlines()[0]:
            where = Path(inspect.getsourcefile(fn) or "").name
            cell = "its cell" if "ipykernel" in str(inspect.getsourcefile(fn)) else where
            return f"line {start + first_def + node.lineno - 1} of {cell} ({fn.__name__})"
    return ""


def _functions(kernel) -> list:
    """The Python functions of ``kernel`` and of the notebook's helpers it calls."""
    found, todo = [], [kernel]
    while todo:
        item = todo.pop()
        fn = getattr(item, "fn", item)
        if not isinstance(fn, types.FunctionType) or fn in found:
            continue
        found.append(fn)
        todo += [fn.__globals__.get(n) for n in _names(fn.__code__)]
    return [f for f in found if not f.__module__.startswith("triton")]


def explain(error: BaseException, kernel, name: str, arch: str) -> str:
    """The compiler's refusal, as a learner reads it: where, the compiler's words, the code."""
    inner = _innermost(error)
    head = (
        f"Triton's compiler refuses {name} for {arch} ({GPU_NAMES[arch]}): it cannot run on a "
        "GPU, whatever the interpreter does (it accepts more than the compiler)."
    )
    if not isinstance(inner, CompilationError):
        return f"{head}\nThe compiler says: {type(inner).__name__}: {str(inner).strip()}"
    where = _where(inner, kernel)
    words = inner.error_message or type(inner).__name__
    excerpt = inner.message.splitlines()[1:]  # after "at LINE:COLUMN:", the code and a caret
    if inner.error_message and excerpt and excerpt[-1] == inner.error_message:
        excerpt = excerpt[:-1]
    return f"{head}\nThe compiler says, at {where or 'the line marked'}: {words}\n" + "\n".join(
        excerpt[-6:]
    )


def expect_compiles(
    kernel, name: str, types_: tuple, constants: tuple, archs=tuple(ARCHS), show=True, cache=None
) -> list[Build]:
    """A test: ``kernel`` compiles for every GPU of ``archs`` (default: sm_80 and sm_90); print
    what the compiler made of it. Fails with the compiler's message and the line it refused.
    ``constants`` may differ by GPU: {arch: constants} (a kernel with a tl.constexpr switch is
    compiled with it off for one GPU and on for the other, so that both of its branches are)."""
    builds = []
    for arch in archs:
        values = constants[arch] if isinstance(constants, dict) else constants
        try:
            builds.append(compile_kernel(kernel, types_, values, arch, cache))
        except TypeError as error:
            raise AssertionError(f"{name}: {error}") from None
        except Exception as error:  # noqa: BLE001 -- any refusal of the compiler fails the test
            raise AssertionError(explain(error, kernel, name, arch)) from None
    if show:
        for build in builds:
            print(build.line())
    return builds


def builds_table(builds: list[Build]) -> str:
    """Registers, spills and shared memory of several builds, one row each."""
    columns = ("registers", "spills", "shared", "warps")
    head = f"{'kernel':32s} {'GPU':6s} " + " ".join(f"{c:>9s}" for c in columns) + "  settings"
    rows = [head, "-" * len(head)]
    for b in builds:
        rows.append(
            f"{b.kernel:32s} {b.arch:6s} {b.registers:9d} {b.spills:9d} {b.shared:9,d} "
            f"{b.num_warps:9d}  {b.settings}"
        )
    return "\n".join(rows)
