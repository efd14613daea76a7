"""The book as `make book` builds it: every lesson executed, figures, local MathJax, solutions
folded, hidden tests nowhere. (A real browser looks at it in test_book_browser.py.)"""

from __future__ import annotations

import copy
import html
import os
import re
import subprocess
import warnings
from pathlib import Path

import nbformat
import pytest

from coursekit.course import expected_time
from coursekit.course.lessons import ROOT, Lesson, all_lessons
from coursekit.course.reading import source_to_notebook
from coursekit.publishing import book as publishing
from coursekit.publishing import quoted_output

from .leaks import hidden_test_lines, released_code

pytestmark = [pytest.mark.book, pytest.mark.make]
HTML = ROOT / "book" / "_build" / "solutions" / "_build" / "html"
# How a lesson folds a hint (a markdown cell): <details><summary>HINT_SUMMARY</summary> ...
HINT_SUMMARY = "Hint (open it only if you are stuck)"
# Addresses a book built with no repository setting must not show: the online notebook
# services, and the addresses once written in advance (one never existed) or by default.
NO_REPOSITORY_SET = (
    "colab.research.google.com",
    "mybinder.org",
    "attention-course/attention-from-lookup-to-transformer",
    "executablebooks/jupyter-book",
    "COURSE_REPOSITORY",
    "git+https://",
)


@pytest.fixture(scope="session")
def book():
    """Build the book once per session with the README's command (a no-op when up to date),
    with no repository setting: what a book built before it is published shows."""
    env = {k: v for k, v in os.environ.items() if k not in ("BOOK_REPOSITORY", "BOOK_BRANCH")}
    result = subprocess.run(["make", "book"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert result.returncode == 0, (
        f"make book failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    assert (HTML / "index.html").exists()
    return HTML


def _text(page: Path) -> str:
    """The page's visible text, tags stripped (what a reader could see or copy)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def _article_text(page: Path) -> str:
    """The visible text of the page's own article, without the book's navigation (whose
    "Grading with nbgrader" is an instructors' page, not a leak of the lesson's metadata)."""
    found = re.search(
        r'<article class="bd-article"[^>]*>(.*)</article>', page.read_text(encoding="utf-8"), re.S
    )
    assert found, f'{page.name} has no <article class="bd-article">: the theme changed'
    return html.unescape(re.sub(r"<[^>]+>", "", found.group(1)))


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
    source = source_to_notebook(lesson.source)  # a cell may hold several solution regions (a class)
    solution_cells = sum("### BEGIN SOLUTION" in cell.source for cell in source.cells)
    assert text.count("tag_hide-input") == solution_cells, (
        "each solution cell is folded behind a toggle"
    )
    visible = _article_text(page)
    for marker in ("BEGIN SOLUTION", "HIDDEN TESTS", "nbgrader"):
        assert marker not in visible, f"{marker!r} appears on {page.name}"
    hidden = hidden_test_lines(lesson)
    assert hidden, "the lesson has hidden tests"
    everything = "\n".join(_text(p) for p in book.rglob("*.html"))
    everything += (book / "searchindex.js").read_text(encoding="utf-8")
    leaked = [line for line in hidden if line in everything]
    assert not leaked, f"hidden test lines are in the book: {leaked[:3]}"


@pytest.mark.parametrize("lesson", all_lessons(), ids=lambda item: item.assignment)
def test_text_quoted_from_output_is_what_the_executed_lesson_printed(book, lesson):
    """Each string a lesson's `<!-- from output: ... -->` lists is in its cell's text and in the
    printed text of an earlier cell of the page as the book executed it (from the build's cache:
    nothing runs again). Numbers the prose may quote without marking them are a warning."""
    found = quoted_output.problems(lesson)
    assert not found, f"{lesson.assignment}: text and output disagree:\n  " + "\n  ".join(found)
    candidates = quoted_output.unmarked(quoted_output.executed_lesson(lesson))
    if candidates:
        warnings.warn(
            f"{lesson.assignment}: numbers in the prose that a cell above printed, not marked"
            " <!-- from output: ... --> (mark them if quoted):\n  " + "\n  ".join(candidates),
            stacklevel=1,
        )


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


def test_without_a_repository_setting_the_book_names_no_address(book):
    """No Colab or Binder button, no `git clone` of an address written in advance: a book built
    without BOOK_REPOSITORY= links to nothing that may not exist. The only github.com links
    left are works cited in references.bib."""
    cited = set(publishing.bibliography_urls())
    found = []
    for page in sorted(book.rglob("*.html")):
        if page.relative_to(book).parts[0] in ("_static", "_sources"):
            continue
        text = page.read_text(encoding="utf-8")
        name = page.relative_to(book).as_posix()
        found += [f"{name}: {what}" for what in NO_REPOSITORY_SET if what in text]
        found += [
            f"{name}: {url}"
            # a citation's tooltip ends the work's url with a full stop
            for url in re.findall(r'https?://github\.com/[^"\s<>)]*', text)
            if url.rstrip(".") not in cited
        ]
    assert not found, "the book names a repository nobody set:\n  " + "\n  ".join(found[:20])
    guide = _text(book / "how_to_use.html")
    assert "Get a copy of the course" in guide and "make lab" in guide


def _lessons_with_times(root: Path, minutes: list[int | None]) -> list[Lesson]:
    """A course under ``root`` whose lessons state these expected times (None: no line)."""
    for number, value in enumerate(minutes, start=1):
        folder = root / "solutions" / f"lesson{number:02d}"
        folder.mkdir(parents=True)
        line = "" if value is None else f"**Expected time:** about {value} minutes\n\n"
        (folder / f"topic{number}.md").write_text(
            f"# Lesson {number} — a topic\n\n{line}Some text.\n", encoding="utf-8"
        )
    return all_lessons(root)


def test_a_repository_setting_reaches_every_button_and_the_set_up_text(tmp_path):
    """`make book BOOK_REPOSITORY=https://github.com/ORG/REPO BOOK_BRANCH=B` (a second full
    build is slow: the configuration and pages it builds from are checked instead)."""
    lessons = _lessons_with_times(tmp_path, [30, 45])
    slug = publishing.repository_slug("https://github.com/some-org/some-course.git")
    assert slug == "some-org/some-course"
    config = publishing.book_config("solutions", slug, "spring", lessons)
    assert config["repository"] == {
        "url": "https://github.com/some-org/some-course",
        "branch": "spring",
    }
    values = config["parse"]["myst_substitutions"]
    clone = "git clone --branch spring https://github.com/some-org/some-course"
    assert clone in values["clone_the_course"]
    assert "(https://github.com/some-org/some-course)" in values["the_repository"]
    note = publishing.launch_header(lessons[0], slug, "spring").source
    student = "notebooks/lesson01/topic1.ipynb"
    assert f"colab.research.google.com/github/some-org/some-course/blob/spring/{student}" in note
    assert f"mybinder.org/v2/gh/some-org/some-course/spring?labpath={student}" in note
    assert "%pip install git+https://github.com/some-org/some-course@spring" in note
    assert "`make check`, which adds the hidden tests, needs a clone" in note  # no make there
    # ... and without it, the download alone, and no address in the configuration either
    assert "github" not in publishing.launch_header(lessons[0], "", "main").source
    bare = publishing.book_config("solutions", "", "main", lessons)
    assert bare["repository"]["url"] == ""
    assert "github" not in str(bare["parse"]["myst_substitutions"])


@pytest.mark.parametrize(
    "url", ["https://gitlab.com/org/repo", "github.com/org/repo", "https://github.com/org"]
)
def test_a_repository_colab_cannot_open_is_refused(url):
    with pytest.raises(SystemExit, match="not a GitHub repository"):
        publishing.repository_slug(url)


def test_every_lesson_states_its_expected_time():
    """Each lesson's top says `**Expected time:** about N minutes`; the course map lists it."""
    missing = []
    for lesson in all_lessons():
        try:
            publishing.expected_minutes(lesson)
        except SystemExit as error:
            missing.append(str(error))
    assert not missing, "\n".join(missing)


def test_course_map_times_are_computed_by_the_stated_method(tmp_path):
    """The course map shows each lesson's computed time (whatever its line says: a test of its
    own holds the line to it), the total, and the method in words."""
    lessons = _lessons_with_times(tmp_path, [50, 70, 100])
    values = publishing.substitutions(lessons, "", "main")
    computed = [expected_time.computed_minutes(item) for item in lessons]
    assert values["time_lesson01"] == f"{computed[0]}\u00a0min"
    assert values["total_time"] == publishing.hours(sum(computed))
    assert values["time_method"] == expected_time.METHOD
    assert publishing.hours(220) == "about 220 minutes (3½ hours)"
    assert publishing.hours(60) == "about 60 minutes (1 hour)"


def test_a_lesson_without_its_expected_time_stops_the_build_and_says_which(tmp_path):
    lessons = _lessons_with_times(tmp_path, [50, None, 40])
    with pytest.raises(SystemExit, match=r"solutions/lesson02/topic2\.md: no single line"):
        publishing.substitutions(lessons, "", "main")


def test_the_course_map_lists_every_lesson_with_its_time():
    """intro.md's table has a row per lesson whose time is that lesson's substitution (a row
    for a lesson that does not exist fails the build: its substitution is undefined)."""
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    for lesson in all_lessons():
        row = next((line for line in intro.splitlines() if f"(lessons/{lesson.name})" in line), "")
        assert row.rstrip().endswith(f"| {{{{ time_{lesson.assignment} }}}} |"), (
            f"book/intro.md: the course map has no row for {lesson.assignment} ending in its"
            f" time, {{{{ time_{lesson.assignment} }}}}"
        )
    assert "{{ total_time }}" in intro and "{{ time_method }}" in intro


def test_the_built_course_map_shows_each_lesson_time_and_the_total(book):
    intro = _text(book / "intro.html")
    total = 0
    for lesson in all_lessons():
        minutes = publishing.expected_minutes(lesson)
        total += minutes
        assert f"{minutes}\u00a0min" in intro, f"the course map lacks {lesson.assignment}'s time"
    assert publishing.hours(total) in intro
    assert "{{" not in intro


def test_the_page_generator_keeps_a_hint_as_it_is():
    """A hint is HTML in a markdown cell: the book's page generator must pass it on untouched,
    in both editions, for MyST to render it as a closed <details> block."""
    hint = (
        f"<details>\n<summary>{HINT_SUMMARY}</summary>\n\nSubtract the **maximum** first:"
        " `x - x.max()`.\n\n</details>"
    )
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("# A lesson"), nbformat.v4.new_markdown_cell(hint)]
    )
    for make_page in (publishing.solutions_page, publishing.student_page):
        page = make_page(copy.deepcopy(nb))
        assert page.cells[1].source == hint


def test_hints_render_folded_with_their_markdown(book):
    """Every hint of the lessons reaches its page, as a closed <details> whose body is rendered
    markdown (not text with asterisks and backticks). how_to_use.md shows one to learners."""
    pages = {"how_to_use.html": (ROOT / "book" / "how_to_use.md").read_text(encoding="utf-8")}
    for lesson in all_lessons():
        pages[f"lessons/{lesson.name}.html"] = lesson.source.read_text(encoding="utf-8")
    for name, source in pages.items():
        text = (book / name).read_text(encoding="utf-8")
        built = re.findall(
            rf"<details( open)?>\s*<summary>{re.escape(HINT_SUMMARY)}</summary>(.*?)</details>",
            text,
            re.DOTALL,
        )
        assert len(built) == source.count(f"<summary>{HINT_SUMMARY}</summary>"), name
        for is_open, body in built:
            assert not is_open, f"{name}: a hint is open before the reader opens it"
            assert "<p>" in body and "**" not in body, f"{name}: a hint's markdown is not rendered"
    assert "<summary>" in pages["how_to_use.html"]


def test_the_bibliography_is_a_list_of_list_items(book):
    """references.html: a role="list" whose every entry is a role="listitem" (docutils writes
    role="doc-biblioentry", deprecated, which screen readers do not take for list items), and
    every work of references.bib is an entry."""
    from pybtex.database import parse_file

    references = (book / "references.html").read_text(encoding="utf-8")
    assert "doc-biblioentry" not in references
    assert references.count('<div role="list" class="citation-list">') == 1
    entries = re.findall(r'<div class="citation" id="[^"]+" role="([^"]+)">', references)
    works = parse_file(str(ROOT / "book" / "references.bib")).entries
    assert entries == ["listitem"] * len(works), entries


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
