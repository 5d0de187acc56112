"""The website's builder (tools/build_site.py) without building: what it does to a notebook, what its offline check
catches, and the MathML renderer. CI builds the whole site too (make site in .ci/run)."""

import base64
import importlib.util
import json
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "notebooks"))
pytest.importorskip("latex2mathml")


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


site = load("build_site", ROOT / "tools" / "build_site.py")
mathml = load("mathml", ROOT / "docs" / "site" / "mathml.py")


@pytest.mark.parametrize(
    "html",
    [
        '<script src="https://cdn.jsdelivr.net/npm/vega@5"></script>',
        "<script defer src='//cdn.example.org/x.js'></script>",
        '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">',
        '<link href="https://fonts.gstatic.com/x.woff2" rel="preload" as="font">',
        '<img alt="badge" src="https://colab.research.google.com/assets/colab-badge.svg">',
        "<style>@font-face { src: url(https://example.org/font.woff) }</style>",
        '@import "https://example.org/theme.css";',
        '<iframe src="https://www.youtube.com/embed/x"></iframe>',
    ],
)
def test_the_offline_check_catches_what_a_page_would_fetch(html):
    assert site.EXTERNAL.search(html)


@pytest.mark.parametrize(
    "html",
    [
        '<a href="https://colab.research.google.com/github/x">Open in Colab</a>',  # a link: followed only on a click
        '<link rel="canonical" href="https://example.org/page.html">',
        '<script src="../_static/vega-bundle.js"></script>',
        '<img src="_static/colab-badge.svg">',
        "<style>@font-face { src: url(fonts/DejaVuSerif.ttf) }</style>",
    ],
)
def test_the_offline_check_lets_links_and_local_files_pass(html):
    assert not site.EXTERNAL.search(html)


def chart_output(spec):
    """An Altair chart as notebooks/build.py finds it: HTML that calls vegaEmbed on the spec."""
    import build

    html = f'<div id="altair-viz-1"></div><script>{build.ALTAIR_CALL}{__import__("json").dumps(spec)}, {{}})</script>'
    html = html.replace("<script>", '<script type="text/javascript">(function(vegaEmbed) {', 1)
    return nbformat.v4.new_output("display_data", data={"text/html": html, "text/plain": "alt.Chart(...)"})


def test_a_notebook_becomes_a_page(tmp_path):
    import build

    spec = {"$schema": "https://vega.github.io/schema/vega-lite/v6.1.0.json", "mark": "point"}
    assert build.altair_spec(chart_output(spec)) == spec
    nb = nbformat.v4.new_notebook()
    badge = f"[![Open In Colab]({site.BADGE})](https://colab.research.google.com/x.ipynb)"
    nb.cells = [
        nbformat.v4.new_markdown_cell(f"# 01 · Title\n\n{badge}\n\nOpen the [student edition](student/01_x.ipynb)."),
        nbformat.v4.new_markdown_cell('<a id="bug-3"></a>\n\n## Bug 3\n\n![diagram](attachment:d.png)'),
        nbformat.v4.new_code_cell("chart", outputs=[chart_output(spec)]),
        nbformat.v4.new_code_cell("solution", metadata={"tags": ["exercise"]}),
    ]
    nb.cells[1]["attachments"] = {"d.png": {"image/png": base64.b64encode(b"\x89PNG fake").decode()}}
    twin = nbformat.v4.new_output("display_data", data={"image/png": "aGk="}, metadata={site.TWIN: True})
    nb.cells[2].outputs.append(twin)
    path = tmp_path / "01_x.ipynb"
    nbformat.write(nb, path)
    images = tmp_path / "_images"
    images.mkdir()

    page, versions = site.stage_notebook(path, build.altair_spec, images)

    first = page.cells[0].source
    assert site.BADGE not in first and "course-links" in first and "../_static/colab-badge.svg" in first
    assert "notebooks/student/01_x.ipynb" in first and "](student/" not in first  # both editions, on Colab
    assert page.cells[1].source.startswith("(bug-3)=")  # a MyST target: links to it are checked
    assert "attachment:" not in page.cells[1].source and (images / "01_x-1-d.png").read_bytes() == b"\x89PNG fake"
    outputs = page.cells[2].outputs
    assert len(outputs) == 1 and "course-chart" in outputs[0].data["text/html"]  # the twin gone, the chart drawn here
    assert "vegaEmbed" in outputs[0].data["text/html"] and "cdn" not in outputs[0].data["text/html"]
    assert '"description": "An interactive chart: its values show' in outputs[0].data["text/html"]  # for a reader
    assert "hide-input" in page.cells[3].metadata["tags"]
    assert versions == {spec["$schema"]}


def test_formulas_become_mathml():
    from docutils import nodes

    class Writer:
        body: list

        def starttag(self, node, tag, **attributes):
            return f"<{tag}>"

    writer = Writer()
    writer.body = []
    with pytest.raises(nodes.SkipNode):
        mathml.visit_inline(writer, nodes.math(text=r"\sqrt{d_k}"))
    with pytest.raises(nodes.SkipNode):
        mathml.visit_block(writer, nodes.math_block(text=r"\mathrm{softmax}\left(\frac{QK^\top}{\sqrt{d_k}}\right)V"))
    inline, block = writer.body[0], "".join(writer.body[1:])
    assert inline.startswith('<span class="math"><math') and "<msqrt>" in inline
    assert 'display="block"' in block and "<mfrac>" in block and "merror" not in block


def test_the_landing_page_is_for_students_and_gives_both_editions_of_every_chapter():
    chapters = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    page = site.landing((ROOT / "README.md").read_text(), chapters)
    for path in chapters:
        assert f"](chapters/{path.stem}.ipynb)" in page
        assert f'href="downloads/{path.name}" download' in page and f'href="downloads/student/{path.name}"' in page
    assert "make test" not in page and "GPU (H200)" not in page  # the project's figures are in the Teaching section
    assert "teaching/instructor_guide.md" in page and "\u00a0minutes" in page


def test_a_teaching_page_in_the_search_index_is_named(tmp_path):
    index = tmp_path / "searchindex.js"
    data = {"docnames": ["chapters/01_attention", "teaching/lessons/07_gpt"], "terms": {"attent": 0, "poll": [0, 1]}}
    index.write_text(f"Search.setIndex({json.dumps(data)})")
    assert site.teaching_searched(index) == ["teaching/lessons/07_gpt: 1 words in the students' search index"]
    data["terms"]["poll"] = [0]
    index.write_text(f"Search.setIndex({json.dumps(data)})")
    assert site.teaching_searched(index) == []


def test_a_figure_gets_its_stored_text_alternative_or_its_section_and_a_file_name_alone_is_caught(tmp_path):
    import build

    png = {"image/png": "aGk="}
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("## 3. Scaling"),
        nbformat.v4.new_code_cell("fig", outputs=[nbformat.v4.new_output("display_data", data=png,
                                                                          metadata={"alt": "Scores. Across: key"})]),
        nbformat.v4.new_code_cell("old", outputs=[nbformat.v4.new_output("display_data", data=png)]),
        nbformat.v4.new_code_cell("print(1)", outputs=[nbformat.v4.new_output("stream", text="1\n")]),
    ]  # fmt: skip
    path = tmp_path / "01_x.ipynb"
    nbformat.write(nb, path)
    page, _ = site.stage_notebook(path, build.altair_spec, tmp_path)
    assert page.cells[1].metadata["mystnb"]["image"]["alt"] == "Scores. Across: key"  # as the figure stored it
    assert page.cells[2].metadata["mystnb"]["image"]["alt"].startswith("Figure 2 of the section “3. Scaling”")
    assert "mystnb" not in page.cells[3].metadata  # no image
    assert site.FILE_ALT.search('<img alt="../_images/38347ab2.png" src="../_images/38347ab2.png" />')
    assert not site.FILE_ALT.search('<img alt="Scores. Across: key" src="../_images/38347ab2.png" />')
