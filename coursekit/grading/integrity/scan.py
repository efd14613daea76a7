"""The code scan: constructs no solution needs, in the cells the learner wrote."""

from __future__ import annotations

import ast
import copy
import re
from functools import lru_cache
from pathlib import Path

from coursekit.course.cells import grade_id
from coursekit.grading.integrity.findings import Finding
from coursekit.grading.integrity.reference import Reference, parse_cell
from coursekit.grading.integrity.rules import (
    ABOUT_TESTS,
    BUILTIN_RULES,
    DUNDER_ATTRS,
    FILE_METHODS,
    FRAME_ATTRS,
    HISTORY,
    HISTORY_ATTRS,
    KIND_TEXT,
    MODULE_RULES,
    SAFE_OS,
    VERDICT,
)
from coursekit.grading.integrity.submission import structure


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
            and name not in SAFE_OS
            and not any(name.startswith(p) for p, *_ in MODULE_RULES if p.startswith("os."))
        ):
            self.hit("files", node, name)
            return
        for prefix, kind, why in MODULE_RULES:
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
            if attr in HISTORY_ATTRS or HISTORY.fullmatch(attr):
                self.hit("ipython-history", node, f".{attr}")
            if attr in DUNDER_ATTRS or attr in FRAME_ATTRS:
                self.hit("introspection", node, f".{attr}")
            elif attr in FILE_METHODS:
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
        if isinstance(node.ctx, ast.Load) and HISTORY.fullmatch(node.id):
            self.hit("ipython-history", node, node.id)
        elif isinstance(node.ctx, ast.Load):
            if node.id in BUILTIN_RULES:
                kind, why = BUILTIN_RULES[node.id]
                self.hit(kind, node, f"{node.id} ({why})")
            elif node.id in self.modules or node.id in ("__builtins__", "get_ipython"):
                self.check_name(self.aliases.get(node.id, node.id), node)
        elif isinstance(node.ctx, (ast.Store, ast.Del)):
            self.check_rebind(node.id, node)

    def visit_Constant(self, node):
        if isinstance(node.value, str) and HISTORY.fullmatch(node.value):
            self.hit("ipython-history", node, repr(node.value))

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
                inner = copy.deepcopy(parse_cell(code))  # its lines are renumbered below
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
            if any(VERDICT.search(t) and ABOUT_TESTS.search(t) for t in texts):
                self.hit("fake-output", node, f"{func}({texts[0][:40]!r}...)")
        self.generic_visit(node)


def _aliases(cells) -> tuple[dict[str, str], set[str]]:
    """Names bound by import statements anywhere in the notebook, {"np": "numpy", "F": ...}, and
    which of them are surely modules (``import x as y``; ``from x import y`` may be a function)."""
    aliases, modules = {}, set()
    for source in cells:
        for name, target, module in _imports(source):
            aliases[name] = target
            if module:
                modules.add(name)
    return aliases, modules


@lru_cache(maxsize=1024)
def _imports(source: str) -> tuple[tuple[str, str, bool], ...]:
    """(name, what it names, surely a module) for each name a cell's imports bind, in order:
    remembered by the cell's text, like its tree."""
    tree, found = parse_cell(source), []
    for node in ast.walk(tree) if tree else ():
        if isinstance(node, ast.Import):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                found.append((name, alias.name if alias.asname else name, True))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                found.append((alias.asname or alias.name, f"{node.module}.{alias.name}", False))
    return tuple(found)


def _code_hits(sources: list[tuple[str, str]], ref: Reference) -> list[tuple[str, str, str, str]]:
    """(kind, cell label, code line, what) for every suspicious construct in these cells."""
    aliases, modules = _aliases(s for _, s in sources)
    out = []
    for label, source in sources:
        tree = parse_cell(source)
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
        gid = grade_id(cell)
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
            Finding(kind, "review", f"{what}: {KIND_TEXT[kind]}", f"{label}: {line[:120]}")
        )
    return findings


def screen(nb, ref: Reference, root: Path | None = None) -> list[Finding]:
    """Everything :func:`structure` and :func:`scan_code` find in a readable notebook."""
    found = structure(nb, ref, root)
    if any(f.severity == "invalid" for f in found):
        return found
    return found + scan_code(nb, ref)
