"""Class grading throughput: runs the class-grading command and parses its own report."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from coursekit.bench.report import Config, Table
from coursekit.course.lessons import ROOT

CLASS_SIZE = 100
# Makefile targets that grade a class of CLASS and report notebooks per minute
GRADING_TARGETS = ("grade-class",)
RATE = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*notebooks?\s*(?:/|per)\s*min", re.IGNORECASE)


def class_grading_target(root: Path = ROOT) -> str | None:
    """The Makefile target that autogrades a class and reports notebooks per minute, if any."""
    makefile = (root / "Makefile").read_text(encoding="utf-8")
    return next(
        (t for t in GRADING_TARGETS if re.search(rf"^{re.escape(t)}\s*:", makefile, re.MULTILINE)),
        None,
    )


def parse_rate(output: str) -> float | None:
    """The last "N notebooks/minute" (or "notebooks per minute") in a command's output."""
    found = RATE.findall(output)
    return float(found[-1]) if found else None


def bench_grading(cfg: Config, root: Path = ROOT) -> Table:
    table = Table(f"Autograding a class of {CLASS_SIZE} on this machine", ["measure", "value"])
    target = class_grading_target(root) if cfg.grading else None
    if target is None:
        why = "not run (--tiny)" if not cfg.grading else "n/a (class grading not on main yet)"
        table.rows.append(["notebooks per minute", why])
        return table
    # its report ends with the rate
    command = [
        "make",
        "--no-print-directory",
        target,
        f"CLASS={CLASS_SIZE}",
    ]
    print(
        f"  running `{' '.join(command)}` (minutes; its progress bar follows)",
        file=sys.stderr,
        flush=True,
    )
    start = time.perf_counter()
    # its report (stdout) is parsed; its progress bar (stderr) shows as it runs
    result = subprocess.run(command, cwd=root, stdout=subprocess.PIPE, text=True, check=False)
    took = time.perf_counter() - start
    rate = parse_rate(result.stdout)
    if result.returncode != 0 or rate is None:
        table.rows.append(
            [
                "notebooks per minute",
                f"n/a (`{' '.join(command)}` exited {result.returncode}, "
                "no 'notebooks/minute' in its output)",
            ]
        )
    else:
        table.rows.append(["notebooks per minute", f"{rate:.1f}"])
    table.rows.append(["wall time of the command", f"{took:.0f} s"])
    table.notes.append(f"from `{' '.join(command)}` (its own report, parsed)")
    return table
