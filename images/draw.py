"""Draw the course's diagrams with matplotlib: ``python images/draw.py [folder]`` rewrites images/*.png.

The notebooks embed these files (notebooks/build.py turns ``![...](../images/x.png)`` into attachments).
Every diagram is drawn here, from the course's own conventions: batch first, True = may attend.

The slides show an image at most 1200 x 620 px (docs/slides/slides.css), shrunk to fit and never enlarged: every
diagram is laid out in pixels (one data unit is one pixel of the PNG), at most about 900 x 600, so that it shows at
its natural size there as in a notebook, and its smallest label is 18.5 px tall, legible from the back of a room.
main() refuses a diagram whose labels a slide would show under 18 px, or whose texts overlap or leave their box.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import itertools

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from matplotlib.transforms import Bbox
from PIL import Image

HERE = Path(__file__).resolve().parent
DPI = 100
LABEL, NOTE, TITLE = 19, 18.5, 22  # text sizes in px: a box's label, a note beside it (monospace), a title
SLIDE = (1200, 620)  # the largest an image shows on a slide, width x height in px
MIN_LABEL_PX = 18
COLOURS = {
    "attn": "#f9d9a8",  # attention
    "norm": "#f6f3b5",  # add & norm
    "ffn": "#c6e5f7",  # feed-forward
    "embed": "#f8c6c6",  # embeddings and positions
    "out": "#d9ccf0",  # linear, softmax, outputs
    "tensor": "#eeeeee",  # a tensor, with its shape
    "op": "#d5efd0",  # an operation
}


def pt(px):
    """A font size in points for text px pixels tall at DPI."""
    return px * 72 / DPI


def box(ax, x, y, w, h, text, kind, size=LABEL, bold=False):
    """A rounded box centred on (x, y)."""
    patch = FancyBboxPatch(
        (x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0,rounding_size=7",
        facecolor=COLOURS[kind], edgecolor="#444444", linewidth=1.2,
    )  # fmt: skip
    ax.add_patch(patch)
    label = ax.text(x, y, text, ha="center", va="center", fontsize=pt(size), weight="bold" if bold else "normal")
    label.box = patch  # collisions() checks that the label stays inside


def note(ax, x, y, text, **kwargs):
    """A monospace note: a shape, or what a step does."""
    ax.text(x, y, text, fontsize=pt(NOTE), va="center", family="monospace", color="#333333", **kwargs)


def arrow(ax, start, end, text=None, rad=0.0, colour="#333333", offset=(8, 0), ha="left"):
    ax.add_patch(
        FancyArrowPatch(
            start, end, arrowstyle="-|>", mutation_scale=14, color=colour, linewidth=1.3,
            connectionstyle=f"arc3,rad={rad}", shrinkA=0, shrinkB=0,
        )
    )  # fmt: skip
    if text:
        note(ax, (start[0] + end[0]) / 2 + offset[0], (start[1] + end[1]) / 2 + offset[1], text, ha=ha)


def column(ax, x, bottom, rows, width, gap):
    """Boxes (text, kind, height) stacked upwards from bottom, an arrow from each to the next: their (bottom, top)."""
    spans = []
    for text, kind, height in rows:
        box(ax, x, bottom + height / 2, width, height, text, kind)
        if spans:
            arrow(ax, (x, spans[-1][1]), (x, bottom))
        spans.append((bottom, bottom + height))
        bottom += height + gap
    return spans


def residual(ax, x, y_from, y_to, half_width, side=-1):
    """A skip connection: leaves the main path at y_from, runs beside the boxes, enters add & norm at y_to."""
    lane = x + side * (half_width + 18)
    ax.plot([x, lane, lane], [y_from, y_from, y_to], color="#888888", linewidth=1.2)
    arrow(ax, (lane, y_to), (x + side * half_width, y_to), colour="#888888")


def frame(ax, x0, y0, x1, y1):
    """The grey frame around a stack of N layers."""
    ax.add_patch(
        FancyBboxPatch((x0, y0), x1 - x0, y1 - y0, boxstyle="round,pad=0,rounding_size=10", facecolor="#fafafa",
                       edgecolor="#888888", linewidth=1.2, zorder=0)
    )  # fmt: skip


def canvas(width, height):
    """A figure width x height px whose data units are its pixels."""
    fig = plt.figure(figsize=(width / DPI, height / DPI), dpi=DPI)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def texts(fig):
    return [t for ax in fig.axes for t in ax.texts if t.get_text().strip()]


def drawn(fig):
    """What fig draws, padded, in inches: what savefig keeps of it."""
    renderer = fig.canvas.get_renderer()
    extents = [a.get_window_extent(renderer) for ax in fig.axes for a in [*ax.patches, *ax.lines, *ax.texts]]
    return Bbox.union(extents).transformed(fig.dpi_scale_trans.inverted()).padded(0.1)


def smallest_label_on_slide(fig, size) -> float:
    """How tall, in px, a slide shows the smallest text of fig saved at DPI as a PNG of size (width, height) px:
    the slide shrinks the image to fit SLIDE and never enlarges it."""
    scale = min(1.0, SLIDE[0] / size[0], SLIDE[1] / size[1])
    return min(t.get_fontsize() for t in texts(fig)) * DPI / 72 * scale


def collisions(fig) -> list[str]:
    """Texts that overlap one another, or stick out of the box drawn around them."""
    renderer = fig.canvas.get_renderer()
    extent = {t: t.get_window_extent(renderer) for t in texts(fig)}
    found = [f"{a.get_text()!r} overlaps {b.get_text()!r}" for a, b in itertools.combinations(extent, 2)
             if extent[a].overlaps(extent[b])]  # fmt: skip
    for t, e in extent.items():
        if hasattr(t, "box"):
            b = t.box.get_window_extent(renderer)
            if not (b.x0 + 4 <= e.x0 and e.x1 <= b.x1 - 4 and b.y0 + 2 <= e.y0 and e.y1 <= b.y1 - 2):
                found.append(f"{t.get_text()!r} does not fit its box")
    return found


def transformer():
    """The encoder-decoder: N encoder layers (post-norm, as in the paper), N decoder layers, the generator."""
    fig, ax = canvas(900, 600)
    w, h, h2, gap = 270, 32, 54, 14  # a box's width, height, height with two lines; the gap between two boxes
    ex, dx = 245, 645  # the two columns
    base = 146  # the first layer box's bottom, in both columns
    # encoder
    frame(ax, ex - w / 2 - 30, 126, ex + w / 2 + 30, 326)
    ax.text(ex - w / 2 - 38, 226, "N ×", fontsize=pt(24), ha="right", va="center", weight="bold")
    rows = [("multi-head self-attention", "attn"), ("add & norm", "norm"), ("feed-forward", "ffn"), ("add & norm", "norm")]  # fmt: skip
    spans = column(ax, ex, base, [(text, kind, h) for text, kind in rows], w, gap)
    residual(ax, ex, 136, sum(spans[1]) / 2, w / 2)  # x + self_attn(x), then norm
    residual(ax, ex, spans[1][1] + gap / 2, sum(spans[3]) / 2, w / 2)  # x + ffn(x), then norm
    box(ax, ex, 67, w, h2, "embedding × √d_model\n+ positional encoding", "embed")
    note(ax, ex, 10, "src (B, T_src)", ha="center")
    arrow(ax, (ex, 21), (ex, 40))
    arrow(ax, (ex, 94), (ex, base), "x (B, T_src, d_model)", offset=(-8, -13), ha="right")
    note(ax, ex, 358, "memory (B, T_src, d_model)", ha="center")
    arrow(ax, (ex, spans[-1][1]), (ex, 348))
    ax.text(ex, 400, "ENCODER", ha="center", va="center", fontsize=pt(TITLE), weight="bold")
    # decoder
    drows = [
        ("masked multi-head\nself-attention", "attn"), ("add & norm", "norm"),
        ("cross-attention\nQ: decoder, K,V: memory", "attn"), ("add & norm", "norm"),
        ("feed-forward", "ffn"), ("add & norm", "norm"),
    ]  # fmt: skip
    spans = column(ax, dx, base, [(text, kind, h2 if "\n" in text else h) for text, kind in drows], w, gap)
    frame(ax, dx - w / 2 - 30, 126, dx + w / 2 + 30, spans[-1][1] + 10)
    ax.text(dx + w / 2 + 38, (126 + spans[-1][1] + 10) / 2, "× N", fontsize=pt(24), ha="left", va="center", weight="bold")  # fmt: skip
    for branch, norm in [(136, 1), (spans[1][1] + gap / 2, 3), (spans[3][1] + gap / 2, 5)]:
        residual(ax, dx, branch, sum(spans[norm]) / 2, w / 2, side=1)
    box(ax, dx, 67, w, h2, "embedding × √d_model\n+ positional encoding", "embed")
    note(ax, dx, 10, "tgt (B, T_tgt), shifted right", ha="center")
    arrow(ax, (dx, 21), (dx, 40))
    arrow(ax, (dx, 94), (dx, base), "causal tgt_mask", offset=(8, -13))
    # memory feeds every decoder layer's cross-attention (keys and values only)
    arrow(ax, (ex + 147, 358), (dx - w / 2, sum(spans[2]) / 2), rad=-0.25, colour="#c0392b")
    ax.text(445, 312, "K, V", fontsize=pt(NOTE), ha="center", va="center", family="monospace", color="#c0392b")
    top = spans[-1][1]
    ax.text(dx - w / 2 - 30, top + 27, "DECODER", ha="left", va="center", fontsize=pt(TITLE), weight="bold")
    arrow(ax, (dx, top), (dx, top + 42))
    linear, _ = column(ax, dx, top + 42, [("linear (generator)", "out", h), ("softmax → next-token probabilities", "out", h)], 350, 30)  # fmt: skip
    note(ax, dx + 8, linear[1] + 15, "(B, T_tgt, vocab)")  # the logits
    return fig


def attention_flow():
    """Scaled dot-product attention, operation by operation, with the shape after each."""
    fig, ax = canvas(900, 600)
    x, w = 152, 296  # the column of steps
    box(ax, 92, 22, 176, 40, "Q  (B, T_q, d_k)", "tensor")
    box(ax, 304, 22, 176, 40, "K  (B, T_k, d_k)", "tensor")
    box(ax, 798, 22, 170, 40, "V  (B, T_k, d_v)", "tensor")
    steps = [
        ("Q Kᵀ", "(B, T_q, T_k)   one score per (query, key)"),
        ("÷ √d_k", "keeps the scores' variance near 1"),
        ("mask: False → −∞", "True = may attend (padding, causal)"),
        ("softmax over keys (dim=−1)", "(B, T_q, T_k)   each row sums to 1"),
    ]
    spans = column(ax, x, 94, [(op, "op", 40) for op, _ in steps], w, 34)
    for (bottom, top), (_, text) in zip(spans, steps):
        note(ax, x + w / 2 + 12, (bottom + top) / 2, text)
    arrow(ax, (92, 42), (x - 40, 94))
    arrow(ax, (304, 42), (x + 40, 94))
    box(ax, 480, 420, 200, 40, "weights @ V", "op")
    arrow(ax, (x, spans[-1][1]), (430, 400))
    ax.plot([798, 798], [42, 420], color="#333333", linewidth=1.3)
    arrow(ax, (798, 420), (580, 420))
    box(ax, 480, 495, 260, 40, "output  (B, T_q, d_v)", "out")
    arrow(ax, (480, 440), (480, 475))
    ax.text(444, 565, "Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V", fontsize=pt(TITLE), ha="center", va="center", style="italic")  # fmt: skip
    return fig


def multi_head_shapes():
    """Shapes through multi-head attention: split the model dimension into heads, attend, merge back."""
    fig, ax = canvas(900, 560)
    stages = [
        ("x  (B, T, d_model)", "tensor", None),
        ("w_q, w_k, w_v:\nnn.Linear(d_model, d_model)", "op", "(B, T, d_model) each"),
        (".view(B, T, n_heads, d_k)", "op", "split: d_model = n_heads × d_k"),
        (".transpose(1, 2)", "op", "(B, n_heads, T, d_k):\nheads become a batch dim"),
        ("scaled dot-product attention", "attn", "(B, n_heads, T, d_k);\nweights (B, n_heads, T, T)"),
        (".transpose(1, 2)\n.reshape(B, T, d_model)", "op", "merge: the heads side by side"),
        ("w_o: nn.Linear(d_model, d_model)", "op", "mixes what the heads found"),
        ("output  (B, T, d_model)", "out", None),
    ]
    x, w = 180, 350
    rows = [(text, kind, 58 if "\n" in text else 40) for text, kind, _ in stages]
    spans = column(ax, x, 0, rows, w, 24)
    for (bottom, top), (*_, text) in zip(spans, stages):
        if text:
            note(ax, x + w / 2 + 14, (bottom + top) / 2, text)
    # the heads, drawn as a stack, beside the attention
    y = sum(spans[4]) / 2
    for i, colour in enumerate(["#f9d9a8", "#f4c27f", "#eeaa55", "#e89330"]):
        ax.add_patch(FancyBboxPatch((720 + 9 * i, y - 41 + 9 * i), 56, 56, boxstyle="round,pad=0,rounding_size=4", facecolor=colour, edgecolor="#555555"))  # fmt: skip
    ax.text(761, y - 48, "n_heads attention\nmaps, in parallel", fontsize=pt(NOTE), ha="center", va="top")
    return fig


DIAGRAMS = {
    "transformer.png": transformer,
    "attention_flow.png": attention_flow,
    "multi_head_shapes.png": multi_head_shapes,
}


def main(out: Path = HERE) -> dict[str, float]:
    """Draws every diagram into out; returns each one's smallest label, in px, as a slide shows it."""
    shown, problems = {}, []
    for name, draw in DIAGRAMS.items():
        fig = draw()
        path = Path(out) / name
        fig.savefig(path, dpi=DPI, bbox_inches=drawn(fig), metadata={"Software": None})
        with Image.open(path) as png:
            shown[name] = smallest_label_on_slide(fig, png.size)
            print(f"wrote {path}: {png.width}x{png.height}, smallest label {shown[name]:.1f} px on a slide")
        problems += [f"{name}: {p}" for p in collisions(fig)]
        plt.close(fig)
    problems += [f"{n}: a label only {px:.1f} px tall on a slide" for n, px in shown.items() if px < MIN_LABEL_PX]
    if problems:
        raise ValueError("\n".join(problems))
    return shown


if __name__ == "__main__":
    import sys

    main(*sys.argv[1:])
