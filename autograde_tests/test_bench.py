"""`make bench` runs: every section on toy sizes (its numbers are not checked: they are numbers,
not timed tests), the GPU section's code on the CPU, and the parsing of the class-grading report."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import attention_ref.flash as flash
from coursekit import bench
from coursekit.bench.cli import main as bench_main
from coursekit.bench.triton_kernels import backward_rows

pytestmark = pytest.mark.bench


def test_every_section_runs_on_toy_sizes(capsys):
    bench_main(["--tiny"])
    out = capsys.readouterr().out
    for title in (
        "Lesson execution",
        "floor: imports numpy, torch, matplotlib",
        "Attention on the CPU",
        "reference NumPy (lesson 2)",
        "tiled PyTorch (lesson 9",
        "Peak memory",
        "Autograding a class",
        "make bench-book",
    ):
        assert title in out, f"{title!r} missing from the benchmark's output:\n{out}"
    if not torch.cuda.is_available():
        assert "no GPU on this machine" in out
    if flash.UNAVAILABLE is None:  # compiling for a GPU needs none
        assert "as a GPU run launches them, compiled for an A100 (sm_80)" in out
        assert "attention_kernel" in out and "registers" in out and "cp.async" in out


def test_lessons_run_in_rounds_beside_the_floor_and_can_be_chosen(capsys):
    from coursekit.bench.lessons import rounds, selected_lessons

    chosen = selected_lessons(bench.Config(lesson_names=("lesson12", "lesson02")))
    assert [item.assignment for item in chosen] == ["lesson12", "lesson02"]
    assert len(selected_lessons(bench.Config())) >= 12
    names = [name for name, _ in rounds(2, 3, chosen)]
    assert names == ["floor", "lesson12", "lesson02"] * 3
    assert [name for name, _ in rounds(2, 1, chosen)] == ["floor", "lesson12", "lesson02", "floor"]
    with pytest.raises(SystemExit, match="no lesson called 'lesson99'; the lessons are: lesson01"):
        bench_main(["--only", "lessons", "--lessons", "lesson12,lesson99"])
    assert "Lesson execution" not in capsys.readouterr().out  # refused before measuring


def test_gpu_section_code_runs_on_the_cpu():
    tables = bench.bench_gpu(bench.TINY, device="cpu")
    text = "\n".join(table.render() for table in tables)
    assert "tiled PyTorch (block" in text and "throughput" in text
    timing = tables[0]
    tiled = next(row for row in timing.rows if row[0].startswith("tiled PyTorch"))
    # it ran (and matched the built-in) at every n
    assert all(float(cell) > 0 for cell in tiled[1:]), tiled


def test_lesson_11_backward_is_timed_against_flash_on_a_gpu():
    """The backward kernel's row beside the forward one: measured where CUDA compiles the
    kernels, and a row saying why not elsewhere."""
    tables = bench.bench_gpu(bench.TINY, device="cpu")
    text = "\n".join(table.render() for table in tables)
    assert "Triton backward (lesson 11)" in text and "not run" in text
    if not torch.cuda.is_available() or flash.UNAVAILABLE:
        pytest.skip("no CUDA GPU here: the backward kernel is timed on one only")
    from coursekit.bench.gpu import _Setting

    cfg = dataclasses.replace(bench.TINY, gpu_shape=(1, 2, 64))  # a head dimension the kernels take
    setting = _Setting(cfg, torch.device("cuda"), torch.float16, torch.Generator("cuda"))
    rows = backward_rows(setting, 256)
    assert rows[0][0] == "Triton backward / flash backward throughput" and float(rows[0][1]) > 0


def test_class_grading_report_is_found_and_parsed(tmp_path):
    (tmp_path / "Makefile").write_text("lab:\n\ttrue\n")
    assert bench.class_grading_target(tmp_path) is None
    table = bench.bench_grading(bench.Config(), root=tmp_path)
    assert "not on main yet" in table.render()
    (tmp_path / "Makefile").write_text(
        "grade-class: x\n\t@echo 'graded 100 notebooks: 37.5 notebooks/minute'\nx:\n\t@true\n"
    )
    assert bench.class_grading_target(tmp_path) == "grade-class"
    assert "37.5" in bench.bench_grading(bench.Config(), root=tmp_path).render()
    assert bench.parse_rate("12 notebooks per minute, then 14.25 Notebooks / min") == 14.25
    assert bench.parse_rate("nothing to see") is None


def test_cells_lists_every_cell_that_raised_and_the_run_goes_on(tmp_path):
    import nbformat.v4 as v4

    from coursekit.bench.cells import main as cells_main
    from coursekit.bench.cells import raised
    from coursekit.bench.lessons import execute_seconds

    nb = v4.new_notebook()
    nb.cells = [
        v4.new_code_cell("x = 1"),
        v4.new_code_cell("1 / 0"),
        v4.new_markdown_cell("prose is not run"),
        v4.new_code_cell("x += 1\nprint(x)"),
        v4.new_code_cell("raise ValueError('second')", metadata={"nbgrader": {"grade_id": "t"}}),
    ]
    execute_seconds(nb, tmp_path, keep_going=True)
    assert raised(nb) == [
        "  cell 1: ZeroDivisionError: division by zero",
        "  cell 4 (t): ValueError: second",
    ]
    assert nb.cells[3].outputs[0]["text"] == "2\n"  # the cells after an error ran
    with pytest.raises(SystemExit, match="no lesson called 'lesson99'"):
        cells_main(["lesson99"])
