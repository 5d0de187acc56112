"""Build the course's website from the committed notebooks, without executing them: ``make site``.

    python tools/build_site.py            # stage into build/site-src/, build build/site/, check it is self-contained
    python tools/build_site.py --check    # only the check, on an existing build/site/

Sphinx with MyST-NB and the Book theme (what Jupyter Book 1 is made of) builds offline from packages on PyPI;
Jupyter Book 2 downloads its theme at build time, which no offline build machine can. The pages:

- ``index``: the README, its links turned into the site's pages and its badges into local images;
- ``chapters/NN_*``: the complete editions, exercise solutions folded (``hide-input``), each chart's static PNG twin
  replaced by the interactive chart itself (drawn by the Vega bundle in ``_static``), "Open in Colab" links to both
  editions at the top;
- ``instructor_guide``, ``lessons/`` (the lesson plans of docs/lessons), and ``api/``: the reference of ``course_utils`` generated from its docstrings.

The site must fetch nothing from another host (a classroom without internet, a USB stick): formulas are MathML
written at build time (``latex2mathml``; the browser draws them, with no script and no web font) and Vega comes from
``vl-convert-python``. After building, every HTML, CSS and JavaScript file is searched for a resource loaded from
another host (a script, a style sheet, an image, a font, a frame); any one fails the build. Links to other sites
(Colab, GitHub) are fine: following them needs the network, loading the page does not.
"""

from __future__ import annotations

import argparse
import base64
import copy
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from html import escape
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
SITE_DOCS = ROOT / "docs" / "site"
STAGE = ROOT / "build" / "site-src"
OUT = ROOT / "build" / "site"
BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
TWIN = "static_twin"  # notebooks/build.py marks each chart's PNG twin so
API_PAGES = {  # page: (title, modules)
    "model": ("The model", ["attention", "masks", "positional", "layers", "encoder", "decoder", "transformer", "causal_lm", "gpt",
                            "llama", "convert_torch", "convert_hf", "torch_reference"]),
    "data": ("Data", ["tokenizers", "bpe", "text", "pairs", "dates", "multi30k"]),
    "training": ("Training", ["loop", "recipes", "pretrained", "seq2seq", "decoding", "translation", "metrics"]),
    "teaching": ("Teaching: probes and plots", ["probes", "plots"]),
    "checks": ("Exercise checkers", ["_core", "attention", "masks", "positional", "layers", "seq2seq", "training",
                                     "generation", "sampling", "translation", "bug_lab", "modern", "predictions"]),
}  # fmt: skip
# A resource the page itself loads from another host: src=, a style sheet or icon <link href=>, CSS url(), @import.
EXTERNAL = re.compile(
    r"""<(?:script|img|iframe|source|audio|video|embed)\b[^>]*\bsrc\s*=\s*["']?(?:https?:)?//"""
    r"""|<link\b(?=[^>]*\brel\s*=\s*["']?(?:stylesheet|icon|preload|modulepreload|manifest))[^>]*\bhref\s*=\s*["']?(?:https?:)?//"""
    r"""|url\(\s*["']?(?:https?:)?//|@import\s+["'](?:https?:)?//""",
    re.IGNORECASE,
)


def course_config() -> dict[str, str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["course"]


def colab_url(path: str) -> str:
    cfg = course_config()
    return f"https://colab.research.google.com/github/{cfg['repository']}/blob/{cfg['branch']}/{path}"


def github_url(path: str) -> str:
    cfg = course_config()
    return f"https://github.com/{cfg['repository']}/blob/{cfg['branch']}/{path}"


def local_badges(markdown: str, static: str) -> str:
    """The Colab badge image, fetched from Google by the README and the notebooks, as the site's own copy."""
    return markdown.replace(BADGE, f"{static}/colab-badge.svg")


def chapter_links(name: str) -> str:
    """The links at the top of a chapter: both editions on Colab, and the notebook file."""
    badge = '<img src="../_static/colab-badge.svg" alt="Open in Colab">'
    return (
        '<div class="course-links">\n'
        f'<a href="{colab_url(f"notebooks/{name}")}">{badge}</a>\n'
        f'<a href="{colab_url(f"notebooks/{name}")}">complete edition</a> ·\n'
        f'<a href="{colab_url(f"notebooks/student/{name}")}">student edition (the exercises to write)</a> ·\n'
        f'<a href="{github_url(f"notebooks/{name}")}">the notebook on GitHub</a>\n'
        "</div>"
    )


def chart_html(spec: dict, index: int) -> str:
    """An interactive chart drawn by the site's Vega bundle (loaded once per page from _static)."""
    div = f"course-chart-{index}"
    return (
        f'<div class="course-chart" id="{div}"></div>\n<script type="text/javascript">\n'
        f"window.vegaEmbed('#{div}', {json.dumps(spec)}, {{mode: 'vega-lite', actions: false}})"
        f".catch(function (error) {{ document.getElementById('{div}').textContent = 'chart error: ' + error; }});\n"
        "</script>"
    )


def stage_notebook(path: Path, altair_spec, images: Path) -> tuple[nbformat.NotebookNode, set[str]]:
    """The site's version of a committed notebook; and the Vega-Lite versions of its charts."""
    nb = copy.deepcopy(nbformat.read(path, as_version=4))
    versions: set[str] = set()
    charts = 0
    first = nb.cells[0]
    # The badge line becomes links to both editions; links to the student edition go to Colab.
    first.source = re.sub(r"^\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)$", chapter_links(path.name), first.source,
                          count=1, flags=re.MULTILINE)  # fmt: skip
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            # An HTML anchor (<a id="bug-7"></a>) becomes a MyST target, so that links to it are checked too.
            cell.source = re.sub(r'^<a id="([\w-]+)"></a>$', r"(\1)=", cell.source, flags=re.MULTILINE)
            # Images attached to the cell: MyST-NB reads files, so each becomes one beside the chapter.
            for file, data in cell.pop("attachments", {}).items():
                mime, encoded = next(iter(data.items()))
                target = images / f"{path.stem}-{index}-{file}"
                target.write_bytes(base64.b64decode(encoded) if mime != "image/svg+xml" else encoded.encode())
                cell.source = cell.source.replace(f"attachment:{file}", f"_images/{target.name}")
            cell.source = re.sub(r"\]\(student/([^)]+)\)", lambda m: f"]({colab_url('notebooks/student/' + m.group(1))})",
                                 cell.source)  # fmt: skip
            continue
        if cell.cell_type != "code":
            continue
        tags = cell.metadata.get("tags", [])
        if "exercise" in tags:  # folded, as in the notebook; a prediction's verdict too, which tells the answer
            cell.metadata["tags"] = [*tags, "hide-cell" if "check_prediction(" in cell.source else "hide-input"]
        outputs = []
        for output in cell.get("outputs", []):
            if output.get("metadata", {}).get(TWIN):
                continue  # the chart it copies is interactive here
            spec = altair_spec(output)
            if spec is not None:
                charts += 1
                versions.add(spec.get("$schema", ""))
                output = nbformat.v4.new_output("display_data", data={"text/html": chart_html(spec, charts)})
            outputs.append(output)
        cell.outputs = outputs
    return nb, versions


def api_page(page: str, title: str, modules: list[str]) -> str:
    package = "course_utils" if page == "utils" else f"course_utils.{page}"
    lines = [f"# {title}", "", f"`{package}`", "", "```{eval-rst}", f".. automodule:: {package}", "   :no-members:", ""]
    for module in modules:
        lines += [f".. automodule:: {package}.{module}", ""]
    return "\n".join([*lines, "```", ""])


def stage() -> None:
    from course_utils.teaching._vega import vl_convert

    sys.path.insert(0, str(ROOT / "notebooks"))
    build = importlib.import_module("build")  # notebooks/build.py: how the notebooks store their charts

    if STAGE.exists():
        shutil.rmtree(STAGE)
    shutil.copytree(SITE_DOCS, STAGE)
    # The math font of last resort (course.css): DejaVu Serif, which matplotlib ships, with an OpenType MATH table.
    import matplotlib

    (STAGE / "_static" / "fonts").mkdir()
    shutil.copy(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSerif.ttf", STAGE / "_static" / "fonts")
    (STAGE / "chapters" / "_images").mkdir(parents=True)
    versions: set[str] = set()
    chapters = sorted(p for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    for path in chapters:
        nb, found = stage_notebook(path, build.altair_spec, STAGE / "chapters" / "_images")
        versions |= found
        nbformat.write(nb, STAGE / "chapters" / path.name)
    # One Vega bundle for every chart: the committed outputs come from one Altair, so one Vega-Lite version.
    vl = {re.sub(r".*/v(\d+)\.(\d+).*", r"v\1_\2", v) for v in versions}
    if len(vl) > 1:
        raise SystemExit(f"charts of several Vega-Lite versions {sorted(vl)}: rebuild the notebooks with one Altair")
    bundle = vl_convert().javascript_bundle(vl_version=vl.pop()) if vl else ""
    (STAGE / "_static" / "vega-bundle.js").write_text(f"(function () {{\n{bundle}\n}})();\n")

    readme = (ROOT / "README.md").read_text()
    readme = local_badges(readme, "_static")
    readme = re.sub(r"\]\(notebooks/(\d\d_[\w]+)\.ipynb\)", r"](chapters/\1.ipynb)", readme)
    readme = re.sub(r"\]\(notebooks/student/([\w.]+)\)", lambda m: f"]({github_url('notebooks/student/' + m.group(1))})",
                    readme)  # fmt: skip
    readme = readme.replace("](docs/instructor_guide.md)", "](instructor_guide.md)")
    readme = readme.replace("`docs/instructor_guide.md`", "the [instructor guide](instructor_guide.md)")
    readme = readme.replace("](docs/lessons/)", "](lessons/index.md)")
    readme = re.sub(r"\*\*Read it as a website:\*\*.*?\n\n", "", readme, count=1, flags=re.DOTALL)  # it is read here
    toc = ["", "```{toctree}", ":hidden:", ":caption: Chapters", ""]
    toc += [f"chapters/{p.stem}" for p in chapters]
    toc += ["```", "", "```{toctree}", ":hidden:", ":caption: Teaching and reference", "", "instructor_guide",
            "lessons/index", "api/index", "```", ""]  # fmt: skip
    (STAGE / "index.md").write_text(readme + "\n".join(toc))
    shutil.copy(ROOT / "docs" / "instructor_guide.md", STAGE / "instructor_guide.md")

    # The lesson plans, one 90-minute class per chapter
    lessons = STAGE / "lessons"
    lessons.mkdir()
    plans = sorted((ROOT / "docs" / "lessons").glob("[0-9][0-9]_*.md"))
    for plan in plans:
        shutil.copy(plan, lessons / plan.name)
    (lessons / "index.md").write_text(
        "# Lesson plans\n\nA 90-minute class for every chapter: what to say, run live, show or skip; how long each "
        "section runs on two CPU cores; the prediction's poll; class or homework for each exercise; the discussion "
        "questions with their answers.\n\n```{toctree}\n:maxdepth: 1\n\n"
        + "\n".join(plan.stem for plan in plans)
        + "\n```\n"
    )

    api = STAGE / "api"
    api.mkdir()
    index = ["# The `course_utils` reference", "", "Generated from the docstrings of the package the notebooks import.",
             "", "```{toctree}", ":maxdepth: 1", "", *API_PAGES, "utils", "```", ""]  # fmt: skip
    (api / "index.md").write_text("\n".join(index))
    for page, (title, modules) in API_PAGES.items():
        (api / f"{page}.md").write_text(api_page(page, title, modules))
    (api / "utils.md").write_text(
        "# Settings and utilities\n\n```{eval-rst}\n.. automodule:: course_utils.settings\n\n"
        ".. automodule:: course_utils.utils\n\n.. automodule:: course_utils.grade\n   :no-members:\n```\n"
    )


def sphinx() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    env = {**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-j", "auto", str(STAGE), str(OUT)]
    subprocess.run(command, check=True, env=env)
    (OUT / ".nojekyll").write_text("")  # GitHub Pages: serve _static/ as it is


def check() -> list[str]:
    """Every resource a page of the built site loads from another host (``file: what``); empty when self-contained."""
    problems = []
    for path in sorted(OUT.rglob("*")):
        if path.suffix not in (".html", ".css", ".js") or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for m in EXTERNAL.finditer(text):
            snippet = text[m.start() : m.end() + 60].replace("\n", " ")
            problems.append(f"{path.relative_to(OUT)}: {escape(snippet)}")
    pages = list(OUT.rglob("*.html"))
    expected = {f"chapters/{p.stem}.html" for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    expected |= {
        "index.html",
        "instructor_guide.html",
        "lessons/index.html",
        "api/index.html",
        "search.html",
        "searchindex.js",
    }
    missing = sorted(e for e in expected if not (OUT / e).exists())
    problems += [f"missing page: {m}" for m in missing]
    if not pages:
        problems.append("no page built")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check an existing build/site/")
    args = parser.parse_args()
    if not args.check:
        stage()
        sphinx()
    problems = check()
    for problem in problems:
        print(problem)
    pages = len(list(OUT.rglob("*.html")))
    size = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file()) / 2**20
    print(f"{pages} pages, {size:.0f} MiB in {OUT.relative_to(ROOT)}: "
          + ("self-contained" if not problems else f"{len(problems)} problems"))  # fmt: skip
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
