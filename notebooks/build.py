"""Build the course notebooks from their sources, and optionally run them to store their outputs.

Sources live in ``notebooks/src/NN_name.py`` in the "percent" format (as jupytext writes it):

    # %% [markdown]
    # # A title, written as Markdown behind "# "
    # %% tags=["nbval-ignore-output"]
    print("a code cell; tags and other metadata are JSON after the marker")

A first line ``# notebook-metadata: {...}`` (JSON) is merged into the notebook's metadata.
Placeholders stamped from ``[tool.course]`` in pyproject.toml: ``{{COLAB_BADGE}}``,
``{{REPOSITORY_URL}}`` and ``{{PIP_SPEC}}``. Images referenced from Markdown as
``![text](../images/file.png)`` are embedded as cell attachments, so they show on Colab and GitHub.

Interactive Altair charts need JavaScript (and, by default, a CDN) to draw; GitHub's notebook viewer and
an offline HTML export show nothing in their place. So after running, each chart output is followed by a
static twin: the same chart rendered to PNG by vl-convert, fully offline. nbval never compares PNGs, so the
twin costs the regression check nothing; re-running the cell replaces both with the live chart.

    python notebooks/build.py                  # write notebooks/*.ipynb without outputs
    python notebooks/build.py --execute [01]   # ... then run them (CPU) and store the outputs
    python notebooks/build.py --check          # exit 1 if a notebook differs from its source
    python notebooks/build.py --twins          # redraw the static chart images of stored outputs
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import sys
import time
import tomllib
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MARKER = re.compile(r"^# %%(?: \[(markdown)\])?(.*)$")
META = re.compile(r'(\w+)=(\[[^\]]*\]|\{.*?\}(?=\s+\w+=|$)|"[^"]*")')
IMAGE = re.compile(r"!\[([^\]]*)\]\(\.\./images/([\w.-]+)\)")
MIME = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg"}
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}


def course_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["course"]


def placeholders(name: str) -> dict[str, str]:
    cfg = course_config()
    repo, branch = cfg["repository"], cfg["branch"]
    colab = f"https://colab.research.google.com/github/{repo}/blob/{branch}/notebooks/{name}.ipynb"
    return {
        "{{COLAB_BADGE}}": f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab})",
        "{{REPOSITORY_URL}}": f"https://github.com/{repo}",
        "{{PIP_SPEC}}": f"transformers-from-scratch @ git+https://github.com/{repo}@{branch}",
    }


def parse(text: str) -> tuple[dict, list[tuple[str, dict, list[str]]]]:
    """Percent-format text -> (notebook metadata, [(cell_type, metadata, lines)])."""
    cells: list[tuple[str, dict, list[str]]] = []
    notebook_meta: dict = {}
    for line in text.splitlines():
        if not cells and line.startswith("# notebook-metadata: "):
            notebook_meta = json.loads(line.split(": ", 1)[1])
            continue
        m = MARKER.match(line)
        if m:
            meta = {key: json.loads(value) for key, value in META.findall(m.group(2))}
            cells.append(("markdown" if m.group(1) else "code", meta, []))
        elif cells:
            cells[-1][2].append(line)
        elif line.strip():
            raise ValueError(f"text before the first '# %%' marker: {line!r}")
    return notebook_meta, cells


def markdown_source(lines: list[str]) -> str:
    out = []
    for line in lines:
        if line.strip() == "":  # blank lines separate cells
            out.append("")
            continue
        if line != "#" and not line.startswith("# "):
            raise ValueError(f"a Markdown line must start with '# ': {line!r}")
        out.append(line[2:])
    return "\n".join(out).strip("\n")


HEADING = re.compile(r"^(#{1,3}) ")
SLIDE_TYPES = {1: "slide", 2: "slide", 3: "subslide"}


def split_sections(source: str) -> list[tuple[str, str]]:
    """Markdown -> [(text, slide type)], a new piece at each heading (outside code fences), so that every
    section can open a slide: a title or ``##`` starts a slide, ``###`` a sub-slide, other text follows on."""
    pieces: list[list[str]] = [[]]
    kinds = ["-"]
    fenced = False
    for line in source.split("\n"):
        fenced ^= line.lstrip().startswith("```")
        heading = None if fenced else HEADING.match(line)
        if heading and any(x.strip() for x in pieces[-1]):
            pieces.append([])
            kinds.append("-")
        if heading and not any(x.strip() for x in pieces[-1]):
            kinds[-1] = SLIDE_TYPES[len(heading.group(1))]
        pieces[-1].append(line)
    return [("\n".join(p).strip("\n"), kind) for p, kind in zip(pieces, kinds)]


def embed_images(source: str) -> tuple[str, dict]:
    attachments = {}

    def attach(m: re.Match) -> str:
        path = ROOT / "images" / m.group(2)
        attachments[path.name] = {MIME[path.suffix]: base64.b64encode(path.read_bytes()).decode()}
        return f"![{m.group(1)}](attachment:{path.name})"

    return IMAGE.sub(attach, source), attachments


def build(src: Path) -> nbformat.NotebookNode:
    name = src.stem
    stamps = placeholders(name)
    nb = nbformat.v4.new_notebook()
    notebook_meta, cells = parse(src.read_text())
    for kind, meta, lines in cells:
        source = markdown_source(lines) if kind == "markdown" else "\n".join(lines).strip("\n")
        for key, value in stamps.items():
            source = source.replace(key, value)
        if kind == "markdown":
            for piece, slide_type in split_sections(source):
                piece, attachments = embed_images(piece)
                cell = nbformat.v4.new_markdown_cell(piece, metadata={**meta, "slideshow": {"slide_type": slide_type}})
                if attachments:
                    cell.attachments = attachments
                nb.cells.append(cell)
        else:
            nb.cells.append(nbformat.v4.new_code_cell(source, metadata=meta))
    for index, cell in enumerate(nb.cells):
        cell.id = hashlib.sha1(f"{name}-{index}".encode()).hexdigest()[:8]  # stable ids: quiet diffs
    nb.metadata = {
        "kernelspec": KERNELSPEC,
        "language_info": {"name": "python", "pygments_lexer": "ipython3"},
        "colab": {"provenance": [], "toc_visible": True},
        **notebook_meta,  # e.g. {"accelerator": "GPU"}: Colab then opens a GPU runtime
    }
    return nb


def clean_outputs(nb: nbformat.NotebookNode) -> None:
    """Keep outputs that read well everywhere: a progress bar keeps only the line a reader would see
    (the text after its last carriage return), and widgets keep their text form."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("execution", None)
        merged = []
        for output in cell.get("outputs", []):
            output.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)
            if output.output_type == "stream" and merged and merged[-1].get("name") == output.name:
                merged[-1].text += output.text  # one progress bar arrives as many stream messages
            else:
                merged.append(output)
        for output in merged:
            if output.output_type == "stream":
                output.text = "\n".join(line.rsplit("\r", 1)[-1] for line in output.text.split("\n"))
        cell.outputs = merged


ALTAIR_CALL = "})("  # the universal template ends with `(function(spec, embedOpt){...})(SPEC, OPTIONS);`
TWIN = "static_twin"


def altair_spec(output: dict) -> dict | None:
    """The Vega-Lite spec inside an Altair HTML output, or None for any other output."""
    html = output.get("data", {}).get("text/html", "")
    html = "".join(html) if isinstance(html, list) else html
    if "vegaEmbed" not in html or ALTAIR_CALL not in html:
        return None
    spec, _ = json.JSONDecoder().raw_decode(html, html.rindex(ALTAIR_CALL) + len(ALTAIR_CALL))
    return spec


def add_static_twins(nb: nbformat.NotebookNode) -> int:
    """Put a PNG rendering after every Altair chart output; returns how many were added."""
    import vl_convert

    added = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        outputs = []
        for output in cell.get("outputs", []):
            if output.get("metadata", {}).get(TWIN):
                continue  # rebuilt below, from the chart it copies
            outputs.append(output)
            spec = altair_spec(output)
            if spec is None:
                continue
            major, minor = re.search(r"/v(\d+)\.(\d+)", spec["$schema"]).groups()
            png = vl_convert.vegalite_to_png(spec, vl_version=f"v{major}_{minor}", scale=1.0)
            outputs.append(
                nbformat.v4.new_output(
                    "display_data",
                    data={"image/png": base64.b64encode(png).decode()},
                    metadata={TWIN: True},
                )
            )
            added += 1
        cell.outputs = outputs
    return added


def execute(nb: nbformat.NotebookNode, name: str) -> float:
    from nbclient import NotebookClient

    start = time.perf_counter()
    client = NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}, record_timing=False
    )
    client.execute()
    clean_outputs(nb)
    add_static_twins(nb)
    return time.perf_counter() - start


def comparable(nb: nbformat.NotebookNode) -> list[tuple]:
    return [(c.cell_type, c.source, json.dumps(c.metadata, sort_keys=True)) for c in nb.cells]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("only", nargs="*", help="notebook name prefixes, e.g. 01 03 (default: all)")
    parser.add_argument("--execute", action="store_true", help="run each notebook and store its outputs")
    parser.add_argument("--check", action="store_true", help="fail if a notebook differs from its source")
    parser.add_argument("--twins", action="store_true", help="only (re)draw the static twins of stored charts")
    args = parser.parse_args()
    sources = sorted((HERE / "src").glob("[0-9][0-9]_*.py"))
    sources = [s for s in sources if not args.only or any(s.stem.startswith(p) for p in args.only)]
    stale = []
    for src in sources:
        target = HERE / f"{src.stem}.ipynb"
        if args.twins:
            stored = nbformat.read(target, as_version=4)
            print(f"{target.name}: {add_static_twins(stored)} static chart images")
            nbformat.write(stored, target)
            continue
        nb = build(src)
        if args.check:
            if not target.exists() or comparable(nbformat.read(target, as_version=4)) != comparable(nb):
                stale.append(target.name)
            continue
        if args.execute:
            print(f"running {target.name} ...", flush=True)
            seconds = execute(nb, src.stem)
            print(f"  {seconds:.1f} s", flush=True)
        nbformat.validate(nb)
        nbformat.write(nb, target)
    if stale:
        print("out of date with notebooks/src (run `make notebooks` or `make outputs`): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
