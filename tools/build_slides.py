"""Build one reveal.js deck per chapter, for a projector and no internet: ``make slides``.

    python tools/build_slides.py              # every chapter, into build/slides/
    python tools/build_slides.py 04           # one chapter

The instructor's deck comes from the complete edition, with what students must not see yet taken out, rather than
from a source of its own: the complete edition holds the outputs a class is shown (the measured tables and figures,
made by the cell beside them), and a second source would drift from the chapter it presents. From it:

- each exercise cell shows the student edition's stub, with no output; its solution is in the speaker notes;
- each prediction shows its question and the stub (``my_prediction = None``); the answer and the checker's
  explanation are in the speaker notes, and the class sees the result on the next slides, which measure it;
- the chapter's title and every ``##`` section start a new slide (left to right); a section too long for one
  1280×800 screen, or with more than ``WORDS`` words of prose, continues on sub-slides (downwards), cut between
  cells or between paragraphs, never inside one but a long list (between its items) or table (between its rows,
  the header repeated);
- a code cell longer than its box, or a long printed output, scrolls inside its own box (``.scroll``); nothing
  else on a slide is meant to scroll, and ``tests/browser/check_slides.py`` fails a slide taller than the screen;
- the discussion questions of ``docs/lessons/NN_*.md`` follow the chapter's last section, before its pitfalls,
  summary and exercises, with their answers as speaker notes (``s``
  opens the speaker view).

Nothing is loaded from another host: reveal.js and its speaker-notes plugin come from the ``sphinx-revealjs`` wheel
(which bundles reveal.js 5), formulas are MathML written at build time (as on the website), code is coloured by
Pygments, and charts are the PNG twins the notebooks store beside each interactive chart. The folder
``build/slides/`` can be copied to a USB stick and opened with a double click on ``index.html``.
"""

from __future__ import annotations

import argparse
import base64
import functools
import html
import importlib.util
import re
import shutil
import struct
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Any

import nbformat
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer

from course_utils.teaching.plots import slide_scale

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other tools, also when loaded by path
from lesson_quotes import unquoted

try:  # IPython's lexer reads a cell's `!command` and `%magic` lines as such, where Python's marks them as errors
    from IPython.lib.lexers import IPython3Lexer as CellLexer
except ImportError:  # pragma: no cover - IPython comes with ipykernel
    CellLexer = PythonLexer

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
LESSONS = ROOT / "docs" / "lessons"
OUT = ROOT / "build" / "slides"
WIDTH, HEIGHT = 1280, 800
BUDGET = 680  # of the 800 px, what a sub-slide fills by the estimate below (the rest: margins, the slide number)
WORDS = 200  # of prose on one slide, at most, where a paragraph ends before it: more is read, not listened to
TWIN = "static_twin"  # notebooks/build.py marks the PNG twin of each interactive chart so
BADGE = re.compile(r"^\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)\s*$", re.MULTILINE)
SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION\n?", re.DOTALL)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
EDITION_BANNER = re.compile(r"^> \*\*(?:Student|Complete) edition.*\n?", re.MULTILINE)
DETOUR = "\x00{}\x00"  # where the Discussion slide names the slide of an exercise done together, once it is known
CLOSING_SECTIONS = ("Pitfalls", "Summary", "Exercises")  # the discussion slide goes before the first of these


def _mathml() -> Any:
    """The website's LaTeX-to-MathML converter (docs/site/mathml.py), so that a formula looks the same in both."""
    spec = importlib.util.spec_from_file_location("course_mathml", ROOT / "docs" / "site" / "mathml.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.mathml


def markdown_renderer() -> MarkdownIt:
    to_mathml = _mathml()
    md = MarkdownIt("commonmark", {"html": True}).enable("table").use(dollarmath_plugin, double_inline=True)

    def inline(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        return f'<span class="math">{to_mathml(tokens[idx].content, "inline")}</span>'

    def block(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        return f'<div class="math">{to_mathml(tokens[idx].content, "block")}</div>\n'

    for rule in ("math_inline", "math_inline_double"):
        md.add_render_rule(rule, inline)
    for rule in ("math_block", "math_block_label"):
        md.add_render_rule(rule, block)
    return md


# --- what a slide holds, and how tall it is likely to be ---------------------------------------------------------


@dataclass
class Piece:
    """Something placed on a slide: its HTML and its estimated height in pixels."""

    html: str
    height: int


@dataclass
class Slide:
    pieces: list[Piece] = field(default_factory=lambda: [])
    notes: list[str] = field(default_factory=lambda: [])

    @property
    def height(self) -> int:
        return sum(p.height for p in self.pieces)

    @property
    def words(self) -> int:
        """Its words of prose (paragraphs, lists, tables), not of code, output or figures."""
        return sum(_words(p.html) for p in self.pieces)

    @property
    def bare(self) -> bool:
        """Whether it holds nothing but headings (a section's, a subsection's, a "continued" line)."""
        return all(re.match(r'<(h\d|p class="continued")', p.html) for p in self.pieces)

    def take_lead_in(self) -> list[Piece]:
        """What introduces the code, formula or table that goes to the next slide, removed from this one:
        its last piece where that is a sentence ending in a colon, with the subsection heading right above it, if
        any. Where that would leave only headings here, the paragraph's last sentence alone; else []."""
        if len(self.pieces) < 2 or not re.fullmatch(r"<p>.*:</p>\s*", self.pieces[-1].html, re.DOTALL):
            return []
        k = len(self.pieces) - 1
        while k > 0 and re.match(r"<h[3-6]", self.pieces[k - 1].html):
            k -= 1  # a subsection's heading goes with its sentence
        if not Slide(self.pieces[:k]).bare:
            taken, self.pieces[k:] = self.pieces[k:], []
            return taken
        split = _last_sentence(self.pieces[-1].html)
        if split is None:
            return []
        self.pieces[-1] = Piece(split[0], _prose_height(_plain(split[0])))
        return [Piece(split[1], _prose_height(_plain(split[1])))]


def _words(html_: str) -> int:
    """The words a reader reads in a piece of prose's HTML; 0 for code, an output or a figure."""
    if re.match(r"\s*<(pre|div|img|figure)\b", html_):
        return 0
    text = re.sub(r"<math\b.*?</math>", " x ", html_, flags=re.DOTALL)  # a formula counts as one word
    return len(re.sub(r"<[^>]+>", " ", text).split())


SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z(])")


def _last_sentence(paragraph: str) -> tuple[str, str] | None:
    """A paragraph's HTML as two paragraphs, the last sentence apart; None for one sentence, or where the only
    place to cut is inside a tag, code or a formula."""
    found = re.fullmatch(r"<p>(.*)</p>\s*", paragraph, re.DOTALL)
    if not found:
        return None
    inner = found.group(1)
    for end in reversed(list(SENTENCE_END.finditer(inner))):
        before = inner[: end.start()]
        inside = before.rfind("<") > before.rfind(">") or any(
            before.count(f"<{tag}") != before.count(f"</{tag}>") for tag in ("code", "math", "a", "em", "strong")
        )
        if not inside:
            return f"<p>{before}</p>\n", f"<p>{inner[end.end() :]}</p>\n"
    return None


CHARS_PER_LINE = 105  # of prose at the deck's font size, on a 1280-px slide
LINE = 32  # px per line of prose
CODE_LINE = 23  # px per line of code or output
CODE_MAX, OUTPUT_MAX = 330, 250  # the boxes' max-height in slides.css (a figure's: course_utils' slide_scale)
PREDICTION_ROOM = 120  # a prediction's cell (two lines of code) below its question and choices


def _prose_height(block: str) -> int:
    """The estimated height of one markdown block (a paragraph, a list, a table, a formula, a heading)."""
    lines = block.strip().splitlines() or [""]
    if "![" in block:  # a diagram: slides.css caps it at 620 px
        return 640 + _prose_height(re.sub(r"!\[[^\]]*\]\([^)]*\)", "", block)) * (len(block.strip()) > 300)
    if block.lstrip().startswith("$$"):
        rows = block.count("\\\\") + 1
        return 30 + 42 * rows
    if block.lstrip().startswith("|"):
        return 20 + 40 * sum(1 for line in lines if not re.match(r"^\|[\s:|-]+\|$", line.strip()))
    if block.lstrip().startswith("#"):
        return {1: 90, 2: 70, 3: 55}.get(len(block) - len(block.lstrip("#")), 50)
    if block.lstrip().startswith("```"):
        return 24 + CODE_LINE * min(len(lines), CODE_MAX // CODE_LINE)
    items = re.split(r"\n(?=\s*(?:[-*+]|\d+\.)\s)", block.strip())
    text = [re.sub(r"\$[^$]*\$", "xxxxxx", item) for item in items]  # a formula reads shorter than its LaTeX
    text = [re.sub(r"\]\([^)]*\)", "]", t) for t in text]  # a link's address is not shown
    return 18 + sum(
        LINE * max(1, -(-len(" ".join(t.split())) // (CHARS_PER_LINE - 4 * (len(items) > 1)))) for t in text
    )


# What a slide shows of a long paragraph is chosen by hand, in docs/slides/cuts.toml; every other paragraph is whole.
CUTS = ROOT / "docs" / "slides" / "cuts.toml"


def slide_cuts(stem: str) -> list[dict[str, str]]:
    """The cuts of chapter ``stem``'s paragraphs (``after``, and ``resume`` for a cut in the middle)."""
    return tomllib.loads(CUTS.read_text()).get(stem, []) if CUTS.exists() else []


def _find(text: str, words: str, start: int = 0) -> re.Match[str] | None:
    """``words`` in ``text`` from ``start``, with any whitespace between them (a source wraps its lines anywhere)."""
    return re.compile(r"\s+".join(map(re.escape, words.split()))).search(text, start)


def slide_paragraph(block: str, cut: dict[str, str]) -> tuple[str, str]:
    """What a slide says of a paragraph, and what it leaves to the speaker notes: the paragraph up to the end of
    ``cut["after"]``, and then, if ``cut`` has ``"resume"``, from that text on again. The notebook keeps the whole."""
    stop = _find(block, cut["after"])
    if stop is None:
        return block, ""
    back = _find(block, cut["resume"], stop.end()) if "resume" in cut else None
    shown = block[: stop.end()].rstrip() + (" " + block[back.start() :].strip() if back else "")
    return shown, block[stop.end() : back.start() if back else len(block)].strip()


def _blocks(source: str) -> list[str]:
    """A markdown cell cut between its blocks (never inside a formula, a fenced code block or a list)."""
    blocks: list[str] = []
    current: list[str] = []
    fence = None
    for line in source.splitlines():
        stripped = line.strip()
        if (
            fence is None
            and (stripped.startswith("```") or stripped.startswith("$$"))
            and not (stripped.startswith("$$") and stripped.endswith("$$") and len(stripped) > 4)
        ):
            fence = stripped[:3] if stripped.startswith("```") else "$$"
            current.append(line)
            continue
        if fence is not None:
            current.append(line)
            if stripped.endswith(fence) and (stripped != fence or len(current) > 1):
                fence = None
            continue
        if not stripped:
            if current:
                blocks.append("\n".join(current))
                current = []
            continue
        current.append(line)
    if current:
        blocks.append("\n".join(current))
    # a list's items separated by blank lines, or a line that introduces a list, stay with the list
    merged: list[str] = []
    for block in blocks:
        if merged and merged[-1].lstrip().startswith("<details") and "</details>" not in merged[-1]:
            merged[-1] += "\n\n" + block  # a toggle and what it hides: one block, never split between slides
            continue
        is_item = re.match(r"\s*(?:[-*+]|\d+\.)\s", block) is not None
        if (
            merged
            and is_item
            and (re.match(r"\s*(?:[-*+]|\d+\.)\s", merged[-1]) or merged[-1].rstrip().endswith((":", "?")))
        ):
            merged[-1] += "\n\n" + block
        else:
            merged.append(block)
    return merged


ITEM = re.compile(r"^(?:[-*+]|\d+\.)\s", re.MULTILINE)  # a list's item, at the list's own level (column 0)


def split_long(block: str, words: Callable[[str], int]) -> list[str]:
    """A list or a table of more than ``WORDS`` words (as ``words`` counts them) as a few shorter ones of about
    equal length, for successive sub-slides: cut between items (an ordered list keeps its numbers, a sentence that
    introduces the list stays with its first part) or between rows (each part repeats the header). Anything else,
    or a list or table within ``WORDS``, comes back whole."""
    total = words(block)
    if total <= WORDS:
        return [block]
    if block.lstrip().startswith("|"):
        lines = block.strip().splitlines()
        head, units = "\n".join(lines[:2]) + "\n", [line + "\n" for line in lines[2:]]
    else:
        starts = [m.start() for m in ITEM.finditer(block)]
        if len(starts) < 2:
            return [block]
        head = ""
        units = [block[a:b] for a, b in zip(starts, [*starts[1:], len(block)], strict=True)]
        units[0] = block[: starts[0]] + units[0]  # the sentence that introduces the list, with its first item
    sizes = [words(head + unit) - (words(head) if head else 0) for unit in units]
    # the fewest parts that each fit within WORDS (one unit a part, at worst), and of those cuts the most even
    cuts = list(range(len(units) + 1))
    for parts in range(min(-(-total // WORDS), len(units)), len(units) + 1):
        cuts = _even_cuts(sizes, parts)
        if max(sum(sizes[a:b]) for a, b in pairwise(cuts)) <= WORDS:
            break
    return [(head + "".join(units[a:b])).rstrip() for a, b in pairwise(cuts)]


def _even_cuts(sizes: list[int], parts: int) -> list[int]:
    """Where to cut a sequence of ``sizes`` into ``parts`` runs so that the largest run is as small as it can be:
    the runs' bounds, from 0 to ``len(sizes)``."""
    n = len(sizes)
    prefix = [0, *accumulate(sizes)]
    # best[j][i]: the smallest largest run when the first i sizes make j runs; then where its last run starts
    best = [[float("inf")] * (n + 1) for _ in range(parts + 1)]
    start = [[0] * (n + 1) for _ in range(parts + 1)]
    best[0][0] = 0
    for j in range(1, parts + 1):
        for i in range(j, n + 1):
            for k in range(j - 1, i):
                largest = max(best[j - 1][k], prefix[i] - prefix[k])
                if largest < best[j][i]:
                    best[j][i], start[j][i] = largest, k
    cuts, i = [n], n
    for j in range(parts, 0, -1):
        i = start[j][i]
        cuts.append(i)
    return cuts[::-1]


def _png_size(data: bytes) -> tuple[int, int]:
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return struct.unpack(">II", data[16:24])
    return (800, 500)


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _stream(text: str) -> str:
    """Printed text as a terminal shows it: a progress bar's carriage returns keep only the last state of a line."""
    text = ANSI.sub("", text)
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


def output_pieces(cell: Any) -> list[Piece]:
    pieces: list[Piece] = []
    texts: list[str] = []

    def flush() -> None:
        if texts:
            body = "".join(texts).rstrip("\n")
            lines = body.count("\n") + 1
            pieces.append(
                Piece(
                    f'<pre class="output scroll">{html.escape(body)}</pre>',
                    16 + min(OUTPUT_MAX, CODE_LINE * lines),
                )
            )
            texts.clear()

    for output in cell.get("outputs", []):
        kind = output.get("output_type")
        if kind == "stream":
            texts.append(_stream(_text(output.get("text", ""))))
            continue
        if kind == "error":
            texts.append(f"{output.get('ename', '')}: {output.get('evalue', '')}\n")
            continue
        data = output.get("data", {})
        if "image/png" in data:
            flush()
            # A figure whose text would be under 18 px on a slide comes with a copy drawn for one (course_utils'
            # figure_metadata): a grid's panels one to a slide, each as tall as the slide allows, or the figure
            # smaller with its text as it is, so that the slide enlarges both.
            metadata = output.get("metadata", {})
            panels = metadata.get("projector_panels") or []
            copy = metadata.get("projector_png")
            text_px = metadata.get("projector_text_px" if panels or copy else "text_px")
            alt = html.escape(metadata.get("alt") or "figure", quote=True)  # figure_alt's, when it ran
            for png in panels or [copy or _text(data["image/png"])]:
                width, height = _png_size(base64.b64decode(png))
                dpi_scale = 0.5 if width > 1400 else 1.0  # retina-sized figures
                natural_w, natural_h = width * dpi_scale, height * dpi_scale
                # as large as the slide allows, up to 1.5 times the notebook's size: legible from the back of a room
                scale = slide_scale(natural_w, natural_h, alone=bool(panels))
                shown_w, shown_h = int(natural_w * scale), int(natural_h * scale)
                # the browser check (tests/browser/check_slides.py) measures the text at the size the slide shows
                size = f' data-text-px="{text_px * dpi_scale:g}"' if text_px else ""
                pieces.append(
                    Piece(f'<img class="figure" style="width: {shown_w}px; height: {shown_h}px"{size} '
                          f'src="data:image/png;base64,{png}" alt="{alt}">', BUDGET if panels else shown_h + 12)
                )  # fmt: skip
        elif "text/html" in data and "vega" in _text(data["text/html"]):
            continue  # an interactive chart: its PNG twin follows
        elif "text/plain" in data:
            texts.append(_text(data["text/plain"]) + "\n")
    flush()
    return pieces


CODE_CHARS = 112  # characters of code on one line of a slide's box; a longer line wraps


def _code_height(source: str) -> int:
    """The estimated height of a code box: its lines as the slide wraps them."""
    lines = source.strip("\n").split("\n")
    return 24 + CODE_LINE * sum(max(1, -(-len(line) // CODE_CHARS)) for line in lines)


IMPORT_LIST = re.compile(r"^(from [\w.]+ import \()\n((?:[ \t]+[\w ,]+\n)+)\)", re.MULTILINE)
FORMATTER_NOTE = re.compile(r"[ \t]*# fmt: (?:skip|off|on)\b")


def slide_code(source: str) -> str:
    """A cell's code as a slide shows it: an import list of one name a line (as ruff formats it) on one wrapped
    line, and without the formatter's ``# fmt: skip`` notes, which say nothing to a class."""
    source = IMPORT_LIST.sub(lambda m: m[1] + " ".join(m[2].split()).rstrip(",") + ")", source)
    return FORMATTER_NOTE.sub("", source)


def code_piece(source: str, label: str = "") -> Piece:
    code = highlight(source, CellLexer(), HtmlFormatter(nowrap=True))
    badge = f'<span class="badge">{html.escape(label)}</span>' if label else ""
    # as tall as it is, up to the room of a slide below its heading (a taller box scrolls)
    height = min(_code_height(source), BUDGET - 40)
    return Piece(f'<div class="code scroll">{badge}<pre><code>{code}</code></pre></div>', height)


def _statement_starts(source: str) -> list[int]:
    """The lines (from 0) where a cell's top-level statements after the first begin, each with the comments right
    above it, as Python parses the cell (an IPython magic or shell line read as a statement); [] if it does not
    parse."""
    import ast

    lines = source.split("\n")
    readable = "\n".join("pass" if line.startswith(("%", "!")) else line for line in lines)
    try:
        tree = ast.parse(readable)
    except SyntaxError:
        return []
    starts = []
    for node in tree.body[1:]:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
        while first > 0 and lines[first - 1].lstrip().startswith("#") and not lines[first - 1][:1].isspace():
            first -= 1
        starts.append(first)
    return sorted(set(starts))


def code_parts(source: str, room: int, below: int) -> list[str]:
    """A code cell as the slides show it: whole where it fits ``room`` px with ``below`` px of its output under it;
    else cut between top-level statements into as few parts as fit (a statement taller than a slide alone), the
    last with room for the output, as even as they can be, at blank lines where that costs no evenness."""
    if _code_height(source) + below <= room:
        return [source]
    lines = source.strip("\n").split("\n")
    starts = [0, *(k for k in _statement_starts("\n".join(lines)) if k > 0), len(lines)]
    n = len(starts) - 1
    if n < 2:
        return [source]

    def part(i: int, j: int) -> str:
        return "\n".join(lines[starts[i] : starts[j]]).strip("\n")

    # best[j]: the best cut of the first j statements: (parts, tallest part in lines of 3, cuts not at a blank line)
    best: list[tuple[tuple[int, int, int], int] | None] = [((0, 0, 0), -1)] + [None] * n
    for j in range(1, n + 1):
        for i in range(j):
            if best[i] is None:
                continue
            height = _code_height(part(i, j))
            limit = room - below if j == n else room
            if height > limit and j > i + 1:
                continue  # too tall, and more than one statement: cut further
            (parts, tallest, unblank), _ = best[i]
            unblank += i > 0 and lines[starts[i] - 1].strip() != ""
            score = (parts + 1, max(tallest, -(-height // (3 * CODE_LINE))), unblank)
            if best[j] is None or score < best[j][0]:
                best[j] = (score, i)
    cuts, j = [], n
    while j > 0:
        i = best[j][1]
        cuts.insert(0, (i, j))
        j = i
    return [part(i, j) for i, j in cuts]


# --- a chapter's deck ------------------------------------------------------------------------------------------


@functools.cache
def _site_builder() -> Any:
    """tools/build_site.py, for its ``colab_url``: one place builds the course's Colab addresses."""
    spec = importlib.util.spec_from_file_location("course_build_site", ROOT / "tools" / "build_site.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fix_links(source: str) -> str:
    source = BADGE.sub("", source)
    # "the complete edition" is the notebook (on Colab), not this deck, which shows it without its solutions
    source = re.sub(r"\[complete edition\]\(\.\./(\d\d_\w+\.ipynb)\)",
                    lambda m: f"[complete edition]({_site_builder().colab_url('notebooks/' + m.group(1))})", source)  # fmt: skip
    source = re.sub(r"\]\(student/([^)#]+)\.ipynb", r"](\1.html", source)
    source = re.sub(r"\]\(\.\./(\d\d_\w+)\.ipynb", r"](\1.html", source)
    return re.sub(r"\]\((\d\d_[\w]+)\.ipynb", r"](\1.html", source)


def _stub(student_source: str) -> str:
    return "\n".join(line for line in student_source.splitlines() if not line.startswith("# ✏️")).strip("\n")


def _other_letters(source: str) -> str:
    """What each wrong letter of the prediction the cell checks would have meant (the checker's explanations), for the
    speaker notes: the right letter's comes from the cell's own output."""
    from course_utils.checks.predictions import QUESTIONS

    found = re.search(r"check_prediction\(\s*[\"']([^\"']+)[\"']", source)
    question = QUESTIONS.get(found.group(1)) if found else None
    if question is None:
        return ""
    items = "".join(
        f"<li><b>({letter})</b> {html.escape(why)}</li>"
        for letter, why in question.why.items()
        if letter != question.answer
    )
    return f"<p>The other letters:</p><ul>{items}</ul>"


def lesson_discussion(stem: str) -> list[tuple[str, str]]:
    """The discussion questions of docs/lessons/<stem>.md and their answers: ``**Q:**`` and ``**A:**`` paragraphs
    under its ``## Discussion`` heading."""
    path = LESSONS / f"{stem}.md"
    if not path.exists():
        return []
    text = path.read_text()
    section = re.search(r"^## Discussion\n(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE)
    if not section:
        return []
    pairs = re.findall(r"\*\*Q:\*\*\s*(.*?)\n\s*\*\*A:\*\*\s*(.*?)(?=\n\s*\*\*Q:\*\*|\Z)", section.group(1), re.DOTALL)
    return [(" ".join(q.split()), a.strip()) for q, a in pairs]


CUE = re.compile(r"^\*\*(\d+)–(\d+) · (.+?)\*\*(.*?)(?=^\*\*\d+–\d+ · |^#|\Z)", re.DOTALL | re.MULTILINE)


def _part_key(name: str) -> str:
    """What a lesson plan's part or a deck's section is called, to match one to the other: ``§5``, ``bug 7``,
    ``setup``, ``discussion``, ``summary`` (the wrap-up), else its name in lower case."""
    name = name.strip().rstrip(".")
    if name.startswith(("Opening", "Setup")):  # "Setup; §1 The decoder layer": on the Setup slide, where it begins
        return "setup"
    for pattern, key in ((r"§(\d+)", "§{}"), (r"^(\d+)\.", "§{}"), (r"^Bugs? (\d+)", "bug {}")):
        found = re.search(pattern, name)
        if found:
            return key.format(found.group(1))
    for start, key in (("Discussion", "discussion"), ("Wrap-up", "summary")):
        if name.startswith(start):
            return key
    return name.lower()


def lesson_cues(stem: str, sections: set[str]) -> dict[str, list[tuple[str, str]]]:
    """The lesson plan's part-by-part script (``**32–38 · §5 Training.** Say: ... Run live: ...``), by the deck
    section it belongs to (``_part_key``: ``sections`` are the deck's, ``"discussion"`` the discussion slide's); a
    part that names none of them goes with the part before it. Each: (its minutes and name, its cues in Markdown)."""
    path = LESSONS / f"{stem}.md"
    if not path.exists():
        return {}
    text = unquoted(path.read_text())
    part = re.search(r"^### Part by part\n(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE)
    cues: dict[str, list[tuple[str, str]]] = {}
    target = "setup"
    for m in CUE.finditer(part.group(1) if part else ""):
        label = m.group(3).rstrip(".")
        if _part_key(label) in sections | {"discussion"}:
            target = _part_key(label)
        elif re.match(r"Exercise \d+\b", label) and "exercises" in sections:  # an end-of-chapter one, done together
            target = "exercises"
        cues.setdefault(target, []).append((f"minutes {m.group(1)}–{m.group(2)} · {label}", m.group(4).strip()))
    return cues


STOPWORDS = {"the", "and", "its", "what", "with", "from", "that", "this", "then", "into", "each", "over", "when"}


def _stems(text: str) -> set[str]:
    """The first four letters of each word of four letters or more: ``"scores"`` and ``"Scoring"`` meet."""
    return {w[:4] for w in re.findall(r"[a-z]{4,}", text.lower()) if w not in STOPWORDS}


def _plain(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def place_cues(slides: list[Slide], later: list[str], parts: list[tuple[str, str]], first: bool = True) -> None:
    """Put a section's later cues (the first is on its first slide) each on the slide where its part begins.
    ``parts`` are the section's parts, the first included: (``"minutes 4–10 · §1 name"``, what to say and run).
    A part is found, after the previous one, by the first text holding a name its title quotes in backticks
    (``my_byte_table``; a prediction's, ``my_prediction``, for a part named "Prediction ..."), else the first ``###``
    heading, bold lead-in or paragraph's opening words that share a word with its title (``§4 The untuned scores``
    finds ``Scoring: ...``, ``§6 Bugs 2 to 6`` a paragraph that opens "Bugs 2 to 4, ..."), else the first text
    holding the first name its script quotes (``Run live: `learn_bpe` ...``). A part found by none of these goes as
    far after the previous one as its minutes are into what is left of the section's. A part titled "Exercise N"
    (one done together) is found at its stub, ``def`` and the first name its script quotes, else by those words.
    With ``first`` false, the first part is placed that way too (``later`` holds its cue): the Exercises section's
    parts go with the exercise they do, not on the section's first slide."""
    if not later:
        return
    marks = []  # (slide, whether a ### heading, its text), in the order the class sees them
    for number, slide in enumerate(slides):
        for piece in slide.pieces:
            # what heads a part: a ### heading, a bold lead-in, or a paragraph's opening words ("Bugs 2 to 4, ...")
            headings = re.findall(
                r"<h3[^>]*>(.*?)</h3>|<p><strong>(.*?)</strong>|<p>((?:[^<,.:;]+\s){0,4}[^<,.:;\s]+)[,.:;]", piece.html
            )
            marks += [(number, True, _plain("".join(found))) for found in headings]
            marks.append((number, False, _plain(piece.html)))
    minutes = [tuple(map(int, re.findall(r"\d+", name.split(" · ", 1)[0]))) for name, _ in parts]
    end = max(b for _, b in minutes)
    cursor, at, since = -1, 0, minutes[0][0]

    def find(names: list[str], stems: set[str]) -> int | None:
        """The first mark after the cursor that holds one of ``names``, or a ### heading with one of ``stems``."""
        for k in range(cursor + 1, len(marks)):
            _, heading, text = marks[k]
            if any(name in text for name in names) or (heading and stems & _stems(text)):
                return k
        return None

    skip = 1 if first else 0
    for note, (name, text), (start, _) in zip(later, parts[skip:], minutes[skip:], strict=True):
        title = name.split(" · ", 1)[1]
        quoted = re.findall(r"`([^`]+)`", title) + ["my_prediction"] * bool(re.match(r"(§\d+\s*)?Prediction\b", title))
        topic = _stems(re.sub(r"`[^`]*`", "", re.split(r";", re.sub(r"^§\d+\s*", "", title))[0]))
        named = [n for n in re.findall(r"`([A-Za-z_][\w.]*)", text) if re.search(r"\w[_.]\w", n)][:1]
        if re.match(r"Exercise \d+\b", title):  # done together: on the slide of its stub, where its solution is
            quoted += [f"def {n}(" for n in named] or re.findall(r"^(Exercise \d+)\b", title)
        found = find(quoted, set()) if quoted else find([], topic)
        if found is None and named:
            found = find(named, set())
        if found is not None:
            cursor, at = found, marks[found][0]
        else:  # as far on as its minutes are into the rest of the section
            share = (start - since) / max(1, end - since)
            at = min(len(slides) - 1, at + round(share * (len(slides) - at)))
            cursor = max([k for k, mark in enumerate(marks) if mark[0] < at] or [cursor])
        since = start
        cued = sum(n.startswith('<div class="cue">') for n in slides[at].notes)
        slides[at].notes.insert(cued, note)


def build_deck(stem: str, md: MarkdownIt) -> tuple[str, int]:
    """The deck's HTML, and its number of slides."""
    complete = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
    student = nbformat.read(NOTEBOOKS / "student" / f"{stem}.ipynb", as_version=4)
    if len(complete.cells) != len(student.cells):
        raise SystemExit(f"{stem}: the editions have {len(complete.cells)} and {len(student.cells)} cells")
    sections: list[list[Slide]] = []
    title = ""
    section_title = ""

    def new_section() -> None:
        sections.append([Slide()])

    def continued(note: str = "") -> Piece:
        """The line that heads a sub-slide: the section's title, and what goes on there."""
        return Piece(f'<p class="continued">{md.renderInline(section_title)}{note}</p>', 40)

    def place(piece: Piece) -> None:
        slide = sections[-1][-1]
        # a slide that holds only headings takes what comes next however tall, never left with nothing else
        if not slide.bare and (slide.height + piece.height > BUDGET or slide.words + _words(piece.html) > WORDS):
            lead_in = [] if re.match(r"<(p|h\d)\b", piece.html) else slide.take_lead_in()  # what it introduces
            sections[-1].append(Slide([continued(" (continued)"), *lead_in]))
        sections[-1][-1].pieces.append(piece)

    discussion = lesson_discussion(stem)
    discussed = not discussion
    detours: list[str] = []  # the exercises done together before the discussion, which its notes point to
    titles = {_part_key(m.group(1)) for c in complete.cells if c.cell_type == "markdown"
              for m in re.finditer(r"^## (.+)$", c.source, re.MULTILINE)}  # fmt: skip
    cues = lesson_cues(stem, titles)

    def script(target: str) -> list[str]:
        """The plan's cues for a section, as the first notes of its first slide: what to say and run, and when."""
        return [
            f'<div class="cue"><p><b>{md.renderInline(name)}</b></p>{md.render(text)}</div>'
            for name, text in cues.pop(target, [])
        ]

    # a section's cues after its first (all of them, for the Exercises section): placed once the section is built
    later: dict[int, tuple[list[str], list[tuple[str, str]], bool]] = {}

    def section_script(target: str) -> list[str]:
        parts = [(name, text) for name, text in cues.get(target, [])]
        notes = script(target)
        first = target != "exercises"
        later[len(sections) - 1] = (notes[first:], parts, first)
        return notes[:first]

    def discussion_slide() -> None:
        questions = "".join(f"<li>{md.renderInline(q)}</li>" for q, _ in discussion)
        answers = "".join(f"<p><b>{md.renderInline(q)}</b></p>{md.render(a)}" for q, a in discussion)
        # an end-of-chapter exercise the plan does together before the discussion: its slides come after this one
        before = [name for name, _ in cues.get("exercises", [])]
        detours.extend(before)
        detour = [f"<p><i>Before the discussion</i>: {md.renderInline(name)}, on slide {DETOUR.format(name)} "
                  "further on (its cue is there); then back to this slide.</p>" for name in before]  # fmt: skip
        sections.append([Slide([Piece(f"<h2>Discussion</h2><ol class=\"discussion\">{questions}</ol>", 500)],
                               [*detour, *script("discussion"), answers])])  # fmt: skip

    cuts_here = slide_cuts(stem)
    used = [0] * len(cuts_here)
    answer_note = ""  # a prediction's answer: in the notes of the slide that measures it, not of the question's
    cells = list(zip(complete.cells, student.cells, strict=True))
    for k, (cell, theirs) in enumerate(cells):
        if cell.cell_type == "markdown":
            # Where the editions' text differs (the title's banner, the exercises' introduction), the student
            # edition's describes what the deck shows: stubs. Its banner, about editions, is left out.
            source = _fix_links(EDITION_BANNER.sub("", theirs.source if theirs.source != cell.source else cell.source))
            for name, data in cell.get("attachments", {}).items():  # images pasted into the cell: inlined
                mime, encoded = next(iter(data.items()))
                source = source.replace(f"attachment:{name}", f"data:{mime};base64,{_text(encoded)}")
            blocks = _blocks(source)
            heading = re.match(r"^(#{1,2}) (.*)", blocks[0]) if blocks else None
            # before a prediction's cell: its question (the paragraph that says to predict) and its choices
            poll = k + 1 < len(cells) and "check_prediction(" in cells[k + 1][0].source
            exercise_next = k + 1 < len(cells) and "exercise" in cells[k + 1][0].metadata.get("tags", [])
            asked = next((i for i, b in enumerate(blocks) if re.search(r"\bpredict", b, re.I)), None) if poll else None
            if heading and not discussed and heading.group(2).strip() in CLOSING_SECTIONS:
                discussion_slide()  # after the chapter's last section, before its pitfalls, summary and exercises
                discussed = True
            if heading or not sections:
                new_section()
                section_title = heading.group(2) if heading else section_title
                if heading and heading.group(1) == "##":
                    # the wrap-up ("show the Summary and the Pitfalls table") from the first of the two
                    key = "summary" if section_title.strip() == "Pitfalls" else _part_key(section_title)
                    sections[-1][0].notes += section_script(key)
                if heading and heading.group(1) == "#":
                    title = heading.group(2)
            for i, block in enumerate(blocks):
                # What must share this block's slide: a prediction's question, its choices (the blocks after it)
                # and its cell, so that the poll is read at once; a heading and what follows it (the next block,
                # or the code cell that comes next).
                if i == asked:
                    needed = sum(_prose_height(b) for b in blocks[i:]) + PREDICTION_ROOM
                elif block.lstrip().startswith("#") and not (i == 0 and heading):
                    needed = _prose_height(block) + (_prose_height(blocks[i + 1]) if i + 1 < len(blocks) else 150)
                elif i + 1 < len(blocks) and blocks[i + 1].lstrip().startswith("$$") and re.search(r"\w$", block):
                    needed = _prose_height(block) + _prose_height(blocks[i + 1])  # a sentence its formula ends
                else:
                    needed = 0
                if needed and len(sections[-1][-1].pieces) > 1 and sections[-1][-1].height + needed > BUDGET:
                    sections[-1].append(Slide([continued(" (continued)")]))
                if "![" in block and not sections[-1][-1].bare:  # a diagram fills its slide: its sentence stays
                    sections[-1].append(Slide([continued()]))
                # A long paragraph cut by hand (docs/slides/cuts.toml): the slide shows what it says, the speaker
                # notes keep the rest. Never a poll's question or choices, a cell that leads into an exercise, or
                # the closing sections.
                instructions = exercise_next and not poll  # the whole cell leads into the exercise below it
                polled = asked is not None and i >= asked  # the poll's question or one of its choices
                whole = instructions or section_title.strip() in CLOSING_SECTIONS or polled
                shown, rest = block, ""
                for n, cut in enumerate(cuts_here):
                    if _find(block, cut["after"]) is None:
                        continue
                    if whole:
                        raise SystemExit(f"{stem}: {CUTS.name} cuts a poll, an exercise or a closing section "
                                         f"after {cut['after']!r}")  # fmt: skip
                    used[n] += 1
                    shown, rest = slide_paragraph(block, cut)
                # a long list or table goes on over sub-slides, never a poll's choices or an exercise's instructions
                for part in [shown] if instructions or polled else split_long(shown, lambda b: _words(md.render(b))):
                    place(Piece(md.render(part), _prose_height(part)))
                if rest:
                    said = "goes on" if block.rstrip().endswith(rest) else "says, where the slide skips"
                    sections[-1][-1].notes.append(f"<p><i>The chapter {said}:</i> {md.renderInline(rest)}</p>")
            continue
        if cell.cell_type != "code":
            continue
        if not sections:
            new_section()
        tags = cell.metadata.get("tags", [])
        if "exercise" in tags:
            stub = _stub(theirs.source)
            solution = "".join(SOLUTION.findall(cell.source)).strip("\n")
            if "check_prediction(" in cell.source:
                place(code_piece(slide_code(stub), "predict"))
                verdict = "".join(_text(o.get("text", "")) for o in cell.get("outputs", [])).lstrip("✅ ")
                sections[-1][-1].notes.append(
                    "<p>Poll the class now; the answer is in the notes of the slides that measure it.</p>"
                )
                answer_note = (
                    f"<p><b>The prediction's answer</b>: <code>{html.escape(solution)}</code></p>"
                    f"<p>{html.escape(verdict.strip())}</p>" + _other_letters(cell.source)
                )
            else:
                place(code_piece(slide_code(stub), "exercise"))
                sections[-1][-1].notes.append(
                    "<p><b>Solution</b></p><pre><code>"
                    + highlight(solution, CellLexer(), HtmlFormatter(nowrap=True))
                    + "</code></pre>"
                )
            continue
        outputs = output_pieces(cell)
        below = sum(p.height for p in outputs)
        # a cell taller than a slide is cut between its statements, the output with the last part
        parts = code_parts(slide_code(cell.source), BUDGET - 40, min(below, (BUDGET - 40) // 2))
        code = code_piece(parts[0])
        total = code.height + (below if len(parts) == 1 else 0)
        slide = sections[-1][-1]
        # a cell and its outputs start a sub-slide together when they do not fit; a measurement always does, so
        # that its answer is not on the question's slide
        if slide.pieces and (slide.height + total > BUDGET or answer_note):
            sections[-1].append(Slide([continued(), *slide.take_lead_in()]))  # "Run it:" goes with what it runs
        place(code)
        for part in parts[1:]:  # a cell too tall for one slide: the rest of its code, then its output
            sections[-1].append(Slide([continued(" (the cell goes on)"), code_piece(part)]))
        for piece in outputs:
            place(piece)
        if answer_note:  # the first cell after the prediction measures it
            sections[-1][-1].notes.append(answer_note)
            answer_note = ""
    if not discussed:
        discussion_slide()
    for cut, count in zip(cuts_here, used, strict=True):
        if count != 1:
            raise SystemExit(f"{stem}: {CUTS.name}'s cut after {cut['after']!r} matches {count} paragraphs, not one")
    for index, (notes, parts, first) in later.items():
        place_cues(sections[index], notes, parts, first)
    # the Discussion slide's pointer to an exercise done together: the number the deck shows on that one's slide
    for name in detours:
        cue = f'<div class="cue"><p><b>{md.renderInline(name)}</b></p>'
        where = next(
            (f"{h + 1}.{v + 1}" if len(section) > 1 else f"{h + 1}"
             for h, section in enumerate(sections) for v, slide in enumerate(section) if cue in "".join(slide.notes)),
            None,
        )  # fmt: skip
        if where is None:
            raise SystemExit(f"{stem}: the cue of {name!r} is on no slide")
        for section in sections:
            for slide in section:
                slide.notes = [note.replace(DETOUR.format(name), where) for note in slide.notes]

    body = []
    count = 0
    for section in sections:
        inner = []
        for slide in section:
            count += 1
            notes = f'<aside class="notes">{"".join(slide.notes)}</aside>' if slide.notes else ""
            inner.append(f"<section>{''.join(p.html for p in slide.pieces)}{notes}</section>")
        body.append(inner[0] if len(inner) == 1 else f"<section>{''.join(inner)}</section>")
    page = TEMPLATE.format(title=html.escape(title or stem), slides="\n".join(body), width=WIDTH, height=HEIGHT)
    # the checkers' ✅ is an emoji, an empty box on a machine without an emoji font; ✓ is in every text font
    page = page.replace("\u2705", '<span class="pass">\u2713</span>')
    return page, count


TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · slides</title>
<link rel="stylesheet" href="reveal/dist/reset.css">
<link rel="stylesheet" href="reveal/dist/reveal.css">
<link rel="stylesheet" href="reveal/dist/theme/white.css">
<link rel="stylesheet" href="slides.css">
</head>
<body>
<div class="reveal"><div class="slides">
{slides}
</div></div>
<script src="reveal/dist/reveal.js"></script>
<script src="reveal/plugin/notes/notes.js"></script>
<script>
Reveal.initialize({{
  width: {width}, height: {height}, margin: 0.02, minScale: 0.2, maxScale: 1.5,
  center: false, hash: true, slideNumber: "h.v", transition: "none", plugins: [RevealNotes]
}});
// Each scrolling box (long code or output) as tall as the room its slide leaves, not a fixed height: it shows all
// it holds where the slide has room, and scrolls only what does not fit, the code before the output. A figure alone
// on its slide grows into the room left, as wide as the slide allows: legible from the back of the room.
function fitBoxes(slide) {{
  if (!slide) return;
  // a formula wider than the slide is drawn smaller until it fits, not cut at the right edge
  slide.querySelectorAll("div.math").forEach(d => {{
    d.style.fontSize = "";
    if (d.scrollWidth > d.clientWidth + 1) d.style.fontSize = Math.max(0.55, d.clientWidth / d.scrollWidth - 0.01) + "em";
  }});
  const boxes = Array.from(slide.querySelectorAll(":scope > .scroll"));
  boxes.forEach(b => {{ b.style.maxHeight = "none"; }});
  const outer = el => {{ const st = getComputedStyle(el); return el.offsetHeight + parseFloat(st.marginTop) + parseFloat(st.marginBottom); }};
  const parts = Array.from(slide.children).filter(el => el.tagName !== "ASIDE");
  const over = parts.reduce((sum, el) => sum + outer(el), 0) - (Reveal.getConfig().height - 24);
  const figures = Array.from(slide.querySelectorAll("img.figure"));
  if (over < 0 && figures.length === 1 && !figures[0].dataset.grown) {{
    const img = figures[0], w = img.offsetWidth, h = img.offsetHeight;
    const grow = Math.min((h - over) / h, (Reveal.getConfig().width - 40) / w);
    if (grow > 1.02) {{
      img.style.width = Math.floor(w * grow) + "px";
      img.style.height = Math.floor(h * grow) + "px";
      img.dataset.grown = "1";
    }}
  }}
  if (over <= 0 || !boxes.length) return;
  // the code gives up its room first: the output is what the class is shown
  let left = over;
  for (const b of [...boxes.filter(b => b.classList.contains("code")), ...boxes.filter(b => !b.classList.contains("code"))]) {{
    const cut = Math.min(left, Math.max(0, b.offsetHeight - 120));
    b.style.maxHeight = (b.offsetHeight - cut) + "px";
    left -= cut;
  }}
}}
Reveal.on("ready", e => fitBoxes(e.currentSlide));
Reveal.on("slidechanged", e => fitBoxes(e.currentSlide));
</script>
</body>
</html>
"""


def index_page(decks: list[tuple[str, str, int]]) -> str:
    rows = "".join(
        f'<li><a href="{stem}.html">{html.escape(title)}</a> <span class="count">({n} slides)</span></li>'
        for stem, title, n in decks
    )
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>Transformers from Scratch · slides'
        '</title><link rel="stylesheet" href="slides.css"></head><body class="index"><h1>Transformers from Scratch'
        f"</h1><p>One deck per chapter. Arrows move between slides; <kbd>s</kbd> opens the speaker notes "
        f"(solutions, prediction answers, discussion answers); <kbd>Esc</kbd> shows the overview.</p><ol>{rows}"
        "</ol></body></html>\n"
    )


def copy_assets(out: Path) -> None:
    import sphinx_revealjs

    reveal = Path(sphinx_revealjs.__file__).parent / "_static" / "revealjs"
    target = out / "reveal"
    shutil.rmtree(target, ignore_errors=True)
    for part in ("dist/reset.css", "dist/reveal.css", "dist/reveal.js", "dist/theme/white.css",
                 "dist/theme/fonts/source-sans-pro", "plugin/notes/notes.js", "LICENSE"):  # fmt: skip
        source, dest = reveal / part, target / part
        dest.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy)(source, dest)
    import matplotlib

    fonts = out / "fonts"
    fonts.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSerif.ttf", fonts)
    css = (ROOT / "docs" / "slides" / "slides.css").read_text()
    css += "\n/* Pygments */\n" + HtmlFormatter(style="default").get_style_defs(".code pre")
    (out / "slides.css").write_text(css)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", help="chapter numbers (default: all)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    copy_assets(out)
    md = markdown_renderer()
    stems = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    chosen = [s for s in stems if not args.chapters or s[:2] in args.chapters]
    decks = []
    for stem in stems:
        title = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4).cells[0].source.splitlines()[0].lstrip("# ")
        if stem in chosen:
            page, count = build_deck(stem, md)
            (out / f"{stem}.html").write_text(page)
            print(f"{stem}: {count} slides")
        else:
            count = 0
        decks.append((stem, title, count))
    (out / "index.html").write_text(index_page(decks))
    print(f"decks in {out}/ (open index.html)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
