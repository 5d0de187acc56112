"""Vega-Lite specs drawn without a network, through vl-convert: the one place that imports it.

Used by ``viz.use_offline_charts`` (interactive charts that carry their own JavaScript) and by the notebook
build (a static PNG twin after every chart).
"""

from __future__ import annotations

import copy
import functools
import json
import re
import uuid
from types import ModuleType
from typing import Any

__all__ = ["offline_html", "static_png", "to_png", "vl_convert", "vl_version"]


def vl_convert() -> ModuleType:
    """vl-convert, or an ImportError that says how to install it."""
    try:
        import vl_convert
    except ImportError:
        raise ImportError(
            "offline charts and static chart images come from vl-convert: `pip install vl-convert-python` "
            "(it is in the course's `lab` and `test` extras), then restart the kernel"
        ) from None
    return vl_convert


def vl_version(spec: dict[str, Any]) -> str:
    """The Vega-Lite version a spec was written for, as vl-convert names it: ``.../v6.1.0.json`` -> ``"v6_1"``."""
    found = re.search(r"/v(\d+)\.(\d+)", spec.get("$schema", ""))
    if found is None:
        raise ValueError(f"not a Vega-Lite spec with a versioned $schema: {spec.get('$schema')!r}")
    return f"v{found.group(1)}_{found.group(2)}"


@functools.cache
def _javascript_bundle(version: str) -> str:
    bundle: str = vl_convert().javascript_bundle(vl_version=version)
    return bundle


def offline_html(spec: dict[str, Any]) -> str:
    """HTML that draws a Vega-Lite spec with no network: Vega, Vega-Lite and vega-embed are inlined (about
    0.9 MB, parsed once a page), where Altair's default output fetches them from a CDN. The bundle runs
    inside a function, so a chart drawn twice in one page does not redeclare its names."""
    div = f"course-chart-{uuid.uuid4().hex}"
    return (
        f'<div id="{div}"></div>\n<script type="text/javascript">\n'
        f"if (typeof window.vegaEmbed !== 'function') {{ (function () {{\n{_javascript_bundle(vl_version(spec))}\n}})(); }}\n"
        f"window.vegaEmbed('#{div}', {json.dumps(spec)}, {{mode: 'vega-lite'}}).catch(function (error) {{\n"
        f"  document.getElementById('{div}').innerHTML = '<pre style=\"color: red\">' + error + '</pre>';\n}});\n"
        "</script>"
    )


def to_png(spec: dict[str, Any], scale: float = 1.0) -> bytes:
    """The chart as a PNG image, rendered offline (byte-identical across runs)."""
    png: bytes = vl_convert().vegalite_to_png(spec, vl_version=vl_version(spec), scale=scale)
    return png


def without_hint(spec: dict[str, Any]) -> dict[str, Any]:
    """The chart without its title's subtitle, which says what the pointer and the menu do: a static image has
    neither."""
    title = spec.get("title")
    if not isinstance(title, dict) or "subtitle" not in title:
        return spec
    static = dict(spec)
    static["title"] = {key: value for key, value in title.items() if not key.startswith("subtitle")}
    return static


def choice_specs(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The chart once per choice of its dropdown (a head, a layer), titled with it, without the subtitle that says
    what the menu does (``without_hint``); ``[spec]`` when it has no dropdown."""
    picks = [p for p in spec.get("params", []) if p.get("bind", {}).get("input") == "select"]
    if not picks:
        return [spec]
    if len(picks) > 1:
        raise ValueError("a static image can show every choice of one dropdown, not of several")
    pick = picks[0]
    options = pick["bind"]["options"]
    labels = pick["bind"].get("labels") or [str(o) for o in options]
    title = without_hint(spec).get("title", "")
    text = title.get("text", "") if isinstance(title, dict) else title
    specs = []
    for option, label in zip(options, labels):
        one = copy.deepcopy(spec)
        next(p for p in one["params"] if p["name"] == pick["name"])["value"] = option
        named = f"{text}: {label}" if text else str(label)
        one["title"] = {**title, "text": named} if isinstance(title, dict) else named
        specs.append(one)
    return specs


def static_png(spec: dict[str, Any], max_width: int = 1000) -> bytes:
    """A static image of an interactive chart that shows everything the chart can show: when a dropdown picks
    what is drawn (a head, a layer), one panel per choice, titled with it, in a grid at most ``max_width`` pixels
    wide (as many columns as fit); else the chart itself. Neither has the subtitle that says what the pointer and
    the menu do (``without_hint``)."""
    specs = choice_specs(spec)
    if len(specs) == 1 and specs[0] is spec:
        return to_png(without_hint(spec))
    import io

    from PIL import Image

    panels = [Image.open(io.BytesIO(to_png(one))).convert("RGB") for one in specs]
    width, height = max(p.width for p in panels), max(p.height for p in panels)
    columns = max(1, min(len(panels), max_width // width))
    rows = -(-len(panels) // columns)
    grid = Image.new("RGB", (width * columns, height * rows), "white")
    for i, panel in enumerate(panels):
        grid.paste(panel, ((i % columns) * width, (i // columns) * height))
    out = io.BytesIO()
    grid.save(out, format="PNG", optimize=True)
    return out.getvalue()
