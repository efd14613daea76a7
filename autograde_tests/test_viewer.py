"""The attention viewer (attention_ref.viewer): the numbers the models compute, shown offline,
readable, and live in a real Chromium under the mouse and the keyboard, with axe-core's WCAG 2 A
and AA rules passing."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
import torch

from attention_ref.pt.lm import CharTokenizer, TransformerLM, zen_of_python
from attention_ref.pt.model import BOS, Transformer, tokens_to_digits
from attention_ref.viewer import AttentionView, shade
from coursekit.course.lessons import ROOT

AXE = ROOT / "build" / "axe-core" / "axe.min.js"


def _contrast(background: str, text: str) -> float:
    def luminance(colour: str) -> float:
        if colour.startswith("#"):
            rgb = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
        else:
            rgb = [int(x) for x in re.findall(r"\d+", colour)]
        lin = [c / 255 / 12.92 if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4
               for c in rgb]  # fmt: skip
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    a, b = sorted([luminance(background), luminance(text)], reverse=True)
    return (a + 0.05) / (b + 0.05)


def language_model() -> tuple[np.ndarray, list[str]]:
    """Lesson 10's model (as lessons 10 and 12 build it, untrained) on a line of its text: one
    (batch, h, n, n) of weights per layer."""
    text = zen_of_python()[:24]
    tokenizer = CharTokenizer(zen_of_python())
    model = TransformerLM(tokenizer.vocab_size, d_model=48, num_heads=4, d_ff=192, num_layers=2,
                          generator=torch.Generator().manual_seed(3))  # fmt: skip
    with torch.no_grad():
        _, weights = model(tokenizer.encode(text)[None], return_weights=True)
    return weights, list(text)


def translation_model():
    """Lesson 8's model reversing digits (untrained): its cross-attention, decoder x source."""
    seed = torch.Generator().manual_seed(4)
    model = Transformer(13, 13, d_model=32, num_heads=2, d_ff=64, num_encoder_layers=2,
                        num_decoder_layers=2, generator=seed).eval()  # fmt: skip
    src = torch.tensor([[3 + d for d in (1, 5, 2, 8, 0, 7)]])
    tgt = torch.cat([torch.tensor([[BOS]]), src.flip(-1)[:, :5]], dim=-1)
    with torch.no_grad():
        memory = model.encode(src, model.source_mask(src))
        _, layers = model.decode(tgt, memory, model.source_mask(src), return_weights=True)
    return (
        [layer["cross_attn"] for layer in layers],
        tokens_to_digits(tgt[0]),
        tokens_to_digits(src[0]),
    )


@pytest.mark.unit
def test_the_view_holds_the_models_numbers_and_nothing_from_the_network():
    weights, tokens = language_model()
    view = AttentionView(weights, tokens, title="lesson 10's language model")
    data = view.data()
    stacked = torch.stack([w[0] for w in weights]).numpy()
    np.testing.assert_allclose(np.array(data["weights"]), stacked, rtol=1e-5, atol=1e-8)
    assert data["queries"][3] == "\u2423" and len(data["keys"]) == len(tokens)  # a space, shown
    page = view._repr_html_()
    assert not re.search(r"(src|href)=|https?://|@import|url\(", page), "no request leaves"
    assert page.count("<td ") == 4 * len(tokens) and 'aria-live="polite"' in page
    with pytest.raises(ValueError, match=r"need 24 query and 24 key tokens, got 3 and 3"):
        AttentionView(weights, tokens[:3])
    with pytest.raises(ValueError, match=r"\(layers, heads, n_q, n_k\), got shape \(4, 24, 24\)"):
        AttentionView(weights[0][0], tokens)


@pytest.mark.unit
def test_every_shade_keeps_its_text_readable():
    for weight in np.linspace(0, 1, 501):
        assert _contrast(*shade(float(weight))) >= 4.5, weight


@pytest.fixture(scope="module")
def axe_script() -> str:
    """axe-core at the version the Makefile pins, fetched from the npm registry by its rule."""
    made = subprocess.run(["make", AXE.relative_to(ROOT).as_posix()], cwd=ROOT,
                          capture_output=True, text=True)  # fmt: skip
    assert made.returncode == 0, f"could not fetch axe-core: {made.stdout}{made.stderr}"
    return AXE.read_text(encoding="utf-8")


def _shown(page, view: int = 0) -> np.ndarray:
    """The weights the view shows now, (heads, n_k), read from its cells."""
    return np.array(page.evaluate(
        """n => Array.from(document.querySelectorAll('.attention-view')[n]
              .querySelectorAll('tbody tr')).map(tr => Array.from(tr.querySelectorAll('td'))
              .map(td => Number(td.dataset.weight)))""",
        view,
    ))  # fmt: skip


@pytest.mark.browser
def test_hovering_or_focusing_a_token_shows_where_each_head_attends(browser, axe_script):
    weights, tokens = language_model()
    cross, decoder_in, source = translation_model()
    lm = torch.stack([w[0] for w in weights]).numpy()
    cross_w = torch.stack([w[0] for w in cross]).numpy()
    views = [
        AttentionView(weights, tokens, title="self-attention of lesson 10's language model"),
        AttentionView(cross, list(decoder_in), list(source), title="cross-attention"),
    ]
    body = "".join(v.to_html() for v in views)
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    outside = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith("data:") else None)
    page.set_content(f'<!doctype html><html lang="en"><head><title>Attention viewer</title></head>'
                     f"<body><main><h1>Attention</h1>{body}</main></body></html>")  # fmt: skip
    try:
        np.testing.assert_allclose(_shown(page), lm[0, :, 0], rtol=1e-5)  # as drawn, query 0
        first = page.locator(".attention-view").first
        first.locator(".av-query").nth(7).hover()
        np.testing.assert_allclose(_shown(page), lm[0, :, 7], rtol=1e-5)
        assert first.locator(".av-query").nth(7).get_attribute("aria-pressed") == "true"
        assert first.locator(".av-status").inner_text().startswith("layer 1, query 7 \u201c")
        first.locator(".av-layer").nth(1).click()
        np.testing.assert_allclose(_shown(page), lm[1, :, 7], rtol=1e-5)
        first.locator(".av-query").nth(7).focus()  # the keyboard: arrows move the query
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        np.testing.assert_allclose(_shown(page), lm[1, :, 9], rtol=1e-5)
        page.keyboard.press("Home")
        np.testing.assert_allclose(_shown(page), lm[1, :, 0], rtol=1e-5)
        causal = _shown(page)[:, 1:]
        assert not causal.any(), "query 0 of a causal model sees only key 0"
        second = page.locator(".attention-view").nth(1)  # a rectangle: decoder x source
        second.locator(".av-query").nth(2).hover()
        np.testing.assert_allclose(_shown(page, 1), cross_w[0, :, 2], rtol=1e-5)
        assert _shown(page, 1).shape == (2, 6)
        np.testing.assert_allclose(_shown(page), lm[1, :, 0], rtol=1e-5)  # the first untouched
        page.add_script_tag(content=axe_script)
        found = page.evaluate(
            "() => axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa']}})"
            ".then(r => r.violations.map(v => v.id + ': ' + v.help + ' ' + v.nodes[0].target))"
        )
        assert not found, found
        assert not outside, outside
    finally:
        context.close()


def _column_in_sight(page, column: int) -> bool:
    """Whether key ``column``'s cells lie inside the table's scrolling box."""
    return page.evaluate(
        """k => { const box = document.querySelector('.av-scroll').getBoundingClientRect();
                  const cell = document.querySelectorAll('tbody tr')[0]
                      .querySelectorAll('td')[k].getBoundingClientRect();
                  return cell.left >= box.left - 1 && cell.right <= box.right + 1; }""",
        column,
    )


@pytest.mark.browser
def test_a_table_wider_than_its_box_follows_the_chosen_query(browser):
    """A late query's own key (the diagonal: its most recent keys) lay off the box's right edge
    in a notebook narrower than the table (2026-12-07): the box scrolls to it, and back."""
    weights, tokens = language_model()
    context = browser.new_context(viewport={"width": 480, "height": 800})
    page = context.new_page()
    page.set_content('<!doctype html><html lang="en"><head><title>v</title></head><body>'
                     f"{AttentionView(weights, tokens).to_html()}</body></html>")  # fmt: skip
    try:
        width = page.evaluate("() => document.querySelector('.av-scroll').clientWidth")
        assert page.evaluate("() => document.querySelector('.av-scroll').scrollWidth") > width
        assert not _column_in_sight(page, 20)
        page.locator(".av-query").nth(20).focus()
        np.testing.assert_allclose(_shown(page), torch.stack([w[0] for w in weights])[0, :, 20],
                                   rtol=1e-5)  # fmt: skip
        assert _column_in_sight(page, 20)
        page.keyboard.press("Home")
        assert _column_in_sight(page, 0)
    finally:
        context.close()


@pytest.mark.unit
def test_an_installed_course_carries_the_viewer_and_the_hints(tmp_path):
    """What `pip install git+...` (Colab) builds: the viewer's style and script and every lesson's
    hint table travel in the wheel, beside the modules that read them."""
    import shutil
    import sys
    import zipfile

    source = tmp_path / "course"  # a copy: setuptools writes its build/ beside the project
    for part in ("pyproject.toml", "README.md", "coursekit", "solutions/attention_ref"):
        copy = shutil.copytree if (ROOT / part).is_dir() else shutil.copy2
        (source / part).parent.mkdir(parents=True, exist_ok=True)
        copy(ROOT / part, source / part)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(source)], capture_output=True, text=True,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"attention_ref/viewer/view.js", "attention_ref/viewer/view.css"} <= names
    tables = {p.name for p in (ROOT / "solutions" / "attention_ref" / "hints").glob("*.json")}
    assert tables and {f"attention_ref/hints/{name}" for name in tables} <= names
