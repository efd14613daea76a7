"""What a learner reads cites the paper and published sources, never the team's planning notes.

The notes the course was planned from (the "seed" notes, kept outside the course) are not the
learner's: a lesson, a book page, the README or a docstring of the library that names one ("seed
001", "the seed notes") points the learner at something they cannot read, and such notes
paraphrase, and sometimes get wrong, what the paper says. Quote the paper itself (Vaswani et al.,
2017, by section, equation or figure) or a published source instead."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from coursekit.course.lessons import ROOT

pytestmark = pytest.mark.unit

# "seed 001", "Seed\n003", "seed notes", "seed texts", "shared/seeds": never a random seed
# ("manual_seed(0)", "the same rng seed", "for seed, line in ...").
SEED_NOTE = re.compile(
    r"\bseeds?\s+0\d\d\b|\bseeds?[\s-]+(?:notes?|texts?)\b|shared/seeds", re.IGNORECASE
)

LEARNER_FACING = (
    "solutions/lesson*/*.md",
    "notebooks/**/*.ipynb",
    "book/*.md",
    "book/*.bib",
    "book/*.yml",  # the book's title, table of contents and configuration
    "coursekit/publishing/*.py",  # the text it writes into the book's pages
    "solutions/attention_ref/**/*.py",
    "README.md",
    "docs/*.md",  # the contributors' guide and the grading defences, which instructors read too
)


def _learner_facing_files() -> list[Path]:
    files = {path for pattern in LEARNER_FACING for path in ROOT.glob(pattern)}
    return sorted(path for path in files if "_build" not in path.parts)


def _text(path: Path) -> str:
    """What a learner reads in the file: a notebook's cells joined (a phrase may span lines)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":
        cells = json.loads(text)["cells"]
        return "\n".join("".join(cell["source"]) for cell in cells)
    return text


@pytest.mark.parametrize(
    "text",
    [
        "as seed 001 quotes",
        "(Seed\n003 writes",
        "the seed notes on attention",
        "seed texts",
        "/work/shared/seeds/004_x.txt",
        "seeds 002",
    ],
)
def test_the_pattern_finds_a_named_note(text):
    assert SEED_NOTE.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "torch.manual_seed(0)",
        "the same rng seed must give the same masking",
        "seed=0",
        "for seed, line in enumerate(lines)",
        "def _trigram(vocab, seed):",
        "seed 1 and seed 2",
    ],
)
def test_the_pattern_leaves_random_seeds_alone(text):
    assert not SEED_NOTE.search(text)


def test_no_learner_facing_file_names_a_planning_note():
    files = _learner_facing_files()
    assert any(path.suffix == ".ipynb" for path in files), "the student notebooks were not found"
    found = []
    for path in files:
        text = _text(path)
        for match in SEED_NOTE.finditer(text):
            where = (
                "" if path.suffix == ".ipynb" else f":{text.count(chr(10), 0, match.start()) + 1}"
            )
            context = " ".join(text[max(0, match.start() - 40) : match.end() + 40].split())
            found.append(f"{path.relative_to(ROOT)}{where}: ...{context}...")
    assert not found, (
        "these learner-facing files name the team's planning notes, which learners never see:\n  "
        + "\n  ".join(found)
        + "\nQuote and cite the paper itself (Vaswani et al., 2017, by section, equation or figure)"
        " or a published source (book/references.bib; lessons link to arXiv) instead, and"
        " `make notebooks` to regenerate the student edition."
    )
