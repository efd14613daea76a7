"""make versions (coursekit/bench/versions.py) installs what pyproject.toml promises, and the GPU
machine's script (coursekit/bench/gpu_check.sh) is a valid script. The environments themselves
are built by `make versions`, never here: they take GBs and half an hour."""

from __future__ import annotations

import subprocess

import pytest

from coursekit.bench import versions
from coursekit.course.lessons import ROOT

pytestmark = pytest.mark.unit


def test_the_oldest_set_is_every_floor_pyproject_declares(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\ndependencies = ["numpy>=1.26", "torch >= 2.6"]\n'
        '[project.optional-dependencies]\nlearner = ["matplotlib", "transformers>=5.11,<6", '
        "\"triton>=3.8; sys_platform == 'linux'\"]\n"
    )
    assert versions.floors(pyproject) == {
        "numpy": "1.26",
        "torch": "2.6",
        "transformers": "5.11",
        "triton": "3.8",
    }


def test_each_set_installs_the_watched_packages():
    floors = versions.floors()
    oldest = versions.requirements("oldest")
    for package in ("numpy", "torch"):
        assert f"{package}=={floors[package]}" in oldest
    assert len(oldest) == len(set(oldest))
    newest = versions.requirements("newest")
    assert all("=" not in item for item in newest)  # the newest the registries serve
    assert set(versions.WATCHED) <= set(newest) and "pytest" in newest
    colab = versions.requirements("colab")
    assert "pytest" not in colab and "nbgrader" not in colab and "jupytext" not in colab
    assert str(ROOT / "constraints.txt") in colab  # Colab's packages at the course's pins
    with pytest.raises(ValueError, match="unknown set 'old'"):
        versions.requirements("old")


def test_colab_installs_the_last_commit_as_the_book_says_not_the_folder():
    # %pip install git+https://...@branch installs what git has: no untracked file, nothing
    # setuptools left in build/lib
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert versions.colab_source() == f"git+file://{ROOT}@{commit}"


def test_the_gpu_script_parses():
    script = ROOT / "coursekit" / "bench" / "gpu_check.sh"
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_cell_that_runs_too_long_is_reported_and_the_run_goes_on(monkeypatch, tmp_path):
    import nbclient
    import nbformat

    def too_long(client):
        raise nbclient.exceptions.CellTimeoutError("A cell timed out after 1800 seconds.\nmore")

    monkeypatch.setattr(nbclient.NotebookClient, "execute", too_long)
    monkeypatch.setenv("JUPYTER_PATH", "")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
    lines = versions.execute(nb, tmp_path, tmp_path / "venv")
    assert lines == ["  A cell timed out after 1800 seconds. (the cells after it did not run)"]
