"""The paper's figures, drawn with matplotlib where they are taught (lessons 2, 4, 5, 8) and on
the book's architecture page: no pasted images, so they read the same in a notebook and the book.

The one module of the library that needs matplotlib: nothing else imports it, so the reference
library itself still needs only NumPy and PyTorch.

draw_scaled_dot_product_attention()  the paper's Figure 2, left
draw_multi_head_attention()          the paper's Figure 2, right
draw_transformer()                   the encoder-decoder, with the three uses of attention marked
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch

COLORS = {
    "matmul": "#d9e8fb",
    "scale": "#fde9c9",
    "mask": "#eadcf4",
    "softmax": "#d8f0d8",
    "linear": "#e8e8e8",
    "attention": "#fbe3d6",
    "concat": "#fff4c2",
    "norm": "#f5f1c8",
    "ffn": "#cfe9f7",
    "embed": "#f9d5dd",
    "encoder": "#eef5fb",
    "decoder": "#f7f0fa",
}
USE_COLORS = ["#2f7ed8", "#d9534f", "#2a9d5b"]  # encoder self, masked decoder self, cross


def _canvas(width, height, size):
    fig, ax = plt.subplots(figsize=size)
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def box(ax, x, y, w, h, text, color="#ffffff", edge="#333333", lw=1.2, fontsize=10, z=2, **kw):
    """A rounded box centred at (x, y); returns its top and bottom centre points."""
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.12",
            facecolor=color,
            edgecolor=edge,
            linewidth=lw,
            zorder=z,
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, zorder=z + 1, **kw)
    return (x, y + h / 2), (x, y - h / 2)


def arrow(ax, start, end, color="#333333", lw=1.2, style="-|>", gid=None, **kw):
    """An arrow from start to end; ``gid`` names it (the tests find residual connections so)."""
    ax.annotate(
        "",
        xy=end,
        xytext=start,
        zorder=1,
        gid=gid,
        arrowprops=dict(arrowstyle=style, color=color, lw=lw, shrinkA=0, shrinkB=0, **kw),
    )


def draw_scaled_dot_product_attention():
    """Q, K -> MatMul -> Scale -> Mask (opt.) -> SoftMax -> MatMul with V -> output."""
    fig, ax = _canvas(6, 9, (3.6, 5.4))
    steps = [
        ("MatMul\n$QK^\\top$", "matmul", 2.0),
        ("Scale\n$1/\\sqrt{d_k}$", "scale", 3.3),
        ("Mask (opt.)\nillegal $\\to -\\infty$", "mask", 4.6),
        ("SoftMax\nover the keys", "softmax", 5.9),
    ]
    tops = []
    for text, kind, y in steps:
        top, bottom = box(ax, 2.4, y, 2.8, 0.85, text, COLORS[kind], fontsize=9)
        if tops:
            arrow(ax, tops[-1], bottom)
        tops.append(top)
    top, bottom = box(
        ax, 3.4, 7.3, 2.4, 0.8, "MatMul\nweights $\\cdot V$", COLORS["matmul"], fontsize=9
    )
    arrow(ax, tops[-1], (2.9, 7.3 - 0.4))
    arrow(ax, (4.9, 0.6), (4.4, 7.3 - 0.4))
    arrow(ax, top, (3.4, 8.6))
    ax.text(3.4, 8.75, "output $(n_q, d_v)$", ha="center", fontsize=9)
    for x, label in ((1.7, "$Q$"), (3.1, "$K$"), (4.9, "$V$")):
        ax.text(x, 0.3, label, ha="center", fontsize=12)
    arrow(ax, (1.7, 0.6), (1.9, 2.0 - 0.43))
    arrow(ax, (3.1, 0.6), (2.9, 2.0 - 0.43))
    ax.set_title("Scaled dot-product attention", fontsize=11)
    return fig


def draw_multi_head_attention(heads: int = 3):
    """V, K, Q -> h Linear projections -> h parallel attentions -> Concat -> Linear."""
    fig, ax = _canvas(8, 9, (4.6, 5.2))
    stack = 0.14  # offset of the copies drawn behind: h of them
    for x, label in ((1.7, "$V$"), (4.0, "$K$"), (6.3, "$Q$")):
        for k in reversed(range(heads)):
            box(
                ax,
                x + k * stack,
                2.2 + k * stack,
                1.6,
                0.7,
                "Linear" if k == 0 else "",
                COLORS["linear"],
                fontsize=9,
                z=2 + 3 * (heads - k),
            )
        arrow(ax, (x, 0.65), (x, 2.2 - 0.37))
        ax.text(x, 0.3, label, ha="center", fontsize=12)
        arrow(ax, (x, 2.2 + 0.37), (4.0 + (x - 4.0) * 0.35, 4.3 - 0.5))
    for k in reversed(range(heads)):
        box(
            ax,
            4.0 + k * stack,
            4.3 + k * stack,
            4.6,
            0.95,
            "Scaled dot-product attention" if k == 0 else "",
            COLORS["attention"],
            fontsize=9,
            z=2 + 3 * (heads - k),
        )
    ax.text(6.9, 4.95, "$h$ heads", fontsize=9, ha="left")
    top, bottom = box(ax, 4.0, 6.0, 2.0, 0.7, "Concat", COLORS["concat"], fontsize=9)
    arrow(ax, (4.0, 4.3 + 0.48 + heads * stack), bottom)
    top2, bottom2 = box(ax, 4.0, 7.3, 2.0, 0.7, "Linear $W^O$", COLORS["linear"], fontsize=9)
    arrow(ax, top, bottom2)
    arrow(ax, top2, (4.0, 8.5))
    ax.text(4.0, 8.65, "output $(n_q, d_\\mathrm{model})$", ha="center", fontsize=9)
    ax.set_title("Multi-head attention", fontsize=11)
    return fig


ENCODER_LAYER = [
    ("① Multi-head attention", "attention", USE_COLORS[0]),
    ("Add & Norm", "norm", None),
    ("Feed forward", "ffn", None),
    ("Add & Norm", "norm", None),
]
DECODER_LAYER = [
    ("② Masked multi-head attention", "attention", USE_COLORS[1]),
    ("Add & Norm", "norm", None),
    ("③ Multi-head attention", "attention", USE_COLORS[2]),
    ("Add & Norm", "norm", None),
    ("Feed forward", "ffn", None),
    ("Add & Norm", "norm", None),
]
LEGEND = [
    ("① encoder self-attention:", "Q, K, V from the previous encoder layer"),
    ("② masked decoder self-attention:", "position $i$ sees positions $\\leq i$"),
    ("③ encoder–decoder (cross-) attention:", "Q from the decoder, K and V from the encoder"),
]
# Figure 1's geometry: the encoder's and the decoder's column, the sub-layer boxes, the gap a
# residual connection runs in (left of the encoder, right of the decoder, as in the paper).
ENCODER_X, DECODER_X = 3.9, 11.4
BOX_W, BOX_H, STEP, FIRST_Y = 4.3, 0.72, 1.15, 3.6
RESIDUAL_GAP = 0.4


def _stack_frames(ax):
    """The encoder (left) and decoder (right) frames, each repeated N = 6 times."""
    margin = BOX_W / 2 + RESIDUAL_GAP + 0.4  # on the residual's side
    for x, layers, left, right, color in (
        (ENCODER_X, len(ENCODER_LAYER), margin, BOX_W / 2 + 0.4, COLORS["encoder"]),
        (DECODER_X, len(DECODER_LAYER), BOX_W / 2 + 0.4, margin, COLORS["decoder"]),
    ):
        bottom, top = FIRST_Y - 0.75, FIRST_Y + (layers - 1) * STEP + 0.7
        frame = FancyBboxPatch(
            (x - left, bottom),
            left + right,
            top - bottom,
            boxstyle="round,pad=0.05,rounding_size=0.3",
            facecolor=color,
            edgecolor="#777777",
            zorder=0,
        )
        ax.add_patch(frame)
    ax.text(ENCODER_X - margin - 0.45, FIRST_Y + 1.7, "$N\\times$", fontsize=12, ha="center")
    ax.text(DECODER_X + margin + 0.45, FIRST_Y + 2.9, "$\\times N$", fontsize=12, ha="center")
    encoder_top = FIRST_Y + 3 * STEP + 0.75
    ax.text(ENCODER_X - 1.3, encoder_top + 0.3, "encoder", fontsize=10, ha="center", style="italic")
    decoder_top = FIRST_Y + 5 * STEP + 0.75
    ax.text(DECODER_X + 2.3, decoder_top + 0.3, "decoder", fontsize=10, ha="center", style="italic")


def _residual(ax, x, side, y_sublayer, y_norm):
    """The residual connection around one sub-layer: from its input, beside it, into Add & Norm."""
    branch = y_sublayer - BOX_H / 2 - 0.2  # on the arrow into the sub-layer
    beside = x + side * (BOX_W / 2 + RESIDUAL_GAP)
    ax.plot([x, beside, beside], [branch, branch, y_norm], color="#333333", lw=1.2, zorder=1)
    arrow(ax, (beside, y_norm), (x + side * BOX_W / 2, y_norm), gid="residual")


def _layer(ax, x, specs, side):
    """A stack of sub-layer boxes joined by arrows, each sub-layer with its residual connection
    into the Add & Norm above it; returns the top of the last box."""
    previous, y = None, FIRST_Y
    for text, kind, edge in specs:
        lw = 2.6 if edge else 1.2
        top, bottom = box(
            ax, x, y, BOX_W, BOX_H, text, COLORS[kind], edge=edge or "#333333", lw=lw, fontsize=9
        )
        if previous:
            arrow(ax, previous, bottom)
        if kind == "norm":
            _residual(ax, x, side, y - STEP, y)
        previous, y = top, y + STEP
    return previous


def _inputs(ax):
    for x, text, label in (
        (ENCODER_X, "Input embedding\n+ positional encoding", "inputs"),
        (DECODER_X, "Output embedding\n+ positional encoding", "outputs (shifted right)"),
    ):
        top, bottom = box(ax, x, 1.75, BOX_W, 0.9, text, COLORS["embed"], fontsize=9)
        arrow(ax, (x, 0.55), bottom)
        ax.text(x, 0.2, label, ha="center", fontsize=9)
        arrow(ax, top, (x, FIRST_Y - BOX_H / 2))


def _memory(ax, enc_top):
    """The encoder's output: the keys and values of every decoder layer's cross-attention."""
    cross_y = FIRST_Y + 2 * STEP
    left_edge = DECODER_X - BOX_W / 2
    over, down = enc_top[1] + 0.95, left_edge - 0.3
    ax.plot([enc_top[0], enc_top[0], down, down], [enc_top[1], over, over, cross_y],
            color=USE_COLORS[2], lw=1.8, zorder=1)  # fmt: skip
    arrow(ax, (down, cross_y), (left_edge, cross_y), color=USE_COLORS[2], lw=1.8)
    ax.text(
        (enc_top[0] + down) / 2, over + 0.15, "keys and values from the encoder", fontsize=8,
        color=USE_COLORS[2], ha="center",
    )  # fmt: skip


def _output_head(ax, dec_top):
    top, bottom = box(
        ax, DECODER_X, dec_top[1] + 1.0, 3.0, 0.62, "Linear", COLORS["linear"], fontsize=9
    )
    arrow(ax, dec_top, bottom)
    top2, bottom2 = box(
        ax, DECODER_X, top[1] + 0.64, 3.0, 0.62, "Softmax", COLORS["softmax"], fontsize=9
    )
    arrow(ax, top, bottom2)
    arrow(ax, top2, (DECODER_X, top2[1] + 0.5))
    ax.text(DECODER_X, top2[1] + 0.65, "output probabilities", ha="center", fontsize=9)


def draw_transformer():
    """The encoder-decoder Transformer of the paper's Figure 1, with the residual connection around
    every sub-layer; the three uses of multi-head attention are marked."""
    fig, ax = _canvas(15.4, 13.6, (9.6, 8.5))
    _stack_frames(ax)
    enc_top = _layer(ax, ENCODER_X, ENCODER_LAYER, side=-1)
    dec_top = _layer(ax, DECODER_X, DECODER_LAYER, side=+1)
    _inputs(ax)
    _memory(ax, enc_top)
    _output_head(ax, dec_top)
    y = 13.3
    for (use, detail), color in zip(LEGEND, USE_COLORS):
        ax.text(0.3, y, use, fontsize=8.5, color=color, ha="left", va="top")
        ax.text(0.7, y - 0.4, detail, fontsize=8.5, color=color, ha="left", va="top")
        y -= 0.95
    return fig
