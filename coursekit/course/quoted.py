"""Text a lesson quotes from what its code prints, marked so that a test can hold the two together.

A markdown cell that quotes printed output (a number, a generated line) lists the quoted strings
in an HTML comment, invisible in JupyterLab and in the book::

    Beam search finds a line the model rates higher: "Now is better than complex."
    (log P −2.98 against −3.48).
    <!-- from output: "Now is better than complex.", "−2.98", "−3.48" -->

Each listed string must appear in the cell's visible text and in the printed text (stdout and
stderr, ``text/plain``, ``text/html`` without its tags) of one earlier code cell of the *executed*
lesson. Matching is exact after two normalizations: the minus sign "−" (U+2212) counts as "-",
and every run of white space (no-break spaces included) as one space. A quote that begins or ends
with a letter or digit must not be part of a longer word or number there ("2.9" is not quoted
from "12.95"): print what the prose says, rounded as the prose rounds it.

The first check needs only the lesson's source (``source_problems``); the second needs outputs
(``output_problems``), which the book's build already has (coursekit.publishing.quoted).
"""

from __future__ import annotations

import html
import json
import re

COMMENT = re.compile(r"<!--(.*?)-->", re.DOTALL)
MARKER = re.compile(r"^\s*from[\s_-]*outputs?\s*:?", re.IGNORECASE)
EXACT = re.compile(r"^\s*from output:(.*)$", re.DOTALL)
TAG = re.compile(r"<[^>]+>")
SPACE = re.compile(r"\s+")
HEADING = re.compile(r"^#+\s+(.*)$", re.MULTILINE)
TEXT_TYPES = ("text/plain", "text/markdown", "text/latex")


def normalize(text: str) -> str:
    """The minus sign as "-", every run of white space (no-break ones too) as one space."""
    return SPACE.sub(" ", text.replace("\u2212", "-")).strip()


def _boundary_pattern(quote: str) -> re.Pattern:
    """``quote`` (normalized) as a regex that a longer word or number around it does not match."""
    pattern = re.escape(quote)
    if quote[:1].isalnum():
        pattern = r"(?<![\w.])" + pattern if quote[:1].isdigit() else r"(?<!\w)" + pattern
    if quote[-1:].isalnum():
        pattern += r"(?![\w])(?!\.\d)" if quote[-1:].isdigit() else r"(?!\w)"
    return re.compile(pattern)


def contains(text: str, quote: str) -> bool:
    """Whether normalized ``text`` holds normalized ``quote`` as a whole (see the module's doc)."""
    quote = normalize(quote)
    return bool(quote) and _boundary_pattern(quote).search(normalize(text)) is not None


def visible_text(markdown: str) -> str:
    """What a reader can see of a markdown cell: its text without HTML comments."""
    return COMMENT.sub(" ", markdown)


def quotes(markdown: str) -> tuple[list[str], list[str]]:
    """(the strings a markdown cell says it quotes from output, problems with how it says so)."""
    found, problems = [], []
    for comment in COMMENT.findall(markdown):
        if not MARKER.match(comment):
            continue
        exact = EXACT.match(comment)
        try:
            listed = json.loads(f"[{exact.group(1)}]") if exact else None
        except json.JSONDecodeError:
            listed = None
        if (
            not isinstance(listed, list)
            or not listed
            or not all(isinstance(item, str) and normalize(item) for item in listed)
        ):
            problems.append(
                f"<!--{comment}--> is not a list of quoted strings: write"
                ' <!-- from output: "first", "second" --> (double quotes, commas between)'
            )
            continue
        found += listed
    return found, problems


def printed_text(cell) -> str:
    """All a code cell printed or displayed as text, its outputs one after another."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output.get("text", ""))
        data = output.get("data", {})
        parts += [data[kind] for kind in TEXT_TYPES if isinstance(data.get(kind), str)]
        if isinstance(data.get("text/html"), str):
            parts.append(html.unescape(TAG.sub(" ", data["text/html"])))
    return "\n".join(parts)


def where(cells, index: int) -> str:
    """A markdown cell as a reader finds it: under which heading, and how it begins."""
    heading, own = "", HEADING.match(cells[index].source.lstrip())
    for cell in cells[:index]:
        if cell.cell_type == "markdown":
            heading = (HEADING.findall(cell.source) or [heading])[-1]
    start = normalize(visible_text(cells[index].source))[:50]
    return f"cell {index} under {(own.group(1) if own else heading)!r} ({start!r}...)"


def source_problems(nb) -> list[str]:
    """Malformed markers, and quotes missing from their own cell's visible text."""
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        listed, problems = quotes(cell.source)
        visible = visible_text(cell.source)
        problems += [
            f"{q!r} is listed but not in the text" for q in listed if not contains(visible, q)
        ]
        found += [f"{where(nb.cells, index)}: {p}" for p in problems]
    return found


def output_problems(executed) -> list[str]:
    """Quotes that no earlier code cell of the executed notebook printed."""
    found, printed = [], []
    for index, cell in enumerate(executed.cells):
        if cell.cell_type == "code":
            printed.append(printed_text(cell))
            continue
        if cell.cell_type != "markdown":
            continue
        for quote in quotes(cell.source)[0]:
            if not any(contains(text, quote) for text in printed):
                found.append(f"{where(executed.cells, index)}: no earlier cell printed {quote!r}")
    return found
