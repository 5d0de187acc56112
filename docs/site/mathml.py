"""A Sphinx math renderer that writes MathML at build time (``latex2mathml``), for a site that works offline.

Browsers draw MathML themselves (MathML Core: Chromium, Firefox, Safari), so a page needs no script and no web font
to show a formula: nothing to download, and nothing that a ``file://`` page may not load. MathJax, the usual choice,
loads its fonts in a way Chromium refuses for pages opened from a folder or a USB stick.
"""

from __future__ import annotations

import re
from typing import Any

from docutils import nodes
from latex2mathml.converter import convert

ALIGNED = re.compile(r"\\begin\{aligned\}(.*?)\\end\{aligned\}", re.DOTALL)


def _as_array(m: re.Match[str]) -> str:
    """``aligned`` (which latex2mathml does not know) as the ``array`` it means: columns aligned right, left, right,
    left... (``&&`` opens a new pair of columns, for a comment after an equation)."""
    rows = [row.split("&") for row in re.split(r"\\\\", m.group(1)) if row.strip()]
    width = max(len(cells) for cells in rows)
    body = " \\\\ ".join(" & ".join(cells + [""] * (width - len(cells))) for cells in rows)
    return "\\begin{array}{" + "rl" * (width // 2) + "r" * (width % 2) + "}" + body + "\\end{array}"


def mathml(latex: str, display: str) -> str:
    """LaTeX as MathML (``display``: ``"inline"`` or ``"block"``); the slides use it too."""
    return convert(ALIGNED.sub(_as_array, latex.strip()), display=display)


def visit_inline(self: Any, node: nodes.Element) -> None:
    self.body.append(f'<span class="math">{mathml(node.astext(), "inline")}</span>')
    raise nodes.SkipNode


def visit_block(self: Any, node: nodes.Element) -> None:
    latex = node.astext()
    if node.get("nowrap"):  # an amsmath environment written out in full
        latex = f"\\begin{{aligned}}{latex}\\end{{aligned}}" if "\\begin" not in latex else latex
    self.body.append(self.starttag(node, "div", CLASS="math notranslate"))
    self.body.append(mathml(latex, "block"))
    self.body.append("</div>\n")
    raise nodes.SkipNode


def setup(app: Any) -> dict[str, Any]:
    app.add_html_math_renderer("mathml", (visit_inline, None), (visit_block, None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
