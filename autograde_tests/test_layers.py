"""The architecture the tree claims, checked: imports run one way, the reference library stands
alone, functions fit on a screen, and the drawing of the layers in the contributors' guide
(docs/contributing.md) is the real one."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
# coursekit's subpackages, lowest first: each may import its own and lower layers only.
LAYERS = {
    "course": 0,
    "grading": 1,
    "publishing": 2,
    "learner": 2,
    "classroom": 2,
    "mutants": 2,
    "democlass": 3,
    "bench": 4,
}
LONGEST = 60  # lines per function: one screen
LIBRARY_DEPENDENCIES = {"numpy", "torch", "attention_ref"}
# The library's optional parts: each may import one more package, and nothing in the library
# imports them (but a part that needs the same package). figures.py draws the paper's figures
# (matplotlib); the package flash/ holds lesson 11's Triton kernels and compiles them for a GPU
# (triton, which has wheels for Linux only); checkpoints.py reads and writes lesson 14's
# checkpoint files (safetensors) and chat.py renders its chat templates (jinja2); lens.py runs
# lesson 15's model in TransformerLens (transformer_lens). Keyed by path within attention_ref: a
# folder names a package.
OPTIONAL = {
    "chat.py": "jinja2",
    "checkpoints.py": "safetensors",
    "figures.py": "matplotlib",
    "flash": "triton",
    "lens.py": "transformer_lens",
}
LIBRARY = ROOT / "solutions" / "attention_ref"


def _modules(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path) -> list[str]:
    """Absolute names of what ``path`` imports; a relative import (within its own package)
    reads as its bare module name with a leading dot."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append("." * node.level + (node.module or ""))
    return names


def _optional_part(path: Path) -> str | None:
    """The optional part of the library (a key of OPTIONAL) that ``path`` belongs to, if any."""
    top = path.relative_to(LIBRARY).parts[0]
    return top if top in OPTIONAL else None


def _module_name(path: Path) -> str:
    """``attention_ref.flash.forward`` for solutions/attention_ref/flash/forward.py."""
    parts = path.relative_to(LIBRARY.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _subpackage(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "coursekit" and parts[1] in LAYERS else None


def coursekit_edges() -> set[tuple[str, str]]:
    """(importer, imported) between coursekit's subpackages."""
    edges = set()
    for path in _modules(ROOT / "coursekit"):
        parts = path.relative_to(ROOT / "coursekit").parts
        if len(parts) < 2:
            continue
        for name in _imports(path):
            target = _subpackage(name)
            if target and target != parts[0]:
                edges.add((parts[0], target))
    return edges


def test_coursekit_imports_run_from_higher_layers_to_lower_ones():
    upward = sorted((a, b) for a, b in coursekit_edges() if LAYERS[b] >= LAYERS[a])
    assert not upward, f"imports against the layers (importer, imported): {upward}"


def test_tooling_never_imports_the_tests():
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _modules(ROOT / "coursekit")
        for name in _imports(path)
        if name.split(".")[0] == "autograde_tests"
    ]
    assert not offenders, offenders


def test_the_reference_library_needs_only_numpy_and_torch():
    """So it imports fast and runs anywhere, a bare GPU machine included."""
    allowed = LIBRARY_DEPENDENCIES | set(sys.stdlib_module_names)
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _modules(LIBRARY)
        for name in _imports(path)
        if not name.startswith(".")
        and name.split(".")[0] not in allowed | {OPTIONAL.get(_optional_part(path))}
    ]
    assert not offenders, offenders


@pytest.mark.parametrize("optional", sorted(OPTIONAL))
def test_nothing_in_the_library_imports_its_optional_parts(optional):
    """Only the lessons (and the book, the benchmark) import figures.py and attention_ref.flash."""
    module = _module_name(LIBRARY / optional)
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _modules(LIBRARY)
        for name in _library_imports(path)
        if (name == module or name.startswith(module + "."))
        and OPTIONAL.get(_optional_part(path)) != OPTIONAL[optional]
    ]
    assert not offenders, f"only the lessons import {optional}: {offenders}"


def _library_imports(path: Path) -> list[str]:
    """Every module ``path`` may import, as a full name: ``from attention_ref import flash`` reads
    as attention_ref and attention_ref.flash, ``from .. import hints`` in attention_ref/testing/
    as attention_ref and attention_ref.hints."""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names += [module] + [f"{module}.{alias.name}" for alias in node.names]
    return names


def _module_graph(folder: Path) -> dict[str, set[str]]:
    """{module: the modules of ``folder``'s package it imports}, at the top or inside a function
    (an import deferred into a function is still a circle); ``from package import module`` counts
    as the module alone."""
    top = folder.parent
    modules = {}
    for path in _modules(folder):
        parts = path.relative_to(top).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                subs = {f"{module}.{alias.name}" for alias in node.names} & set(modules)
                found |= subs or {module}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


@pytest.mark.parametrize("folder", ["coursekit", "solutions/attention_ref"])
def test_no_modules_import_each_other(folder):
    """Imports within a package run one way: two modules that import each other (even from
    inside a function) are one module in two files, or a third one waiting to be split out."""
    circles = _circles(_module_graph(ROOT / folder))
    assert not circles, f"modules that import each other, round a circle: {circles}"


def test_the_circle_check_sees_a_circle(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from pkg import b\n")
    (package / "b.py").write_text("from . import a\n")
    (package / "c.py").write_text("import pkg.a\n")
    assert _circles(_module_graph(package)) == [["pkg.a", "pkg.b"]]


@pytest.mark.parametrize("folder", ["coursekit", "solutions/attention_ref", "book"])
def test_every_function_fits_on_a_screen(folder):
    long = []
    for path in _modules(ROOT / folder):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > LONGEST:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines})")
    assert not long, f"functions over {LONGEST} lines: split them into named steps: {long}"


def test_the_contributors_guide_draws_the_layers_as_they_are():
    """docs/contributing.md's 'Layout' section lists each subpackage with what it imports from the
    others."""
    text = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    drawn = {}
    for name, uses in re.findall(r"^\s*coursekit/(\w+)/\s.*?(?:uses: ([\w, ]+))?$", text, re.M):
        drawn[name] = set(filter(None, (u.strip() for u in uses.split(","))))
    assert set(drawn) == set(LAYERS), f"docs/contributing.md's layout names {sorted(drawn)}"
    real = {name: {b for a, b in coursekit_edges() if a == name} for name in LAYERS}
    assert drawn == real, f"docs/contributing.md says {drawn}; the code imports {real}"
