"""The book as `make book` builds it: every lesson executed, figures, local MathJax, solutions
folded, hidden tests nowhere. (A real browser looks at it in test_book_browser.py.)"""

from __future__ import annotations

import html
import re
import subprocess
from pathlib import Path

import pytest

from coursekit.course.lessons import ROOT, all_lessons

from .leaks import hidden_test_lines, released_code

pytestmark = pytest.mark.book
HTML = ROOT / "book" / "_build" / "solutions" / "_build" / "html"


@pytest.fixture(scope="session")
def book():
    """Build the book once per session with the README's command (a no-op when up to date)."""
    result = subprocess.run(["make", "book"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, (
        f"make book failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    assert (HTML / "index.html").exists()
    return HTML


def _text(page: Path) -> str:
    """The page's visible text, tags stripped (what a reader could see or copy)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("lesson", all_lessons(), ids=lambda item: item.assignment)
def test_lesson_page_is_executed_with_figures(book, lesson):
    page = book / "lessons" / f"{lesson.name}.html"
    assert page.exists(), f"{lesson.assignment} is not in the book (book/_toc.yml)"
    text = page.read_text(encoding="utf-8")
    images = re.findall(r'<img[^>]+src="\.\./(_images/[^"]+\.png)"', text)
    assert len(images) >= 2, f"{page.name} shows {len(images)} figures, expected at least 2"
    for image in images:
        assert (book / image).stat().st_size > 1000, f"{image} is empty"
    assert "Traceback" not in _text(page), f"a cell of {page.name} raised an error"


@pytest.mark.parametrize("lesson", all_lessons(), ids=lambda item: item.assignment)
def test_solutions_are_folded_and_hidden_tests_absent(book, lesson):
    page = book / "lessons" / f"{lesson.name}.html"
    text = page.read_text(encoding="utf-8")
    solution_cells = lesson.source.read_text(encoding="utf-8").count("### BEGIN SOLUTION")
    assert text.count("tag_hide-input") == solution_cells, (
        "each solution cell is folded behind a toggle"
    )
    visible = _text(page)
    for marker in ("BEGIN SOLUTION", "HIDDEN TESTS", "nbgrader"):
        assert marker not in visible, f"{marker!r} appears on {page.name}"
    hidden = hidden_test_lines(lesson)
    assert hidden, "the lesson has hidden tests"
    everything = "\n".join(_text(p) for p in book.rglob("*.html"))
    everything += (book / "searchindex.js").read_text(encoding="utf-8")
    leaked = [line for line in hidden if line in everything]
    assert not leaked, f"hidden test lines are in the book: {leaked[:3]}"


def test_math_is_served_by_a_local_mathjax(book):
    for page in book.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "cdn.jsdelivr.net" not in text and "mathjax@" not in text, (
            f"{page} loads MathJax from a CDN"
        )
    page = (book / "lessons" / f"{all_lessons()[0].name}.html").read_text(encoding="utf-8")
    assert re.search(r'<script[^>]+src="\.\./_static/mathjax/tex-mml-chtml\.js', page)
    assert (book / "_static" / "mathjax" / "tex-mml-chtml.js").stat().st_size > 100_000
    assert list(
        (book / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff")
    )
    assert page.count('class="math') >= 10, "the lesson's formulas are marked up for MathJax"


def test_every_lesson_is_in_the_table_of_contents():
    toc = (ROOT / "book" / "_toc.yml").read_text(encoding="utf-8")
    for lesson in all_lessons():
        assert f"lessons/{lesson.name}" in toc, f"{lesson.name} is missing from book/_toc.yml"


def test_make_targets_do_no_work_the_second_time(book):
    """After a build, make considers the book and the student edition up to date (`make -q`)."""
    subprocess.run(["make", "notebooks"], cwd=ROOT, check=True, capture_output=True)
    index = (HTML / "index.html").relative_to(ROOT).as_posix()  # `book` itself only prints the path
    for target in (index, "notebooks", "install"):
        result = subprocess.run(["make", "-q", target], cwd=ROOT, capture_output=True, text=True)
        assert result.returncode == 0, (
            f"`make {target}` would run again: {result.stdout}{result.stderr}"
        )


def test_internal_links_resolve(book):
    """Every relative link of every page points to a file of the book, and to an anchor in it."""
    from urllib.parse import unquote, urlsplit

    broken = []
    ids_of = {}
    for page in book.rglob("*.html"):
        if page.relative_to(book).parts[0] in ("_static", "_sources"):
            continue
        for href in re.findall(r'href="([^"]+)"', page.read_text(encoding="utf-8")):
            parts = urlsplit(href)
            if parts.scheme or href.startswith(("mailto:", "//", "javascript:")):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not target.exists():
                broken.append(f"{page.name}: {href}")
                continue
            if parts.fragment and target.suffix == ".html":
                if target not in ids_of:
                    ids_of[target] = set(
                        re.findall(r'id="([^"]+)"', target.read_text(encoding="utf-8"))
                    )
                if unquote(parts.fragment) not in ids_of[target]:
                    broken.append(f"{page.name}: {href} (no such anchor)")
    assert not broken, f"{len(broken)} broken links: {broken[:10]}"


def test_lesson_pages_offer_the_student_notebook(book):
    for lesson in all_lessons():
        text = (book / "lessons" / f"{lesson.name}.html").read_text(encoding="utf-8")
        downloads = re.findall(r'href="\.\./(_downloads/[^"]+\.ipynb)"', text)
        assert downloads, f"{lesson.name}: no student notebook to download"
        assert (book / downloads[0]).read_bytes() == lesson.student_notebook.read_bytes()
        assert "colab.research.google.com/github/" in text and "mybinder.org/v2/gh/" in text
        assert f"notebooks/{lesson.assignment}/{lesson.name}.ipynb" in text


def _solution_lines(source: Path) -> list[str]:
    lines, inside = [], False
    for line in source.read_text(encoding="utf-8").splitlines():
        if "### BEGIN SOLUTION" in line:
            inside = True
        elif "### END SOLUTION" in line:
            inside = False
        elif inside and len(line.strip()) > 15:
            lines.append(line.strip())
    return lines


def test_student_edition_of_the_book_has_no_solution_code():
    """`make book EDITION=student`: the same pages with stubs instead of solutions."""
    result = subprocess.run(
        ["make", "book", "EDITION=student"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    student = ROOT / "book" / "_build" / "student" / "_build" / "html"
    assert "student edition" in (student / "intro.html").read_text(encoding="utf-8")
    for lesson in all_lessons():
        text = _text(student / "lessons" / f"{lesson.name}.html")
        assert "NotImplementedError" in text
        released = released_code(lesson)  # demo cells may share a line
        leaked = [
            line for line in _solution_lines(lesson.source) if line in text and line not in released
        ]
        assert not leaked, f"{lesson.name}: solution code in the student edition: {leaked[:3]}"
        for hidden in hidden_test_lines(lesson):
            assert hidden not in text


def test_links_to_cited_works_become_citations_that_link(book):
    """A lesson's link to a work in references.bib is a citation in the book, leading to the
    references page (test_internal_links_resolve checks that the anchor exists)."""
    from coursekit.publishing.book import bibliography_urls

    urls = bibliography_urls()
    for lesson in all_lessons():
        linked = {
            urls[url]
            for url in re.findall(
                r"\]\((https?://[^)\s]+)\)", lesson.source.read_text(encoding="utf-8")
            )
            if url in urls
        }
        if not linked:
            continue
        text = (book / "lessons" / f"{lesson.name}.html").read_text(encoding="utf-8")
        citations = re.findall(r'<a [^>]*href="\.\./references\.html#id\d+"[^>]*>', text)
        assert len(citations) >= len(linked), (
            f"{lesson.name} cites {sorted(linked)}: {len(citations)} citation links"
        )
    assert "vaswani2017" in urls.values()
