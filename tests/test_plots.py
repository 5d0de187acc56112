import json

import altair as alt
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from course_utils import (
    History,
    attention_chart,
    attention_grid,
    attention_heatmap,
    evaluation_curve,
    loss_curve,
    positional_encoding_chart,
    positional_encoding_heatmap,
    positional_waves,
    sinusoidal_encoding,
)
from course_utils.teaching import plots

TOKENS = ["the", "cat", "sat", "the", "mat"]


@pytest.fixture
def weights():
    return torch.softmax(torch.randn(2, 5, 5), dim=-1)


def test_matplotlib_helpers_return_figures_without_leaving_them_open(weights):
    figures = [
        attention_heatmap(weights[0], TOKENS),
        attention_heatmap(weights[0, :3], TOKENS, ["a", "b", "c"], title="cross"),
        attention_grid(weights, TOKENS, titles=["one", "two"]),
        positional_encoding_heatmap(sinusoidal_encoding(20, 16)),
        positional_waves(sinusoidal_encoding(20, 16), dims=(0, 1)),
        loss_curve(History(steps=[1, 2, 3], loss=[3.0, 2.0, 1.0]), labels=["run"]),
    ]
    assert all(isinstance(f, Figure) for f in figures)
    assert plt.get_fignums() == []  # nothing left for pyplot to show a second time


def test_heatmap_labels_the_axes_with_tokens(weights):
    ax = attention_heatmap(weights[0], TOKENS).axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == TOKENS
    assert "key (attended to)" in ax.get_xlabel() and "query (attending)" in ax.get_ylabel()


def test_altair_charts_are_valid_and_carry_tooltips(weights):
    chart = attention_chart(weights, TOKENS, head_names=["h0", "h1"])
    spec = chart.to_dict()  # validates against the Vega-Lite schema
    assert isinstance(chart, alt.Chart)
    assert {t["field"] for t in spec["encoding"]["tooltip"]} == {"head", "query", "key", "weight"}
    rows = chart.data.values.splitlines()
    assert rows[0] == "h,q,k,weight" and len(rows) == 1 + 2 * 5 * 5
    assert all(token in json.dumps(spec) for token in TOKENS)  # the labels travel once, in the lookups
    pe_chart = positional_encoding_chart(sinusoidal_encoding(30, 16))
    assert len(pe_chart.data.values.splitlines()) == 1 + 30 * 16 and "tooltip" in pe_chart.to_dict()["encoding"]


def test_wrong_labels_or_shapes_are_rejected(weights):
    with pytest.raises(ValueError, match="4 key labels for 5 key positions"):
        attention_heatmap(weights[0], TOKENS[:4])
    with pytest.raises(ValueError, match="must have 2 dimensions"):
        attention_heatmap(weights, TOKENS)
    with pytest.raises(ValueError, match="must have 3 dimensions"):
        attention_grid(weights[0], TOKENS)
    with pytest.raises(ValueError, match="at most 5000: pass fewer heads or a shorter sequence"):
        attention_chart(torch.rand(8, 30, 30))


@pytest.fixture
def default_renderer():
    yield
    alt.renderers.enable("default")


def test_offline_charts_carry_their_javascript_and_draw_twice_in_one_page(weights, default_renderer):
    from course_utils import use_offline_charts
    from course_utils.teaching._vega import offline_html
    from course_utils.teaching.plots import OFFLINE_RENDERER

    chart = attention_chart(weights[0], list("abcde"))
    online = chart._repr_mimebundle_()
    online = online[0] if isinstance(online, tuple) else online
    assert "cdn.jsdelivr.net" in online["text/html"]  # Altair's default needs the network

    use_offline_charts()
    assert alt.renderers.active == OFFLINE_RENDERER
    bundle = chart._repr_mimebundle_()
    html = (bundle[0] if isinstance(bundle, tuple) else bundle)["text/html"]
    assert "cdn.jsdelivr.net" not in html and "http" not in html.split("<script")[0]
    assert len(html) > 500_000  # Vega, Vega-Lite and vega-embed inlined
    assert "typeof window.vegaEmbed !== 'function'" in html  # loaded once a page, inside a function
    assert json.dumps(chart.to_dict()) in html
    assert offline_html(chart.to_dict()) != offline_html(chart.to_dict())  # a fresh element id each time

    use_offline_charts(False)
    assert alt.renderers.active == "default"


def test_offline_charts_say_what_to_install_without_vl_convert(monkeypatch, default_renderer):
    import importlib.util

    from course_utils import use_offline_charts

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vl_convert" else real(name, *a))
    monkeypatch.setitem(__import__("sys").modules, "vl_convert", None)
    with pytest.raises(ImportError, match="pip install vl-convert-python"):
        use_offline_charts()
    assert alt.renderers.active == "default"


def test_the_vega_lite_version_is_read_from_the_spec_schema(weights):
    from course_utils.teaching._vega import vl_version

    spec = attention_chart(weights[0]).to_dict()
    major, minor = alt.SCHEMA_VERSION.lstrip("v").split(".")[:2]
    assert vl_version(spec) == f"v{major}_{minor}"
    with pytest.raises(ValueError, match="versioned"):
        vl_version({"$schema": "https://example.org/schema.json"})


def test_environment_variable_turns_offline_charts_on(weights, monkeypatch, default_renderer):
    from course_utils.teaching.plots import OFFLINE_RENDERER

    monkeypatch.setenv("COURSE_OFFLINE_CHARTS", "1")
    attention_chart(weights[0])
    assert alt.renderers.active == OFFLINE_RENDERER


def test_grid_panels_share_one_colour_scale_unless_asked(weights):
    diffuse = torch.full((5, 5), 0.2)
    focused = torch.eye(5)
    shared = attention_grid(torch.stack([diffuse, focused]), TOKENS)
    images = [ax.images[0] for ax in shared.axes if ax.images]
    assert [im.get_clim() for im in images] == [(0.0, 1.0), (0.0, 1.0)]  # the diffuse head looks pale
    assert len(shared.axes) == 3  # two panels and one colour bar
    own = attention_grid(torch.stack([diffuse, focused]), TOKENS, per_panel_scale=True)
    assert [ax.images[0].get_clim()[1] for ax in own.axes if ax.images] == pytest.approx([0.2, 1.0])
    assert all("own scale" in ax.get_title() for ax in own.axes if ax.images)


def test_grids_of_long_sequences_keep_legible_panels():
    fig = attention_grid(torch.rand(8, 19, 19), [str(i % 10) for i in range(19)], ncols=4)
    width, _ = fig.get_size_inches()
    assert width <= 13  # shown at about its own width in a notebook, so its labels keep their size
    labelled = [ax for ax in fig.axes if ax.images]
    assert all(len(ax.get_xticklabels()) == 19 for ax in labelled)


def _red_and_blue_rows(rgb):
    """Mean row of the strongly red and of the strongly blue pixels of an RGB image."""
    import numpy as np

    r, b = rgb[..., 0].astype(int), rgb[..., 2].astype(int)
    red, blue = r > b + 50, b > r + 50
    assert red.sum() > 20 and blue.sum() > 20
    return np.nonzero(red)[0].mean(), np.nonzero(blue)[0].mean()


def test_encodings_use_the_same_colours_in_matplotlib_and_altair():
    import io

    import numpy as np
    from PIL import Image

    from course_utils.teaching._vega import to_png

    pe = torch.cat([torch.ones(10, 12), -torch.ones(10, 12)])  # positions 0-9 at +1, 10-19 at -1
    fig = positional_encoding_heatmap(pe)
    fig.axes[1].remove()  # the colour bar shows both colours
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    static = np.asarray(Image.open(buffer).convert("RGB"))
    chart = positional_encoding_chart(pe).properties(width=96, height=160).configure_legend(disable=True)
    interactive = np.asarray(Image.open(io.BytesIO(to_png(chart.to_dict()))).convert("RGB"))
    for image in (static, interactive):
        red_row, blue_row = _red_and_blue_rows(image)
        assert red_row < blue_row  # +1 is red and drawn at the top (position 0) in both


def test_waves_are_drawn_continuously_through_the_encoding():
    pe = sinusoidal_encoding(20, 16)
    ax = positional_waves(pe, dims=(0, 3)).axes[0]
    lines = ax.get_lines()
    curve, dots = lines[0], lines[1]
    assert len(curve.get_xdata()) > 10 * 20  # fractional positions: no zig-zag at short wavelengths
    assert torch.allclose(torch.tensor(dots.get_ydata()), pe[:, 0].double())
    x = torch.tensor(lines[2].get_xdata())
    assert torch.allclose(torch.tensor(lines[2].get_ydata()), torch.cos(x / 10000 ** (2 / 16)))  # dim 3: cos, i = 1
    with pytest.raises(ValueError, match="outside the encoding"):
        positional_waves(pe, dims=(16,))


def test_log_axes_label_plain_numbers_inside_the_range():
    history = History(steps=list(range(1, 201)), loss=[0.6 + 2.4 * 0.98**s for s in range(200)])
    fig = loss_curve(history, smooth=1, levels={"floor": 0.6})
    fig.canvas.draw()
    ax = fig.axes[0]
    low, high = ax.get_ylim()
    shown = [t.get_text() for t, v in zip(ax.get_yticklabels(), ax.get_yticks()) if low <= v <= high]
    assert len(shown) >= 3 and all(t and "^" not in t for t in shown), shown
    (legend,) = fig.legends
    assert any("floor = 0.600" in t.get_text() for t in legend.get_texts())


def test_an_evaluation_curves_legend_names_each_metric_in_words():
    history = History(steps=[1, 2, 3], loss=[3.0, 2.5, 2.0], evals=[(2, {"val_loss": 2.6, "bleu_4": 0.1})])
    fig = evaluation_curve(history)
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["training batches", "validation set", "bleu 4"]
    plt.close(fig)


@pytest.mark.parametrize("labels", [None, ["a short name", "another"]])
def test_a_curves_legend_lies_under_the_plot_where_no_curve_can_run(labels):
    """Inside the axes, matplotlib's "best" corner still covered chapter 02's steep drop: the legend goes below."""
    history = History(steps=list(range(1, 301)), loss=[2.3 if s < 150 else 1e-3 for s in range(300)])
    histories = (history,) if labels is None else (history, history)
    levels = {"2 ln 10: knows nothing": 4.605, "ln 10: one job solved, one at chance": 2.303}
    for fig in (loss_curve(*histories, labels=labels, levels=levels), evaluation_curve(history)):
        fig.draw_without_rendering()  # constrained layout places the legend and the plot
        (legend,) = fig.legends
        box, plot, whole = legend.get_window_extent(), fig.axes[0].get_window_extent(), fig.bbox
        assert box.y1 <= plot.y0 and whole.x0 <= box.x0 and box.x1 <= whole.x1, (box, plot, whole)
        plt.close(fig)


def test_the_static_image_of_a_chart_shows_every_head(weights):
    import io

    from PIL import Image

    from course_utils.teaching._vega import static_png, to_png, without_hint

    spec = attention_chart(weights, TOKENS, head_names=["h0", "h1"]).to_dict()
    one, both = (Image.open(io.BytesIO(png)) for png in (to_png(without_hint(spec)), static_png(spec)))
    assert both.width >= 2 * one.width - 4 and one.height <= both.height < 1.5 * one.height  # side by side
    single = attention_chart(weights[0], TOKENS).to_dict()
    assert static_png(single) == to_png(without_hint(single)) != to_png(single)  # the same chart, less its hint


def test_a_chart_says_what_it_shows_in_its_title_and_how_to_use_it_in_its_subtitle(weights):
    from course_utils.teaching._vega import choice_specs, without_hint

    spec = attention_chart(weights, TOKENS, head_names=["h0", "h1"], title="Two heads").to_dict()
    assert spec["title"]["text"] == "Two heads"
    assert "Hover" in spec["title"]["subtitle"][0] and "menu" in spec["title"]["subtitle"][1]
    assert "menu" not in str(attention_chart(weights[0], TOKENS).to_dict()["title"]["subtitle"])  # no menu, no word
    assert "Hover" in positional_encoding_chart(np.zeros((4, 8))).to_dict()["title"]["subtitle"][0]
    # The static images (the decks, the site's fallback) have neither pointer nor menu: no subtitle, each choice named.
    titles = [one["title"] for one in choice_specs(spec)]
    assert [t["text"] for t in titles] == ["Two heads: h0", "Two heads: h1"]
    assert not any("subtitle" in t for t in titles)
    assert "subtitle" not in without_hint(spec)["title"] and "subtitle" in spec["title"]  # the chart itself unchanged


# --- colours every reader can tell apart -----------------------------------------------------------------------------

# Machado, Oliveira and Fernandes (2009): simulated full protanopia, deuteranopia and tritanopia, on linear RGB.
CVD = {
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]],
}


def _lab(rgb_linear):
    """CIE L*a*b* (D65) of a linear sRGB colour."""
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ rgb_linear
    xyz = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def _closest_pair(colours, matrix):
    """The smallest colour difference (CIE76 delta E) between two of ``colours`` as ``matrix``'s viewer sees them."""
    from itertools import combinations

    from matplotlib.colors import to_rgb

    def linear(c):
        c = np.asarray(to_rgb(c))
        return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)

    seen = [_lab(np.clip(np.asarray(matrix) @ linear(c), 0, 1)) for c in colours]
    return min(float(np.linalg.norm(a - b)) for a, b in combinations(seen, 2))


@pytest.mark.parametrize("deficiency", sorted(CVD))
def test_the_line_palette_stays_distinct_under_colour_blindness(deficiency):
    from course_utils.teaching.plots import PALETTE

    assert _closest_pair(PALETTE, CVD[deficiency]) > 12  # clearly different colours (JND is about 2.3)
    assert _closest_pair(PALETTE, np.eye(3)) > 12


def test_the_check_rejects_matplotlibs_default_palette():
    tab10 = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
    assert _closest_pair(tab10, CVD["protanopia"]) < 12  # its green and orange, red and brown merge


def test_the_palette_is_matplotlibs_cycle_once_course_utils_is_imported():
    import matplotlib as mpl

    from course_utils.teaching.plots import PALETTE

    assert [c.lower() for c in mpl.rcParams["axes.prop_cycle"].by_key()["color"]] == [c.lower() for c in PALETTE]


def _smallest_text_px(fig, shown_width=900):
    """The smallest text of a figure in screen pixels when a projected JupyterLab shows it at most ``shown_width``
    pixels wide (a wider figure is shrunk, its text with it)."""
    import matplotlib.text
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.canvas.draw()
    scale = min(1.0, shown_width / (fig.get_figwidth() * fig.dpi))
    sizes = [t.get_fontsize() * fig.dpi / 72 * scale for t in fig.findobj(matplotlib.text.Text)
             if t.get_visible() and t.get_text().strip()]  # fmt: skip
    return min(sizes)


def test_every_plot_is_legible_when_projected():
    torch.manual_seed(0)
    words = "the cat sat on the mat and it was happy".split()
    figures = {
        "attention_heatmap": plots.attention_heatmap(torch.rand(10, 10).softmax(-1), words),
        "attention_grid 8 heads": plots.attention_grid(torch.rand(8, 10, 10).softmax(-1), words),
        "attention_grid 30 tokens": plots.attention_grid(torch.rand(4, 30, 30), [f"t{i}" for i in range(30)]),
        "dependency_heatmap": plots.dependency_heatmap(torch.rand(3, 8, 8), [str(i) for i in range(8)]),
        "positional_encoding_heatmap": plots.positional_encoding_heatmap(torch.rand(50, 64)),
        "positional_waves": plots.positional_waves(torch.rand(50, 64)),
    }
    for name, fig in figures.items():
        assert _smallest_text_px(fig) >= 12, f"{name}: text of {_smallest_text_px(fig):.1f} px on a projector"


def test_the_interactive_charts_text_is_legible_when_projected():
    """Vega's default labels are 10-11 px; the course's charts ask for at least 12 on every axis and legend."""
    charts = {
        "attention_chart": plots.attention_chart(torch.rand(2, 5, 5).softmax(-1), list("abcde")),
        "positional_encoding_chart": plots.positional_encoding_chart(torch.rand(20, 16)),
    }
    for name, chart in charts.items():
        spec = chart.to_dict()
        encoding = spec["encoding"]
        for channel, guide in (("x", "axis"), ("y", "axis"), ("color", "legend")):
            sizes = encoding[channel][guide]
            assert sizes["labelFontSize"] >= 12 and sizes["titleFontSize"] >= 12, (name, channel, sizes)
        assert spec["title"]["fontSize"] >= 12, name


def test_the_notebooks_own_figures_are_narrow_enough_to_stay_legible_projected():
    """A figure wider than 11.4 inches (at 100 dpi) is shrunk below 900 px on a projector, and its 11-pt text
    below 12 px: the notebooks' own figures (the course's plot helpers are measured above) stay narrower."""
    import re
    from pathlib import Path

    sources = Path(__file__).resolve().parents[1] / "notebooks" / "src"
    widths = [
        (path.name, float(width))
        for path in sorted(sources.glob("[0-9][0-9]_*.py"))
        for width in re.findall(r"figsize=\(([\d.]+),", path.read_text())
    ]
    assert widths
    too_wide = [(name, width) for name, width in widths if 11 * 100 / 72 * 900 / (width * 100) < 12]
    assert not too_wide, too_wide


@pytest.mark.slow  # a few seconds: draws the panels
def test_a_grid_too_small_for_a_slide_comes_with_each_panel_alone_legible_there():
    """A deck shows a grid as large as a 1280 x 800 slide allows; where its labels would fall below 18 px there
    (chapter 07's four heads of a 24-character line), each panel is drawn alone for a slide of its own, in the
    output's metadata, with labels of 18 px or more at the size it is shown (at most 680 px tall)."""
    import base64
    import io

    from PIL import Image

    torch.manual_seed(0)
    line = [f"{c}" for c in "HAMLET:_To_be,_or_not_to"]
    grid = plots.attention_grid(torch.rand(4, 24, 24).softmax(-1), line, titles=[f"head {h}" for h in range(4)],
                                suptitle="Four heads of a GPT on one line")  # fmt: skip
    data, metadata = grid._repr_mimebundle_()
    assert data == {} and len(metadata["projector_panels"]) == 4  # the PNG itself: the notebook's usual one
    height = Image.open(io.BytesIO(base64.b64decode(metadata["projector_panels"][0]))).height
    assert height <= 680
    alone = plots.panel_figure(*grid.panels[0])
    assert _smallest_text_px(alone, 1240) >= 18, f"{_smallest_text_px(alone, 1240):.1f} px"
    assert alone.get_suptitle() == "Four heads of a GPT on one line"  # a slide of one panel still says what it is
    shared = {panel[4] for panel in grid.panels}
    assert len(shared) == 1  # one colour scale, as in the grid
    assert metadata["projector_text_px"] >= 18
    small = plots.attention_grid(torch.rand(2, 6, 6).softmax(-1), list("abcdef"))
    data, metadata = small._repr_mimebundle_()
    assert small.panels == [] and data == {} and set(metadata) == {"text_px", "alt"}


@pytest.mark.slow  # a second or two: draws the figure three times
def test_a_figure_whose_text_would_be_small_on_a_slide_comes_with_a_copy_drawn_smaller_for_one():
    """A wide figure (chapter 01's three panels, 11 inches) is shown on a slide at most 1240 px wide, and its 11-pt
    text at about 17 px there: its metadata holds a copy drawn smaller with the same text, which the slide enlarges
    until that text is 18 px. The figure itself, as the notebook shows it, is left as it was."""
    import base64
    import io

    from PIL import Image

    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), layout="constrained")
    for ax in axes:
        ax.plot(range(10), label="a line")
        ax.set(title="a panel", xlabel="step")
        ax.legend(fontsize=plots.SMALL_TEXT)
    before = fig.get_size_inches().tolist()
    metadata = plots.figure_metadata(fig)
    assert fig.get_size_inches().tolist() == before
    assert metadata["text_px"] == pytest.approx(plots.SMALL_TEXT * 100 / 72, abs=0.1)  # the legend's, the smallest
    copy = Image.open(io.BytesIO(base64.b64decode(metadata["projector_png"])))
    shown = metadata["projector_text_px"] * plots.slide_scale(*copy.size)
    assert 18 <= shown < 19.5, shown
    narrow, ax = plt.subplots(figsize=(6, 3), layout="constrained")
    ax.plot(range(10))
    assert set(plots.figure_metadata(narrow)) == {"text_px"}  # 1.5 times its size on a slide: 23 px already
    empty = plt.figure()
    assert plots.figure_metadata(empty) == {}  # no text to measure
    for figure in (fig, narrow, empty):
        plt.close(figure)  # pyplot would show them again to a later test


def test_a_figure_s_text_alternative_reads_its_titles_and_labels_once():
    w = torch.softmax(torch.randn(2, 4, 4), dim=-1)
    grid = plots.attention_grid(w, list("abcd"), list("abcd"), titles=["head 1", "head 2"], ncols=2, suptitle="Two")
    alt = plots.figure_alt(grid)
    assert alt.startswith("Two. head 1; head 2. ")  # the figure's title, then each panel's
    assert alt.count("key (attended to)") == 1 and "Down: query (attending)" in alt  # said once, without the arrows
    assert "Colour: attention weight" in alt  # the colour bar's meaning
    assert plots.figure_metadata(grid)["alt"] == alt  # stored with the figure, for the website and the decks
    runs, ax = plt.subplots()
    for name in ("post-norm", "pre-norm"):
        ax.plot(range(3), label=name)
    ax.legend()
    ax.set(title="Loss\n$\\sqrt{d_k}$ scaled", xlabel="step")
    assert plots.figure_alt(runs) == "Loss, √d_k scaled. Across: step. Key: post-norm; pre-norm"  # the legend too
    long, ax = plt.subplots()
    ax.set_title("; ".join(f"part {i} of a long title" for i in range(40)))
    cut = plots.figure_alt(long)
    assert len(cut) <= plots.ALT_LENGTH and cut.endswith("of a long title…")  # cut after a whole part
    ax.set_title("a very long title " * 40)
    assert len(plots.figure_alt(long)) == plots.ALT_LENGTH and plots.figure_alt(long).endswith("…")  # or anywhere
    bare, ax = plt.subplots()
    ax.plot(range(3))
    assert plots.figure_alt(bare) == ""  # nothing written: nothing to read out
    for figure in (grid, runs, long, bare):
        plt.close(figure)
