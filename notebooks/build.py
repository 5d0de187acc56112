"""Build the course notebooks from their sources, and optionally run them to store their outputs.

Sources live in ``notebooks/src/NN_name.py`` in jupytext's "percent" format, read and written by
jupytext itself:

    # %% [markdown]
    # # A title, written as Markdown behind "# "
    # %% tags=["nbval-ignore-output"]
    print("a code cell; tags are the only cell metadata kept")

An optional YAML header (``# ---`` / ``# jupyter:`` / ``#   accelerator: GPU`` / ``# ---``) adds notebook
metadata. On top of jupytext, the build adds what is the course's own: placeholders stamped from
``[tool.course]`` in pyproject.toml (``{{COLAB_BADGE}}``, ``{{REPOSITORY_URL}}``, ``{{PIP_SPEC}}``); Markdown
split at headings so that each section opens a slide; images referenced as ``![text](../images/file.png)``
embedded as cell attachments, so that they show on Colab and GitHub; stable cell ids; and, after a run,
a static PNG twin under every interactive chart.

Interactive Altair charts need JavaScript (and, by default, a CDN) to draw; GitHub's notebook viewer and
an offline HTML export show nothing in their place. So after running, each chart output is followed by a
static twin: the same chart rendered to PNG by vl-convert, fully offline. nbval never compares PNGs, so the
twin costs the regression check nothing; re-running the cell replaces both with the live chart.

Each source gives two editions: notebooks/NN_*.ipynb, complete (exercise cells, tagged ``exercise``, keep their
solutions and are folded away), and notebooks/student/NN_*.ipynb, where every ``### BEGIN SOLUTION`` ...
``### END SOLUTION`` block becomes ``raise NotImplementedError``; only the complete edition is run and stores outputs.

    python notebooks/build.py                  # write both editions without outputs
    python notebooks/build.py --execute [01]   # ... then run them (CPU) and store the outputs
    python notebooks/build.py --check          # exit 1 if a notebook differs from its source
    python notebooks/build.py --twins          # redraw the static chart images of stored outputs
    python notebooks/build.py --pull 06        # write notebooks/06_*.ipynb, edited in Jupyter, back to src/
    python notebooks/build.py --prose 07       # Markdown or cell settings only: keep the stored outputs (refused if
                                               # a code cell's source changed)
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import jupytext
import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
IMAGE = re.compile(r"!\[([^\]]*)\]\(\.\./images/([\w.-]+)\)")
MIME = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg"}
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
KEPT_CELL_METADATA = ("tags",)
NOTEBOOK_METADATA = ("accelerator",)  # what a source's header may set (Colab opens a GPU runtime for "GPU")


def course_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["course"]


EDITIONS = ("complete", "student")
STUDENT_DIR = HERE / "student"


def notebook_path(name: str, edition: str = "complete") -> Path:
    return (STUDENT_DIR if edition == "student" else HERE) / f"{name}.ipynb"


def placeholders(name: str, edition: str = "complete") -> dict[str, str]:
    cfg = course_config()
    repo, branch = cfg["repository"], cfg["branch"]
    folder = "notebooks/student" if edition == "student" else "notebooks"
    colab = f"https://colab.research.google.com/github/{repo}/blob/{branch}/{folder}/{name}.ipynb"
    if edition == "student":
        edition_note = (
            "> **Student edition.** The chapter's key pieces are yours to write. Each exercise cell (it starts "
            "with ✏️) is a stub that raises `NotImplementedError` until you fill it in (its `check_*` call then says it is not "
            "written yet); once written, the `check_*` call at its end tests your version and says what differs. The cells after a stub use `course_utils`' tested version, so the "
            "chapter runs to the end even before your code is finished. Questions marked *predict, then run* "
            'ask you to commit to an answer (one letter: `my_prediction = "..."`) before the cell that measures it. '
            f"Solutions: the [complete edition](../{name}.ipynb)."
        )
        exercises = (
            "These exercises ask you to carry what the chapter built to something it did not show. Each is a stub: "
            "write the function where it says `raise NotImplementedError`, then run the cell; its `check_*` helper "
            "tests it against the reference and names the likely mistake. "
            f"The solutions are in the [complete edition](../{name}.ipynb) of this chapter."
        )
    else:
        edition_note = (
            "> **Complete edition**: every exercise solved, its solution folded away (unfold a cell to read it). "
            f"To write them yourself, open the [student edition](student/{name}.ipynb)."
        )
        exercises = (
            "These exercises ask you to carry what the chapter built to something it did not show. Each is a "
            "function for you to write, checked by the `check_*` helper that follows it. In this edition the "
            "solutions are written in, folded away: unfold a cell to see one. The "
            f"[student edition](student/{name}.ipynb) has the same exercises as stubs to fill in."
        )
    return {
        "{{COLAB_BADGE}}": f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab})"
        + f"\n\n{edition_note}",
        "{{REPOSITORY_URL}}": f"https://github.com/{repo}",
        "{{PIP_SPEC}}": f"transformers-from-scratch @ git+https://github.com/{repo}@{branch}",
        "{{EXERCISES}}": exercises,
    }


SOLUTION = re.compile(r"^([ \t]*)### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION\n?", re.MULTILINE | re.DOTALL)


ANSWER = re.compile(r"^[ \t]*### BEGIN SOLUTION\n[ \t]*(\w+) = [^\n]*\n[ \t]*### END SOLUTION\n?", re.MULTILINE)


def student_version(source: str) -> str:
    """An exercise cell for the student edition: each solution block becomes a stub that raises, except a block
    that only assigns an answer (``my_prediction = "b"``), which becomes ``my_prediction = None``."""

    def stub(m: re.Match) -> str:
        answer = ANSWER.fullmatch(m.group(0))
        if answer:
            return f"{m.group(1)}{answer.group(1)} = None  # your answer here\n"
        return f"{m.group(1)}# your code here\n{m.group(1)}raise NotImplementedError\n"

    return SOLUTION.sub(stub, source)


MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*$", re.MULTILINE)


class SourceError(ValueError):
    """A source the student edition cannot be built from safely (a solution would reach the students)."""


def check_markers(source: str, exercise: bool, where: str) -> None:
    """Every ``### BEGIN SOLUTION`` closed by an ``### END SOLUTION`` before the next BEGIN, and only in a cell tagged
    ``exercise``: anywhere else the student edition would pass the solution on unchanged."""
    markers = [m.group(1) for m in MARKER.finditer(source)]
    if markers and not exercise:
        raise SourceError(f"{where}: a solution block in a cell not tagged exercise would reach the student edition")
    if markers != ["BEGIN", "END"] * (len(markers) // 2) or len(markers) % 2:
        raise SourceError(f"{where}: unbalanced solution markers {markers}: each BEGIN SOLUTION needs its END")


ANSWER_STUB = re.compile(r"^\w+ = None  # your answer here$", re.MULTILINE)
# The student edition's cell after a prediction, folded (JupyterLab) or shown as a form (Colab) under this title: its
# code asserts what it measures, which would answer the prediction before it is made.
MEASUREMENT_TITLE = "# @title The measurement: run it once your prediction is in"
SHOWS_THE_ANSWER = " (its code shows the answer)"  # added to the title of a measurement that asserts its result
EXERCISE_PROMPT = "# ✏️ Exercise: write the code where it says `raise NotImplementedError`, then run this cell."
PREDICT_PROMPT = "# ✏️ Predict, then run: replace None with your answer, run this cell, then the next one."


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


def build(src: Path, edition: str = "complete") -> nbformat.NotebookNode:
    """The notebook of one edition: ``complete`` (every solution written in, exercise cells folded away) or
    ``student`` (each ``### BEGIN SOLUTION`` ... ``### END SOLUTION`` block replaced by a stub that raises
    ``NotImplementedError``; its checker then reports the exercise as not attempted yet)."""
    name = src.stem
    stamps = placeholders(name, edition)
    text = jupytext.read(src, fmt="py:percent")
    nb = nbformat.v4.new_notebook()
    measurement_next = False  # the code cell after a prediction measures its answer (after any tagged "runs-first")
    for cell in text.cells:
        source = cell.source
        for key, value in stamps.items():
            source = source.replace(key, value)
        meta = {key: cell.metadata[key] for key in KEPT_CELL_METADATA if key in cell.metadata}
        if cell.cell_type == "markdown":
            for piece, slide_type in split_sections(source):
                piece, attachments = embed_images(piece)
                md = nbformat.v4.new_markdown_cell(piece, metadata={**meta, "slideshow": {"slide_type": slide_type}})
                if attachments:
                    md.attachments = attachments
                nb.cells.append(md)
        else:
            exercise = "exercise" in meta.get("tags", [])
            check_markers(source, exercise, f"{src.name}, the code cell starting {source.strip()[:40]!r}")
            if exercise and edition == "student":
                source = student_version(source)
                prompt = PREDICT_PROMPT if ANSWER_STUB.search(source) else EXERCISE_PROMPT
                source = f"{prompt}\n{source}"
            elif "runs-first" in meta.get("tags", []):
                pass  # between a prediction and its measurement (chapter 06 trains there): nothing to fold
            elif (measurement_next or "measurement" in meta.get("tags", [])) and edition == "student":
                # the cell after a prediction, or one tagged "measurement" later on (it asserts what the prediction
                # asked): its asserts would give the answer away, so it is folded
                shows = SHOWS_THE_ANSWER if re.search(r"^\s*assert ", source, re.MULTILINE) else ""
                source = f"{MEASUREMENT_TITLE}{shows}\n{source}"
                meta = {**meta, "jupyter": {"source_hidden": True}, "cellView": "form"}  # JupyterLab's, Colab's
            elif exercise:
                folded = {"source_hidden": True}  # folded: the solution shows on request
                if "check_prediction(" in source:  # and a prediction's verdict, which names the answer, too: so that
                    folded["outputs_hidden"] = (
                        True  # a notebook presented (RISE) does not show it before it is measured
                    )
                meta = {**meta, "jupyter": folded}
            nb.cells.append(nbformat.v4.new_code_cell(source, metadata=meta))
            measurement_next = (exercise and "check_prediction(" in source) or (
                measurement_next and "runs-first" in meta.get("tags", [])
            )
    for index, cell in enumerate(nb.cells):
        cell.id = hashlib.sha1(f"{name}-{index}".encode()).hexdigest()[:8]  # stable ids: quiet diffs
    notebook_meta = {k: v for k, v in text.metadata.items() if k in NOTEBOOK_METADATA}
    nb.metadata = {
        "kernelspec": KERNELSPEC,
        "language_info": {"name": "python", "pygments_lexer": "ipython3"},
        "colab": {"provenance": [], "toc_visible": True},
        # RISE (make lab): a projector's 1280x800, long slides scroll, and a theme whose fonts need no internet
        "rise": {"theme": "white", "width": 1280, "height": 800, "scroll": True, "enable_chalkboard": False},
        **notebook_meta,  # e.g. {"accelerator": "GPU"}: Colab then opens a GPU runtime
    }
    return nb


ATTACHMENT = re.compile(r"!\[([^\]]*)\]\(attachment:([\w.-]+)\)")


def pull(notebook: Path, src: Path) -> None:
    """Write a notebook edited in Jupyter back to its source, through jupytext: outputs dropped, and what the
    build adds undone (stamped placeholders, embedded images, Markdown split into one cell per slide)."""
    nb = nbformat.read(notebook, as_version=4)
    stamps = placeholders(src.stem)
    cells: list[nbformat.NotebookNode] = []
    for cell in nb.cells:
        source = ATTACHMENT.sub(r"![\1](../images/\2)", cell.source)
        for key, value in sorted(stamps.items(), key=lambda kv: -len(kv[1])):  # the longest first: they nest
            source = source.replace(value, key)
        meta = {key: cell.metadata[key] for key in KEPT_CELL_METADATA if key in cell.metadata}
        if cell.cell_type == "markdown":
            if cells and cells[-1].cell_type == "markdown" and not meta and not cells[-1].metadata:
                cells[-1].source += "\n\n" + source  # one Markdown cell of the source, split into slides
            else:
                cells.append(nbformat.v4.new_markdown_cell(source, metadata=meta))
        else:
            cells.append(nbformat.v4.new_code_cell(source, metadata=meta))
    extra = {key: nb.metadata[key] for key in NOTEBOOK_METADATA if key in nb.metadata}
    jupytext_settings = {
        "notebook_metadata_filter": ",".join(NOTEBOOK_METADATA) + ",-all",
        "cell_metadata_filter": "tags,-all",
    }
    text = nbformat.v4.new_notebook(cells=cells, metadata={**extra, "jupytext": jupytext_settings})
    jupytext.write(text, src, fmt="py:percent")
    subprocess.run([sys.executable, "-m", "ruff", "format", "--quiet", str(src)], check=False)  # the sources' style


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
                lines = output.text.replace("\r\n", "\n").split("\n")  # a shell command's (`!`) lines end in \r\n
                output.text = "\n".join(line.rsplit("\r", 1)[-1] for line in lines)
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


def projector_panels(spec: dict, twin: bytes) -> list[str]:
    """Each choice of a chart's dropdown alone, its labels drawn at 18 px, for the decks (tools/build_slides.py),
    where the twin's grid of every choice, shown as large as a slide allows, would shrink them below that; else []."""
    import struct

    from course_utils.teaching._vega import choice_specs, to_png
    from course_utils.teaching.plots import SLIDE_TEXT_PX, palette_png, slide_scale

    width, height = struct.unpack(">II", twin[16:24])  # a PNG's header
    choices = choice_specs(spec)
    label = chart_text_px(spec)
    if len(choices) < 2 or label * slide_scale(width, height) >= SLIDE_TEXT_PX:
        return []
    scale = SLIDE_TEXT_PX / label
    return [base64.b64encode(palette_png(to_png(one, scale=scale))).decode() for one in choices]


def chart_text_px(spec: dict) -> float:
    """A chart's smallest text, in pixels: the course's charts set every size (Vega's defaults are 10-11 px)."""
    sizes = [float(v) for v in re.findall(r'"(?:label|title)?[fF]ontSize": ([0-9.]+)', json.dumps(spec))]
    return min(sizes, default=10.0)


def add_static_twins(nb: nbformat.NotebookNode) -> int:
    """Put a PNG rendering after every Altair chart output (every choice of its dropdown, if it has one), with each
    choice alone for the decks where the grid would be too small there (``projector_panels``); returns how many
    were added."""
    from course_utils.teaching._vega import static_png
    from course_utils.teaching.plots import SLIDE_TEXT_PX

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
            twin = static_png(spec)
            metadata = {TWIN: True, "text_px": chart_text_px(spec)}
            panels = projector_panels(spec, twin)
            if panels:
                metadata["projector_panels"] = panels
                metadata["projector_text_px"] = SLIDE_TEXT_PX
            png = base64.b64encode(twin).decode()
            outputs.append(nbformat.v4.new_output("display_data", data={"image/png": png}, metadata=metadata))
            added += 1
        cell.outputs = outputs
    return added


RUN_TIMES = ROOT / "docs" / "lessons" / "run_times.json"


def section_times(nb: nbformat.NotebookNode) -> list[tuple[str, float]]:
    """Seconds each ``##`` section's code cells ran (from nbclient's timing), in the notebook's order; the cells
    before the first section count under the chapter's title."""
    from datetime import datetime

    times: dict[str, float] = {}
    section = "Title"
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            heading = re.match(r"^## (.+)", cell.source)
            section = heading.group(1).strip() if heading else section
            continue
        timing = cell.metadata.get("execution", {})
        if "iopub.execute_input" in timing and "shell.execute_reply" in timing:
            start, end = (datetime.fromisoformat(timing[k].replace("Z", "+00:00"))
                          for k in ("iopub.execute_input", "shell.execute_reply"))  # fmt: skip
            times[section] = times.get(section, 0.0) + (end - start).total_seconds()
    return list(times.items())


@functools.cache
def kernels() -> str:
    """The CPU kernels PyTorch picks in a kernel started from here (``AVX512``, ``AVX2``, ``DEFAULT``, ...): the
    rounding of every trained figure stored depends on them, so make test compares the stored outputs on others
    (notebooks/conftest.py)."""
    asked = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    return subprocess.run([sys.executable, "-c", asked], capture_output=True, text=True, check=True).stdout.strip()


def record_times(nb: nbformat.NotebookNode, name: str, seconds: float) -> None:
    """Store the notebook's run time (``seconds``: the kernel's start and every cell, as the README's table gives it)
    and each section's in docs/lessons/run_times.json (tools/lesson_times.py puts them into the lesson plans): the
    machine that ran them is named, since they are only true of it, and PyTorch's CPU kernels, which the outputs'
    last digits depend on."""
    import os
    import platform

    saved = json.loads(RUN_TIMES.read_text()) if RUN_TIMES.exists() else {}
    saved[name] = {
        "machine": f"{os.cpu_count()} CPU cores, {platform.machine()}, PyTorch on the CPU",
        "kernels": kernels(),
        "whole": round(seconds, 1),
        "sections": [[section, round(cells, 1)] for section, cells in section_times(nb)],
    }
    RUN_TIMES.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        f'  {json.dumps(stem)}: {{"machine": {json.dumps(entry["machine"])}, "kernels": {json.dumps(entry.get("kernels"))}, '
        f'"whole": {json.dumps(entry.get("whole"))}, "sections": [\n'
        + ",\n".join(f"    {json.dumps(section, ensure_ascii=False)}" for section in entry["sections"])
        + "\n  ]}"
        for stem, entry in sorted(saved.items())
    ]
    RUN_TIMES.write_text("{\n" + ",\n".join(lines) + "\n}\n")  # a section per line: readable diffs


def execute(nb: nbformat.NotebookNode, name: str) -> float:
    from nbclient import NotebookClient

    start = time.perf_counter()
    client = NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}, record_timing=True
    )
    with tempfile.TemporaryDirectory(prefix="course-checkpoints-") as folder:  # stored outputs come from a run that
        os.environ.setdefault("COURSE_CHECKPOINTS", folder)  # trained afresh, never from a previous run's checkpoint
        try:
            client.execute()
        finally:
            if os.environ.get("COURSE_CHECKPOINTS") == folder:
                del os.environ["COURSE_CHECKPOINTS"]
    seconds = time.perf_counter() - start
    record_times(nb, name, seconds)
    clean_outputs(nb)
    add_static_twins(nb)
    return seconds


def comparable(nb: nbformat.NotebookNode) -> list[tuple]:
    return [(c.cell_type, c.source, json.dumps(c.metadata, sort_keys=True)) for c in nb.cells]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("only", nargs="*", help="notebook name prefixes, e.g. 01 03 (default: all)")
    parser.add_argument("--execute", action="store_true", help="run each notebook and store its outputs")
    parser.add_argument("--check", action="store_true", help="fail if a notebook differs from its source")
    parser.add_argument("--twins", action="store_true", help="only (re)draw the static twins of stored charts")
    parser.add_argument("--pull", action="store_true", help="write notebooks edited in Jupyter back to their sources")
    parser.add_argument(
        "--prose", action="store_true", help="rewrite Markdown and cell settings, keeping the stored outputs"
    )
    args = parser.parse_args()
    sources = sorted((HERE / "src").glob("[0-9][0-9]_*.py"))
    sources = [s for s in sources if not args.only or any(s.stem.startswith(p) for p in args.only)]
    stale = []
    STUDENT_DIR.mkdir(exist_ok=True)
    for src in sources:
        target = notebook_path(src.stem)
        if args.pull:
            pull(target, src)
            print(f"{target.name} -> src/{src.name}")
            continue
        if args.twins:
            stored = nbformat.read(target, as_version=4)
            print(f"{target.name}: {add_static_twins(stored)} static chart images")
            nbformat.write(stored, target)
            continue
        for edition in EDITIONS:
            nb, path = build(src, edition), notebook_path(src.stem, edition)
            if args.check:
                if not path.exists() or comparable(nbformat.read(path, as_version=4)) != comparable(nb):
                    stale.append(str(path.relative_to(HERE)))
                continue
            if args.prose and edition == "complete":
                stored = nbformat.read(path, as_version=4)
                code = [c.source for c in nb.cells if c.cell_type == "code"]
                if code != [c.source for c in stored.cells if c.cell_type == "code"]:
                    print(
                        f"{path.name}: code cells differ from the source, so its outputs would be stale: run --execute"
                    )
                    return 1
                outputs = iter([(c.outputs, c.execution_count) for c in stored.cells if c.cell_type == "code"])
                for cell in nb.cells:
                    if cell.cell_type == "code":
                        cell.outputs, cell.execution_count = next(outputs)
                nb.metadata = stored.metadata
            if args.execute and edition == "complete":  # the student edition ships without outputs
                print(f"running {path.name} ...", flush=True)
                seconds = execute(nb, src.stem)
                print(f"  {seconds:.1f} s", flush=True)
            nbformat.validate(nb)
            nbformat.write(nb, path)
    if stale:
        print("out of date with notebooks/src (run `make notebooks` or `make outputs`): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
