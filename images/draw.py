"""Draw the course's diagrams with matplotlib: ``python images/draw.py [folder]`` rewrites images/*.png.

The notebooks embed these files (notebooks/build.py turns ``![...](../images/x.png)`` into attachments).
Every diagram is drawn here, from the course's own conventions: batch first, True = may attend.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import itertools

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

HERE = Path(__file__).resolve().parent
OUT = HERE  # where save() writes; main() takes another folder as its argument
COLOURS = {
    "attn": "#f9d9a8",  # attention
    "norm": "#f6f3b5",  # add & norm
    "ffn": "#c6e5f7",  # feed-forward
    "embed": "#f8c6c6",  # embeddings and positions
    "out": "#d9ccf0",  # linear, softmax, outputs
    "tensor": "#eeeeee",  # a tensor, with its shape
    "op": "#d5efd0",  # an operation
}


def box(ax, x, y, w, h, text, kind, fontsize=9, bold=False):
    """A rounded box centred on (x, y)."""
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=COLOURS[kind], edgecolor="#444444", linewidth=1.0,
        )
    )  # fmt: skip
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, weight="bold" if bold else "normal")


def arrow(ax, start, end, text=None, style="-|>", rad=0.0, colour="#333333", offset=(0.08, 0.0), fontsize=8):
    ax.add_patch(
        FancyArrowPatch(
            start, end, arrowstyle=style, mutation_scale=11, color=colour, linewidth=1.1,
            connectionstyle=f"arc3,rad={rad}", shrinkA=0, shrinkB=0,
        )
    )  # fmt: skip
    if text:
        mx, my = (start[0] + end[0]) / 2 + offset[0], (start[1] + end[1]) / 2 + offset[1]
        ax.text(mx, my, text, fontsize=fontsize, ha="left", va="center", color="#333333", family="monospace")


def residual(ax, x, y_from, y_to, half_width, side=-1):
    """A skip connection: leaves the main path at y_from, runs beside the boxes, enters add & norm at y_to."""
    lane = x + side * (half_width + 0.2)
    ax.plot([x, lane, lane], [y_from, y_from, y_to], color="#888888", linewidth=1.0)
    arrow(ax, (lane, y_to), (x + side * half_width, y_to), colour="#888888")


def canvas(width, height, xlim, ylim):
    fig, ax = plt.subplots(figsize=(width, height))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def save(fig, name):
    fig.savefig(OUT / name, dpi=110, bbox_inches="tight", pad_inches=0.1, metadata={"Software": None})
    plt.close(fig)
    print(f"wrote {OUT / name}")


def transformer():
    """The encoder-decoder: N encoder layers (post-norm, as in the paper), N decoder layers, the generator."""
    fig, ax = canvas(7.2, 8.6, (0, 10), (0, 12.2))
    w, h = 3.0, 0.55
    ex, dx = 2.6, 7.2  # the two columns
    # encoder
    ax.add_patch(
        FancyBboxPatch((ex - 1.85, 3.05), 3.7, 4.2, boxstyle="round,pad=0.05", facecolor="#fafafa", edgecolor="#888888")
    )
    ax.text(ex - 2.05, 5.1, "N ×", fontsize=12, ha="right", va="center", weight="bold")
    rows = [(3.6, "multi-head self-attention", "attn"), (4.5, "add & norm", "norm"), (5.5, "feed-forward", "ffn"), (6.5, "add & norm", "norm")]  # fmt: skip
    for y, text, kind in rows:
        box(ax, ex, y, w, h, text, kind)
    box(ax, ex, 1.9, w, h, "embedding × √d_model\n+ positional encoding", "embed", fontsize=8)
    ax.text(ex, 0.75, "src (B, T_src)", ha="center", fontsize=8.5, family="monospace")
    arrow(ax, (ex, 1.0), (ex, 1.62))
    arrow(ax, (ex, 2.18), (ex, 3.32), "x (B, T_src, d_model)")
    for (y0, _, _), (y1, _, _) in itertools.pairwise(rows):
        arrow(ax, (ex, y0 + h / 2), (ex, y1 - h / 2))
    residual(ax, ex, 3.15, 4.5, w / 2)  # x + self_attn(x), then norm
    residual(ax, ex, 4.95, 6.5, w / 2)  # x + ffn(x), then norm
    ax.text(ex, 7.55, "memory (B, T_src, d_model)", ha="center", fontsize=8.5, family="monospace")
    arrow(ax, (ex, 6.78), (ex, 7.4))
    ax.text(ex, 8.2, "ENCODER", ha="center", fontsize=11, weight="bold")
    # decoder
    ax.add_patch(
        FancyBboxPatch((dx - 1.85, 3.05), 3.7, 6.1, boxstyle="round,pad=0.05", facecolor="#fafafa", edgecolor="#888888")
    )
    ax.text(dx + 2.1, 6.1, "× N", fontsize=12, ha="left", va="center", weight="bold")
    drows = [
        (3.6, "masked multi-head\nself-attention", "attn"), (4.5, "add & norm", "norm"),
        (5.5, "cross-attention\nQ: decoder, K,V: memory", "attn"), (6.4, "add & norm", "norm"),
        (7.4, "feed-forward", "ffn"), (8.4, "add & norm", "norm"),
    ]  # fmt: skip
    for y, text, kind in drows:
        box(ax, dx, y, w, h + (0.15 if "\n" in text else 0), text, kind, fontsize=8.5 if "\n" in text else 9)
    for (y0, t0, _), (y1, t1, _) in itertools.pairwise(drows):
        arrow(ax, (dx, y0 + h / 2 + (0.07 if "\n" in t0 else 0)), (dx, y1 - h / 2 - (0.07 if "\n" in t1 else 0)))
    residual(ax, dx, 3.15, 4.5, w / 2, side=1)
    residual(ax, dx, 4.95, 6.4, w / 2, side=1)
    residual(ax, dx, 6.9, 8.4, w / 2, side=1)
    box(ax, dx, 1.9, w, h, "embedding × √d_model\n+ positional encoding", "embed", fontsize=8)
    ax.text(dx, 0.75, "tgt (B, T_tgt), shifted right", ha="center", fontsize=8.5, family="monospace")
    arrow(ax, (dx, 1.0), (dx, 1.62))
    arrow(ax, (dx, 2.18), (dx, 3.25), "causal tgt_mask", offset=(0.1, 0.0))
    # memory feeds every decoder layer's cross-attention (keys and values only)
    arrow(ax, (ex + 1.65, 7.55), (dx - w / 2, 5.5), "K, V", rad=-0.2, colour="#c0392b", offset=(0.3, 0.35))
    ax.text(dx, 9.45, "DECODER", ha="center", fontsize=11, weight="bold")
    box(ax, dx, 10.3, w, h, "linear (generator)", "out")
    box(ax, dx, 11.2, w, h, "softmax → next-token probabilities", "out", fontsize=8.5)
    arrow(ax, (dx, 8.68), (dx, 10.02))
    arrow(ax, (dx, 10.58), (dx, 10.92))
    ax.text(dx + 1.65, 9.75, "(B, T_tgt, vocab)", fontsize=8, family="monospace")
    save(fig, "transformer.png")


def attention_flow():
    """Scaled dot-product attention, operation by operation, with the shape after each."""
    fig, ax = canvas(8.0, 6.9, (0, 11), (0, 9.5))
    box(ax, 1.5, 0.8, 2.0, 0.6, "Q  (B, T_q, d_k)", "tensor")
    box(ax, 4.3, 0.8, 2.0, 0.6, "K  (B, T_k, d_k)", "tensor")
    box(ax, 9.8, 0.8, 2.0, 0.6, "V  (B, T_k, d_v)", "tensor")
    steps = [
        (2.2, "Q Kᵀ", "(B, T_q, T_k)   one score per (query, key)"),
        (3.4, "÷ √d_k", "keeps the scores' variance near 1"),
        (4.6, "mask: False → −∞", "True = may attend (padding, causal)"),
        (5.8, "softmax over keys (dim=−1)", "(B, T_q, T_k)   each row sums to 1"),
    ]
    x = 2.9
    arrow(ax, (1.5, 1.1), (x - 0.4, 1.92))
    arrow(ax, (4.3, 1.1), (x + 0.4, 1.92))
    for (y0, _, _), (y1, _, _) in itertools.pairwise(steps):
        arrow(ax, (x, y0 + 0.28), (x, y1 - 0.28))
    for y, op, note in steps:
        box(ax, x, y, 3.4, 0.56, op, "op")
        ax.text(x + 1.85, y, note, fontsize=8, va="center", family="monospace")
    box(ax, 5.8, 7.1, 3.2, 0.56, "weights @ V", "op")
    arrow(ax, (x, 6.08), (5.2, 6.82))
    ax.plot([9.8, 9.8], [1.1, 7.1], color="#333333", linewidth=1.1)
    arrow(ax, (9.8, 7.1), (7.4, 7.1))
    box(ax, 5.8, 8.15, 3.6, 0.56, "output  (B, T_q, d_v)", "out")
    arrow(ax, (5.8, 7.38), (5.8, 7.87))
    ax.text(
        5.5, 9.2, "Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V", fontsize=10, ha="center", va="center", style="italic"
    )
    save(fig, "attention_flow.png")


def multi_head_shapes():
    """Shapes through multi-head attention: split the model dimension into heads, attend, merge back."""
    fig, ax = canvas(10.5, 7.0, (0, 15), (0, 9.0))
    stages = [
        (0.6, "x  (B, T, d_model)", "tensor", None),
        (1.7, "w_q, w_k, w_v: nn.Linear(d_model, d_model)", "op", "(B, T, d_model) each"),
        (2.8, ".view(B, T, n_heads, d_k)", "op", "split: d_model = n_heads × d_k"),
        (3.9, ".transpose(1, 2)", "op", "(B, n_heads, T, d_k): heads become a batch dim"),
        (5.0, "scaled dot-product attention", "attn", "(B, n_heads, T, d_k);  weights (B, n_heads, T, T)"),
        (6.1, ".transpose(1, 2).reshape(B, T, d_model)", "op", "merge: the heads side by side"),
        (7.2, "w_o: nn.Linear(d_model, d_model)", "op", "mixes what the heads found"),
        (8.3, "output  (B, T, d_model)", "out", None),
    ]
    x = 3.2
    for y, text, kind, note in stages:
        box(ax, x, y, 5.0, 0.58, text, kind, fontsize=8.5)
        if note:
            ax.text(x + 2.75, y, note, fontsize=8, va="center", family="monospace")
    for (y0, *_), (y1, *_) in itertools.pairwise(stages):
        arrow(ax, (x, y0 + 0.29), (x, y1 - 0.29))
    # the heads, drawn as a stack
    for i, colour in enumerate(["#f9d9a8", "#f4c27f", "#eeaa55", "#e89330"]):
        ax.add_patch(FancyBboxPatch((13.4 + 0.12 * i, 4.45 + 0.12 * i), 0.9, 0.9, boxstyle="round,pad=0.02", facecolor=colour, edgecolor="#555555"))  # fmt: skip
    ax.text(14.0, 4.25, "n_heads attention\nmaps, in parallel", fontsize=8, ha="center", va="top")
    save(fig, "multi_head_shapes.png")


DIAGRAMS = {
    "transformer.png": transformer,
    "attention_flow.png": attention_flow,
    "multi_head_shapes.png": multi_head_shapes,
}


def main(out: Path = HERE) -> None:
    global OUT
    OUT = Path(out)
    for draw in DIAGRAMS.values():
        draw()


if __name__ == "__main__":
    import sys

    main(*sys.argv[1:])
