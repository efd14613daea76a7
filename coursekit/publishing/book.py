"""Build the Jupyter Book from the lesson sources, offline.

    python -m coursekit.publishing.book [--edition solutions|student]
                                        [--repository https://github.com/ORG/REPO [--branch B]]

* ``solutions`` (default): each lesson page is the solved lesson with its hidden tests removed,
  the solution markers dropped and every solution cell folded behind a toggle; pages are
  executed at build time (cached by jupyter-cache, so an unchanged lesson is not re-run).
* ``student``: the pages are the student edition from notebooks/, shown unexecuted, with no
  solution code at all -- for instructors who run graded courses.

Sphinx warnings are errors (-W) and references are checked (-n). MathJax is served from the
book itself (see the Makefile's MathJax rule), so math renders with no network.

What is decided at build time goes into the configuration the build uses
(book/_build/<edition>/_config.yml, derived from book/_config.yml), never into a committed file:

* the repository the book is published from (``--repository``, the Makefile's
  ``BOOK_REPOSITORY=``): each lesson page's Colab and Binder links and the pages' ``git clone``
  use it. Without one the book offers each student notebook as a download and names no address,
  since any address written in advance would be a guess that leads nowhere;
* each lesson's expected time, computed from its source by the stated method of
  coursekit.course.expected_time (which the lesson's top line ``**Expected time:** about N
  minutes`` states too), their total and the method, which the course map on the intro page
  shows through MyST substitutions (``{{ time_lesson01 }}``, ``{{ total_time }}``,
  ``{{ time_method }}``).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml

from coursekit.course import expected_time, numerics
from coursekit.course.lessons import ROOT, Lesson, all_lessons
from coursekit.course.sources import nbgrader_source

BOOK = ROOT / "book"
PAGES = BOOK / "lessons"  # generated, git-ignored
EDITIONS = ("solutions", "student")
MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$\n?", re.MULTILINE)
MARKDOWN_LINK = re.compile(r"\[([^\]]+)\]\((https?://[^)\s]+)\)")
# Colab opens notebooks from GitHub only, so the repository is a GitHub one.
GITHUB = re.compile(r"^https://github\.com/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?:\.git)?/?$")


def repository_slug(url: str) -> str:
    """``ORG/REPO`` of ``https://github.com/ORG/REPO``; "" when no repository is set."""
    if not url:
        return ""
    match = GITHUB.match(url)
    if match is None:
        raise SystemExit(
            f"BOOK_REPOSITORY={url!r} is not a GitHub repository's address: give one like "
            "https://github.com/ORG/REPO (Colab opens notebooks from GitHub only), or none"
        )
    return match.group(1)


def expected_minutes(item: Lesson) -> int:
    """The lesson's expected time, computed by the course's stated method
    (coursekit.course.expected_time); the lesson states it in its top line, which must exist
    (a test holds the two equal)."""
    if expected_time.stated_minutes(item) is None:
        raise SystemExit(
            f"{item.source.relative_to(item.root)}: no single line"
            " '**Expected time:** about N minutes'; a lesson states its expected time once, at"
            " its top (`python -m coursekit.course.expected_time --write` writes it), and the"
            " book's course map lists it (and the total)"
        )
    return expected_time.computed_minutes(item)


def hours(minutes: int) -> str:
    """A total for the reader: "about 690 minutes (11½ hours)", the hours to the half hour."""
    halves = round(minutes / 30)
    whole, half = divmod(halves, 2)
    amount = f"{whole}½" if half else f"{whole}"
    return f"about {minutes} minutes ({amount} hour{'' if halves == 2 else 's'})"


def substitutions(lessons: list[Lesson], slug: str, branch: str) -> dict[str, str]:
    """The MyST substitutions the book's pages use (intro.md's course map, how_to_use.md)."""
    minutes = {item.assignment: expected_minutes(item) for item in lessons}
    # "50 min" with a no-break space: a narrow table column would put "min" on a line of its own
    values = {f"time_{assignment}": f"{m}\u00a0min" for assignment, m in minutes.items()}
    values["total_time"] = hours(sum(minutes.values()))
    values["time_method"] = expected_time.METHOD
    if slug:
        url = f"https://github.com/{slug}"
        values["the_repository"] = f"[the course's repository]({url})"
        option = "" if branch == "main" else f" --branch {branch}"
        values["clone_the_course"] = (
            f"```bash\ngit clone{option} {url} attention-course && cd attention-course\n```"
        )
    else:
        values["the_repository"] = "the course's repository"
        values["clone_the_course"] = (
            "Get a copy of the course's repository (whoever pointed you to this book knows where"
            " it is published), then, in its folder:"
        )
    return values


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


def launch_header(item: Lesson, slug: str, branch: str) -> nbformat.NotebookNode:
    """A note under the lesson's title: download its student notebook, or open it online
    (only when the book knows the repository it is published from: ``slug``, ORG/REPO)."""
    student = item.student_notebook.relative_to(item.root).as_posix()
    links = [f"{{download}}`download the student notebook <../../{student}>`"]
    online = ""
    if slug:
        links.append(
            f"[open it in Colab](https://colab.research.google.com/github/{slug}/blob/{branch}/{student})"
        )
        links.append(
            f"[launch it on Binder](https://mybinder.org/v2/gh/{slug}/{branch}?labpath={student})"
        )
        online = (
            f" Online, run `%pip install git+https://github.com/{slug}@{branch}` first, so that"
            " the notebook finds the reference library. There the test cells under the exercises"
            " check your work as you go; `make check`, which adds the hidden tests, needs a clone"
            " of the course."
        )
    text = "**Work through this lesson yourself:** " + " · ".join(links) + "." + online
    return nbformat.v4.new_markdown_cell(
        f":::{{note}}\n{text}\n:::",
        id="launch-links",
    )


def lesson_page(
    item: Lesson, edition: str, slug: str = "", branch: str = "main", urls: dict | None = None
) -> nbformat.NotebookNode:
    """The lesson's page as the book builds it (unexecuted): book/lessons/<name>.ipynb."""
    if edition == "student":
        page = student_page(nbformat.read(item.student_notebook, as_version=4))
    else:
        page = solutions_page(nbgrader_source(item.source))  # test cells as learners see them
    page = link_citations(page, bibliography_urls() if urls is None else urls)
    page.cells.insert(1, launch_header(item, slug, branch))  # under the title and its intro
    return page


def write_pages(edition: str, slug: str = "", branch: str = "main") -> list[Path]:
    """Write book/lessons/<name>.ipynb for every lesson; only pages whose text changed."""
    PAGES.mkdir(exist_ok=True)
    written, urls = [], bibliography_urls()
    for item in all_lessons():
        page = lesson_page(item, edition, slug, branch, urls)
        target = PAGES / f"{item.name}.ipynb"
        text = nbformat.writes(page) + "\n"
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            written.append(target)
    return written


def book_config(edition: str, slug: str, branch: str, lessons: list[Lesson]) -> dict:
    """book/_config.yml plus what is decided at build time: the repository (none: ``slug``
    is ""), the lessons' expected times; for the student edition, also no execution (stubs
    raise NotImplementedError) and a title that says which edition it is."""
    config = yaml.safe_load((BOOK / "_config.yml").read_text(encoding="utf-8"))
    # Jupyter Book's default repository is its own: name ours, or none at all.
    config["repository"] = {"url": f"https://github.com/{slug}" if slug else "", "branch": branch}
    config["parse"]["myst_substitutions"] = substitutions(lessons, slug, branch)
    if edition == "student":
        config["title"] = f"{config['title']} (student edition)"
        config["execute"]["execute_notebooks"] = "off"
    return config


def edition_config(edition: str, slug: str = "", branch: str = "main") -> Path:
    """Write the configuration a build uses, book/_build/<edition>/_config.yml."""
    config = book_config(edition, slug, branch, all_lessons())
    target = BOOK / "_build" / edition / "_config.yml"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), "utf-8")
    return target


def build(
    edition: str,
    pages: bool = True,
    quiet: bool = False,
    repository: str = "",
    branch: str = "main",
) -> Path:
    """Build the book; ``pages=False`` keeps book/lessons/ as it is (the benchmark edits it)."""
    slug = repository_slug(repository)
    config = edition_config(edition, slug, branch)  # first: it checks every lesson's time
    if pages:
        write_pages(edition, slug, branch)
    out = BOOK / "_build" / edition
    command = [
        str(Path(sys.executable).with_name("jupyter-book")),
        "build",
        str(BOOK),
        "--path-output",
        str(out),
        "--config",
        str(config),
        "-W",
        "-n",
        "--keep-going",
    ]
    result = subprocess.run(
        command,
        cwd=ROOT,
        # lesson 11's builds kept for the next build (attention_ref's flash compiler): trusted code
        env={**numerics.book_environment(), "ATTENTION_REF_KEEP_BUILDS": "1"},
        check=False,
        capture_output=quiet,
        text=True,
    )
    if result.returncode != 0:
        details = (result.stdout or "")[-3000:] if quiet else "see the warnings above"
        raise SystemExit(f"the book did not build ({edition} edition): {details}")
    return out / "_build" / "html" / "index.html"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edition", choices=EDITIONS, default="solutions")
    parser.add_argument(
        "--repository", default="", help="https://github.com/ORG/REPO the book is published from"
    )
    parser.add_argument("--branch", default="main", help="the branch its links open")
    args = parser.parse_args(argv)
    build(args.edition, repository=args.repository, branch=args.branch)


if __name__ == "__main__":
    main(sys.argv[1:])
