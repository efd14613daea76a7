"""Lesson 11 compiles the learner's Triton kernels for a GPU while grading: the sandbox's audit
hook lets exactly Triton's bundled assembler run, as Triton calls it, and nothing else
(coursekit.grading.compilers). Seconds: no nbgrader (the chain tests grade lesson 11 in
bubblewrap with the same hook)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from coursekit.course.lessons import ROOT
from coursekit.grading import compilers

# Triton's wheels (and its assembler) exist for Linux only (pyproject.toml installs it there):
# elsewhere there is nothing to compile with; on Linux a missing assembler is a failure below.
pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(sys.platform != "linux", reason="Triton has wheels for Linux only"),
]


def test_the_installed_triton_brings_its_assembler():
    assert compilers.bundled_tools(), (
        "no ptxas in the installed Triton's wheel (triton/backends/nvidia/bin/): `make install`"
        " installs the pinned triton on Linux; lesson 11's compile checks need it"
    )


def _tool(name: str = "ptxas") -> str:
    return next(t for t in compilers.bundled_tools() if os.path.basename(t) == name)


def test_triton_s_own_calls_are_recognised_and_others_are_not(tmp_path):
    ptxas, ptx = _tool(), str(tmp_path / "k.ptx")
    triton_s = [ptxas, "-lineinfo", "-v", "--regAllocOptLevel=2", "--gpu-name=sm_80", ptx]
    call = (ptxas, [*triton_s, "-o", ptx + ".o"], None, None)
    assert compilers.assembler_files("subprocess.Popen", call) == [ptx, ptx + ".o"]
    assert compilers.assembler_files("os.posix_spawn", (ptxas, [ptxas, "--version"], {})) == []
    refused = {
        "another program": ("subprocess.Popen", ("/bin/sh", ["/bin/sh", "-c", "id"], None, None)),
        "a shell string": ("subprocess.Popen", (None, f"{ptxas} --version", None, None)),
        "a flag Triton never passes": (
            "subprocess.Popen",
            (None, [ptxas, "--input-as-string", "x"], None, None),
        ),
        "another folder": ("subprocess.Popen", (None, [ptxas, "--version"], "/", None)),
        "ptxas's name on another program": (
            "subprocess.Popen",
            ("/bin/sh", [ptxas, "--version"], None, None),
        ),
        "-o without a file": ("subprocess.Popen", (None, [ptxas, ptx, "-o"], None, None)),
        "a fork": ("os.fork", ()),
    }
    for what, (event, args) in refused.items():
        assert compilers.assembler_files(event, args) is None, what


def test_the_hook_lets_a_kernel_compile_and_keeps_ptxas_out_of_the_course(tmp_path):
    """Under the grading sandbox's hook: a kernel compiles for sm_80, sm_90, sm_100 and sm_120
    (ptxas and ptxas-blackwell run), and its report is kept nowhere the hook protects (the build
    cache of a graded notebook is read, never written); ptxas told to write into the course, or
    any other program, is refused."""
    course, tmp = tmp_path / "course", tmp_path / "t"
    work = course / "autograded" / "me"
    work.mkdir(parents=True)
    tmp.mkdir()
    (course / "gradebook.db").write_text("grades")
    script = textwrap.dedent(f"""
        import json, os, subprocess, sys, tempfile
        tempfile.tempdir = {str(tmp)!r}
        import attention_ref.flash as flash
        from attention_ref.flash import compiler as flash_compile
        from coursekit.grading.sandbox import make_audit_hook
        os.chdir({str(work)!r})
        protected, writable = [{str(course)!r}], [{str(work)!r}, {str(tmp)!r}]
        sys.addaudithook(make_audit_hook(protected, [{str(work)!r}], writable, []))
        out = {{}}
        types = ("*fp16", "*fp16", "i32")
        cache = {str(course / "builds")!r}
        for arch in ("sm_80", "sm_90", "sm_100", "sm_120"):
            build = flash_compile.compile_kernel(flash.softmax_kernel, types, (64,), arch, cache)
            out[arch] = build.registers
        out["cache written"] = os.path.exists(cache)
        out["left in tmp"] = os.listdir(tempfile.tempdir)
        ptxas, gradebook = {_tool()!r}, {str(course / "gradebook.db")!r}
        tries = {{
            "ptxas writing into the course": [ptxas, "x.ptx", "-o", gradebook],
            "another program": ["/bin/true"],
        }}
        for name, argv in tries.items():
            try:
                subprocess.run(argv, capture_output=True)
                out[name] = "allowed"
            except PermissionError:
                out[name] = "refused"
        print(json.dumps(out))
        """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert all(out[arch] > 0 for arch in ("sm_80", "sm_90", "sm_100", "sm_120")), out
    assert out["cache written"] is False, out
    assert out["left in tmp"] == [], "the compiler's folders are removed after each compile"
    assert out["ptxas writing into the course"] == out["another program"] == "refused", out
    assert (course / "gradebook.db").read_text() == "grades"
