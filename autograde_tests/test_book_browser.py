"""The built book in a real headless Chromium, served on 127.0.0.1 only.

For every page: it and every resource it requests answer 200, no request leaves 127.0.0.1,
formulas are typeset by MathJax (no raw TeX left), images have loaded, every solution toggle and
every folded hint opens, and axe-core finds no serious or critical violation of WCAG 2 A or AA.
A screenshot of each page's first screen, as a reader first sees it, is saved in
book/_build/screenshots/ (whole pages took Chromium up to 8 CPU-seconds each, 52 in all).

Chromium comes from Debian (`make test` installs it where it can, as root). Without it the
test skips on a learner's laptop, and fails under CI (CI=true).
"""

from __future__ import annotations

import functools
import http.server
import subprocess
import threading
from dataclasses import dataclass, field

import pytest

from coursekit.course.lessons import ROOT

from .test_book import HINT_SUMMARY, HTML, book  # noqa: F401 -- the fixture that builds the book

pytestmark = [pytest.mark.book, pytest.mark.browser]
SCREENSHOTS = HTML.parent.parent.parent / "screenshots"
# axe-core, fetched from the npm registry at the version the Makefile pins (like MathJax).
AXE = ROOT / "build" / "axe-core" / "axe.min.js"
AXE_TAGS = ["wcag2a", "wcag2aa"]  # WCAG 2.0 levels A and AA
AXE_FAILS = ("serious", "critical")  # minor and moderate findings are reported, not failed


@pytest.fixture(scope="session")
def site(book):  # noqa: F811 -- the fixture imported above
    """The built book served by a local HTTP server on a free port of 127.0.0.1."""
    handler = functools.partial(_QuietHandler, directory=str(book))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _pages(indexes: bool = False):
    """The book's pages (not the theme's templates under _static/; the search and index pages
    only with ``indexes``)."""
    return sorted(
        p.relative_to(HTML).as_posix()
        for p in HTML.rglob("*.html")
        if (indexes or p.name not in ("genindex.html", "search.html"))
        and not p.relative_to(HTML).parts[0].startswith("_")
    )


# The theme makes each code block or output that scrolls focusable (tabindex 0, so a keyboard
# can scroll it) 300 ms after the page last changed, and MathJax's typesetting changes it.
TAB_STOPS_SET = """() => Array.from(document.querySelectorAll('pre, .cell_output > .output'))
    .every(el => el.tabIndex === 0
                 || (el.scrollWidth <= el.clientWidth && el.scrollHeight <= el.clientHeight))"""


@dataclass
class Visit:
    """What one load of a page showed: everything the tests below assert, gathered in a single
    visit (loading and typesetting 22 pages is most of this file's cost, so each is loaded once)."""

    status: int
    outside: list  # requests that left 127.0.0.1
    failures: list  # responses >= 400 and requests that failed
    formulas: int  # .math elements
    typeset: int  # mjx-container elements MathJax made
    tex_errors: list  # what MathJax could not typeset: its error messages (mjx-merror)
    text: str  # the main column's visible text
    image_widths: list  # [src, naturalWidth] of every image
    violations: list  # axe-core's serious and critical findings, as sentences
    toggles: list = field(default_factory=list)  # (folded before, open after a click, code shown)
    hints: list = field(default_factory=list)  # (open before, text shown folded, open, shown)


def _visit(reader, site: str, path: str, axe_script: str) -> Visit:
    """Load ``path`` as a reader would (formulas typeset, scrolling blocks focusable), screenshot
    it, run axe-core on it as loaded, then open its solution toggles and folded hints.
    ``reader``: a browser context, whose cache keeps MathJax and the theme from one page to the
    next, as a reader's browser does."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page = reader.new_page()
    # a page waits for MathJax: on 2 cores shared with graded kernels that took over Playwright's
    # default 30 s (a wait, not a speed test: the page must load, however slowly)
    page.set_default_timeout(120_000)
    requests, failures = [], []
    page.on("request", lambda request: requests.append(request.url))
    page.on(
        "response", lambda r: failures.append(f"{r.status} {r.url}") if r.status >= 400 else None
    )
    page.on("requestfailed", lambda r: failures.append(f"failed {r.url}"))
    response = page.goto(f"{site}/{path}", wait_until="networkidle")
    page.wait_for_function("() => !window.MathJax || !MathJax.startup || MathJax.startup.promise")
    page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")
    try:
        page.wait_for_function(TAB_STOPS_SET, timeout=10_000)
    except PlaywrightTimeout:
        pass  # not the theme's doing any more: axe-core names the blocks
    visit = Visit(
        status=response.status,
        outside=[u for u in requests if not u.startswith(site) and not u.startswith("data:")],
        failures=failures,
        formulas=page.locator(".math").count(),
        typeset=page.locator("mjx-container").count(),
        tex_errors=page.evaluate(
            "() => Array.from(document.querySelectorAll('mjx-merror'))"
            ".map(e => e.getAttribute('data-mjx-error'))"
        ),
        text=page.inner_text("main"),
        image_widths=page.evaluate(
            "() => Array.from(document.images).map(i => [i.src, i.naturalWidth])"
        ),
        violations=_axe(page, path, axe_script),
    )
    page.screenshot(path=str(SCREENSHOTS / (path.replace("/", "_") + ".png")))
    visit.toggles = [
        _open_toggle(page.locator("details.hide.above-input").nth(i))
        for i in range(page.locator("details.hide.above-input").count())
    ]
    hints = page.locator("details", has=page.locator("summary", has_text=HINT_SUMMARY))
    visit.hints = [_open_hint(hints.nth(i)) for i in range(hints.count())]
    page.close()
    return visit


def _axe(page, path: str, script: str) -> list[str]:
    """axe-core's serious and critical WCAG 2 A/AA findings on the page as it is now."""
    page.add_script_tag(content=script)
    violations = page.evaluate(
        "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})"
        ".then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.length, target: v.nodes[0].target.join(' ')})))",
        AXE_TAGS,
    )
    return [
        f"{path}: {v['impact']} {v['id']} ({v['help']}) on {v['nodes']} element(s),"
        f" e.g. {v['target']}"
        for v in violations
        if v["impact"] in AXE_FAILS
    ]


def _open_toggle(toggle) -> tuple[bool, bool, bool]:
    folded = not toggle.evaluate("el => el.open")
    toggle.locator("summary").click()
    return folded, toggle.evaluate("el => el.open"), toggle.locator("pre").first.is_visible()


def _open_hint(hint) -> tuple[bool, bool, bool, bool]:
    body = hint.locator(":scope > :not(summary)").first
    before = hint.evaluate("el => el.open"), body.is_visible()
    hint.locator("summary").click()
    return (*before, hint.evaluate("el => el.open"), body.is_visible())


@pytest.fixture(scope="session")
def axe():
    """axe-core's script, fetched by the Makefile rule that `make test` runs first."""
    result = subprocess.run(
        ["make", AXE.relative_to(ROOT).as_posix()], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, f"could not fetch axe-core: {result.stdout}{result.stderr}"
    return AXE


@pytest.fixture(scope="session")
def visits(site, browser, axe) -> dict[str, Visit]:
    """{page: what its one visit showed}, for every page of the book, search and index included."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    script = axe.read_text(encoding="utf-8")
    reader = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        return {path: _visit(reader, site, path, script) for path in _pages(indexes=True)}
    finally:
        reader.close()


def test_every_page_loads_offline_with_typeset_math_and_images(visits):
    pages = _pages()
    assert "intro.html" in pages and any(p.startswith("lessons/") for p in pages)
    for path in pages:
        visit = visits[path]
        assert visit.status == 200, path
        assert not visit.outside, f"{path} requested outside 127.0.0.1: {visit.outside}"
        assert not visit.failures, f"{path}: {visit.failures}"
        assert visit.typeset >= visit.formulas, (
            f"{path}: {visit.formulas} formulas, {visit.typeset} typeset by MathJax"
        )
        # a formula MathJax could not parse is typeset as its error, red on yellow (`A_\log`
        # once showed "Missing open brace for subscript" in lesson 13)
        assert not visit.tex_errors, f"{path}: MathJax could not typeset: {visit.tex_errors}"
        assert "$$" not in visit.text and "\\(" not in visit.text and "\\frac" not in visit.text, (
            f"{path}: raw TeX is shown"
        )
        widths = visit.image_widths
        assert all(width > 0 for _, width in widths), f"{path}: images not loaded {widths}"


def test_solution_toggles_open_on_click(visits):
    for path in (p for p in _pages() if p.startswith("lessons/")):
        toggles = visits[path].toggles
        assert len(toggles) >= 4, f"{path}: solution toggles missing"
        for i, (folded, opened, shown) in enumerate(toggles):
            assert folded, f"{path}: solution {i} is not folded"
            assert opened, f"{path}: solution {i} does not open"
            assert shown, f"{path}: solution {i} shows no code when opened"


def test_site_search_finds_softmax(site, browser):
    page = browser.new_page()
    page.goto(f"{site}/search.html?q=softmax", wait_until="networkidle")
    page.wait_for_selector("#search-results li", timeout=15000)
    assert page.locator("#search-results li").count() >= 1
    page.close()


def test_hints_are_folded_and_open_on_click(visits):
    """A lesson's hint (a <details> block in a markdown cell) is closed until the reader opens
    it. The how-to page shows one, so the check runs even while no lesson has a hint."""
    pages = [p for p in _pages() if p.startswith("lessons/")] + ["how_to_use.html"]
    seen = 0
    for path in pages:
        for i, (was_open, shown_folded, opened, shown) in enumerate(visits[path].hints):
            assert not was_open, f"{path}: hint {i} is open before a click"
            assert not shown_folded, f"{path}: hint {i} shows its text while folded"
            assert opened, f"{path}: hint {i} does not open"
            assert shown, f"{path}: hint {i} shows nothing when opened"
            seen += 1
    assert seen, "no folded hint in the book (how_to_use.md shows one)"


def test_every_page_passes_axe_wcag2_a_and_aa(visits):
    """axe-core, injected into each page after MathJax has typeset it, with the WCAG 2 A and
    AA rules: no serious or critical violation (the references page once had a citation list
    with role="list" and no list items: aria-required-children, critical)."""
    found = [finding for visit in visits.values() for finding in visit.violations]
    assert not found, "axe-core (WCAG 2 A/AA) finds:\n  " + "\n  ".join(found)
