"""Lesson 11's kernels compiled for a GPU on any machine, by Triton's own compiler (no GPU needed).

Triton's interpreter (``TRITON_INTERPRET=1``, what lesson 11 runs on a CPU) executes a kernel as
Python with NumPy: it accepts code that the compiler, which turns the same kernel into GPU code,
refuses (``break``, ``print``, a NumPy call on a block, ``int()`` of a value only the GPU knows).
The compiler itself needs no GPU: given a target (``GPUTarget("cuda", 90, 32)``: an H100) it lowers
a kernel to Triton's IRs, LLVM IR and PTX in this process, and the ``ptxas`` that ships inside
Triton's wheel assembles the PTX and reports what the kernel needs per thread (``ptxas -v``):
registers, spills, stack.

What is compiled is what a GPU would run: each launch the tests made, with its specialization as
Triton's JIT computes it (attention_ref.flash.launches: dtypes, ``tl.constexpr`` values, the
``tt.divisibility=16`` a launch notes on 16-byte aligned pointers and on integers divisible by 16).
:func:`expect_compiles` runs the compiler's front end (Python to Triton's IR, where it refuses what
it cannot compile) on every such launch, for each GPU of :data:`ARCHS`, and builds the largest of
them (and any sizes a GPU run adds) the whole way to machine code, checking its shared memory
against each GPU's limit: a kernel that needs more cannot be launched there.

compile_kernel(kernel, types, constants, arch)   one kernel, as written, for one GPU: a Build
compile_launch(kernel, launch, arch)             one launch's specialization, to machine code
expect_compiles(kernel, name)                    a test: every launch of it compiles, or it fails
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
import os
import re
import resource
import sys
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path

import triton
from triton import knobs
from triton._C.libtriton import ir
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.compiler import make_backend
from triton.compiler.errors import CompilationError
from triton.runtime.jit import JITFunction

from attention_ref.flash import launches as flash_launches

try:
    from triton.runtime.interpreter import InterpretedFunction
except ImportError:  # pragma: no cover -- every Triton 3.x has it
    InterpretedFunction = ()

# The GPUs lesson 11's kernels must build for: Ampere, Hopper, and Blackwell's data-centre and
# desktop chips (compute capability 10.0 and 12.0), each with its largest shared memory per
# program (thread block) in bytes: 163, 227, 227 and 99 KiB (the CUDA C++ Programming Guide's
# table of technical specifications per compute capability; a launch asking for more fails with
# Triton's OutOfResources).
ARCHS = {"sm_80": 80, "sm_90": 90, "sm_100": 100, "sm_120": 120}
GPU_NAMES = {"sm_80": "A100", "sm_90": "H100", "sm_100": "B200", "sm_120": "RTX 5090"}
SHARED_LIMITS = {"sm_80": 166_912, "sm_90": 232_448, "sm_100": 232_448, "sm_120": 101_376}
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

    def __init__(self, substitute=None):
        self.made: dict[int, JITFunction] = {}
        self.keep: list = []  # the converted objects, so that their ids stay theirs
        self.substitute = substitute or {}  # id(a notebook's helper) -> the function in its place

    def __call__(self, kernel):
        kernel = self.substitute.get(id(kernel), kernel)
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
        copy.__annotations__ = dict(fn.__annotations__)  # tl.constexpr: what a launch binds
        made = JITFunction(copy, **kernel.kwargs)
        made.source_function = fn  # where errors point: the notebook's own cell
        self.made[id(kernel)] = made
        for name in _names(fn.__code__):
            if isinstance(scope.get(name), (InterpretedFunction, JITFunction)):
                scope[name] = self(scope[name])
        return made

    def constant(self, value):
        """A tl.constexpr value as the compiler takes it: a helper passed as one, converted."""
        return self(value) if isinstance(value, (InterpretedFunction, JITFunction)) else value


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


_VIEW = {"depth": 0}  # compiles in progress (mutated in place): the view is set up once


@contextlib.contextmanager
def _compiler_view():
    """triton.language as the compiler expects it, for the duration of a compile (or of several:
    nested, only the outermost swaps)."""
    if _VIEW["depth"]:
        _VIEW["depth"] += 1
        try:
            yield
        finally:
            _VIEW["depth"] -= 1
        return
    changed = []
    for (owner, name), value in _PRISTINE.items():
        now = vars(owner).get(name, _ABSENT)
        value = _compilable(value)
        if now is not value:
            changed.append((owner, name, now))
            setattr(owner, name, value)
    _VIEW["depth"] += 1
    try:
        yield
    finally:
        _VIEW["depth"] -= 1
        for owner, name, now in reversed(changed):
            if now is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, now)


@dataclass(frozen=True)
class Build:
    """What the compiler made of one kernel for one GPU."""

    kernel: str
    arch: str  # "sm_80", "sm_90", "sm_100", "sm_120"
    registers: int  # per thread (ptxas -v)
    spill_stores: int  # bytes per thread written to local memory because registers ran out
    spill_loads: int
    stack: int  # bytes of stack frame per thread
    shared: int  # bytes of shared memory per program (Triton's allocation)
    num_warps: int
    ptx_lines: int
    ptxas: str  # ptxas's own report
    settings: str = ""  # what it was compiled for, e.g. "fp16, D=64, BLOCK_Q=64, BLOCK_K=64"
    seconds: float = 0.0  # CPU seconds the compile took (ptxas included)
    num_stages: int = 0  # the software-pipelining depth asked for (Triton's default: 3)
    async_copies: int = 0  # cp.async instructions in the PTX: loads pipelined into shared memory
    divisibility: int = 0  # arguments compiled with tt.divisibility=16, as a launch notes them

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads

    @property
    def shared_limit(self) -> int:
        return SHARED_LIMITS.get(self.arch, 0)

    @property
    def fits(self) -> bool:
        """Whether a GPU of this arch can launch it: its shared memory is within the limit."""
        return self.shared <= self.shared_limit

    def line(self) -> str:
        return (
            f"{self.kernel} for {self.arch} ({GPU_NAMES.get(self.arch, self.arch)}; "
            f"{self.settings}): {self.registers} registers per thread, {self.spills} bytes of "
            f"spills, {self.shared:,} of {self.shared_limit:,} bytes of shared memory, "
            f"{self.num_warps} warps ({self.ptx_lines:,} lines of PTX)"
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
# Reports of compiles that passed, kept across processes, by the source of a kernel and of every
# function it calls, the launch, the GPU and Triton's version: in the Python environment's own
# folder. Every process reads them; only one whose environment has KEEP_BUILDS=1 writes them (the
# reference tests, make bench, the grading chain's run of the solved lesson). The grading sandbox
# drops that variable and mounts the environment read-only: a graded notebook finds the reports
# trusted runs made, and writes none (an attempt would be reported as a refused write).
CACHE = Path(sys.prefix) / "var" / "attention_ref" / "triton-builds"
KEEP_BUILDS = "ATTENTION_REF_KEEP_BUILDS"
_CHECK = 2  # what a report means: a new value when that changes
_FRONT_ENDS: dict[tuple, None] = {}  # launches whose front end passed, by source and settings
# How float32 blocks are multiplied where the course compiles its kernels for a GPU: IEEE float32
# unless the variable says otherwise (attention_ref.flash.runtime sets it so on a GPU machine).
_PRECISION = "TRITON_F32_DEFAULT"


def _options(options: dict) -> dict:
    """A launch's options, with what a GPU run of the course adds."""
    return {
        "enable_fp_fusion": True,  # Triton 3.9's default for a launch
        "default_dot_input_precision": os.environ.get(_PRECISION) or "ieee",
        **options,
    }


def compile_kernel(
    kernel, types_: tuple, constants: tuple, arch: str = "sm_90", cache: Path | None = CACHE
) -> Build:
    """Compile ``kernel`` as written for ``arch`` ("sm_80", ...): its first parameters have the
    Triton types ``types_`` ("*fp16", "i32", "fp32", ...), the others (its ``tl.constexpr``
    ones) the values ``constants``, in order, and nothing is noted of their values (a launch
    would add ``tt.divisibility``: :func:`compile_launch`). Raises
    :class:`triton.compiler.errors.CompilationError` (or the compiler's other errors) where the
    compiler refuses the kernel.

    Each kernel is compiled once per process. ``cache``, a folder (default :data:`CACHE`), keeps
    the reports of kernels that compiled across processes too: a report is found again only for
    the same source of the kernel and every function it calls, the same settings and the same
    Triton; where the folder cannot be written (the grading sandbox), nothing is kept."""
    _known(arch)
    converter = _Converter()
    with _compiler_view():
        jit = converter(kernel)
        signature, constexprs = _signature(jit, types_, constants)
        key = (jit.cache_key, tuple(signature.items()), tuple(constexprs.items()), arch)
        if key not in _BUILDS:
            found = _cached(key, cache)
            _BUILDS[key] = found or _build(jit, signature, constexprs, {}, {}, arch)
            if found is None:
                _keep(key, cache, dataclasses.asdict(_BUILDS[key]))
    return _BUILDS[key]


def _known(arch: str) -> None:
    if arch not in ARCHS:
        raise ValueError(f"arch {arch!r}: lesson 11 compiles for {', '.join(ARCHS)}")


def _launch_key(jit, launch, arch: str, converter) -> tuple:
    constants = tuple(
        (k, getattr(converter.constant(v), "cache_key", v)) for k, v in launch.constants
    )
    precision = os.environ.get(_PRECISION) or "ieee"
    return (jit.cache_key, launch.args, constants, arch, precision)


def compile_launch(
    kernel, launch, arch: str = "sm_90", cache: Path | None = CACHE, substitute=None,
    converter=None,
) -> Build:  # fmt: skip
    """Compile ``kernel`` for ``arch`` as a GPU compiles it for ``launch`` (a
    attention_ref.flash.launches.Launch: the specialization a real launch computes, the
    ``tt.divisibility`` attributes included), the whole way to machine code. ``substitute``:
    {id(a helper): the function to compile in its place}; ``converter``: a _Converter made with
    it, to share between compiles. Cached as :func:`compile_kernel`."""
    _known(arch)
    converter = converter or _Converter(substitute)
    with _compiler_view():
        jit = converter(kernel)
        key = (*_launch_key(jit, launch, arch, converter), "build")
        if key not in _BUILDS:
            found = _cached(key, cache)
            if found is None:
                spec = flash_launches.specialize(jit, launch, ARCHS[arch], converter.constant)
                found = _build(jit, *spec[:3], dict(spec[3].__dict__), arch)
                _keep(key, cache, dataclasses.asdict(found))
            _BUILDS[key] = found
    return _BUILDS[key]


# The front end reads of the target only the options that parse_options sets by capability
# (which FP8 types it takes) and, in make_ttir, whether to rewrite tensor descriptors (below
# sm_90): an sm_100 or sm_120 front end is sm_90's, so it runs once for the three.
FRONT_END_OF = {"sm_80": "sm_80", "sm_90": "sm_90", "sm_100": "sm_90", "sm_120": "sm_90"}


def front_end(
    kernel, launch, arch: str = "sm_90", substitute=None, cache=CACHE, converter=None
) -> None:
    """Run the compiler's front end (the kernel's Python to Triton's IR, and its first passes)
    on ``launch`` for ``arch``: where it refuses what it cannot compile. Raises its error."""
    _known(arch)
    converter = converter or _Converter(substitute)
    with _compiler_view():
        jit = converter(kernel)
        key = (*_launch_key(jit, launch, arch, converter), "front end")
        if key in _FRONT_ENDS or key[:-1] + ("build",) in _BUILDS or _cached(key, cache, dict):
            return
        _ttir(jit, launch, arch, converter)
        _FRONT_ENDS[key] = None
        _keep(key, cache, {"front end": "accepted"})


def _ttir(jit, launch, arch: str, converter) -> str:
    """Triton's IR of ``launch`` of ``jit`` for ``arch``, after the front end's passes."""
    signature, constexprs, attrs, options = flash_launches.specialize(
        jit, launch, ARCHS[arch], converter.constant
    )
    target = GPUTarget("cuda", ARCHS[arch], 32)
    backend = make_backend(target)
    options = backend.parse_options(_options(dict(options.__dict__)))
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    source = ASTSource(fn=jit, signature=signature, constexprs=constexprs, attrs=attrs)
    module = source.make_ir(
        target, options, backend.get_codegen_implementation(options), backend.get_module_map(),
        context,
    )  # fmt: skip
    stages: dict = {}
    backend.add_stages(stages, options, source.language)
    return str(stages["ttir"](module, {}))


def _cache_file(key: tuple, cache: Path) -> Path:
    schema = tuple(f.name for f in dataclasses.fields(Build))  # a report of another shape: anew
    digest = hashlib.sha256(repr((key, triton.__version__, schema, _CHECK)).encode()).hexdigest()
    return Path(cache) / f"{key[0][:8]}-{digest[:32]}.json"


def _cached(key: tuple, cache: Path | None, kind=Build):
    """The report kept for ``key``, or None (none kept, or unreadable: compile again)."""
    if cache is None:
        return None
    try:
        found = json.loads(_cache_file(key, cache).read_text(encoding="utf-8"))
        return kind(**found) if kind is Build else found
    except (OSError, ValueError, TypeError):
        return None


def _keep(key: tuple, cache: Path | None, report: dict) -> None:
    """Keep a report in ``cache``, where this process may (:data:`KEEP_BUILDS`)."""
    if cache is None or os.environ.get(KEEP_BUILDS) != "1":
        return
    target = _cache_file(key, cache)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.part")
        partial.write_text(json.dumps(report), encoding="utf-8")
        os.replace(partial, target)  # whole or not at all, for a process reading it meanwhile
    except OSError:  # a read-only folder, a full disk: the report is only a cache
        return


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


def _settings(jit, signature: dict, constexprs: dict, options: dict) -> str:
    """'fp16, D=64, BLOCK_Q=64, BLOCK_K=64' (and warps and stages where they were asked for)."""
    names = list(jit.arg_names)
    pointers = [t.lstrip("*") for t in signature.values() if str(t).startswith("*")]
    values = []
    for key, value in constexprs.items():
        name = names[key[0]] if isinstance(key, tuple) else key
        values.append(f"{name}={getattr(value, '__name__', value)}")
    values += [f"{k}={options[k]}" for k in ("num_warps", "num_stages") if k in options]
    return ", ".join(pointers[:1] + values)


def _build(jit, signature: dict, constexprs: dict, attrs: dict, options: dict, arch: str) -> Build:
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
                    ASTSource(fn=jit, signature=signature, constexprs=constexprs, attrs=attrs),
                    target=GPUTarget("cuda", ARCHS[arch], 32),
                    options=_options(options),
                )
    return Build(
        kernel=jit.__name__,
        arch=arch,
        shared=int(compiled.metadata.shared),
        num_warps=int(compiled.metadata.num_warps),
        ptx_lines=compiled.asm["ptx"].count("\n"),
        ptxas=log.getvalue().strip(),
        settings=_settings(jit, signature, constexprs, _asked(options)),
        seconds=round(_cpu_seconds() - started, 3),
        num_stages=int(compiled.metadata.num_stages),
        async_copies=compiled.asm["ptx"].count("cp.async"),
        divisibility=sum(1 for v in attrs.values() if ["tt.divisibility", 16] in v),
        **parse_ptxas(log.getvalue()),
    )


def _asked(options: dict) -> dict:
    """The launch options a launch set away from Triton's defaults (4 warps, 3 stages)."""
    defaults = {"num_warps": 4, "num_stages": 3}
    return {k: v for k, v in options.items() if k in defaults and v != defaults[k]}


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


def _source_of(error: CompilationError, kernel, extra=()) -> tuple:
    """(the kernel or helper, its Python function, 'line N of its cell (F)') whose source the
    error quotes; (None, None, '') where it is none of them."""
    node = getattr(error, "node", None)
    if node is None or not hasattr(node, "lineno"):
        return None, None, ""
    for item, fn in _functions(kernel, extra):
        try:
            lines, start = inspect.getsourcelines(fn)
        except (OSError, TypeError):
            continue
        first_def = next(i for i, line in enumerate(lines) if line.lstrip().startswith("def "))
        if error.src and lines[first_def].strip() in error.src.splitlines()[0]:
            where = Path(inspect.getsourcefile(fn) or "").name
            cell = "its cell" if "ipykernel" in str(inspect.getsourcefile(fn)) else where
            return item, fn, f"line {start + first_def + node.lineno - 1} of {cell} ({fn.__name__})"
    return None, None, ""


def _functions(kernel, extra=()) -> list[tuple]:
    """(object, Python function) of ``kernel``, of ``extra`` (helpers passed as constants) and
    of the notebook's helpers they call."""
    found, seen, todo = [], set(), [kernel, *extra]
    while todo:
        item = todo.pop()
        fn = getattr(item, "fn", item)
        if not isinstance(fn, types.FunctionType) or fn in seen:
            continue
        seen.add(fn)
        found.append((item, fn))
        todo += [fn.__globals__.get(n) for n in _names(fn.__code__)]
    return [(item, f) for item, f in found if not f.__module__.startswith("triton")]


def explain(error: BaseException, kernel, name: str, arch: str, extra=()) -> str:
    """The compiler's refusal, as a learner reads it: where, the compiler's words, the code."""
    inner = _innermost(error)
    head = (
        f"Triton's compiler refuses {name} for {arch} ({GPU_NAMES[arch]}): it cannot run on a "
        "GPU, whatever the interpreter does (it accepts more than the compiler)."
    )
    if not isinstance(inner, CompilationError):
        return f"{head}\nThe compiler says: {type(inner).__name__}: {str(inner).strip()}"
    where = _source_of(inner, kernel, extra)[2]
    words = inner.error_message or type(inner).__name__
    excerpt = inner.message.splitlines()[1:]  # after "at LINE:COLUMN:", the code and a caret
    if inner.error_message and excerpt and excerpt[-1] == inner.error_message:
        excerpt = excerpt[:-1]
    return f"{head}\nThe compiler says, at {where or 'the line marked'}: {words}\n" + "\n".join(
        excerpt[-6:]
    )


# ---- the test -----------------------------------------------------------------------------------


def _largest(launches: list) -> object:
    """The launch whose blocks are largest: tl.constexpr sizes multiplied, times the widest
    dtype (what a kernel's registers and shared memory grow with)."""

    def size(launch) -> int:
        product = max((a.dtype.itemsize for a in launch.args if hasattr(a, "dtype")), default=1)
        for _, value in launch.constants:
            if isinstance(value, int) and not isinstance(value, bool):
                product *= max(value, 1)
        return product

    return max(launches, key=size)


# Notebook helpers whose own compile check failed, by id: only these may be replaced in the
# checks of the kernels that call them (mutated in place, never rebound)
_REFUSED: dict[int, object] = {}


def note_refused(helper) -> None:
    """``helper``'s own test found that the compiler refuses it: the kernels that call it are
    compiled with the course's helper in its place (:func:`expect_compiles`' ``stand_ins``)."""
    _REFUSED[id(helper)] = helper


class _Attempt:
    """Compiles that may put the course's own helpers in place of the notebook's ones of the same
    names (``stand_ins``: {name: helper}) when the compiler refuses the kernel, for a helper whose
    own check the compiler failed (:func:`note_refused`): if the kernel then compiles, the refusal
    was the helper's, which its own test charges for. A helper that passed its own check is never
    replaced: what the compiler refuses only inside the kernel is the kernel's to answer for."""

    def __init__(self, kernel, name: str, stand_ins: dict, extra: tuple):
        self.kernel, self.name, self.stand_ins, self.extra = kernel, name, stand_ins, extra
        self.substitute: dict = {}
        self.notes: list[str] = []
        self.converters: dict = {}

    def converter(self) -> _Converter:
        """One converter per set of replaced helpers: each kernel converted (and its source
        hashed) once per check."""
        key = frozenset(self.substitute)
        if key not in self.converters:
            self.converters[key] = _Converter(dict(self.substitute))
        return self.converters[key]

    def __call__(self, compile_one, arch: str):
        try:
            return compile_one(self.substitute)
        except TypeError as error:
            raise AssertionError(f"{self.name}: {error}") from None
        except Exception as error:  # noqa: BLE001 -- any refusal of the compiler fails
            helpers = self._helpers()
            if not helpers:
                raise AssertionError(
                    explain(error, self.kernel, self.name, arch, self.extra)
                ) from None
            refusal = error
        self.substitute.update({id(item): self.stand_ins[fn.__name__] for item, fn in helpers})
        try:
            built = compile_one(self.substitute)
        except Exception:  # noqa: BLE001 -- the kernel's own refusal: the first error says where
            raise AssertionError(
                explain(refusal, self.kernel, self.name, arch, self.extra)
            ) from None
        for _, fn in helpers:
            self.notes.append(
                f"{fn.__name__} does not compile (its own test says why): the compiler's front end "
                f"took {self.name} with the course's {fn.__name__} in its place; its build for the "
                f"GPUs waits for a {fn.__name__} that compiles"
            )
        return built

    def _helpers(self) -> list[tuple]:
        """The notebook's helpers this kernel calls that the course has its own of, not yet
        replaced."""
        own = getattr(self.kernel, "fn", None)
        return [
            (item, fn)
            for item, fn in _functions(self.kernel)
            if fn is not own
            and fn.__name__ in self.stand_ins
            and id(item) not in self.substitute
            and _REFUSED.get(id(item)) is item
        ]


def expect_compiles(
    kernel, name: str, *, launches=None, extra=(), archs=tuple(ARCHS), show=True, cache=CACHE,
    stand_ins=None, helpers=(),
) -> list[Build]:  # fmt: skip
    """A test: ``kernel`` compiles for every GPU of ``archs`` as each of ``launches`` (default:
    every launch of it the tests made, attention_ref.flash.launches) specialized it: the
    compiler's front end for each, and the whole way to machine code, its shared memory within
    each GPU's limit, each of ``extra`` (a GPU run's launches) or, without them, the largest of
    ``launches`` (the front end is where a refusal comes from; a build, where a resource does not
    fit, which a GPU run's sizes show better than the tests' small ones). Prints
    what the compiler made of it; fails with the compiler's message and the line it refused.
    ``stand_ins``: {name: the course's helper}, compiled in place of a notebook helper of that
    name that the compiler refuses (its own test charges for it); ``helpers``: helpers passed to
    the kernel as constants, whose lines a refusal may name."""
    launches = flash_launches.launches_of(kernel) if launches is None else list(launches)
    if not launches:
        raise AssertionError(
            f"{name} has not been launched in this process: the check compiles it as the tests "
            "launched it, so run its test from the start"
        )
    attempt = _Attempt(kernel, name, stand_ins or {}, tuple(helpers))
    front_ends = sorted({FRONT_END_OF[arch] for arch in archs}, key=list(ARCHS).index)
    with _compiler_view():  # once for every compile of the check
        for launch in launches:
            for arch in front_ends:
                attempt(
                    lambda sub, at=launch, to=arch: front_end(
                        kernel, at, to, sub, cache, attempt.converter()
                    ),
                    arch,
                )
        builds = [
            attempt(
                lambda sub, at=launch, to=arch: compile_launch(
                    kernel, at, to, cache, sub, attempt.converter()
                ),
                arch,
            )
            for launch in list(extra) or [_largest(launches)]
            for arch in archs
            if not attempt.substitute  # with another helper in it, a build says nothing of yours
        ]
    _expect_fits(name, builds)
    if show:
        for note in attempt.notes:
            print(note)
        count = f"{len(launches)} specialization{'s' if len(launches) > 1 else ''}"
        built = "; built to machine code:" if builds else ""
        print(f"{name}: the compiler's front end took the {count} the tests launched, for "
              f"{', '.join(archs)}{built}")  # fmt: skip
        for build in builds:
            print("  " + build.line())
    return builds


def _expect_fits(name: str, builds: list[Build]) -> None:
    for build in builds:
        if not build.fits:
            raise AssertionError(
                f"{name} compiles for {build.arch} ({GPU_NAMES[build.arch]}; {build.settings}) "
                f"but needs {build.shared:,} bytes of shared memory per program, more than the "
                f"{build.shared_limit:,} a program may have there: it could not be launched. "
                "Smaller blocks, or fewer pipeline stages (num_stages), need less."
            )


def builds_table(builds: list[Build]) -> str:
    """Registers, spills and shared memory (with the GPU's limit) of several builds, a row each."""
    columns = ("registers", "spills", "shared", "of limit", "warps", "stages", "cp.async")
    head = f"{'kernel':31s} {'GPU':7s} " + " ".join(f"{c:>9s}" for c in columns) + "  settings"
    rows = [head, "-" * len(head)]
    for b in builds:
        rows.append(
            f"{b.kernel:31s} {b.arch:7s} {b.registers:9d} {b.spills:9d} {b.shared:9,d} "
            f"{b.shared / b.shared_limit:9.0%} {b.num_warps:9d} {b.num_stages:9d} "
            f"{b.async_copies:9d}  {b.settings}"
        )
    return "\n".join(rows)
