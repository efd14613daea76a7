"""``make versions``: the course with the versions its learners have, not only the pinned ones.

pyproject.toml promises a range (``numpy>=...``, ``torch>=...``, and the learner's floors for
Triton and ``transformers``); ``constraints.txt`` pins one point of it, the one CI tests. This
builds a virtual environment for each end of the range and one like Colab's, in
``build/versions/<set>/``, and in each runs the reference tests and executes every solved lesson
(every cell, even after one raised), then prints which versions it installed and what failed:

* ``oldest``: every floor pyproject.toml declares, exactly (``torch>=2.6`` -> ``torch==2.6.0``),
  with Triton's floor in place of the Triton PyPI's PyTorch pins (:func:`overrides`);
* ``newest``: the newest release the registries serve (pip's own constraints, ``pip config
  list``, still apply: a machine may cap what it installs);
* ``colab``: only what Colab has (PyTorch, NumPy, matplotlib, ``transformers``, Triton, IPython's
  kernel, at the course's pins; no ``make``, no Jupyter server, no nbgrader, no pytest, no
  jupytext), the course installed as the book tells a Colab user (``%pip install
  git+https://...``, here ``git+file://`` this repository at its last commit: no network), then
  every student notebook and every solved lesson executed in a folder outside the repository, as
  Colab runs them.

Not part of ``make test``: it downloads several GB (PyPI's PyTorch is the CUDA build, with
NVIDIA's libraries) and executes the course three times. ``--sets`` and ``--lessons`` narrow it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from coursekit.course.lessons import ROOT, all_lessons, lesson

BUILD = ROOT / "build" / "versions"
# The packages whose versions the range is about; printed for every set.
WATCHED = ("torch", "numpy", "triton", "transformers", "matplotlib")
# What running the checks needs beside the course's own dependencies (not what a learner needs).
RUNNERS = ("pytest", "hypothesis", "ipykernel", "matplotlib", "tqdm", "safetensors")
# What Colab has preinstalled that the course uses (its GPU runtimes' PyTorch brings Triton).
COLAB = ("torch", "numpy", "matplotlib", "transformers", "safetensors", "tqdm", "triton")
COLAB += ("ipykernel",)
SETS = ("oldest", "newest", "colab")
ENVIRONMENT_ERRORS = ("ModuleNotFoundError", "ImportError", "FileNotFoundError")


@dataclass
class Outcome:
    name: str
    versions: dict[str, str] = field(default_factory=dict)
    reference: str = "not run"
    lessons: dict[str, list[str]] = field(default_factory=dict)  # lesson: lines of what raised
    seconds: float = 0.0


def floors(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str]:
    """{package: its lowest version} as pyproject.toml's dependencies and learner extra say."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    found = {}
    for spec in project["dependencies"] + project["optional-dependencies"]["learner"]:
        match = re.match(r"([A-Za-z0-9_.-]+)\s*(?:\[[^]]*\])?\s*>=\s*([0-9][^,;\s]*)", spec)
        if match:
            found[match.group(1).lower()] = match.group(2)
    return found


def requirements(name: str) -> list[str]:
    """What the set ``name`` installs: the watched packages at its versions, and the runners."""
    if name == "oldest":
        low = floors()
        pinned = [f"{p}=={low[p]}" for p in WATCHED if p in low]
        return pinned + [p for p in dict.fromkeys((*WATCHED, *RUNNERS)) if p not in low]
    if name == "newest":
        return list(dict.fromkeys((*WATCHED, *RUNNERS)))
    if name == "colab":  # at the course's pins: the set tests the environment, not the versions
        return [*COLAB, "-c", str(ROOT / "constraints.txt")]
    raise ValueError(f"unknown set {name!r}: choose from {', '.join(SETS)}")


def pip_sources() -> list[str]:
    """pip's registries and constraints (``pip config list``), as flags for uv, which reads no
    pip configuration: both then install from the same places under the same caps."""
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    ).stdout
    flags: list[str] = []
    for key, value in re.findall(r"^[^.]*\.([a-z-]+)='(.*)'$", listed, re.M):
        if key in ("index-url", "extra-index-url", "find-links", "constraint"):
            for item in value.split():
                flag = f"--{'constraints' if key == 'constraint' else key}={item}"
                if flag not in flags:
                    flags.append(flag)
    return flags


def uv(venv: Path, *args: str) -> None:
    command = [str(Path(sys.executable).parent / "uv"), "pip", "install", "--quiet"]
    command += ["--python", str(venv / "bin" / "python"), "--native-tls"]
    command += ["--index-strategy", "unsafe-best-match", *pip_sources(), *args]
    subprocess.run(command, check=True)


def installed(venv: Path) -> dict[str, str]:
    listed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    versions = {item["name"].lower(): item["version"] for item in json.loads(listed)}
    return {p: versions.get(p, "-") for p in WATCHED}


def overrides(name: str) -> list[str]:
    """uv's --override for the oldest set: PyPI's PyTorch wheels pin the Triton they were built
    with (torch 2.6: triton 3.2), and the Triton floor of lesson 11 replaces that pin, as
    PyTorch's CPU build, which pins no Triton, lets a learner do."""
    low = floors()
    if name != "oldest" or "triton" not in low:
        return []
    path = BUILD / "oldest-overrides.txt"
    path.write_text(f"triton=={low['triton']}\n")
    return ["--override", str(path)]


def colab_source() -> str:
    """What the colab set installs the course from: ``git+file://`` this repository at its last
    commit, as the book's ``%pip install git+https://...@branch`` installs a clone of the
    published branch. Not the folder itself: pip would then build the wheel from files git does
    not have (untracked modules, setuptools' leftovers in ``build/lib``) and pass where a learner's
    install fails."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    changed = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    if changed:
        print(f"versions: colab installs commit {commit[:12]}; changes not committed are not in it",
              file=sys.stderr, flush=True)  # fmt: skip
    return f"git+file://{ROOT}@{commit}"


def make_venv(name: str, reuse: bool = False) -> Path:
    """build/versions/<name>: a new virtual environment with the set's packages and the course
    (``reuse``: the one a last run made, if there is one)."""
    venv = BUILD / name
    if reuse and (venv / "bin" / "python").exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    uv(venv, *requirements(name), *overrides(name))
    python = str(venv / "bin" / "python")
    if name == "colab":  # what the book tells a Colab user, with pip as %pip runs it
        subprocess.run([python, "-m", "pip", "install", "--quiet", colab_source()], check=True)
    else:
        uv(venv, "--no-deps", "-e", str(ROOT))
    kernel = ["-m", "ipykernel", "install", "--prefix", str(venv), "--name", f"course-{name}"]
    subprocess.run([python, *kernel], check=True, capture_output=True)
    return venv


def reference_tests(venv: Path) -> str:
    """The last line of pytest's summary for the reference tests, run in ``venv``."""
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "--continue-on-collection-errors", "autograde_tests/reference"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    (BUILD / f"{venv.name}-reference.log").write_text(done.stdout + done.stderr)
    counts = re.compile(r"\d+ (passed|failed|errors?) ")
    summary = [line for line in done.stdout.splitlines() if counts.search(line)]
    return summary[-1].strip("= ") if summary else f"pytest exited {done.returncode}"


def execute(nb, cwd: Path, venv: Path) -> list[str]:
    """Run ``nb`` in a kernel of ``venv``, every cell; one line for each cell that raised, and one
    for a cell that ran past nbclient's timeout (the next lessons still run)."""
    import nbclient

    from coursekit.bench.cells import raised

    os.environ["JUPYTER_PATH"] = str(venv / "share" / "jupyter")
    client = nbclient.NotebookClient(
        nb,
        timeout=1800,
        kernel_name=f"course-{venv.name}",
        allow_errors=True,
        resources={"metadata": {"path": str(cwd)}},
    )
    try:
        client.execute()
    except nbclient.exceptions.CellTimeoutError as slow:  # nbclient stops the notebook there
        first = str(slow).splitlines()[0]
        return [*raised(nb), f"  {first} (the cells after it did not run)"]
    return raised(nb)


def run_lessons(venv: Path, names: list[str], outcome: Outcome) -> None:
    """Each solved lesson; in the colab set also each student notebook, both executed in a folder
    outside the repository (a student notebook raises at every exercise left to do: only the
    errors that say the environment lacks something count there)."""
    import nbformat

    from coursekit.course.sources import source_to_notebook

    items = [lesson(n) for n in names] if names else all_lessons()
    for item in items:
        began = time.monotonic()
        if venv.name != "colab":
            lines = execute(source_to_notebook(item.source), item.source.parent, venv)
        else:
            with tempfile.TemporaryDirectory(prefix="colab-") as content:
                lines = execute(source_to_notebook(item.source), Path(content), venv)
                student = nbformat.read(item.student_notebook, as_version=4)
                lines += [
                    "  student edition:" + line
                    for line in execute(student, Path(content), venv)
                    if any(f": {kind}:" in line for kind in ENVIRONMENT_ERRORS)
                ]
        outcome.lessons[item.assignment] = lines
        print(f"  {venv.name} {item.assignment}: {time.monotonic() - began:.0f} s, "
              f"{len(lines)} raised", file=sys.stderr, flush=True)  # fmt: skip


def report(outcomes: list[Outcome]) -> str:
    lines = ["| set | " + " | ".join(WATCHED) + " | reference tests | lessons |"]
    lines.append("|---" * (len(WATCHED) + 3) + "|")
    for o in outcomes:
        bad = [name for name, raised_lines in o.lessons.items() if raised_lines]
        lessons = f"{len(o.lessons) - len(bad)} of {len(o.lessons)} ran clean"
        lessons += f" (raised: {', '.join(bad)})" if bad else ""
        versions = " | ".join(o.versions.get(p, "-") for p in WATCHED)
        lines.append(f"| {o.name} | {versions} | {o.reference} | {lessons} |")
    details = [
        f"\n{o.name} {name}:\n" + "\n".join(raised_lines)
        for o in outcomes
        for name, raised_lines in o.lessons.items()
        if raised_lines
    ]
    return "\n".join(lines) + "\n" + "".join(details)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit.bench.versions", description=__doc__)
    parser.add_argument("--sets", default=",".join(SETS), help=f"of {', '.join(SETS)}")
    parser.add_argument("--lessons", default="", help="e.g. lesson11,lesson12 (default: all)")
    parser.add_argument("--no-reference", action="store_true", help="skip the reference tests")
    parser.add_argument("--reuse", action="store_true", help="keep environments a last run made")
    args = parser.parse_args(argv)
    names = [n for n in args.lessons.split(",") if n]
    outcomes = []
    for name in [s for s in args.sets.split(",") if s]:
        began = time.monotonic()
        print(f"versions: building the {name} set in {BUILD / name}", file=sys.stderr, flush=True)
        venv = make_venv(name, args.reuse)
        outcome = Outcome(name, installed(venv))
        if name != "colab" and not args.no_reference:  # Colab has no pytest
            outcome.reference = reference_tests(venv)
        run_lessons(venv, names, outcome)
        outcome.seconds = time.monotonic() - began
        outcomes.append(outcome)
    text = report(outcomes)
    BUILD.mkdir(parents=True, exist_ok=True)
    (BUILD / "report.md").write_text(text)
    print(text)
    failed = any(any(o.lessons.values()) or " failed" in o.reference for o in outcomes)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
