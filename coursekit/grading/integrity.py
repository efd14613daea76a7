"""Screen a submission before it is graded: is it the right notebook, intact, and free of code
that tampers with grading?

Three layers, each giving :class:`Finding` s with a severity:

* ``invalid`` -- nothing can be graded (no notebook, an empty or malformed file, a renamed
  notebook, another assignment's notebook, a symbolic link): the submission scores 0 and the
  finding says what to do;
* ``review`` -- the notebook is graded, but the code does something no solution needs and that
  could tamper with grading (monkeypatching numpy/torch/builtins/the course's check helpers,
  exiting the kernel, reading or writing files, frame introspection, dynamic code, IPython
  hooks, printing fake test results, using the reference library's answer): its points are
  held (0 in the gradebook, flagged) until an instructor accepts it;
* ``note`` -- something the grader repaired or that explains a score (a deleted or edited test
  cell put back, changed cell metadata restored, a cell that timed out): points as earned.

:func:`read_submission` checks the folder and the file, :func:`screen` the notebook against the
lesson (:class:`Reference`). The code scan compares with the released notebook, so that the
lesson's own code (its imports, plots, prints) is never a finding.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

import nbformat

SEVERITIES = ("invalid", "review", "note")
META = "coursekit"  # the notebook metadata key under which the grader records its findings


@dataclass(frozen=True)
class Finding:
    kind: str  # short id, e.g. "monkeypatch", "renamed-notebook"
    severity: str  # "invalid", "review" or "note"
    message: str  # what was found and what it means, for the instructor
    where: str = ""  # e.g. "cell soft_lookup, line 3: np.allclose = ..."

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Finding:
        return cls(**{k: data.get(k, "") for k in ("kind", "severity", "message", "where")})

    def __str__(self) -> str:
        return f"[{self.severity}] {self.kind}: {self.message}" + (
            f" ({self.where})" if self.where else ""
        )


def worst(findings) -> str | None:
    """The most serious severity among ``findings`` (None when there are none)."""
    levels = {f.severity for f in findings}
    return next((s for s in SEVERITIES if s in levels), None)


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


# ---------------------------------------------------------------- the lesson, as a reference


@dataclass
class RefCell:
    grade_id: str
    cell_type: str
    source: str  # the released source (a stub for solution cells, visible tests for test cells)
    metadata: dict  # the released nbgrader metadata
    checksum: str


@dataclass
class Reference:
    """What a submission of one notebook is compared with: the released notebook and its source."""

    assignment: str
    notebook: str
    cells: list[RefCell]  # nbgrader cells of the release, in order
    trusted: dict[str, list]  # names the set-up imports: {"np": ["numpy", None], ...}
    graded_functions: set[str]  # functions the learner writes (defined in solution cells)
    release: nbformat.NotebookNode = field(repr=False)

    @property
    def by_id(self) -> dict[str, RefCell]:
        return {c.grade_id: c for c in self.cells}

    @property
    def test_ids(self) -> list[str]:
        return [
            c.grade_id
            for c in self.cells
            if c.metadata.get("grade") and not c.metadata.get("solution")
        ]

    @classmethod
    def from_notebooks(cls, assignment: str, notebook: str, source_nb, release_nb) -> Reference:
        from nbgrader.utils import compute_checksum

        cells = []
        for cell in release_nb.cells:
            meta = _nbgrader(cell)
            if meta.get("grade_id"):
                cells.append(
                    RefCell(
                        meta["grade_id"],
                        cell.cell_type,
                        cell.source,
                        dict(meta),
                        meta.get("checksum") or compute_checksum(cell),
                    )
                )
        trusted, functions = {}, set()
        for cell in source_nb.cells:
            if cell.cell_type != "code":
                continue
            tree = _parse(cell.source)
            if tree is None:
                continue
            meta = _nbgrader(cell)
            if meta.get("solution"):
                functions |= {
                    n.name
                    for n in tree.body
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                }
            elif not meta.get("grade"):
                for node in tree.body:
                    if isinstance(node, ast.Import):
                        for alias in node.names:
                            if alias.asname:
                                trusted[alias.asname] = [alias.name, None]
                            else:
                                trusted[alias.name.split(".")[0]] = [alias.name.split(".")[0], None]
                    elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                        for alias in node.names:
                            if alias.name != "*":
                                trusted[alias.asname or alias.name] = [node.module, alias.name]
        return cls(assignment, notebook, cells, trusted, functions, release_nb)

    @classmethod
    def from_course(
        cls,
        course: Path,
        assignment: str,
        notebook: str,
        source_dir: str = "solutions",
        release_dir: str = "notebooks",
    ) -> Reference:
        """From a course folder: ``<source_dir>/<assignment>/<notebook>.ipynb`` and its release."""
        source = nbformat.read(
            Path(course) / source_dir / assignment / f"{notebook}.ipynb", as_version=4
        )
        release_path = Path(course) / release_dir / assignment / f"{notebook}.ipynb"
        release = nbformat.read(release_path, as_version=4) if release_path.exists() else source
        return cls.from_notebooks(assignment, notebook, source, release)


@cache
def _lesson_grade_ids(root: str) -> dict[str, set[str]]:
    from coursekit.course.lessons import all_lessons
    from coursekit.course.sources import source_to_notebook

    out = {}
    for item in all_lessons(Path(root)):
        nb = source_to_notebook(item.source)
        out[item.assignment] = {
            _nbgrader(c).get("grade_id") for c in nb.cells if _nbgrader(c).get("grade_id")
        }
    return out


def which_lesson(grade_ids: set[str], root: Path | None = None) -> str | None:
    """The lesson whose graded cells these are (most in common), if any."""
    from coursekit.course.lessons import ROOT

    best, overlap = None, 0
    for assignment, ids in _lesson_grade_ids(str(root or ROOT)).items():
        if len(ids & grade_ids) > overlap:
            best, overlap = assignment, len(ids & grade_ids)
    return best


# ---------------------------------------------------------------- the folder and the file


def read_submission(
    folder: Path, notebook: str
) -> tuple[nbformat.NotebookNode | None, list[Finding]]:
    """The submitted notebook ``<folder>/<notebook>.ipynb`` if it can be graded, and what is
    wrong."""
    folder = Path(folder)
    expected = folder / f"{notebook}.ipynb"
    links = [p for p in folder.rglob("*") if p.is_symlink()] if folder.is_dir() else []
    if links:
        return None, [
            Finding(
                "symlink",
                "invalid",
                f"the submission holds symbolic links ({', '.join(p.name for p in links)}): "
                "nbgrader would copy what they point to (the gradebook, say) next to the "
                "notebook; not graded",
                str(folder),
            )
        ]
    if not expected.exists():
        others = sorted(p.name for p in folder.glob("*.ipynb")) if folder.is_dir() else []
        if others:
            return None, [
                Finding(
                    "renamed-notebook",
                    "invalid",
                    f"no {expected.name}, but {', '.join(others)}: rename the file to "
                    f"{expected.name} in {folder} and grade again",
                    str(folder),
                )
            ]
        return None, [
            Finding("missing-notebook", "invalid", f"no {expected.name} was handed in", str(folder))
        ]
    data = expected.read_bytes()
    if not data.strip():
        return None, [Finding("empty-file", "invalid", f"{expected.name} is empty", str(expected))]
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        return None, [
            Finding(
                "malformed-notebook",
                "invalid",
                f"{expected.name} is not valid JSON ({error}): a truncated or hand-edited file",
                str(expected),
            )
        ]
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        return None, [
            Finding(
                "malformed-notebook",
                "invalid",
                f"{expected.name} is JSON but not a notebook",
                str(expected),
            )
        ]
    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    except Exception as error:  # noqa: BLE001 -- any reason nbformat refuses it
        return None, [
            Finding(
                "malformed-notebook",
                "invalid",
                f"{expected.name} is not a readable notebook ({type(error).__name__}: {error})",
                str(expected),
            )
        ]
    return nb, []


# ---------------------------------------------------------------- the notebook's structure


def structure(nb, ref: Reference, root: Path | None = None) -> list[Finding]:
    """Missing, edited and foreign graded cells (everything here is repaired by :func:`repair`)."""
    found: list[Finding] = []
    ids = [(_nbgrader(c).get("grade_id"), c) for c in nb.cells if _nbgrader(c)]
    known = ref.by_id
    present = {gid for gid, _ in ids if gid in known}
    if not present:
        other = which_lesson({gid for gid, _ in ids if gid}, root)
        what = (
            f"this is the notebook of {other}"
            if other and other != ref.assignment
            else "it has none of the assignment's exercise and test cells"
        )
        return [Finding("wrong-assignment", "invalid", f"not {ref.assignment}'s notebook: {what}")]
    seen = set()
    for gid, cell in ids:
        meta = _nbgrader(cell)
        if gid not in known:
            if meta.get("grade") and meta.get("points"):
                found.append(
                    Finding(
                        "foreign-graded-cell",
                        "review",
                        f"a cell the assignment does not have claims to be graded "
                        f"({gid!r}, {meta.get('points')} points); it is graded as an ordinary "
                        "cell",
                        f"cell {gid}",
                    )
                )
            else:
                found.append(
                    Finding(
                        "foreign-graded-cell",
                        "note",
                        f"unknown nbgrader cell {gid!r}: graded as an ordinary cell",
                        f"cell {gid}",
                    )
                )
            continue
        if gid in seen:
            found.append(
                Finding(
                    "duplicate-cell",
                    "note",
                    f"a second cell {gid!r} (copied?): only the first counts",
                    f"cell {gid}",
                )
            )
            continue
        seen.add(gid)
        ref_cell = known[gid]
        changed = sorted(
            k
            for k in ("grade", "solution", "locked", "points", "schema_version", "task")
            if meta.get(k) != ref_cell.metadata.get(k)
        )
        if cell.cell_type != ref_cell.cell_type:
            changed.append("cell_type")
        if changed:
            found.append(
                Finding(
                    "edited-cell-metadata",
                    "note",
                    f"the nbgrader metadata of {gid!r} was changed ({', '.join(changed)}); "
                    "restored before grading",
                    f"cell {gid}",
                )
            )
        if ref_cell.metadata.get("locked") and cell.source.strip() != ref_cell.source.strip():
            found.append(
                Finding(
                    "edited-test-cell",
                    "note",
                    f"the locked cell {gid!r} was edited; the original was graded instead",
                    f"cell {gid}",
                )
            )
    for ref_cell in ref.cells:
        if ref_cell.grade_id in present:
            continue
        if ref_cell.metadata.get("solution"):
            found.append(
                Finding(
                    "deleted-exercise-cell",
                    "note",
                    f"the exercise cell {ref_cell.grade_id!r} was deleted: graded as unanswered",
                    f"cell {ref_cell.grade_id}",
                )
            )
        else:
            found.append(
                Finding(
                    "deleted-test-cell",
                    "note",
                    f"the test cell {ref_cell.grade_id!r} was deleted; it was put back and graded",
                    f"cell {ref_cell.grade_id}",
                )
            )
    return found


def repair(nb, ref: Reference) -> nbformat.NotebookNode:
    """A copy of ``nb`` that nbgrader can grade whatever was done to its graded cells.

    Graded cells get the released metadata back; foreign or duplicate nbgrader cells become
    ordinary cells; deleted graded cells are put back as released (a deleted exercise as its
    stub, a deleted test cell as the visible test, to which nbgrader re-adds the hidden tests).
    Without this, one cell with a changed ``schema_version`` stops ``nbgrader autograde`` for
    every student after it, and a deleted exercise with its test cell fails the notebook.
    """
    out = nbformat.from_dict(json.loads(json.dumps(nb)))
    known, seen, cells = ref.by_id, set(), []
    for cell in out.cells:
        meta = _nbgrader(cell)
        gid = meta.get("grade_id")
        if meta and (gid not in known or gid in seen):
            cell.metadata.pop("nbgrader", None)
        elif meta:
            seen.add(gid)
            cell.metadata["nbgrader"] = dict(known[gid].metadata)
            if cell.cell_type != known[gid].cell_type:
                cell = _as_type(cell, known[gid].cell_type)
        cells.append(cell)
    position = -1
    for ref_cell in ref.cells:
        index = next(
            (i for i, c in enumerate(cells) if _nbgrader(c).get("grade_id") == ref_cell.grade_id),
            None,
        )
        if index is None:
            restored = _as_type(nbformat.v4.new_markdown_cell(ref_cell.source), ref_cell.cell_type)
            restored.metadata["nbgrader"] = dict(ref_cell.metadata)
            position += 1
            cells.insert(position, restored)
        else:
            position = max(position, index)
    out.cells = cells
    ids = set()
    for cell in out.cells:  # restored and retyped cells need ids, and ids must be unique
        if not cell.get("id") or cell["id"] in ids:
            cell["id"] = nbformat.v4.nbbase.random_cell_id()
        ids.add(cell["id"])
    return out


def _as_type(cell, cell_type: str):
    source, metadata = cell.source, cell.metadata
    new = (
        nbformat.v4.new_code_cell(source)
        if cell_type == "code"
        else nbformat.v4.new_markdown_cell(source)
    )
    new.metadata = metadata
    return new


# ---------------------------------------------------------------- the code


_MODULE_RULES = [  # (resolved-name prefix, kind, why)
    ("os._exit", "exit", "ends the kernel"),
    ("sys.exit", "exit", "ends the kernel"),
    ("os.abort", "exit", "ends the kernel"),
    ("os.kill", "exit", "signals a process"),
    ("os.killpg", "exit", "signals processes"),
    ("signal", "processes", "handles or sends signals"),
    ("gc", "introspection", "reaches objects the tests use"),
    ("inspect", "introspection", "inspects callers"),
    ("sys._getframe", "introspection", "reads the caller's frame (the test's variables)"),
    ("sys.modules", "introspection", "reaches modules behind the tests' back"),
    ("sys.settrace", "introspection", "traces the tests"),
    ("sys.setprofile", "introspection", "traces the tests"),
    ("sys.addaudithook", "introspection", "hooks the interpreter"),
    ("sys.stdout", "introspection", "replaces output"),
    ("sys.stderr", "introspection", "replaces output"),
    ("sys.displayhook", "introspection", "hooks results"),
    ("sys.excepthook", "introspection", "hooks errors"),
    ("linecache", "introspection", "reads cell sources"),
    ("traceback", "introspection", "reads frames"),
    ("dis", "introspection", "reads code"),
    ("importlib", "dynamic-code", "imports by name"),
    ("marshal", "dynamic-code", "loads code"),
    ("pickle", "dynamic-code", "loads objects"),
    ("base64", "dynamic-code", "decodes hidden text"),
    ("codecs", "dynamic-code", "decodes hidden text"),
    ("zlib", "dynamic-code", "decodes hidden data"),
    ("types.FunctionType", "dynamic-code", "builds functions"),
    ("types.CodeType", "dynamic-code", "builds code"),
    ("get_ipython", "ipython", "drives the kernel"),
    ("IPython", "ipython", "drives the kernel"),
    ("ipykernel", "ipython", "drives the kernel"),
    ("jupyter_client", "ipython", "drives the kernel"),
    ("zmq", "ipython", "talks to the kernel's sockets"),
    ("builtins", "monkeypatch", "reaches the builtins"),
    ("__builtins__", "monkeypatch", "reaches the builtins"),
    ("io", "files", "opens files"),
    ("pathlib", "files", "opens files"),
    ("shutil", "files", "copies files"),
    ("glob", "files", "lists files"),
    ("tempfile", "files", "makes files"),
    ("sqlite3", "files", "opens databases"),
    ("numpy.load", "files", "reads files"),
    ("numpy.save", "files", "writes files"),
    ("numpy.loadtxt", "files", "reads files"),
    ("numpy.savetxt", "files", "writes files"),
    ("numpy.genfromtxt", "files", "reads files"),
    ("numpy.fromfile", "files", "reads files"),
    ("numpy.memmap", "files", "maps files"),
    ("torch.load", "files", "reads files"),
    ("torch.save", "files", "writes files"),
    ("mmap", "files", "maps files"),
    ("subprocess", "processes", "starts processes"),
    ("multiprocessing", "processes", "starts processes"),
    ("threading", "processes", "runs code in the background"),
    ("_thread", "processes", "runs code in the background"),
    ("concurrent", "processes", "runs code in the background"),
    ("asyncio", "processes", "runs code in the background"),
    ("socket", "processes", "opens network connections"),
    ("urllib", "processes", "opens network connections"),
    ("http", "processes", "opens network connections"),
    ("requests", "processes", "opens network connections"),
    ("ctypes", "processes", "calls native code"),
    ("cffi", "processes", "calls native code"),
    ("resource", "processes", "changes limits"),
    ("pty", "processes", "starts processes"),
    ("posix", "processes", "calls the OS directly"),
]
_SAFE_OS = {
    "os.path.join",
    "os.path.basename",
    "os.path.dirname",
    "os.path.splitext",
    "os.sep",
    "os.cpu_count",
}
_BUILTIN_RULES = {
    "exit": ("exit", "ends the kernel"),
    "quit": ("exit", "ends the kernel"),
    "exec": ("dynamic-code", "runs code built at run time"),
    "eval": ("dynamic-code", "runs code built at run time"),
    "compile": ("dynamic-code", "builds code at run time"),
    "__import__": ("dynamic-code", "imports by name"),
    "globals": ("introspection", "reaches the notebook's names behind the tests' back"),
    "vars": ("introspection", "reaches an object's attributes behind the tests' back"),
    "setattr": ("monkeypatch", "changes attributes by name"),
    "delattr": ("monkeypatch", "deletes attributes"),
    "open": ("files", "opens files"),
    "breakpoint": ("introspection", "starts a debugger"),
}
_DUNDER_ATTRS = {
    "__code__",
    "__globals__",
    "__defaults__",
    "__kwdefaults__",
    "__dict__",
    "__class__",
    "__bases__",
    "__module__",
    "__qualname__",
    "__closure__",
    "__subclasses__",
    "__mro__",
    "__call__",
    "__builtins__",
    "__wrapped__",
    "__self__",
    "__func__",
    "__getattribute__",
}
_FRAME_ATTRS = {
    "f_back",
    "f_globals",
    "f_locals",
    "f_code",
    "f_builtins",
    "tb_frame",
    "gi_frame",
    "cr_frame",
    "co_code",
    "co_consts",
}
_FILE_METHODS = {"tofile", "read_text", "write_text", "read_bytes", "write_bytes"}
# Text that imitates a test result: a verdict ("passed", a tick) about a test or a score.
_VERDICT = re.compile(r"(?i)(\bpassed\b|\bpasses\b|✓|✔|\bsucceeded\b|\bok\b)")
_ABOUT_TESTS = re.compile(r"(?i)(test|score|points|\d\s*/\s*\d)")
_KIND_TEXT = {
    "exit": "ends or signals the kernel",
    "monkeypatch": "changes objects the tests rely on",
    "introspection": "reaches into the interpreter (frames, modules, objects the tests use)",
    "dynamic-code": "builds or runs code at run time (can hide anything)",
    "ipython": "drives IPython or the kernel (can rewrite or swallow test cells)",
    "files": "reads or writes files (solutions, gradebook, course files)",
    "processes": "starts processes, threads or connections, or calls native code",
    "reference-answer": "uses the reference library's answer to an exercise of this lesson",
    "fake-output": "prints text that looks like test results",
    "rebinds-helper": "rebinds a name the tests use",
    "interrupt": "catches the interrupt that stops a cell at its time limit",
}


def _parse(source: str) -> ast.Module | None:
    """A code cell as Python, IPython magics and shell escapes included (as get_ipython() calls)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 -- plain Python is still worth parsing
        pass
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def _dotted(node) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


_SAFE_MAGICS = {"time", "timeit", "matplotlib", "precision"}


class _Scan(ast.NodeVisitor):
    def __init__(
        self,
        aliases: dict[str, str],
        modules: set[str],
        trusted: dict[str, list],
        functions: set[str],
    ):
        self.aliases, self.modules, self.trusted, self.functions = (
            aliases,
            modules,
            trusted,
            functions,
        )
        self.hits: list[tuple[str, int, str]] = []  # (kind, line, what)

    def hit(self, kind: str, node, what: str) -> None:
        self.hits.append((kind, getattr(node, "lineno", 0), what))

    def resolve(self, node) -> str | None:
        parts = _dotted(node)
        if not parts:
            return None
        root = self.aliases.get(parts[0], parts[0])
        return ".".join([root, *parts[1:]])

    def check_name(self, name: str | None, node) -> None:
        if not name:
            return
        if name.startswith("attention_ref") and name.split(".")[-1] in self.functions:
            self.hit("reference-answer", node, name)
            return
        if (
            name.startswith("os.")
            and name not in _SAFE_OS
            and not any(name.startswith(p) for p, *_ in _MODULE_RULES if p.startswith("os."))
        ):
            self.hit("files", node, name)
            return
        for prefix, kind, why in _MODULE_RULES:
            if name == prefix or name.startswith(prefix + "."):
                self.hit(kind, node, f"{name} ({why})")
                return

    # imports
    def visit_Import(self, node):
        for alias in node.names:
            self.check_name(alias.name, node)
            self.check_rebind(
                alias.asname or alias.name.split(".")[0], node, source=[alias.name, None]
            )

    def visit_ImportFrom(self, node):
        module = node.module or ""
        for alias in node.names:
            self.check_name(f"{module}.{alias.name}", node)
            self.check_rebind(alias.asname or alias.name, node, source=[module, alias.name])

    def check_rebind(self, name: str, node, source=None) -> None:
        if (
            name in self.trusted
            and self.trusted[name] != source
            and not (
                source and self.trusted[name][1] is None and source[0] == self.trusted[name][0]
            )
        ):
            self.hit("rebinds-helper", node, f"{name} (the lesson imports it; the tests use it)")

    # names and attributes
    def visit_Attribute(self, node):
        parts = _dotted(node)
        for attr in parts[1:] if parts else [node.attr]:
            if attr in _DUNDER_ATTRS or attr in _FRAME_ATTRS:
                self.hit("introspection", node, f".{attr}")
            elif attr in _FILE_METHODS:
                self.hit("files", node, f".{attr}()")
        if parts is None:  # an attribute of an expression, e.g. f().x: look inside the expression
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                self.hit("monkeypatch", node, f"... .{node.attr} = ...")
            self.generic_visit(node)
            return
        name = self.resolve(node)
        if isinstance(node.ctx, ast.Load):
            if parts[0] in self.aliases or parts[0] in ("__builtins__", "get_ipython", "builtins"):
                self.check_name(name, node)
        elif (
            parts[0] in self.aliases
            or parts[0] in self.trusted
            or parts[0] in ("__builtins__", "builtins")
        ):
            self.hit("monkeypatch", node, f"{name} = ...")

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load):
            if node.id in _BUILTIN_RULES:
                kind, why = _BUILTIN_RULES[node.id]
                self.hit(kind, node, f"{node.id} ({why})")
            elif node.id in self.modules or node.id in ("__builtins__", "get_ipython"):
                self.check_name(self.aliases.get(node.id, node.id), node)
        elif isinstance(node.ctx, (ast.Store, ast.Del)):
            self.check_rebind(node.id, node)

    def safe_magic(self, node) -> bool:
        """%timeit / %%time / %matplotlib ...: harmless magics, whose code is scanned like any
        code."""
        func = node.func
        if not (
            isinstance(func, ast.Attribute)
            and func.attr in ("run_line_magic", "run_cell_magic")
            and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "get_ipython"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in _SAFE_MAGICS
        ):
            return False
        for arg in node.args[1:]:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                code = re.sub(r"^\s*(-\w+(\s+\d+)?\s+)*", "", arg.value)
                inner = _parse(code)
                if inner is not None:
                    for child in ast.walk(inner):
                        if hasattr(child, "lineno"):
                            child.lineno = node.lineno
                    self.visit(inner)
        return True

    def visit_ExceptHandler(self, node):
        names = (
            [
                self.resolve(t)
                for t in (node.type.elts if isinstance(node.type, ast.Tuple) else [node.type])
            ]
            if node.type is not None
            else []
        )
        if any(n in ("KeyboardInterrupt", "BaseException", "SystemExit") for n in names):
            self.hit("interrupt", node, f"except {', '.join(n for n in names if n)}")
        self.generic_visit(node)

    def visit_Subscript(self, node):
        target = self.resolve(node.value) or ""
        if isinstance(node.ctx, (ast.Store, ast.Del)) and target.split(".")[0] in (
            "__builtins__",
            "builtins",
            "sys",
        ):
            self.hit("monkeypatch", node, f"{target}[...] = ...")
        self.generic_visit(node)

    def visit_FunctionDef(self, node):
        self.check_rebind(node.name, node)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.check_rebind(node.name, node)
        self.generic_visit(node)

    def visit_Global(self, node):
        for name in node.names:
            self.check_rebind(name, node)

    def visit_Call(self, node):
        if self.safe_magic(node):
            return
        func = self.resolve(node.func) or ""
        if func == "getattr" and len(node.args) >= 2 and not isinstance(node.args[1], ast.Constant):
            self.hit("dynamic-code", node, "getattr(..., <computed name>)")
        if func in ("print", "display", "sys.stdout.write", "sys.stderr.write") or func.startswith(
            "IPython.display"
        ):
            texts = [
                n.value
                for arg in node.args
                for n in ast.walk(arg)
                if isinstance(n, ast.Constant) and isinstance(n.value, str)
            ]
            if any(_VERDICT.search(t) and _ABOUT_TESTS.search(t) for t in texts):
                self.hit("fake-output", node, f"{func}({texts[0][:40]!r}...)")
        self.generic_visit(node)


def _aliases(cells) -> tuple[dict[str, str], set[str]]:
    """Names bound by import statements anywhere in the notebook, {"np": "numpy", "F": ...}, and
    which of them are surely modules (``import x as y``; ``from x import y`` may be a function)."""
    aliases, modules = {}, set()
    for source in cells:
        tree = _parse(source)
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, ast.Import):
                for alias in node.names:
                    name = alias.asname or alias.name.split(".")[0]
                    aliases[name] = alias.name if alias.asname else name
                    modules.add(name)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases, modules


def _code_hits(sources: list[tuple[str, str]], ref: Reference) -> list[tuple[str, str, str, str]]:
    """(kind, cell label, code line, what) for every suspicious construct in these cells."""
    aliases, modules = _aliases(s for _, s in sources)
    out = []
    for label, source in sources:
        tree = _parse(source)
        if tree is None:
            continue
        scan = _Scan(aliases, modules, ref.trusted, ref.graded_functions)
        scan.visit(tree)
        lines = source.splitlines()
        for kind, lineno, what in scan.hits:
            line = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
            out.append((kind, label, line, what))
    return out


def _editable_sources(nb, ref: Reference) -> list[tuple[str, str]]:
    """Code cells a learner could change and that are run as handed in (locked cells are reset)."""
    locked = {c.grade_id for c in ref.cells if c.metadata.get("locked")}
    out = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        gid = _nbgrader(cell).get("grade_id")
        if gid in locked:
            continue
        out.append((gid or f"cell {index + 1}", cell.source))
    return out


def scan_code(nb, ref: Reference) -> list[Finding]:
    """Constructs no solution needs, in the cells the learner wrote (the lesson's own are
    ignored)."""
    baseline = {
        (kind, line) for kind, _, line, _ in _code_hits(_editable_sources(ref.release, ref), ref)
    }
    findings, seen = [], set()
    for kind, label, line, what in _code_hits(_editable_sources(nb, ref), ref):
        if (kind, line) in baseline or (kind, label, line) in seen:
            continue
        seen.add((kind, label, line))
        findings.append(
            Finding(kind, "review", f"{what}: {_KIND_TEXT[kind]}", f"{label}: {line[:120]}")
        )
    return findings


def screen(nb, ref: Reference, root: Path | None = None) -> list[Finding]:
    """Everything :func:`structure` and :func:`scan_code` find in a readable notebook."""
    found = structure(nb, ref, root)
    if any(f.severity == "invalid" for f in found):
        return found
    return found + scan_code(nb, ref)
