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
