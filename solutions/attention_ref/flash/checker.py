"""Every launch of lesson 11's kernels, checked: races, bounds, and what each program read.

Triton's interpreter runs the programs of a grid one after the other, on memory it reads and
writes by raw address. So on its own it cannot show a race (a program that stores to a place
another program of the same launch reads or writes gives the same numbers, whatever the order on a
GPU would have been), and a load or store outside a tensor reads whatever lies there or corrupts
the process's heap. The course's launchers (attention_ref.flash, attention_ref.flash.backward) run
every kernel through :func:`launch`, which, where kernels are interpreted:

* copies each tensor argument into one block of memory with a wide unused gap before and after
  each (so that a pointer that runs past one tensor lands in a gap, never in another tensor), and
  copies the results back after the launch;
* records each load, store and atomic of every program: the addresses of the active lanes (those
  the mask lets through), where in the kernel's source it happened, which program made it;
* refuses a load or store outside the argument tensors before it happens (an AssertionError that
  names the line, the program, the tensor, how far out), so no byte is read or written there;
* gives the masked-off lanes of a load without ``other`` NaN (a GPU leaves them undefined; the
  interpreter's zeros would let a kernel rely on them);
* after the launch, refuses a race: a non-atomic store to an address that another program of the
  launch also stores to, loads or adds to; and a load of an address that another program adds to
  atomically (what it reads depends on the order the programs run in).

The record of the last launch stays for the tests that ask which blocks each program read
(:func:`last_record`, :func:`rows_read`). Every launch also goes into :func:`launched` (which
kernels ran, for a test of an autograd Function) and into attention_ref.flash.launches (what each
launch specialized: what the compile check builds).

The hooks are put on Triton's interpreter again before every launch (:func:`install`): a notebook
that restores the interpreter's own methods switches nothing off. Synchronisation other than
atomics (a lock built from atomic compare-and-swap) is not modelled: lesson 11 has none.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field

import numpy as np
import torch
import triton
from triton.runtime import interpreter

from attention_ref.flash import launches as flash_launches

LOAD, STORE, ATOMIC = 0, 1, 2
_KINDS = {LOAD: "loads", STORE: "stores to", ATOMIC: "adds to (atomically)"}
_HOOKED = ("create_masked_load", "create_masked_store", "create_atomic_rmw", "create_atomic_cas")
_HOOKED += ("create_atomic_load", "create_atomic_store")
_ALIGN = 128  # bytes: every tensor starts 128-byte aligned in the checked copy
_MIN_GAP = 1 << 16  # bytes of unused memory before and after each tensor, at least
_OWN_FILES = (os.path.dirname(triton.__file__), os.path.dirname(np.__file__), __file__)
# Mutated in place, never rebound (the grader's guard watches the library's module globals).
_STATE: dict = {"record": None, "last": None, "logs": [], "atomic": [0], "originals": {}}


def refusal(message: str) -> AssertionError:
    """The checker's AssertionError (a plain one, as every failed check of the course), marked so
    that it can be found again under the interpreter's wrappers."""
    error = AssertionError(message)
    error.memory_check = True
    return error


@dataclass
class Region:
    """One tensor argument as the checked launch lays it out: [start, end) in bytes."""

    name: str
    start: int
    end: int
    itemsize: int
    shape: tuple
    position: int  # the argument's place in the kernel's signature


@dataclass
class Access:
    """One load, store or atomic of one program: the byte addresses of its active lanes."""

    program: tuple
    kind: int
    addresses: np.ndarray
    regions: np.ndarray  # which Region each address lies in
    where: tuple  # (file, line, function) in the kernel's source


@dataclass
class Record:
    """What the programs of one launch did to memory."""

    kernel: str
    grid: tuple
    regions: list[Region]
    accesses: list[Access] = field(default_factory=list)


# ---- the hooks on Triton's interpreter ----------------------------------------------------------


def install() -> None:
    """Put the checking methods on Triton's interpreter (again): before every launch."""
    builder_class = interpreter.InterpreterBuilder
    for name in _HOOKED:
        hook = _HOOKS[name]
        current = vars(builder_class).get(name)
        if current is not hook:
            _STATE["originals"].setdefault(name, current)
            setattr(builder_class, name, hook)
    for builder in (interpreter.interpreter_builder, interpreter.interpreter_semantic.builder):
        for name in _HOOKED:
            vars(builder).pop(name, None)  # an instance attribute would hide the class's method


def _original(name: str):
    return _STATE["originals"][name]


def _masked_load(self, ptrs, mask, other, cache_policy, is_volatile):
    _note(LOAD if not _STATE["atomic"][0] else ATOMIC, ptrs, mask)
    if other is None and _STATE["record"] is not None:
        other = _undefined(ptrs)
    return _original("create_masked_load")(self, ptrs, mask, other, cache_policy, is_volatile)


def _undefined(ptrs):
    """What a masked-off lane of a load without ``other`` holds: on a GPU, nothing defined (the
    interpreter gives 0, which a kernel could come to rely on); in a checked launch, NaN for a
    float (0 * NaN is NaN: a value that should have weighed nothing shows up), 0 otherwise."""
    element = ptrs.get_element_ty()
    dtype = interpreter._get_np_dtype(element)
    fill = np.nan if np.issubdtype(dtype, np.floating) else 0
    return interpreter.TensorHandle(np.full(np.shape(ptrs.data), fill, dtype=dtype), element)


def _masked_store(self, ptrs, value, mask, cache_policy):
    _note(STORE if not _STATE["atomic"][0] else ATOMIC, ptrs, mask)
    return _original("create_masked_store")(self, ptrs, value, mask, cache_policy)


def _atomic_rmw(self, op, ptr, val, mask, sem, scope):
    _note(ATOMIC, ptr, mask)
    return _original("create_atomic_rmw")(self, op, ptr, val, mask, sem, scope)


def _atomic_cas(self, ptr, cmp, val, sem, scope):
    _note(ATOMIC, ptr, None)
    return _original("create_atomic_cas")(self, ptr, cmp, val, sem, scope)


def _atomic_load(self, ptr, mask, sem, scope):
    _STATE["atomic"][0] += 1
    try:
        return _original("create_atomic_load")(self, ptr, mask, sem, scope)
    finally:
        _STATE["atomic"][0] -= 1


def _atomic_store(self, ptr, val, mask, sem, scope):
    _STATE["atomic"][0] += 1
    try:
        return _original("create_atomic_store")(self, ptr, val, mask, sem, scope)
    finally:
        _STATE["atomic"][0] -= 1


_HOOKS = {
    "create_masked_load": _masked_load,
    "create_masked_store": _masked_store,
    "create_atomic_rmw": _atomic_rmw,
    "create_atomic_cas": _atomic_cas,
    "create_atomic_load": _atomic_load,
    "create_atomic_store": _atomic_store,
}


def _note(kind: int, ptrs, mask) -> None:
    """Record one access of the running program; refuse it first if it leaves the tensors."""
    record = _STATE["record"]
    if record is None:
        return  # a launch not made through the course's launchers
    addresses = np.asarray(ptrs.data)
    if mask is not None:
        addresses = addresses[np.broadcast_to(np.asarray(mask.data, dtype=bool), addresses.shape)]
    addresses = addresses.astype(np.uint64).ravel()
    itemsize = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
    regions = _region_of(record, addresses, itemsize)
    program = tuple(int(i) for i in interpreter.interpreter_builder.grid_idx)
    where = _kernel_line()
    if (regions < 0).any():
        raise refusal(_out_of_bounds(record, kind, addresses, regions, program, where))
    record.accesses.append(Access(program, kind, addresses, regions, where))


def _region_of(record: Record, addresses: np.ndarray, itemsize: int) -> np.ndarray:
    """The index of the tensor each address (of an element of ``itemsize`` bytes) lies in; -1."""
    found = np.full(addresses.shape, -1, dtype=np.int16)
    for i, region in enumerate(record.regions):
        inside = (addresses >= region.start) & (addresses + itemsize <= region.end)
        found[inside & (found < 0)] = i
    return found


def _kernel_line() -> tuple:
    """(file, line, function) of the innermost frame that is the kernel's own source."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_OWN_FILES) and filename != __file__:
            return filename, frame.f_lineno, frame.f_code.co_name
        frame = frame.f_back
    return "?", 0, "?"


# ---- what a learner reads -----------------------------------------------------------------------


def _where(where: tuple) -> str:
    filename, line, function = where
    cell = "its cell" if "ipykernel" in filename or filename.startswith("<") else None
    return f"line {line} of {cell or os.path.basename(filename)} ({function})"


def _program(program: tuple) -> str:
    while len(program) > 1 and program[-1] == 0:
        program = program[:-1]
    return f"program {program if len(program) > 1 else program[0]}"


def _element(region: Region, address: int) -> str:
    index = (address - region.start) // region.itemsize
    inside = 0 <= index < int(np.prod(region.shape))
    at = f", {tuple(int(i) for i in np.unravel_index(index, region.shape))}" if inside else ""
    return f"{region.name}[{index}{at}]"


def _out_of_bounds(record, kind, addresses, regions, program, where) -> str:
    outside = addresses[regions < 0]
    first = int(outside[0])
    nearest = min(record.regions, key=lambda r: min(abs(first - r.start), abs(first - r.end)))
    index = (first - nearest.start) // nearest.itemsize
    side = "before its first" if index < 0 else "past its last"
    verb = {LOAD: "load", STORE: "store", ATOMIC: "atomic"}[kind]
    return (
        f"{_where(where)}: {_program(program)} would {verb} {len(outside)} of its "
        f"{len(addresses)} active lanes outside {nearest.name}'s tensor ({nearest.shape}, "
        f"{int(np.prod(nearest.shape))} elements), the first at element {index}, {side} element. "
        f"The check stopped it before it touched memory. Mask the {verb} (tl.{verb}(..., "
        "mask=...)) so that the lanes past the edge of the data are off: on a GPU they would "
        "read or overwrite other memory."
    )


def _race_message(record: Record, address: int, first: Access, second: Access) -> str:
    region = next(r for r in record.regions if r.start <= address < r.end)
    return (
        f"A race in {record.kernel}: at {_where(first.where)}, {_program(first.program)} "
        f"{_KINDS[first.kind]} {_element(region, address)}, which {_program(second.program)} "
        f"{_KINDS[second.kind]} at {_where(second.where)}. The programs of one launch run at "
        "the same time on a GPU, in any order: one's store can overwrite another's, or be read "
        "before or after it (the interpreter runs them one after the other, which hides this). "
        "Where several programs add into the same place, use tl.atomic_add; otherwise give each "
        "program places of its own."
    )


# ---- races --------------------------------------------------------------------------------------


def _flatten(record: Record) -> tuple[np.ndarray, ...]:
    """(address, program number, kind, access number) of every recorded lane."""
    programs = {p: i for i, p in enumerate(sorted({a.program for a in record.accesses}))}
    sizes = [len(a.addresses) for a in record.accesses]
    address = np.concatenate([a.addresses for a in record.accesses])
    program = np.repeat([programs[a.program] for a in record.accesses], sizes)
    kind = np.repeat([a.kind for a in record.accesses], sizes)
    access = np.repeat(np.arange(len(record.accesses)), sizes)
    return address, program.astype(np.int64), kind, access


def _programs_per_address(slot: np.ndarray, program: np.ndarray, chosen: np.ndarray, n: int):
    """How many distinct programs touch each address (``slot``), counting the lanes ``chosen``."""
    width = int(program.max()) + 1 if len(program) else 1
    pairs = np.unique(slot[chosen] * width + program[chosen])
    return np.bincount(pairs // width, minlength=n)


def find_race(record: Record) -> str | None:
    """The first race of a launch, as a learner reads it; None when there is none."""
    if not record.accesses:
        return None
    address, program, kind, access = _flatten(record)
    unique, slot = np.unique(address, return_inverse=True)
    n = len(unique)
    every = _programs_per_address(slot, program, np.ones(len(slot), bool), n)
    storing = _programs_per_address(slot, program, kind == STORE, n)
    atomic_or_load = _programs_per_address(slot, program, kind != STORE, n)
    has_atomic = np.bincount(slot[kind == ATOMIC], minlength=n) > 0
    has_load = np.bincount(slot[kind == LOAD], minlength=n) > 0
    racy = ((storing > 0) & (every > 1)) | (has_atomic & has_load & (atomic_or_load > 1))
    if not racy.any():
        return None
    lanes = np.flatnonzero(racy[slot])
    first = lanes[np.argmin(access[lanes])]  # the earliest access that takes part in a race
    target = address[first]
    writer, other = _racing_pair(np.flatnonzero(address == target), kind, program)
    accesses = record.accesses
    return _race_message(record, int(target), accesses[access[writer]], accesses[access[other]])


def _racing_pair(lanes: np.ndarray, kind: np.ndarray, program: np.ndarray) -> tuple[int, int]:
    """Two lanes of one address, of two programs, that race: a store (first, where there is one)
    and any other access, or an atomic addition and a load."""
    pairs = [(i, j) for i in lanes for j in lanes if program[i] != program[j]]
    for i, j in pairs:
        if kind[i] == STORE:
            return i, j
    return next((i, j) for i, j in pairs if kind[i] == ATOMIC and kind[j] == LOAD)


# ---- the checked launch -------------------------------------------------------------------------


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _extent(tensor: torch.Tensor) -> int:
    """Bytes from a tensor's first element to the end of its last one."""
    if tensor.numel() == 0:
        return 0
    last = sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))
    return (last + 1) * tensor.element_size()


def _guarded_copies(args: tuple, names: list[str]) -> tuple[list, list[Region], list]:
    """The arguments with every tensor copied into one block of memory, each storage between
    wide gaps that belong to no tensor; the tensors' regions in it; and, for each storage, a
    pair of byte views (the original, its copy) to copy the results back with."""
    storages = {}
    for arg in args:
        if isinstance(arg, torch.Tensor):
            storages.setdefault(arg.untyped_storage().data_ptr(), arg.untyped_storage())
    total = sum(_aligned(s.nbytes()) for s in storages.values())
    gap = max(_MIN_GAP, _aligned(2 * total))
    block = torch.empty(gap + total + gap * len(storages), dtype=torch.uint8)
    placed, pairs, offset = {}, [], gap
    for pointer, storage in storages.items():
        data = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
        pairs.append((data, block[offset : offset + storage.nbytes()]))
        pairs[-1][1].copy_(data)
        placed[pointer] = offset
        offset += _aligned(storage.nbytes()) + gap
    copies, regions = [], []
    for position, arg in enumerate(args):
        if not isinstance(arg, torch.Tensor):
            copies.append(arg)
            continue
        at = placed[arg.untyped_storage().data_ptr()]
        copy = torch.empty(0, dtype=arg.dtype).set_(
            block.untyped_storage(), at // arg.element_size() + arg.storage_offset(),
            arg.shape, arg.stride(),
        )  # fmt: skip
        start = copy.data_ptr()
        end = start + _extent(arg)
        name = names[position] if position < len(names) else f"argument {position}"
        regions.append(Region(name, start, end, arg.element_size(), tuple(arg.shape), position))
        copies.append(copy)
    return copies, regions, pairs


def _unwrapped(error: BaseException) -> BaseException:
    """The checker's own error under the interpreter's wrappers, or ``error`` itself."""
    seen, inner = set(), error
    while inner is not None and id(inner) not in seen:
        if getattr(inner, "memory_check", False):
            return inner
        seen.add(id(inner))
        inner = inner.__cause__ or inner.__context__
    return error


def _plain_kernel(kernel) -> bool:
    """Whether ``kernel`` is a kernel the interpreter runs directly (not wrapped by autotune)."""
    if isinstance(kernel, interpreter.InterpretedFunction):
        return True
    if isinstance(
        getattr(kernel, "fn", None), (interpreter.InterpretedFunction, triton.JITFunction)
    ):
        raise TypeError(
            f"{type(kernel).__name__} wraps the kernel (triton.autotune or triton.heuristics): "
            "the course's launchers choose the block sizes themselves; give them the kernel "
            "decorated with @triton.jit alone"
        )
    if isinstance(kernel, triton.JITFunction):
        return False
    raise TypeError(f"not a Triton kernel: {type(kernel).__name__} (decorate it with @triton.jit)")


def launch(kernel, grid: tuple, args: tuple, constants: dict) -> None:
    """``kernel[grid](*args, **constants)``, as the course's launchers run every kernel: logged
    (:func:`launched`), its specialization noted for the compile check, and, where kernels are
    interpreted, with every access checked (the module's docstring)."""
    interpreted = _plain_kernel(kernel)
    for log in _STATE["logs"]:
        log.append(kernel)
    flash_launches.note_launch(kernel, args, constants)
    if not interpreted:
        kernel[grid](*args, **constants)
        return
    names = list(getattr(kernel, "arg_names", ()))
    copies, regions, pairs = _guarded_copies(args, names)
    record = Record(kernel.__name__, tuple(grid), regions)
    install()
    _STATE["record"] = record
    try:
        kernel[grid](*copies, **constants)
    except Exception as error:  # noqa: BLE001 -- the checker's own refusal, unwrapped
        found = _unwrapped(error)
        if found is error:
            raise
        raise found from None
    finally:
        _STATE["record"] = None
    for original, copy in pairs:  # byte for byte, as Triton's interpreter copies results back
        original.copy_(copy)
    _STATE["last"] = record
    if not record.accesses:
        raise refusal(
            f"the memory check saw no load or store of {record.kernel}: Triton's interpreter was "
            "changed under it; restart the kernel (Python) and run the notebook again"
        )
    race = find_race(record)
    if race:
        raise refusal(race)


def last_record() -> Record | None:
    """What the last checked launch did to memory (None before any, or where kernels are
    compiled)."""
    return _STATE["last"]


@contextlib.contextmanager
def launched():
    """The kernels launched through :func:`launch` inside the ``with`` block, in order."""
    log: list = []
    _STATE["logs"].append(log)
    try:
        yield log
    finally:
        _STATE["logs"].remove(log)


def rows_read(record: Record, row_sizes: dict[int, int]) -> set[tuple[tuple, int]]:
    """{(program, row)}: the rows each program touched of the tensors at the argument positions
    ``row_sizes`` names, a row being that many elements (a query of d numbers, or one number)."""
    found = set()
    for access in record.accesses:
        for index in np.unique(access.regions):
            region = record.regions[int(index)]
            size = row_sizes.get(region.position)
            if size is None:
                continue
            lanes = access.addresses[access.regions == index]
            rows = np.unique((lanes - region.start) // region.itemsize // size)
            found |= {(access.program, int(r)) for r in rows}
    return found


def most_loads(record: Record, positions) -> int:
    """The most times one program loaded one element of the tensors at the argument positions
    ``positions``: 1 for a kernel that reads each of those elements once (one pass over the keys),
    2 when a first pass over them finds the maximum and a second computes the sums."""
    counts: dict[tuple, int] = {}
    for access in record.accesses:
        if access.kind != LOAD:
            continue
        for index in np.unique(access.regions):
            if record.regions[int(index)].position not in positions:
                continue
            for address in np.unique(access.addresses[access.regions == index]).tolist():
                key = (access.program, address)
                counts[key] = counts.get(key, 0) + 1
    return max(counts.values(), default=0)
