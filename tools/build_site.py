"""Build the course's website from the committed notebooks, without executing them: ``make site``.

    python tools/build_site.py            # stage into build/site-src/, build build/site/, check it is self-contained
    python tools/build_site.py --check    # only the check, on an existing build/site/

Sphinx with MyST-NB and the Book theme (what Jupyter Book 1 is made of) builds offline from packages on PyPI;
Jupyter Book 2 downloads its theme at build time, which no offline build machine can. The pages:

- ``index``: the students' page: what the course is, how to start, every chapter with its time and both editions,
  on Colab and as files to download (``downloads/``: the site holds both editions, so a class given it on a USB
  stick gets the notebooks from it); a list, which reads on a phone;
- ``chapters/NN_*``: the complete editions, exercise solutions folded (``hide-input``), each chart's static PNG twin
  replaced by the interactive chart itself (drawn by the Vega bundle in ``_static``), both editions at the top, on
  Colab and as downloads; code cells with a copy button (``sphinx-copybutton``);
- ``teaching/``, for instructors: the guide, the lesson plans of docs/lessons (with every poll's answer) and the
  README (tests, CI, GPU runs), left out of the search index (``nosearch``), so that students searching find chapters;
- ``api/``: the reference of ``course_utils`` generated from its docstrings.

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

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other tools, also when loaded by path
from lesson_quotes import unquoted

from course_utils.teaching.plots import speakable

ROOT = Path(__file__).resolve().parent.parent
SITE_DOCS = ROOT / "docs" / "site"
STAGE = ROOT / "build" / "site-src"
OUT = ROOT / "build" / "site"
STUDENTS = False  # --students: the site without the Teaching section (build/site-students), for a class's USB stick
BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
TWIN = "static_twin"  # notebooks/build.py marks each chart's PNG twin so
API_PAGES = {  # page: (title, modules)
    "model": ("The model", ["attention", "masks", "positional", "layers", "encoder", "decoder", "transformer", "causal_lm", "gpt",
                            "llama", "convert_torch", "convert_hf", "torch_reference"]),
    "data": ("Data", ["tokenizers", "bpe", "text", "download", "pairs", "dates", "multi30k"]),
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


def chapter_links(name: str, up: str = "../") -> str:
    """The links to a chapter's two editions: each on Colab, and each as a file to download (from this site, which
    holds them: a class given the site on a USB stick gets the notebooks from it)."""
    badge = f'<img src="{up}_static/colab-badge.svg" alt="Open in Colab">'
    student, complete = colab_url(f"notebooks/student/{name}"), colab_url(f"notebooks/{name}")
    return (
        '<div class="course-links">\n'
        f'<a href="{student}">{badge}</a><br>\n'
        f'<b>Student edition</b> (the exercises to write): <a href="{student}">on Colab</a> ·\n'
        f'<a href="{up}downloads/student/{name}" download>download</a><br>\n'
        f'<b>Complete edition</b> (solved): <a href="{complete}">on Colab</a> ·\n'
        f'<a href="{up}downloads/{name}" download>download</a>\n'
        "</div>"
    )


NOSEARCH = "---\nnosearch: true\n---\n\n"  # Sphinx leaves a page with this metadata out of the search index


def landing(readme: str, chapters: list[Path]) -> str:
    """The students' first page: what the course is, how to start, every chapter with both editions (on Colab and as
    downloads) and its time, and what to do when something goes wrong; lists, not wide tables, so that it reads on a
    phone."""
    intro = readme.split("\n## ", 1)[0].split("\n\n")
    lines = [intro[0], "", intro[1], ""]  # the title and the first paragraph
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| (\d\d) \| \[[^]]+\]\([^)]+\) \| (.*?) \|", readme, re.M)}
    lines += [
        "## How to start",
        "",
        "- **In the browser, nothing to install:** open a chapter's *student edition* on Google Colab (below), then "
        "*File → Save a copy in Drive*. Colab's first cell installs the course's package.",
        "- **On your computer:** in a fresh environment with Python 3.11 or newer, `pip install "
        f'"transformers-from-scratch[lab,hf] @ git+https://github.com/{course_config()["repository"]}"` installs the '
        "course's package, JupyterLab and the libraries chapters 10 and 12 compare with (it needs git; on Linux, "
        "`pip install torch --index-url https://download.pytorch.org/whl/cpu` first gives PyTorch's CPU build, about "
        "200 MB, where PyPI's is the CUDA build of several GB); then download "
        "the student edition (below) and open it with `jupyter lab`. Before going offline, `python -m course_utils.data` "
        "downloads every data file the chapters read.",
        "- Each student edition leaves the chapter's key pieces for you to write: every exercise cell has a "
        "`check_*` helper that tests your code at once and names the likely mistake. The *complete edition* has every "
        "exercise solved, folded away; this site shows it, with its outputs and interactive charts.",
        "",
        "## The chapters",
        "",
    ]
    for path in chapters:
        nb = nbformat.read(path, as_version=4)
        title = nb.cells[0].source.splitlines()[0].lstrip("# ").strip()
        time = re.search(r"\*\*Time:\*\* about (\d+)\s+minutes", "\n".join(c.source for c in nb.cells[:4]))
        lines += [f"### [{title}](chapters/{path.stem}.ipynb)", ""]
        if path.stem[:2] in rows:
            lines += [rows[path.stem[:2]][:1].upper() + rows[path.stem[:2]][1:] + ".", ""]
        if time:
            lines += [f"About {time.group(1)}\u00a0minutes.", ""]
        lines += [chapter_links(path.name, up=""), ""]
    # the README's table of errors and what to do, where students look first: as a list, like the chapters
    table = readme.split("### When something goes wrong\n", 1)[1].split("\n#", 1)[0]
    rows = [row.strip("| ").split(" | ") for row in table.strip().splitlines()[2:]]
    lines += ["## When something goes wrong", ""]
    lines += [f"- {seen}\n\n  {what_to_do}\n" for seen, what_to_do in rows]
    if not STUDENTS:
        lines += [
            "## For instructors",
            "",
            "The [instructor guide](teaching/instructor_guide.md), a [lesson plan](teaching/lessons/index.md) per "
            "chapter (with the polls' answers), the grader and the slides are in a section of their own, "
            "[Teaching](teaching/index.md), which this site's search leaves out. To hand the site to a class, build it "
            "without that section: `python tools/build_site.py --students`.",
            "",
        ]
    return "\n".join(lines)


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
    section, drawn = nb.metadata.get("title") or path.stem, 0  # the section, and the figures drawn in it so far
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            heading = re.search(r"^#{1,3} (.+)$", cell.source, flags=re.MULTILINE)
            section, drawn = (heading.group(1).strip(), 0) if heading else (section, drawn)
            # An HTML anchor (<a id="bug-7"></a>) becomes a MyST target, so that links to it are checked too.
            cell.source = re.sub(r'^<a id="([\w-]+)"></a>$', r"(\1)=", cell.source, flags=re.MULTILINE)
            # Images attached to the cell: MyST-NB reads files, so each becomes one beside the chapter.
            for file, data in cell.pop("attachments", {}).items():
                mime, encoded = next(iter(data.items()))
                target = images / f"{path.stem}-{index}-{file}"
                target.write_bytes(base64.b64decode(encoded) if mime != "image/svg+xml" else encoded.encode())
                cell.source = cell.source.replace(f"attachment:{file}", f"_images/{target.name}")
            # a link to the student edition: the file this site holds (offline too)
            cell.source = re.sub(r"\[([^]]+)\]\(student/([^)]+)\)", r'<a href="../downloads/student/\2" download>\1</a>',
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
                spec.setdefault("description", chart_description(spec))  # what a screen reader says of it
                output = nbformat.v4.new_output("display_data", data={"text/html": chart_html(spec, charts)})
            outputs.append(output)
        cell.outputs = outputs
        alt = cell_alt(outputs, section, drawn)
        drawn += sum("image/png" in out.get("data", {}) for out in outputs)
        if alt:  # MyST-NB's alt text for the cell's images, read by screen readers in place of the file's name
            cell.metadata.setdefault("mystnb", {})["image"] = {"alt": alt}
    return nb, versions


def cell_alt(outputs: list, section: str, drawn: int = 0) -> str:
    """The text alternative of a code cell's images: what the notebook stored for each figure (``alt``, written by
    ``course_utils.teaching.plots.figure_alt`` when the cell ran), or, for a figure stored without one, its number
    in its section (``drawn`` figures came before it there) and the section's name; empty for a cell without
    images."""
    found = [out.get("metadata", {}).get("alt") for out in outputs if "image/png" in out.get("data", {})]
    if not found:
        return ""
    described = [alt for alt in found if alt]  # already speakable: plots.figure_alt wrote it so
    if described:
        return " | ".join(dict.fromkeys(described))
    last = drawn + len(found)
    numbers = {1: f"{last}", 2: f"{last - 1} and {last}"}.get(len(found), f"{drawn + 1} to {last}")
    figures = "Figure" if len(found) == 1 else "Figures"
    return f"{figures} {numbers} of the section “{speakable(section)}”, which the text around it describes"


def chart_description(spec: dict) -> str:
    """What a screen reader says of an interactive chart (Vega-Lite's ``description``): its title and what its axes
    and colours show, from its first view that names them, and that the values show on hovering."""
    title = spec.get("title", "")
    title = " ".join(title) if isinstance(title, list) else title.get("text", "") if isinstance(title, dict) else title
    views = [spec, *spec.get("layer", []), *spec.get("hconcat", []), *spec.get("vconcat", []), *spec.get("concat", [])]
    shown = {}
    for view in views:
        for channel, word in (("x", "Across"), ("y", "Down"), ("color", "Colour")):
            encoding = view.get("encoding", {}).get(channel)
            axis = (encoding.get("title") or encoding.get("field")) if isinstance(encoding, dict) else None
            if isinstance(axis, str) and axis and word not in shown:
                shown[word] = axis
    parts = [speakable(title)] if title else []
    parts += [f"{word}: {speakable(axis)}" for word, axis in shown.items()]
    parts.append("An interactive chart: its values show when the pointer rests on them")
    return ". ".join(part.rstrip(".") for part in parts if part)


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

    # Both editions of every chapter, as files to download (html_extra_path copies _extra/ to the site's root).
    downloads = STAGE / "_extra" / "downloads"
    (downloads / "student").mkdir(parents=True)
    for path in chapters:
        shutil.copy(path, downloads / path.name)
        shutil.copy(ROOT / "notebooks" / "student" / path.name, downloads / "student" / path.name)

    readme = (ROOT / "README.md").read_text()
    toc = ["", "```{toctree}", ":hidden:", ":caption: Chapters", ""]
    toc += [f"chapters/{p.stem}" for p in chapters]
    toc += ["```", ""]
    if not STUDENTS:
        toc += ["```{toctree}", ":hidden:", ":caption: For instructors", "", "teaching/index", "```", ""]
    toc += ["```{toctree}", ":hidden:", ":caption: Reference", "", "api/index", "```", ""]
    (STAGE / "index.md").write_text(local_badges(landing(readme, chapters), "_static") + "\n".join(toc))
    if STUDENTS:
        stage_api()
        return

    # For instructors, apart: the README (the project: tests, CI, GPU runs), the guide and the lesson plans, with every
    # poll's answer, none of them in the students' search.
    teaching = STAGE / "teaching"
    lessons = teaching / "lessons"
    lessons.mkdir(parents=True)
    readme = local_badges(readme, "../_static")
    readme = re.sub(r"\]\(notebooks/(\d\d_[\w]+)\.ipynb\)", r"](../chapters/\1.ipynb)", readme)
    readme = re.sub(r"\]\(notebooks/student/([\w.]+)\)", lambda m: f"]({github_url('notebooks/student/' + m.group(1))})",
                    readme)  # fmt: skip
    readme = readme.replace("](docs/instructor_guide.md)", "](instructor_guide.md)")
    readme = readme.replace("`docs/instructor_guide.md`", "the [instructor guide](instructor_guide.md)")
    readme = readme.replace("](docs/lessons/)", "](lessons/index.md)")
    readme = re.sub(r"\*\*Read it as a website:\*\*.*?\n\n", "", readme, count=1, flags=re.DOTALL)  # it is read here
    readme = re.sub(r"\A# .*", "# The project's README", readme, count=1)  # the landing page has the course's title
    (teaching / "project.md").write_text(NOSEARCH + readme)
    guide = unquoted((ROOT / "docs" / "instructor_guide.md").read_text())
    (teaching / "instructor_guide.md").write_text(NOSEARCH + guide.replace("](../README.md)", "](project.md)"))
    (teaching / "index.md").write_text(
        NOSEARCH
        + "# Teaching\n\nFor instructors: the guide (class times, set-up, grading, slides), a 90-minute lesson "
        "plan per chapter with the answers to its polls and discussion questions, and the project's README (how the "
        "course is built and tested). The site's search leaves this section out.\n\n```{toctree}\n:maxdepth: 1\n\n"
        "instructor_guide\nlessons/index\nproject\n```\n"
    )

    # The lesson plans, one 90-minute class per chapter
    plans = sorted((ROOT / "docs" / "lessons").glob("[0-9][0-9]_*.md"))
    for plan in plans:
        # a figure's quote markers, which a line may begin with, would make MyST read that line as raw HTML
        (lessons / plan.name).write_text(NOSEARCH + unquoted(plan.read_text()))
    (lessons / "index.md").write_text(
        NOSEARCH + "# Lesson plans\n\nA 90-minute class for every chapter: what to say, run live, show or skip; how "
        "long each section runs on two CPU cores; the prediction's poll; class or homework for each exercise; the "
        "discussion questions with their answers.\n\n```{toctree}\n:maxdepth: 1\n\n"
        + "\n".join(plan.stem for plan in plans)
        + "\n```\n"
    )

    stage_api()


def stage_api() -> None:
    api = STAGE / "api"
    api.mkdir()
    index = ["# The `course_utils` reference", "", "Generated from the docstrings of the package the notebooks import.",
             "", "```{toctree}", ":maxdepth: 1", "", *API_PAGES, "utils", "```", ""]  # fmt: skip
    (api / "index.md").write_text("\n".join(index))
    for page, (title, modules) in API_PAGES.items():
        (api / f"{page}.md").write_text(api_page(page, title, modules))
    (api / "utils.md").write_text(
        "# Settings and utilities\n\n```{eval-rst}\n.. automodule:: course_utils.settings\n\n"
        ".. automodule:: course_utils.utils\n\n.. automodule:: course_utils.dry_run\n\n"
        ".. automodule:: course_utils.grade\n   :no-members:\n```\n"
    )


def sphinx() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    env = {**os.environ, "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-j", "auto", str(STAGE), str(OUT)]
    subprocess.run(command, check=True, env=env)
    (OUT / ".nojekyll").write_text("")  # GitHub Pages: serve _static/ as it is


FILE_ALT = re.compile(r'<img\b[^>]*\balt="([^"]*\.(?:png|svg|jpe?g|gif))"', re.IGNORECASE)


def check() -> list[str]:
    """Every resource a page of the built site loads from another host, and every image whose text alternative is
    only its file's name (``file: what``); empty when self-contained and described."""
    problems = []
    for path in sorted(OUT.rglob("*")):
        if path.suffix not in (".html", ".css", ".js") or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for m in EXTERNAL.finditer(text):
            snippet = text[m.start() : m.end() + 60].replace("\n", " ")
            problems.append(f"{path.relative_to(OUT)}: {escape(snippet)}")
        problems += [
            f"{path.relative_to(OUT)}: an image whose text alternative is its file's name: {escape(alt)}"
            for alt in FILE_ALT.findall(text)
        ]
    pages = list(OUT.rglob("*.html"))
    expected = {f"chapters/{p.stem}.html" for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    expected |= {f"downloads/{p.name}" for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    expected |= {f"downloads/student/{p.name}" for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    teaching = {"teaching/index.html", "teaching/instructor_guide.html", "teaching/lessons/index.html"}
    if STUDENTS:
        problems += [
            f"an instructors' page on the students' site: {p.relative_to(OUT)}" for p in (OUT / "teaching").rglob("*")
        ]
    else:
        expected |= teaching
    expected |= {
        "index.html",
        "api/index.html",
        "search.html",
        "searchindex.js",
    }
    problems += teaching_searched()
    missing = sorted(e for e in expected if not (OUT / e).exists())
    problems += [f"missing page: {m}" for m in missing]
    if not pages:
        problems.append("no page built")
    return problems


def teaching_searched(index: Path | None = None) -> list[str]:
    """The pages of the Teaching section whose words the search index holds (``page: N words``): a student's search
    must find none of them, the lesson plans' poll answers above all."""
    path = index or OUT / "searchindex.js"
    if not path.exists():
        return []
    text = path.read_text()
    data = json.loads(text[text.index("(") + 1 : text.rindex(")")])
    teaching = {i: name for i, name in enumerate(data["docnames"]) if name.startswith("teaching/")}
    found: dict[str, int] = {}
    for kind in ("terms", "titleterms"):
        for pages in data.get(kind, {}).values():
            for i in pages if isinstance(pages, list) else [pages]:
                if i in teaching:
                    found[teaching[i]] = found.get(teaching[i], 0) + 1
    return [f"{name}: {n} words in the students' search index" for name, n in sorted(found.items())]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check an existing build/site/")
    parser.add_argument(
        "--students", action="store_true", help="the site without the Teaching section, in build/site-students/"
    )
    args = parser.parse_args()
    global STAGE, OUT, STUDENTS
    if args.students:
        STAGE, OUT, STUDENTS = ROOT / "build" / "site-students-src", ROOT / "build" / "site-students", True
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
