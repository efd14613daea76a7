"""The lessons print the numbers their text quotes on x86-64 machines with or without AVX-512:
PyTorch's AVX2 kernels are pinned for every process that runs a lesson
(coursekit.course.numerics), by the Makefile and by these tests' own start-up."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from coursekit.course import numerics
from coursekit.course.lessons import ROOT


@pytest.mark.unit
def test_the_makefile_exports_the_same_pins_on_x86_64():
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    block = re.search(r"^ifeq \(\$\(shell uname -m\),x86_64\)\n(.*?)^endif", text, re.M | re.S)
    assert block, "the Makefile pins the CPU kernels inside ifeq ($(shell uname -m),x86_64)"
    exported = dict(re.findall(r"^export (\w+) \?= (\S+)$", block.group(1), re.M))
    assert exported == numerics.PINNED


@pytest.mark.unit
@pytest.mark.parametrize(
    ("machine", "pinned"), [("x86_64", True), ("AMD64", True), ("arm64", False)]
)
def test_pins_are_set_on_x86_64_only_and_never_override(monkeypatch, machine, pinned):
    monkeypatch.setattr(numerics.platform, "machine", lambda: machine)
    environ = {}
    numerics.pin_cpu_kernels(environ)
    assert environ == (numerics.PINNED if pinned else {})
    chosen = {"ATEN_CPU_CAPABILITY": "default"}
    numerics.pin_cpu_kernels(chosen)
    assert chosen["ATEN_CPU_CAPABILITY"] == "default", "a value set by hand is kept"


@pytest.mark.unit
@pytest.mark.skipif(
    numerics.platform.machine().lower() not in ("x86_64", "amd64"), reason="x86-64 only"
)
def test_a_process_the_tests_start_runs_pytorchs_avx2_kernels():
    """What a kernel started by the tests (nbclient, nbgrader, the book's build) inherits."""
    asked = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    ran = subprocess.run([sys.executable, "-c", asked], capture_output=True, text=True, check=True)
    if os.environ.get("ATEN_CPU_CAPABILITY") != "avx2":
        pytest.skip(f"ATEN_CPU_CAPABILITY={os.environ.get('ATEN_CPU_CAPABILITY')} was set by hand")
    assert ran.stdout.strip() in ("AVX2", "DEFAULT"), ran.stdout  # DEFAULT: a CPU without AVX2
