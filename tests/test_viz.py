import json

import altair as alt
import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure

from course_utils import (
    History,
    attention_chart,
    attention_grid,
    attention_heatmap,
    loss_curve,
    positional_encoding_chart,
    positional_encoding_heatmap,
    positional_waves,
    sinusoidal_encoding,
)

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
    assert ax.get_xlabel().startswith("key") and ax.get_ylabel().startswith("query")


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
    from course_utils._vega import offline_html
    from course_utils.viz import OFFLINE_RENDERER

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
    from course_utils._vega import vl_version

    spec = attention_chart(weights[0]).to_dict()
    major, minor = alt.SCHEMA_VERSION.lstrip("v").split(".")[:2]
    assert vl_version(spec) == f"v{major}_{minor}"
    with pytest.raises(ValueError, match="versioned"):
        vl_version({"$schema": "https://example.org/schema.json"})


def test_environment_variable_turns_offline_charts_on(weights, monkeypatch, default_renderer):
    from course_utils.viz import OFFLINE_RENDERER

    monkeypatch.setenv("COURSE_OFFLINE_CHARTS", "1")
    attention_chart(weights[0])
    assert alt.renderers.active == OFFLINE_RENDERER
