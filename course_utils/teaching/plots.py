"""Plots for the course. Every helper returns a matplotlib ``Figure`` or an Altair ``Chart``; the
notebook displays it. Attention weights may be given as tensors or arrays of shape
``(T_q, T_k)``, or ``(h, T_q, T_k)`` for one heatmap per head.

Colours are chosen for every reader: heatmaps use viridis and magma (sequential, readable without colour vision)
or ColorBrewer's red-blue (diverging); lines take the Okabe-Ito palette (``PALETTE``), whose colours stay distinct
under the common colour-vision deficiencies. Importing this module makes ``PALETTE`` matplotlib's colour cycle, so
the chapters' own plots use it too.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import ListedColormap, LogNorm
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.text import Text
from numpy.typing import ArrayLike
from torch import Tensor

from ..settings import OFFLINE_CHARTS
from . import _vega

if TYPE_CHECKING:  # Altair costs ~2 s to import: only the interactive charts load it
    import altair as alt

    from ..training.loop import History

Matrix = Tensor | ArrayLike  # weights or an encoding: a tensor (any device, with or without gradients) or an array

__all__ = [
    "PALETTE",
    "attention_chart",
    "attention_grid",
    "attention_heatmap",
    "dependency_heatmap",
    "evaluation_curve",
    "loss_curve",
    "positional_encoding_chart",
    "positional_encoding_heatmap",
    "positional_waves",
    "use_offline_charts",
]  # fmt: skip

OFFLINE_RENDERER = "course-offline"
# One diverging map for encodings, the same in matplotlib and Altair: -1 blue, 0 white, +1 red (ColorBrewer's
# RdBu, reversed in both libraries). Attention weights use viridis: sequential and colour-blind safe.
PE_COLORMAP = "RdBu_r"
PE_SCHEME = "redblue"
# Okabe and Ito (2008), "Color universal design": blue, orange, bluish green, vermilion, sky blue, reddish purple,
# yellow, black. tests/test_plots.py simulates protanopia, deuteranopia and tritanopia and holds every pair apart.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#000000"]
mpl.rcParams["axes.prop_cycle"] = cycler(color=PALETTE)
# Text legible from the back of a room: 11 pt is 15 px in a notebook, and at least 12 px where a projected
# JupyterLab shrinks a wide figure to about 900 px (tests/test_plots.py measures every plot so).
mpl.rcParams["font.size"] = 11
SMALL_TEXT = 9.5  # points: the numbers written in heatmap cells, and legends with many entries
# The interactive charts' text, in pixels (Vega's defaults are 10-11 px labels): legible projected, as above.
CHART_TEXT = {"labelFontSize": 12, "titleFontSize": 13}
CHART_TITLE_SIZE = 15
# What the pointer and the menu do goes in a chart's subtitle, so that its title says what it shows; the static
# images of a chart (the decks, the site's fallback) leave the subtitle out (course_utils.teaching._vega).
CHART_HINT_SIZE = 12


def _array(x: Matrix, dims: tuple[int, ...], name: str) -> np.ndarray:
    """Tensor or array -> float NumPy array with one of the allowed numbers of dimensions."""
    a = np.asarray(x.detach().float().cpu() if isinstance(x, Tensor) else x, dtype=float)
    if a.ndim not in dims:
        raise ValueError(f"{name} must have {' or '.join(map(str, dims))} dimensions; got shape {a.shape}")
    return a


def _inline_csv(columns: dict[str, np.ndarray]) -> alt.InlineData:
    """Chart data inlined as CSV: a few bytes a row, where row-wise JSON repeats every field name."""
    import altair as alt

    rows = zip(*(np.asarray(v).tolist() for v in columns.values()))
    text = "\n".join([",".join(columns), *(",".join(map(str, row)) for row in rows)])
    return alt.InlineData(values=text, format=alt.DataFormat(type="csv", parse=dict.fromkeys(columns, "number")))


def _offline_renderer(spec: dict[str, Any], **metadata: Any) -> dict[str, str]:
    return {"text/html": _vega.offline_html(spec), "text/plain": "<interactive chart>"}


def use_offline_charts(enable: bool = True) -> None:
    """Draw the interactive charts without internet (a classroom with poor Wi-Fi): Altair's default output
    loads Vega's JavaScript from a CDN, and with no network shows an error instead of the chart. Enabled,
    each chart carries that JavaScript itself (needs ``vl-convert-python``). Setting the environment variable
    ``COURSE_OFFLINE_CHARTS=1`` before starting Jupyter does the same in every notebook.
    ``use_offline_charts(False)`` goes back to Altair's default."""
    import altair as alt

    if not enable:
        alt.renderers.enable("default")
        return
    _vega.vl_convert()  # fail here, with what to install, rather than at the first chart
    alt.renderers.register(OFFLINE_RENDERER, _offline_renderer)
    alt.renderers.enable(OFFLINE_RENDERER)


def _altair() -> ModuleType:
    """Altair, imported on first use (it costs ~2 s), honouring ``COURSE_OFFLINE_CHARTS``."""
    import altair as alt

    if OFFLINE_CHARTS.is_on():
        if alt.renderers.active != OFFLINE_RENDERER:
            use_offline_charts()
    return alt


def _labels(labels: Sequence[str] | None, n: int, axis: str) -> list[str]:
    if labels is None:
        return [str(i) for i in range(n)]
    if len(labels) != n:
        raise ValueError(f"{len(labels)} {axis} labels for {n} {axis} positions")
    return [str(s) for s in labels]


def _draw_heatmap(
    ax: Axes, w: np.ndarray, keys: list[str], queries: list[str], title: str | None, annotate: bool, vmax: float
) -> AxesImage:
    image = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(keys)), keys, rotation=90 if max(map(len, keys), default=0) > 2 else 0)
    ax.set_yticks(range(len(queries)), queries)
    ax.set_xlabel("key (attended to) →")
    ax.set_ylabel("← query (attending)")
    if title:
        ax.set_title(title)
    if annotate:
        for (i, j), value in np.ndenumerate(w):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=SMALL_TEXT,
                    color="black" if value > 0.6 * vmax else "white")  # fmt: skip
    return image


def attention_heatmap(
    weights: Matrix, keys: Sequence[str] | None = None, queries: Sequence[str] | None = None,
    *, title: str | None = None, annotate: bool | None = None,
) -> Figure:  # fmt: skip
    """One attention matrix ``(T_q, T_k)``: rows are queries, columns keys, labelled with tokens.

    ``queries`` defaults to ``keys`` (self-attention). Values are written in the cells when the
    matrix is small (at most 12 x 12) unless ``annotate`` says otherwise.
    """
    w = _array(weights, (2,), "weights")
    keys = _labels(keys, w.shape[1], "key")
    queries = keys if queries is None and w.shape[0] == w.shape[1] else _labels(queries, w.shape[0], "query")
    fig, ax = plt.subplots(figsize=(1.2 + 0.42 * len(keys), 0.9 + 0.38 * len(queries)), layout="constrained")
    written = max(w.shape) <= 12 if annotate is None else annotate
    image = _draw_heatmap(ax, w, keys, queries, title, written, vmax=max(1e-9, float(w.max())))
    fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight")
    plt.close(fig)  # returned, not shown twice
    return fig


GRID_MAX_WIDTH = 12.0  # inches: wider figures are shrunk to the notebook's width, and their labels with them
# A deck's slide (tools/build_slides.py): 1280 x 800 px, of which a figure gets 1240 px of the width and 560 px of the
# height below the section's line (680 alone on its slide), shown at most 1.5 times its size. Text on a projected
# slide should be 18 px or more (read from the back).
SLIDE_WIDTH, SLIDE_FIGURE_HEIGHT, SLIDE_PANEL_HEIGHT = 1240, 560, 680
SLIDE_MAX_SCALE, SLIDE_TEXT_PX = 1.5, 18
PANEL_HEIGHT = 6.2  # inches at 100 dpi: one panel alone fills a slide's height
PANEL_TEXT = 15.0  # points: 21 px at 100 dpi


class PanelGrid(Figure):
    """``attention_grid``'s figure. Displayed in a notebook it is drawn as any figure; where its labels would be
    smaller than 18 px on a slide (a grid of long sequences), each panel is drawn once more, alone and sized for a
    slide, into the output's metadata (``projector_panels``: base64 PNGs). The decks show those one to a slide;
    Jupyter and the website show the grid."""

    panels: list[tuple[np.ndarray, list[str], list[str], str, float, str]]

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
        return {}, figure_metadata(self)


def palette_png(png: bytes) -> bytes:
    """A PNG in 256 colours: a tenth of the bytes of a chart's or heatmap's full-colour image, which a notebook
    stores in its output's metadata for the slides alone."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.open(io.BytesIO(png)).convert("RGB").quantize(256).save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def slide_scale(width: float, height: float, *, alone: bool = False) -> float:
    """How many times a deck (tools/build_slides.py) enlarges a figure ``width`` x ``height`` pixels large: as much
    as the room below a slide's heading allows, up to 1.5 times; a panel drawn for a slide of its own (``alone``)
    gets the slide's whole height and is not enlarged."""
    room = SLIDE_PANEL_HEIGHT if alone else SLIDE_FIGURE_HEIGHT
    return min(1.0 if alone else SLIDE_MAX_SCALE, SLIDE_WIDTH / width, room / height)


def _drawn(fig: Figure) -> tuple[bytes, float]:
    """The figure as a notebook shows it (a PNG at 100 dpi, cropped to what is drawn) and the size of its smallest
    text, in the image's pixels: the text that the renderer draws, not every label the figure holds."""
    import io

    from matplotlib.backends.backend_agg import RendererAgg

    sizes: list[float] = []
    draw_text = RendererAgg.draw_text

    def record(renderer: RendererAgg, gc: Any, x: float, y: float, s: str, prop: Any, *args: Any, **kw: Any) -> Any:
        if str(s).strip():
            sizes.append(prop.get_size_in_points())
        return draw_text(renderer, gc, x, y, s, prop, *args, **kw)

    buffer = io.BytesIO()
    RendererAgg.draw_text = record  # type: ignore[method-assign]
    try:
        fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    finally:
        RendererAgg.draw_text = draw_text  # type: ignore[method-assign]
    return buffer.getvalue(), min(sizes, default=0.0) * 100 / 72


def _png_size(png: bytes) -> tuple[int, int]:
    import struct

    width, height = struct.unpack(">II", png[16:24])
    return width, height


def _b64(png: bytes) -> str:
    import base64

    return base64.b64encode(palette_png(png)).decode()


ALT_LENGTH = 400  # characters: a screen reader's sentence or two


def speakable(text: str) -> str:
    """``text`` as a screen reader should say it: its lines joined as one sentence, arrows and Markdown or LaTeX
    marks taken out (``$\\sqrt{d_k}$`` becomes ``√d_k``), the spaces collapsed."""
    text = re.sub(r"\s*\n\s*", ", ", text.strip())
    text = re.sub(r"\\sqrt\{([^}]*)\}", r"√\1", text)
    text = re.sub(r"[$`{}\\→←↑↓]", "", text).replace(" · ", ", ")
    return " ".join(text.split()).strip(" ,")


def figure_alt(fig: Figure) -> str:
    """A text alternative for ``fig`` (the website's ``alt``, which a screen reader reads out): the figure's title,
    each plot's title, its axis labels, its legends' entries and what a colour bar's colours mean, each once, as the
    figure writes them (``speakable``); empty when the figure writes none of these. A longer one is cut after the
    last whole part that fits in ``ALT_LENGTH`` characters."""
    titles: list[str] = []
    said: dict[str, list[str]] = {"across": [], "down": [], "key": [], "colour": []}
    legends = list(fig.legends)
    for ax in fig.axes:
        if getattr(ax, "_colorbar", None) is not None:  # a colour bar: its label says what the colours mean
            found = {"colour": [ax.get_ylabel() or ax.get_xlabel()]}
        else:
            title = speakable(ax.get_title() or ax.get_title("left") or ax.get_title("right"))
            titles += [title] if title else []
            found = {"across": [ax.get_xlabel()], "down": [ax.get_ylabel()]}
            legend = ax.get_legend()
            legends += [legend] if legend is not None else []
        for kind, labels in found.items():
            said[kind] += [label for label in map(speakable, labels) if label and label not in said[kind]]
    for legend in legends:
        entries = map(speakable, (t.get_text() for t in legend.get_texts()))
        said["key"] += [entry for entry in entries if entry and entry not in said["key"]]
    parts = [speakable(fig.get_suptitle())] if fig.get_suptitle() else []
    parts += ["; ".join(titles)] if titles else []
    parts += [f"{kind.capitalize()}: {'; '.join(labels)}" for kind, labels in said.items() if labels]
    alt = ". ".join(part.rstrip(".") for part in parts)
    if len(alt) <= ALT_LENGTH:
        return alt
    cut = alt[: ALT_LENGTH - 1]
    whole = max(cut.rfind("; "), cut.rfind(". "))  # the end of the last whole part, if there is one
    return (cut[:whole] if whole > 0 else cut).rstrip(" ,;.") + "…"


def figure_metadata(fig: Figure) -> dict[str, Any]:
    """What a notebook stores beside a figure's PNG for the website and the decks: ``alt``, its text alternative
    (``figure_alt``); ``text_px``, its smallest text in the image's pixels; and where that text would be under 18 px
    on a slide, a copy drawn for the slide. For an ``attention_grid`` too large for that, each panel alone
    (``projector_panels``); for any other figure, the figure drawn smaller with its text as it is (titles at the
    body text's size), so that the slide enlarges both (``projector_png``). The copies' smallest text is
    ``projector_text_px``. Registered for every figure a notebook displays."""
    png, text_px = _drawn(fig)
    if not text_px:
        return {}
    metadata: dict[str, Any] = {"text_px": round(text_px, 1)}
    alt = figure_alt(fig)
    if alt:
        metadata["alt"] = alt
    panels = getattr(fig, "panels", None)
    if panels:
        drawn = [_drawn(panel_figure(*panel)) for panel in panels]
        metadata["projector_panels"] = [_b64(png) for png, _ in drawn]
        metadata["projector_text_px"] = round(min(px for _, px in drawn), 1)
        return metadata
    if text_px * slide_scale(*_png_size(png)) >= SLIDE_TEXT_PX:
        return metadata
    inches = fig.get_size_inches().copy()
    shrink, copy, copy_px = 1.0, png, text_px
    # titles drawn larger than the rest would crowd each other in the smaller figure: the copy draws them at the
    # body text's size, 18 px or more on the slide as well
    base = mpl.rcParams["font.size"]
    large = [(t, t.get_fontsize()) for t in fig.findobj(Text) if t.get_fontsize() > base]
    try:
        for t, _ in large:
            t.set_fontsize(base)
        for _ in range(4):  # the text's share of a smaller figure grows: a few steps to 18 px on the slide
            shown = copy_px * slide_scale(*_png_size(copy))
            if shown >= SLIDE_TEXT_PX:
                break
            shrink *= min(1.6, SLIDE_TEXT_PX / shown * 1.01)
            fig.set_size_inches(float(inches[0]) / shrink, float(inches[1]) / shrink, forward=False)
            copy, copy_px = _drawn(fig)
    finally:
        fig.set_size_inches(float(inches[0]), float(inches[1]), forward=False)
        for t, size in large:
            t.set_fontsize(size)
    metadata["projector_png"] = _b64(copy)
    metadata["projector_text_px"] = round(copy_px, 1)
    return metadata


def _register_figure_metadata() -> None:
    """Make IPython store ``figure_metadata`` with every figure a notebook displays (nothing outside IPython)."""
    import sys

    if "IPython" not in sys.modules:
        return
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None and hasattr(shell, "display_formatter"):
        shell.display_formatter.mimebundle_formatter.for_type(Figure, lambda fig: ({}, figure_metadata(fig)))


def panel_figure(
    w: np.ndarray, keys: list[str], queries: list[str], title: str, vmax: float, suptitle: str = ""
) -> Figure:
    """One panel of a grid alone, for a slide: about 620 px tall at 100 dpi, on the grid's colour scale, under the
    grid's title if it has one (wrapped to the panel's width); its labels 21 px, or a row's height where rows are
    many (18 px for 24 rows)."""
    cells = PANEL_HEIGHT - 1.5  # inches of the heatmap itself: the title, the keys and their label take the rest
    size = min(PANEL_TEXT, 0.95 * cells * 72 / max(len(queries), len(keys)))  # points: a row's height at most
    width = min(GRID_MAX_WIDTH, 2.2 + cells * len(keys) / len(queries))  # square cells, the colour bar beside
    fig, ax = plt.subplots(figsize=(width, PANEL_HEIGHT), dpi=100, layout="constrained")
    with mpl.rc_context({"font.size": PANEL_TEXT}):
        image = _draw_heatmap(ax, w, keys, queries, title, annotate=False, vmax=vmax)
        ax.tick_params(labelsize=size)
        for label in (ax.xaxis.label, ax.yaxis.label):
            label.set_fontsize(PANEL_TEXT)
        bar = fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight")
        bar.ax.tick_params(labelsize=PANEL_TEXT)  # ticks are drawn later, with the settings of that time
        if suptitle:
            fig.suptitle(suptitle, fontsize=PANEL_TEXT, wrap=True)
    plt.close(fig)
    return fig


def attention_grid(
    weights: Matrix, keys: Sequence[str] | None = None, queries: Sequence[str] | None = None,
    *, titles: Sequence[str] | None = None, ncols: int = 4, suptitle: str | None = None,
    per_panel_scale: bool = False,
) -> Figure:  # fmt: skip
    """One heatmap per head (or per layer): ``weights`` of shape ``(n, T_q, T_k)``.

    All panels share one colour scale, from 0 to the largest weight of any panel, shown by one colour bar: a
    diffuse head looks pale next to a focused one. ``per_panel_scale=True`` scales each panel to its own
    maximum instead (each gets its own colour bar, and its title says so). Panels keep a legible size: with
    long sequences the grid has fewer columns than ``ncols``, and more rows.
    """
    w = _array(weights, (3,), "weights")
    n = w.shape[0]
    keys = _labels(keys, w.shape[2], "key")
    queries = keys if queries is None and w.shape[1] == w.shape[2] else _labels(queries, w.shape[1], "query")
    titles = [f"head {i}" for i in range(n)] if titles is None else _labels(titles, n, "title")
    panel = (1.0 + 0.22 * len(keys), 0.9 + 0.22 * len(queries))  # about 0.22 inch a token: labels stay readable
    ncols = max(1, min(ncols, n, int(GRID_MAX_WIDTH // panel[0])))
    nrows = -(-n // ncols)
    size = (panel[0] * ncols + 0.8, panel[1] * nrows + 0.4)
    fig, axes = plt.subplots(nrows, ncols, figsize=size, layout="constrained", squeeze=False, FigureClass=PanelGrid)
    shared_max = max(1e-9, float(w.max()))
    scales = [max(1e-9, float(w[i].max())) if per_panel_scale else shared_max for i in range(n)]  # each panel's vmax
    image = None
    for i, ax in enumerate(axes.flat):
        if i >= n:
            ax.set_axis_off()
            continue
        vmax = scales[i]
        title = f"{titles[i]} (own scale)" if per_panel_scale else titles[i]
        image = _draw_heatmap(ax, w[i], keys, queries, title, annotate=False, vmax=vmax)
        if per_panel_scale:
            fig.colorbar(image, ax=ax, shrink=0.8)
        if i % ncols:
            ax.set_ylabel("")
        if i < n - ncols:  # a panel below shows the same keys
            ax.set_xlabel("")
    if not per_panel_scale and image is not None:
        fig.colorbar(
            image, ax=axes, shrink=min(0.8, 3.0 / nrows + 0.2), label="attention weight (one scale for all panels)"
        )
    if suptitle:
        fig.suptitle(suptitle)
    # its tick labels' size on a slide, where the whole grid is shown as large as the slide allows
    projected = mpl.rcParams["font.size"] * fig.dpi / 72 * slide_scale(size[0] * fig.dpi, size[1] * fig.dpi)
    assert isinstance(fig, PanelGrid)
    fig.panels = (
        [(w[i], keys, queries, titles[i], scales[i], suptitle or "") for i in range(n)]
        if projected < SLIDE_TEXT_PX
        else []
    )
    plt.close(fig)
    return fig


def dependency_heatmap(
    matrices: Matrix, tokens: Sequence[str] | None = None, *, titles: Sequence[str] | None = None,
    suptitle: str | None = None,
) -> Figure:  # fmt: skip
    """The causality probe's ``detail``, one panel per model: ``matrices`` ``(n, T, T)`` (or one ``(T, T)``), entry
    ``(i, j)`` the largest change of output ``i`` when token ``j`` changes. The colour is that change on a log scale,
    one scale for all panels; exact zeros are left white. Above the diagonal (the line) is the future: a causal
    model leaves it white."""
    m = _array(matrices, (2, 3), "matrices")
    m = m[None] if m.ndim == 2 else m
    n, T, _ = m.shape
    labels = _labels(tokens, T, "token")
    titles = [f"model {i}" for i in range(n)] if titles is None else _labels(titles, n, "title")
    positive = m[m > 0]
    low, high = (float(positive.min()), float(positive.max())) if positive.size else (1e-8, 1.0)
    side = 1.2 + 0.22 * T
    fig, axes = plt.subplots(1, n, figsize=(side * n + 1.2, side + 0.3), layout="constrained", squeeze=False)
    norm = LogNorm(vmin=low, vmax=max(high, low * 10))  # one scale for every panel
    # magma_r without its palest fifth: the smallest change drawn is a visible orange, so that white means 0 exactly
    cmap = ListedColormap(plt.get_cmap("magma_r")(np.linspace(0.2, 1.0, 256)))
    for ax, matrix, title in zip(axes[0], m, titles):
        shown = np.ma.masked_where(matrix <= 0, matrix)  # zero change: white
        ax.imshow(shown, cmap=cmap, norm=norm, interpolation="nearest")
        ax.plot([-0.5, T - 0.5], [-0.5, T - 0.5], color=PALETTE[0], linewidth=1)
        ax.set(title=title, xticks=range(T), yticks=range(T), xlabel="token changed (j)", ylabel="output (i)")
        ax.set_xticklabels(labels, rotation=90 if max(map(len, labels)) > 2 else 0)
        ax.set_yticklabels(labels)
    fig.colorbar(
        ScalarMappable(norm=norm, cmap=cmap), ax=axes, shrink=0.8, label="largest change of output i (log scale)"
    )
    if suptitle:
        fig.suptitle(suptitle)
    plt.close(fig)
    return fig


def attention_chart(
    weights: Matrix, keys: Sequence[str] | None = None, queries: Sequence[str] | None = None,
    *, title: str = "Attention weights", head_names: Sequence[str] | None = None, cell: int = 22,
) -> alt.Chart:  # fmt: skip
    """Interactive Altair heatmap: hover a cell for its query, key and weight; hovering highlights
    the query's row. With ``(h, T_q, T_k)`` weights, a dropdown picks the head (or layer). The subtitle says so
    (Vega draws a subtitle only under a title)."""
    alt = _altair()

    w = _array(weights, (2, 3), "weights")
    w = w[None] if w.ndim == 2 else w
    n, T_q, T_k = w.shape
    if n * T_q * T_k > 5000:  # Altair refuses larger inline datasets, and the notebook would grow by megabytes
        raise ValueError(
            f"{n} heads x {T_q} x {T_k} = {n * T_q * T_k} cells; an interactive chart holds at most 5000: "
            "pass fewer heads or a shorter sequence (attention_grid draws any size)"
        )
    keys = _labels(keys, T_k, "key")
    queries = keys if queries is None and T_q == T_k else _labels(queries, T_q, "query")
    names = _labels(head_names, n, "head") if head_names is not None else [f"head {i}" for i in range(n)]  # from 0
    angle = 0 if max(map(len, keys)) <= 2 else -90  # longer labels written across would run into each other
    h, q, k = np.meshgrid(np.arange(n), np.arange(T_q), np.arange(T_k), indexing="ij")
    # Indices and weights only (rounded: smaller notebooks, stable outputs); the labels are looked up from one
    # inlined array each, and positions, not token strings, index the axes (tokens repeat).
    data = _inline_csv({"h": h.ravel(), "q": q.ravel(), "k": k.ravel(), "weight": np.round(w.ravel(), 3)})
    lookup = {"head": (names, "h"), "query": (queries, "q"), "key": (keys, "k")}
    row = alt.selection_point(on="pointerover", fields=["q"], empty=True, clear="pointerout")  # none hovered: all shown
    # Short lines: a subtitle wider than the chart would widen it.
    hint = ["Hover a cell: its query, key, weight", *(["The menu below picks the head"] if n > 1 else [])]
    chart = alt.Chart(data, title=_chart_title(title, hint)).transform_calculate(
        **{field: f"{json.dumps(labels)}[datum.{index}]" for field, (labels, index) in lookup.items()}
    ).mark_rect(stroke="white", strokeWidth=0.5).encode(
        x=alt.X("k:O", title="key (attended to)", axis=alt.Axis(labelExpr=f"{json.dumps(keys)}[datum.value]", labelAngle=angle, **CHART_TEXT)),
        y=alt.Y("q:O", title="query (attending)", axis=alt.Axis(labelExpr=f"{json.dumps(queries)}[datum.value]", **CHART_TEXT)),
        color=alt.Color("weight:Q", scale=alt.Scale(scheme="viridis", domain=[0, round(float(w.max()), 3) or 1.0]), legend=alt.Legend(**CHART_TEXT)),
        opacity=alt.condition(row, alt.value(1.0), alt.value(0.35)),  # the other rows fade while one is hovered
        tooltip=["head:N", "query:N", "key:N", alt.Tooltip("weight:Q", format=".3f")],
    ).add_params(row).properties(width=cell * T_k, height=cell * T_q)  # fmt: skip
    if n > 1:
        pick = alt.param(
            name="head_pick", value=0, bind=alt.binding_select(options=list(range(n)), labels=names, name="show ")
        )
        chart = chart.add_params(pick).transform_filter(alt.datum.h == pick)
    return chart


def positional_encoding_heatmap(pe: Matrix, *, title: str = "Sinusoidal positional encoding") -> Figure:
    """The ``(positions, d_model)`` encoding as an image: one row per position."""
    a = _array(pe, (2,), "pe")
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    image = ax.imshow(a, cmap=PE_COLORMAP, vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_xlabel("dimension (even: sin, odd: cos)")
    ax.set_ylabel("position")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, label="value")
    plt.close(fig)
    return fig


def positional_waves(pe: Matrix, dims: Sequence[int] = (0, 1, 4, 8, 16), *, title: str | None = None) -> Figure:
    """Chosen columns of a sinusoidal encoding against position. Each column is a wave sampled at whole
    positions: the dots are the encoding's entries, the line the continuous wave through them,
    ``sin(pos / 10000^(2i/d))`` (even columns) or ``cos`` (odd), drawn at fractional positions so that a
    short wavelength is not mistaken for a zig-zag."""
    a = _array(pe, (2,), "pe")
    n, d_model = a.shape
    fine = np.linspace(0, n - 1, 40 * n)
    fig, ax = plt.subplots(figsize=(8, 3.2), layout="constrained")
    for dim in dims:
        if not 0 <= dim < d_model:
            raise ValueError(f"dimension {dim} is outside the encoding's 0..{d_model - 1}")
        wave = np.sin if dim % 2 == 0 else np.cos
        (line,) = ax.plot(fine, wave(fine / 10000 ** ((dim - dim % 2) / d_model)), lw=1.2)
        ax.plot(np.arange(n), a[:, dim], "o", ms=3, color=line.get_color(),
                label=f"dim {dim} ({'sin' if dim % 2 == 0 else 'cos'})")  # fmt: skip
    ax.set_xlabel("position")
    ax.set_ylabel("PE(pos, dim)")
    ax.legend(loc="upper right", fontsize=SMALL_TEXT, ncols=len(dims))
    ax.set_ylim(-1.2, 1.55)
    if title:
        ax.set_title(title)
    plt.close(fig)
    return fig


def _chart_title(title: str, hint: list[str]) -> Any:
    """A chart's title, what it shows, with what the pointer and the menu do as its subtitle, one line each."""
    alt = _altair()
    return alt.Title(
        title, subtitle=hint, fontSize=CHART_TITLE_SIZE, subtitleFontSize=CHART_HINT_SIZE, subtitleColor="#444"
    )


def positional_encoding_chart(pe: Matrix, *, title: str = "Sinusoidal positional encoding") -> alt.Chart:
    """Interactive Altair heatmap of the encoding; hover for position, dimension and value."""
    alt = _altair()

    a = _array(pe, (2,), "pe")
    pos, dim = np.meshgrid(np.arange(a.shape[0]), np.arange(a.shape[1]), indexing="ij")
    data = _inline_csv({"position": pos.ravel(), "dimension": dim.ravel(), "value": np.round(a.ravel(), 3)})
    hint = ["Hover a cell: its position, dimension, value"]
    return alt.Chart(data, title=_chart_title(title, hint)).mark_rect().encode(
        x=alt.X("dimension:O", axis=alt.Axis(labelAngle=0, values=list(range(0, a.shape[1], 8)), **CHART_TEXT)),
        y=alt.Y("position:O", axis=alt.Axis(values=list(range(0, a.shape[0], 5)), **CHART_TEXT)),
        color=alt.Color("value:Q", scale=alt.Scale(scheme=PE_SCHEME, domain=[-1, 1], reverse=True), legend=alt.Legend(**CHART_TEXT)),
        tooltip=["position:Q", "dimension:Q", alt.Tooltip("value:Q", format=".3f")],
    ).properties(width=min(8 * a.shape[1], 600), height=min(6 * a.shape[0], 400))  # fmt: skip


def _log_axis(ax: Axes) -> None:
    """A log-scale y axis (call after plotting) labelled in plain numbers at 1, 2, 3, 5 and 7 times each power
    of ten, fewer when the data spans several decades: matplotlib's default labels only the powers of ten,
    often none in a loss curve's range."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_yscale("log")
    low, high = ax.get_ylim()
    decades = np.log10(high / low)
    subs = (1.0, 2.0, 3.0, 5.0, 7.0) if decades < 1.5 else (1.0, 2.0, 5.0) if decades < 3 else (1.0,)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _draw_levels(ax: Axes, levels: Mapping[str, float] | None) -> None:
    for i, (name, value) in enumerate((levels or {}).items()):
        ax.axhline(value, color="black", ls=("--", ":", "-.")[i % 3], lw=1, label=f"{name} = {value:.3f}")


def _legend_below(fig: Figure, ax: Axes) -> None:
    """The legend under the plot, out of the curves' way: inside the axes ("best") it can still cover a steep drop,
    and a curve can cross any corner."""
    from matplotlib.backends.backend_agg import RendererAgg

    handles, names = ax.get_legend_handles_labels()
    renderer = RendererAgg(int(fig.bbox.width), int(fig.bbox.height), fig.dpi)
    ncols = 1
    for rows in range(1, len(names) + 1):  # as few rows as the figure's width allows, filled evenly
        ncols = math.ceil(len(names) / rows)
        legend = fig.legend(handles, names, loc="outside lower center", ncols=ncols, frameon=False)
        if ncols == 1 or legend.get_window_extent(renderer).width <= 0.95 * fig.bbox.width:
            break
        legend.remove()
    fig.set_figheight(fig.get_figheight() + 0.25 * math.ceil(len(names) / ncols))  # the plot keeps its height


def loss_curve(
    *histories: History, labels: Sequence[str] | None = None, title: str = "Training loss", smooth: int = 20,
    levels: Mapping[str, float] | None = None,
) -> Figure:  # fmt: skip
    """Training loss against step for one or more ``History`` objects (a running mean of ``smooth`` steps).
    ``levels`` draws labelled horizontal lines, e.g. ``{"lowest possible loss": 0.61}``."""
    names: list[str | None] = (
        [None] * len(histories) if labels is None else [*_labels(labels, len(histories), "history")]
    )
    fig, ax = plt.subplots(figsize=(7, 3.2), layout="constrained")
    for history, label in zip(histories, names):
        loss = np.asarray(history.loss, dtype=float)
        k = max(1, min(smooth, len(loss)))
        smoothed = np.convolve(loss, np.ones(k) / k, mode="valid")
        ax.plot(history.steps[k - 1 :], smoothed, label=label)
    _draw_levels(ax, levels)
    ax.set_xlabel("step")
    ax.set_ylabel("loss (log scale)")
    ax.set_title(title)
    _log_axis(ax)
    if any(names) or levels:
        _legend_below(fig, ax)
    ax.grid(alpha=0.3)
    plt.close(fig)
    return fig


# What the legend calls the metrics the course's evaluations return: estimate_loss's splits ("train", "val", in eval
# mode, without dropout) and train_translator's "val_loss".
_METRIC_LABELS = {"train": "training set (eval mode)", "val": "validation set", "val_loss": "validation set"}


def evaluation_curve(
    history: History, *, title: str = "Loss during training", ylabel: str = "loss",
    levels: Mapping[str, float] | None = None,
) -> Figure:  # fmt: skip
    """Each metric of ``History.evals`` (e.g. train and validation loss) against step, with the training loss;
    ``levels`` draws labelled horizontal lines."""
    fig, ax = plt.subplots(figsize=(7, 3.2), layout="constrained")
    if history.loss:
        ax.plot(history.steps, history.loss, color="0.6", lw=0.8, label="training batches")
    steps = [step for step, _ in history.evals]
    for name in history.evals[0][1] if history.evals else []:
        label = _METRIC_LABELS.get(name, name.replace("_", " "))
        ax.plot(steps, [metrics[name] for _, metrics in history.evals], "o-", label=label)
    _draw_levels(ax, levels)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    _legend_below(fig, ax)
    ax.grid(alpha=0.3)
    plt.close(fig)
    return fig


_register_figure_metadata()
