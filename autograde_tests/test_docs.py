"""What the README, the contributors' pages (docs/) and the book's own pages tell a reader to run
exists: every `make` target and the variables it is given, every `python -m` module, and every
file or folder of the repository they name. (What those commands *do* is tested where it is
built: the chain runs the nbgrader commands, test_learner_tools.py `make lab` and `make check`,
test_layers.py the drawing of the layers in docs/contributing.md, and so on.)"""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "book").glob("*.md")])
# Folders a page may name that are made by running something (never in a fresh clone).
MADE = ("build/", "book/_build", "book/lessons", "reports/", "work/", "submitted/", "feedback/")
# Folders of the repository itself: a path a page names under one of them must exist.
TRACKED = ("solutions/", "notebooks/", "coursekit/", "classroom/", "autograde_tests/", "book/",
           "docs/", ".ci/")  # fmt: skip
# Settings read from the environment by the tests rather than by the Makefile.
TEST_SETTINGS = {"COURSE_LESSONS", "COURSE_MISTAKES", "CI", "DASK_SCHEDULER_ADDRESS"}

pytestmark = pytest.mark.unit


def _code(text: str) -> list[str]:
    """Every line of a fenced code block and every inline code span of a Markdown page."""
    lines = []
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S):
        lines += block.splitlines()
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.M | re.S)
    return lines + re.findall(r"`([^`\n]+)`", prose)


def _commands(line: str) -> list[list[str]]:
    """The shell commands of a line of code, comments dropped, split at && and ;."""
    line = line.split(" # ")[0].split("\t#")[0].strip()
    if line.startswith("#"):
        return []
    try:
        words = shlex.split(line)
    except ValueError:
        return []
    commands, current = [], []
    for word in words:
        if word in ("&&", ";", "||", "|"):
            commands.append(current)
            current = []
        else:
            current.append(word)
    return [c for c in [*commands, current] if c]


def _makefile():
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w.-]+)\s*:(?!=)", text, re.M))
    variables = set(re.findall(r"\$\(([A-Z_]+)\)", text)) | set(
        re.findall(r"^([A-Z_]+)\s*[?:]?=", text, re.M)
    )
    return targets, variables


def _documented() -> list[tuple[str, list[str]]]:
    found = []
    for page in PAGES:
        for line in _code(page.read_text(encoding="utf-8")):
            found += [(page.relative_to(ROOT).as_posix(), c) for c in _commands(line)]
    return found


def test_every_make_command_a_page_states_exists():
    targets, variables = _makefile()
    wrong = []
    for page, words in _documented():
        words = [w for w in words if w != "sudo"]
        settings = []
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
            settings.append(words.pop(0).split("=")[0])
        if not words or words[0] != "make":
            continue
        for word in words[1:]:
            if re.fullmatch(r"[A-Z_]+=.*", word):
                settings.append(word.split("=")[0])
            elif not word.startswith("-") and word not in targets:
                wrong.append(f"{page}: make {word} (no such target)")
        unknown = [s for s in settings if s not in variables and s not in TEST_SETTINGS]
        wrong += [f"{page}: {s}= (the Makefile reads no such setting)" for s in unknown]
    assert not wrong, "\n".join(wrong)


def test_every_python_module_a_page_runs_exists():
    wrong = []
    for page, words in _documented():
        for i, word in enumerate(words[:-1]):
            if word == "-m" and re.search(r"python3?$", words[i - 1] if i else ""):
                module = words[i + 1]
                if importlib.util.find_spec(module) is None:
                    wrong.append(f"{page}: python -m {module}")
    assert not wrong, "no such module:\n" + "\n".join(wrong)


def test_every_file_a_page_names_exists():
    wrong = []
    for page in PAGES:
        for span in _code(page.read_text(encoding="utf-8")):
            for word in span.split():
                path = word.strip("`'\",;:()")
                if not path.startswith(TRACKED) or path.startswith(MADE):
                    continue
                if re.search(r"[<>*{}$]|NN|\.\.\.", path):
                    continue  # a pattern, not a path
                if not (ROOT / path).exists():
                    wrong.append(f"{page}: {path}")
    assert not wrong, "pages name files that are not in the repository:\n" + "\n".join(wrong)
