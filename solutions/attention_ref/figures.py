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


def arrow(ax, start, end, color="#333333", lw=1.2, style="-|>", **kw):
    ax.annotate(
        "",
        xy=end,
        xytext=start,
        zorder=1,
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
    ("① Multi-head self-attention", "attention", USE_COLORS[0]),
    ("Add & Norm", "norm", None),
    ("Feed forward", "ffn", None),
    ("Add & Norm", "norm", None),
]
DECODER_LAYER = [
    ("② Masked multi-head self-attention", "attention", USE_COLORS[1]),
    ("Add & Norm", "norm", None),
    ("③ Multi-head cross-attention", "attention", USE_COLORS[2]),
    ("Add & Norm", "norm", None),
    ("Feed forward", "ffn", None),
    ("Add & Norm", "norm", None),
]
LEGEND = [
    "① encoder self-attention: Q, K, V from the previous encoder layer",
    "② decoder self-attention, masked: position $i$ sees positions $\\leq i$",
    "③ encoder–decoder attention: Q from the decoder, K, V from the encoder",
]


def _stack_frames(ax):
    """The encoder (left) and decoder (right) frames, each repeated N = 6 times."""
    for (x, height), color in (((0.7, 4.6), COLORS["encoder"]), ((7.8, 6.9), COLORS["decoder"])):
        frame = FancyBboxPatch(
            (x, 2.9),
            4.6,
            height,
            boxstyle="round,pad=0.05,rounding_size=0.3",
            facecolor=color,
            edgecolor="#777777",
            zorder=0,
        )
        ax.add_patch(frame)
    ax.text(0.2, 5.2, "$N\\times$", fontsize=12, ha="center")
    ax.text(12.95, 6.3, "$\\times N$", fontsize=12, ha="center")
    ax.text(3.0, 7.75, "encoder", fontsize=10, ha="center", style="italic")
    ax.text(10.1, 10.05, "decoder", fontsize=10, ha="center", style="italic")


def _layer(ax, x, specs, y0):
    """A stack of sub-layer boxes joined by arrows; returns the top of the last one."""
    previous = None
    for text, kind, edge in specs:
        lw = 2.6 if edge else 1.2
        top, bottom = box(
            ax, x, y0, 4.2, 0.72, text, COLORS[kind], edge=edge or "#333333", lw=lw, fontsize=9
        )
        if previous:
            arrow(ax, previous, bottom)
        previous, y0 = top, y0 + 1.15
    return previous


def _inputs(ax):
    for x, text, label in (
        (3.0, "Input embedding\n+ positional encoding", "inputs"),
        (10.1, "Output embedding\n+ positional encoding", "outputs (shifted right)"),
    ):
        top, bottom = box(ax, x, 1.75, 4.2, 0.9, text, COLORS["embed"], fontsize=9)
        arrow(ax, (x, 0.55), bottom)
        ax.text(x, 0.2, label, ha="center", fontsize=9)
        arrow(ax, top, (x, 3.5 - 0.36))


def _memory(ax, enc_top):
    """The encoder's output: the keys and values of every decoder layer's cross-attention."""
    arrow(ax, enc_top, (3.0, 8.3), style="-")
    style = dict(
        arrowstyle="-|>",
        color=USE_COLORS[2],
        lw=1.8,
        connectionstyle="angle,angleA=0,angleB=90,rad=8",
    )
    ax.annotate("", xy=(8.0, 5.8), xytext=(3.0, 8.3), zorder=1, arrowprops=style)
    ax.text(
        5.5, 8.45, "keys and values from the encoder", fontsize=8, color=USE_COLORS[2], ha="center"
    )


def _output_head(ax, dec_top):
    top, bottom = box(ax, 10.1, 10.9, 3.0, 0.62, "Linear", COLORS["linear"], fontsize=9)
    arrow(ax, dec_top, bottom)
    top2, bottom2 = box(ax, 10.1, 11.85, 3.0, 0.62, "Softmax", COLORS["softmax"], fontsize=9)
    arrow(ax, top, bottom2)
    arrow(ax, top2, (10.1, 12.65))
    ax.text(10.1, 12.8, "output probabilities", ha="center", fontsize=9)


def draw_transformer():
    """The encoder-decoder Transformer; the three uses of multi-head attention are marked."""
    fig, ax = _canvas(14, 13.2, (8.8, 8.3))
    _stack_frames(ax)
    enc_top = _layer(ax, 3.0, ENCODER_LAYER, 3.5)
    dec_top = _layer(ax, 10.1, DECODER_LAYER, 3.5)
    _inputs(ax)
    _memory(ax, enc_top)
    _output_head(ax, dec_top)
    for i, (text, color) in enumerate(zip(LEGEND, USE_COLORS)):
        ax.text(0.2, 12.6 - 0.5 * i, text, fontsize=8.5, color=color, ha="left")
    return fig
