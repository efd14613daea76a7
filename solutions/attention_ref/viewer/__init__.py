"""An attention map you can touch: hover or focus a query token, see where each head attends.

    from attention_ref.viewer import AttentionView
    AttentionView(weights, tokens, title="the language model's self-attention")

``weights`` are one sequence's attention weights, layer by layer: an array ``(layers, heads,
n_q, n_k)``, or a list of one ``(heads, n_q, n_k)`` per layer (PyTorch tensors too, a batch of
one included). ``queries`` and ``keys`` are the tokens' labels (``keys`` defaults to
``queries``: self-attention). A notebook shows the view through ``_repr_html_``; ``to_html()``
gives the same page fragment for anywhere else.

Self-contained HTML, not a widget: its data, style and script travel inside the output, with no
network and no package beyond NumPy (so it lives in the library beside figures.py, and shows
the same in JupyterLab, Colab and the book's pages, where a widget's kernel is gone). The
weights of the first query are drawn in the HTML itself, so a notebook opened without running it
still shows a table; the script makes it live: the query tokens are buttons (hover, focus, click,
or the arrow keys once one has focus), the layers too, and a sentence in a live region says, for
screen readers and everyone, where each head attends most.
"""

from __future__ import annotations

import html
import json
import secrets
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DARK = (8, 48, 107)  # the colour of weight 1; weight 0 is white
SHOWN = {" ": "\u2423", "\n": "\u23ce", "\t": "\u21e5"}  # visible stand-ins for white space


def _to_numpy(weights) -> np.ndarray:
    """(layers, heads, n_q, n_k) float64 from an array, a tensor or a list of per-layer ones."""

    def one(w):
        if hasattr(w, "detach"):
            w = w.detach().float().cpu().numpy()
        return np.asarray(w, dtype=np.float64)

    if isinstance(weights, (list, tuple)):
        layers = [one(w) for w in weights]
        layers = [w[0] if w.ndim == 4 and w.shape[0] == 1 else w for w in layers]
        return np.stack(layers)
    return one(weights)


def shade(weight: float) -> tuple[str, str]:
    """(background, text colour) of a cell: white to dark blue, with whichever of black or white
    text keeps a contrast of at least 4.5:1 (WCAG AA) on it. The script computes the same."""
    rgb = [round(255 + (d - 255) * min(max(weight, 0.0), 1.0)) for d in DARK]
    linear = [
        (c / 255 / 12.92) if c / 255 <= 0.04045 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb
    ]
    luminance = 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    return f"rgb({rgb[0]}, {rgb[1]}, {rgb[2]})", "#000000" if luminance >= 0.179 else "#ffffff"


def label(token) -> str:
    text = str(token)
    return "".join(SHOWN.get(c, c) for c in text) or "\u2205"


class AttentionView:
    """One kind of attention of one sequence (self-attention of an encoder, a decoder's masked
    self-attention, cross-attention), every layer and head of it."""

    def __init__(self, weights, queries, keys=None, title: str = "attention", layer_names=None):
        self.weights = _to_numpy(weights)
        self.queries = [label(t) for t in queries]
        self.keys = [label(t) for t in (queries if keys is None else keys)]
        if self.weights.ndim != 4:
            raise ValueError(
                f"weights must be (layers, heads, n_q, n_k), got shape {self.weights.shape}"
            )
        n_q, n_k = self.weights.shape[2:]
        if (n_q, n_k) != (len(self.queries), len(self.keys)):
            raise ValueError(
                f"weights of shape {self.weights.shape} need {n_q} query and {n_k} key tokens, "
                f"got {len(self.queries)} and {len(self.keys)}"
            )
        self.title = title
        layers = self.weights.shape[0]
        self.layer_names = list(layer_names or [f"layer {i + 1}" for i in range(layers)])

    def data(self) -> dict:
        """What the script reads: the weights to 6 significant digits, and the labels."""
        rounded = [[[[float(f"{w:.6g}") for w in row] for row in head] for head in layer]
                   for layer in self.weights]  # fmt: skip
        return {"weights": rounded, "queries": self.queries, "keys": self.keys,
                "layers": self.layer_names}  # fmt: skip

    def _table(self) -> str:
        heads = self.weights.shape[1]
        head_row = "".join(
            f'<th scope="col" title="key {k}">{html.escape(t)}</th>'
            for k, t in enumerate(self.keys)
        )
        rows = []
        for h in range(heads):
            cells = []
            for k in range(len(self.keys)):
                w = float(self.weights[0, h, 0, k])
                background, colour = shade(w)
                cells.append(
                    f'<td data-weight="{w:.6g}" style="background:{background};color:{colour}">'
                    f"{round(w * 100)}</td>"
                )
            rows.append(f'<tr><th scope="row">head {h + 1}</th>{"".join(cells)}</tr>')
        return (
            '<table class="av-table"><caption>Attention weight, in %, that each head gives each'
            " key, for the chosen query</caption>"
            f'<thead><tr><th scope="col">key:</th>{head_row}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>"
        )

    def _buttons(self) -> tuple[str, str]:
        queries = "".join(
            f'<button type="button" class="av-query" data-query="{q}" '
            f'aria-pressed="{str(q == 0).lower()}" tabindex="{0 if q == 0 else -1}" '
            f'title="query {q}">{html.escape(t)}</button>'
            for q, t in enumerate(self.queries)
        )
        layers = "".join(
            f'<button type="button" class="av-layer" data-layer="{i}" '
            f'aria-pressed="{str(i == 0).lower()}">{html.escape(name)}</button>'
            for i, name in enumerate(self.layer_names)
        )
        return queries, layers

    def to_html(self) -> str:
        """The view as one self-contained HTML fragment (style, data and script inside)."""
        queries, layers = self._buttons()
        style = (HERE / "view.css").read_text(encoding="utf-8")
        script = (HERE / "view.js").read_text(encoding="utf-8")
        data = json.dumps(self.data()).replace("</", "<\\/")
        name = f"av-{secrets.token_hex(4)}"
        return (
            f'<section class="attention-view" aria-labelledby="{name}">'
            f"<style>{style}</style>"
            f'<h4 id="{name}" class="av-title">{html.escape(self.title)}</h4>'
            f'<div class="av-layers" role="group" aria-label="Layer">{layers}</div>'
            '<p class="av-help">Hover over a query token, or focus one (then the arrow keys):</p>'
            f'<div class="av-queries" role="group" aria-label="Query token">{queries}</div>'
            f'<p class="av-status" aria-live="polite"></p>'
            '<div class="av-scroll" tabindex="0" role="region" '
            f'aria-label="{html.escape(self.title)}: weights">{self._table()}</div>'
            f'<script type="application/json" class="av-data">{data}</script>'
            f"<script>{script}</script></section>"
        )

    def _repr_html_(self) -> str:
        return self.to_html()

    def __repr__(self) -> str:
        layers, heads, n_q, n_k = self.weights.shape
        return (
            f"<AttentionView {self.title!r}: {layers} layers x {heads} heads, {n_q} queries x "
            f"{n_k} keys>"
        )
