"""Build the Jupyter Book from the lesson sources, offline.

    python -m coursekit.publishing.book [--edition solutions|student]

* ``solutions`` (default): each lesson page is the solved lesson with its hidden tests removed,
  the solution markers dropped and every solution cell folded behind a toggle; pages are
  executed at build time (cached by jupyter-cache, so an unchanged lesson is not re-run).
* ``student``: the pages are the student edition from notebooks/, shown unexecuted, with no
  solution code at all -- for instructors who run graded courses.

Sphinx warnings are errors (-W) and references are checked (-n). MathJax is served from the
book itself (see the Makefile's MathJax rule), so math renders with no network.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml

from coursekit.course.lessons import ROOT, Lesson, all_lessons
from coursekit.course.sources import source_to_notebook

BOOK = ROOT / "book"
PAGES = BOOK / "lessons"  # generated, git-ignored
EDITIONS = ("solutions", "student")
MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$\n?", re.MULTILINE)
MARKDOWN_LINK = re.compile(r"\[([^\]]+)\]\((https?://[^)\s]+)\)")


def bibliography_urls() -> dict[str, str]:
    """{url: citation key} of every work in book/references.bib that has a url."""
    from pybtex.database import parse_file  # what sphinxcontrib-bibtex reads the file with

    entries = parse_file(str(BOOK / "references.bib")).entries
    return {entry.fields["url"]: key for key, entry in entries.items() if "url" in entry.fields}


def link_citations(nb: nbformat.NotebookNode, urls: dict[str, str]) -> nbformat.NotebookNode:
    """A lesson links to a work it quotes, e.g. ``[Vaswani et al.](https://arxiv.org/abs/1706.03762)``:
    a link that a learner can follow in Jupyter. In the book, a link to a work in references.bib
    becomes its text followed by a citation (``{cite:p}``) that leads to the references page."""

    def cite(match: re.Match) -> str:
        key = urls.get(match.group(2))
        return match.group(0) if key is None else f"{match.group(1)} {{cite:p}}`{key}`"

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = MARKDOWN_LINK.sub(cite, cell.source)
    return nb


def solutions_page(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The solved lesson as a reader sees it: hidden tests gone, solutions folded."""
    from nbgrader.preprocessors import ClearHiddenTests  # the same markers nbgrader strips

    nb, _ = ClearHiddenTests().preprocess(nb, {})
    for cell in nb.cells:
        meta = cell.metadata.pop("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            cell.source = MARKER.sub("", cell.source)
            tags = cell.metadata.setdefault("tags", [])
            if "hide-input" not in tags:
                tags.append("hide-input")
    return nb


def student_page(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The student edition as released (no solutions, no hidden tests), metadata dropped."""
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)
    return nb


def launch_header(item: Lesson, repository: dict) -> nbformat.NotebookNode:
    """A note under the lesson's title: download its student notebook, or open it online."""
    student = item.student_notebook.relative_to(ROOT).as_posix()
    links = [f"{{download}}`download the student notebook <../../{student}>`"]
    url, branch = repository.get("url", "").rstrip("/"), repository.get("branch", "main")
    if url.startswith("https://github.com/"):
        slug = url.removeprefix("https://github.com/")
        links.append(
            f"[open it in Colab](https://colab.research.google.com/github/{slug}/blob/{branch}/{student})"
        )
        links.append(
            f"[launch it on Binder](https://mybinder.org/v2/gh/{slug}/{branch}?labpath={student})"
        )
    return nbformat.v4.new_markdown_cell(
        ":::{note}\n**Work through this lesson yourself:** " + " · ".join(links) + ". Online, run "
        f"`%pip install git+{url}` first, so that the notebook finds the reference library.\n:::",
        id="launch-links",
    )


def write_pages(edition: str) -> list[Path]:
    """Write book/lessons/<name>.ipynb for every lesson; only pages whose text changed."""
    PAGES.mkdir(exist_ok=True)
    repository = yaml.safe_load((BOOK / "_config.yml").read_text(encoding="utf-8")).get(
        "repository", {}
    )
    written, urls = [], bibliography_urls()
    for item in all_lessons():
        if edition == "student":
            page = student_page(nbformat.read(item.student_notebook, as_version=4))
        else:
            page = solutions_page(source_to_notebook(item.source))
        page = link_citations(page, urls)
        page.cells.insert(1, launch_header(item, repository))  # under the title and its intro
        target = PAGES / f"{item.name}.ipynb"
        text = nbformat.writes(page) + "\n"
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            written.append(target)
    return written


def edition_config(edition: str) -> Path:
    """_config.yml as is for the solutions edition; for the student edition a derived copy
    that does not execute (stubs raise NotImplementedError) and says which edition it is."""
    if edition == "solutions":
        return BOOK / "_config.yml"
    config = yaml.safe_load((BOOK / "_config.yml").read_text(encoding="utf-8"))
    config["title"] = f"{config['title']} (student edition)"
    config["execute"]["execute_notebooks"] = "off"
    target = BOOK / "_build" / edition / "_config.yml"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return target


def build(edition: str, pages: bool = True, quiet: bool = False) -> Path:
    """Build the book; ``pages=False`` keeps book/lessons/ as it is (the benchmark edits it)."""
    if pages:
        write_pages(edition)
    out = BOOK / "_build" / edition
    command = [
        str(Path(sys.executable).with_name("jupyter-book")),
        "build",
        str(BOOK),
        "--path-output",
        str(out),
        "--config",
        str(edition_config(edition)),
        "-W",
        "-n",
        "--keep-going",
    ]
    result = subprocess.run(command, cwd=ROOT, check=False, capture_output=quiet, text=True)
    if result.returncode != 0:
        details = (result.stdout or "")[-3000:] if quiet else "see the warnings above"
        raise SystemExit(f"the book did not build ({edition} edition): {details}")
    return out / "_build" / "html" / "index.html"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edition", choices=EDITIONS, default="solutions")
    build(parser.parse_args(argv).edition)


if __name__ == "__main__":
    main(sys.argv[1:])
