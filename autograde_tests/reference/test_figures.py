"""The paper's figures as the course library draws them: every label fits inside its box, no label
covers another or a box it does not belong to, and Figure 1 has what the paper's has (the residual
connection around every sub-layer, the encoder's output reaching every cross-attention)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

from attention_ref import figures  # noqa: E402

pytestmark = pytest.mark.reference

DRAWINGS = [
    figures.draw_scaled_dot_product_attention,
    figures.draw_multi_head_attention,
    figures.draw_transformer,
]


def _layout(fig):
    """(boxes, labels, page): the window extents of the boxes (a frame is not a box: it sits
    below them) and of every text, each text with the box its centre falls in (the front one of a
    stack of boxes, drawn last), or None."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    boxes = [
        p.get_window_extent(renderer)
        for p in ax.patches
        if isinstance(p, FancyBboxPatch) and p.get_zorder() >= 2
    ]
    labels = []
    for text in ax.texts:
        if not text.get_text().strip():
            continue
        extent = text.get_window_extent(renderer)
        centre = ((extent.x0 + extent.x1) / 2, (extent.y0 + extent.y1) / 2)
        home = next((b for b in reversed(boxes) if b.contains(*centre)), None)  # the front one
        labels.append((text.get_text(), extent, home))
    return boxes, labels, fig.bbox


@pytest.mark.parametrize("draw", DRAWINGS, ids=lambda d: d.__name__)
def test_every_label_fits_and_covers_nothing(draw):
    fig = draw()
    try:
        boxes, labels, page = _layout(fig)
        for text, extent, home in labels:
            name = text.replace("\n", " ")
            inside = home if home is not None else page
            assert (
                extent.x0 >= inside.x0 - 1
                and extent.x1 <= inside.x1 + 1
                and extent.y0 >= inside.y0 - 1
                and extent.y1 <= inside.y1 + 1
            ), f"{name!r} overflows its {'box' if home is not None else 'figure'}"
            for box in boxes:
                stacked = home is not None and box.overlaps(home)  # a box behind its own
                if box is not home and not stacked:
                    assert not extent.overlaps(box), f"{name!r} covers a box it does not label"
        for i, (a, extent_a, _) in enumerate(labels):
            for b, extent_b, _ in labels[i + 1 :]:
                assert not extent_a.overlaps(extent_b), f"{a!r} and {b!r} overlap"
    finally:
        plt.close(fig)


def test_figure_1_has_a_residual_connection_around_every_sub_layer():
    fig = figures.draw_transformer()
    try:
        ax = fig.axes[0]
        norms = [t for t in ax.texts if t.get_text() == "Add & Norm"]
        assert len(norms) == 5, "two Add & Norm in an encoder layer, three in a decoder layer"
        residuals = [a for a in ax.texts if a.get_gid() == "residual"]
        assert len(residuals) == len(norms), "one residual connection into every Add & Norm"
    finally:
        plt.close(fig)
