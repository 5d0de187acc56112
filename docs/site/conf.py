"""Sphinx configuration of the course's website, built by ``make site`` (tools/build_site.py).

tools/build_site.py stages the pages (a landing page for students, the committed notebooks and both editions to
download, a Teaching section with the instructor guide, the lesson plans and the README, an API reference) into build/site-src/ next to this file's settings, then runs Sphinx into build/site/. Nothing is
executed: the notebooks' stored outputs are the pages' outputs. The site fetches nothing from another host: formulas
are MathML written at build time (``latex2mathml``), Vega comes from ``vl-convert-python``, the theme's fonts and icons
from its own package.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository: Sphinx reads this file from build/site-src/
if not (ROOT / "pyproject.toml").exists():
    raise RuntimeError(
        "build the site with `make site` (tools/build_site.py), which stages this file in build/site-src/"
    )
sys.path.insert(0, str(ROOT))  # autodoc imports course_utils from the checkout
course = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["course"]
owner, name = course["repository"].split("/")

project = "Transformers from Scratch"
author = "the Transformers from Scratch authors"
copyright = "the Transformers from Scratch authors, MIT licence"
sys.path.insert(0, str(Path(__file__).parent))  # mathml.py
extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.viewcode", "sphinx_copybutton", "mathml"]
exclude_patterns = ["_build", "_extra", "**.ipynb_checkpoints"]
# A copy button on code (not on prompts or on what a cell printed), with the notebooks' own script, nothing fetched.
copybutton_selector = "div.cell_input div.highlight pre, div.highlight-bash pre, div.highlight-python pre"
# _extra/downloads/: both editions of every chapter, as files a reader downloads (from a USB stick too).
html_extra_path = ["_extra"]
nb_execution_mode = "off"  # the committed outputs, as CI checked them
nb_merge_streams = True
# The folded cells of a chapter are its exercises' solutions (and the answers to its predictions).
nb_code_prompt_show = "Show the solution"
nb_code_prompt_hide = "Hide the solution"
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type", "misc.highlighting_failure"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_inherit_docstrings = False  # not nn.Module's "Define the computation performed at every call" on every forward
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}

# Formulas become MathML when the site is built (mathml.py, beside this file): the browser draws them, with no
# script and no web font, so they show offline and from a folder (file://) alike.
html_math_renderer = "mathml"

html_theme = "sphinx_book_theme"
html_title = project
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_js_files = ["vega-bundle.js", "course.js"]  # Vega, Vega-Lite and vega-embed for the charts; theme fixes
html_baseurl = f"https://{owner}.github.io/{name}/"
html_theme_options = {
    "repository_url": f"https://github.com/{course['repository']}",
    "repository_branch": course["branch"],
    "path_to_docs": "",
    "use_repository_button": True,
    "use_download_button": False,  # it offers the site's build copy; each chapter links both editions to download
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "navigation_with_keys": True,
}
html_context = {"default_mode": "auto"}  # light or dark as the reader's system prefers; the button switches
html_last_updated_fmt = None
html_show_sourcelink = False
