"""The conda environment (environment.yml) and the pip constraints pin the same versions."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
CONDA_TO_PIP = {"pytorch": "torch"}  # conda-forge names that differ from PyPI's


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].split(";", 1)[0].strip()  # a pin may have a marker
        if line:
            name, version = line.split("==")
            pins[_norm(name)] = version
    return pins


def _conda_pins() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pins = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str) and "=" in dep and not dep.startswith("python="):
            name, version = dep.split("=", 1)
            pins[_norm(CONDA_TO_PIP.get(name, name))] = version.lstrip("=")
        elif isinstance(dep, dict):  # pip's part: what conda-forge lacks for some platform
            for spec in dep.get("pip", []):
                if "==" in spec:
                    name, version = spec.split(";", 1)[0].split("==")
                    pins[_norm(name)] = version.strip()
    return pins


def _direct_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = project["dependencies"] + [
        d for group in project["optional-dependencies"].values() for d in group
    ]
    names = {_norm(re.split(r"[<>=!~\[ ;]", spec, maxsplit=1)[0]) for spec in specs}
    return names - {_norm(project["name"])}  # course = attention-course[learner] + more


def test_every_direct_dependency_is_pinned_in_both():
    conda, pip = _conda_pins(), _constraints()
    for name in _direct_dependencies():
        assert name in pip, f"{name} (pyproject.toml) is not pinned in constraints.txt"
        assert name in conda, f"{name} (pyproject.toml) is not pinned in environment.yml"


def test_conda_and_pip_pins_agree():
    conda, pip = _conda_pins(), _constraints()
    disagree = {
        name: (version, pip.get(name))
        for name, version in conda.items()
        if pip.get(name) != version
    }
    assert not disagree, f"environment.yml vs constraints.txt: {disagree}"


def test_torch_is_pinned_to_the_cpu_wheel_version():
    # An unpinned torch pulls several GB of CUDA packages on these machines (TOOLCHAIN.md).
    assert _constraints()["torch"] == "2.13.0"


def test_constraints_match_the_installed_environment():
    """What .venv holds (pip's own view) is what constraints.txt says: the lock is not stale."""
    import subprocess
    import sys

    frozen = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    pins = _constraints()
    for line in frozen.splitlines():
        if "==" not in line:
            continue
        name, version = line.split("==")
        name = _norm(name)
        assert name in pins, f"{name} is installed but not pinned in constraints.txt"
        assert version.split("+")[0] == pins[name], (
            f"{name}: installed {version}, pinned {pins[name]}"
        )
