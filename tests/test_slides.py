"""`make slides`: one deck per chapter that a class can be shown, offline, without giving the answers away.

The headless-browser check (tests/browser/check_slides.py, in `make check-browser`) measures every slide at 1280x800;
these tests read the decks' HTML: nothing loaded from another host, no solution or prediction answer on a slide,
each of them in the speaker notes instead, and the lesson plans' discussion answers there too."""

import base64
import html
import importlib.util
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[1]
NOTES = re.compile(r'<aside class="notes">(.*?)</aside>', re.DOTALL)


def _tool(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# The decks are built once a run, by the tool itself (6 s): the tests that read them are in make test, not make quick.
SLOW = pytest.mark.slow


@pytest.fixture(scope="session")
def decks(tmp_path_factory, request):
    """The decks, built once for the whole run: under pytest-xdist the first worker to need them builds them in the
    folder the workers share, the others wait for it and read them."""
    shared = tmp_path_factory.getbasetemp()
    if hasattr(request.config, "workerinput"):  # a worker of pytest-xdist: its parent folder is this run's
        shared = shared.parent
    out = shared / "slides"
    with FileLock(str(shared / "slides.lock")):
        if not (out / "index.html").exists():
            done = subprocess.run([sys.executable, str(ROOT / "tools" / "build_slides.py"), "--out", str(out)],
                                  capture_output=True, text=True, check=False)  # fmt: skip
            assert done.returncode == 0, done.stderr[-2000:]
    return out


def chapters():
    return sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@SLOW
def test_every_chapter_has_a_deck_listed_on_the_index(decks):
    index = (decks / "index.html").read_text()
    for stem in chapters():
        assert (decks / f"{stem}.html").exists()
        assert f'href="{stem}.html"' in index


@SLOW
def test_a_deck_loads_nothing_from_another_host(decks):
    external = _tool("build_site").EXTERNAL
    for path in [*decks.glob("*.html"), *decks.rglob("*.css")]:
        found = external.search(path.read_text(errors="replace"))
        assert found is None, f"{path.name} loads {found.group(0)!r}"
    assert (decks / "reveal" / "dist" / "reveal.js").exists() and (decks / "reveal" / "plugin" / "notes").exists()


@SLOW
def test_no_line_of_code_on_a_deck_is_shown_as_a_syntax_error(decks):
    """A cell's ``!torchrun ...`` and ``%%writefile`` lines are IPython's, not errors: no red box on the screen."""
    for path in decks.glob("[0-9][0-9]_*.html"):
        errors = re.findall(r'<span class="err">([^<]*)</span>', path.read_text())
        assert not errors, f"{path.name}: {errors[:5]} highlighted as errors"


def _text(fragment):
    """What a reader sees of an HTML fragment: tags dropped, entities decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


@SLOW
@pytest.mark.parametrize("stem", chapters())
def test_solutions_and_prediction_answers_are_in_the_notes_only(decks, stem):
    page = (decks / f"{stem}.html").read_text()
    shown, notes = _text(NOTES.sub("", page)), _text(" ".join(NOTES.findall(page)))
    assert "BEGIN SOLUTION" not in page
    assert "my_prediction = None" in shown and not re.search(r"my_prediction = [\"']", shown)
    complete = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    student = nbformat.read(ROOT / "notebooks" / "student" / f"{stem}.ipynb", as_version=4)
    elsewhere = " ".join(
        " ".join(c.source.split()) for c in complete.cells if "exercise" not in c.metadata.get("tags", [])
    )
    exercises = 0
    for cell, stub in zip(complete.cells, student.cells, strict=True):
        if "exercise" not in cell.metadata.get("tags", []):
            continue
        exercises += 1
        solution = re.search(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.DOTALL).group(1)
        lines = [" ".join(line.split()) for line in solution.splitlines() if line.strip() and line not in stub.source]
        own = [line for line in lines if line not in elsewhere]  # what only the solution says
        assert own, f"{stem}: a solution with nothing of its own"
        for line in own:
            assert line not in shown, f"{stem}: a solution line is on a slide: {line}"
        assert own[0] in notes, f"{stem}: the solution is not in the speaker notes: {own[0]}"
    assert exercises >= 2


@SLOW
def test_the_discussion_answers_are_speaker_notes(decks):
    lessons = sorted((ROOT / "docs" / "lessons").glob("[0-9][0-9]_*.md"))
    if not lessons:
        pytest.skip("no lesson plans yet")
    build = _tool("build_slides")
    for lesson in lessons:
        pairs = build.lesson_discussion(lesson.stem)
        assert len(pairs) >= 2, f"{lesson.name}: fewer than two discussion questions with answers"
        page = (decks / f"{lesson.stem}.html").read_text()
        last = page.rsplit("<h2>Discussion</h2>", 1)
        assert len(last) == 2, f"{lesson.stem}: no discussion slide"
        slide, notes = last[1].split('<aside class="notes">', 1)
        first_answer_words = " ".join(pairs[0][1].split()[:4])
        assert first_answer_words not in slide
        assert len(notes) > 200


def test_the_lesson_plans_run_times_are_the_measured_ones():
    lessons = sorted((ROOT / "docs" / "lessons").glob("[0-9][0-9]_*.md"))
    if not lessons:
        pytest.skip("no lesson plans yet")
    times = json.loads((ROOT / "docs" / "lessons" / "run_times.json").read_text())
    assert _tool("lesson_times").main(["--check"]) == 0
    for lesson in lessons:
        assert lesson.stem in times
        plan = lesson.read_text()
        minutes = [(int(a), int(b)) for a, b in re.findall(r"^\|\s*(\d+)\s*[–-]\s*(\d+)\s*\|", plan, re.MULTILINE)]
        assert minutes and minutes[0][0] == 0 and minutes[-1][1] == 90, f"{lesson.name}: the plan is not 0-90 min"
        assert all(b == c for (_, b), (c, _) in itertools.pairwise(minutes)), f"{lesson.name}: gaps"


def test_a_time_said_in_words_is_the_measured_one():
    """The plans and the guide say how long a notebook or a section runs only between markers that
    tools/lesson_times.py fills from run_times.json: a re-measured run cannot leave "under a minute" behind."""
    times_tool = _tool("lesson_times")
    times = {"07_gpt": {"whole": 94.1, "sections": [["Setup", 3.7], ["5. Training", 69.7], ["15. More", 2.0]]},
             "12_fine_tuning": {"whole": 224.2, "sections": [["4. Instruction tuning", 167.6]]}}  # fmt: skip
    said = [times_tool.in_words(s) for s in (4, 28.4, 39.2, 62, 94.1, 107.1, 122.2, 167.6, 224.2)]
    assert said == ["seconds", "about half a minute", "under a minute", "about a minute", "about a minute and a half",
                    "under two minutes", "about two minutes", "about three minutes", "about four minutes"]  # fmt: skip
    assert times_tool.in_words(700) == "about 12 minutes"  # past ten minutes, in figures
    text = "training <!-- time:07_gpt#5 -->under a minute<!-- /time -->; <!-- time:longest -->x<!-- /time --> at most"
    assert times_tool.phrased(text, times) == (
        "training <!-- time:07_gpt#5 -->about a minute<!-- /time -->; <!-- time:longest -->about four minutes"
        "<!-- /time --> at most"
    )
    assert (
        _tool("lesson_quotes").unquoted(times_tool.phrased(text, times))
        == "training about a minute; about four minutes at most"
    )
    for wrong in ("07_gpt#6", "07_gpt#1", "08_translation"):  # no such section ("15." is not "1."), or notebook
        with pytest.raises(SystemExit, match="no"):
            times_tool.phrased(f"<!-- time:{wrong} --><!-- /time -->", times)
    for page in [ROOT / "docs" / "instructor_guide.md", *(ROOT / "docs" / "lessons").glob("[0-9][0-9]_*.md")]:
        bare = re.sub(r"<!-- time:.*?<!-- /time -->", "", page.read_text(), flags=re.DOTALL)
        machine_time = (
            r"(under|about|over) (a|two|three|four) minutes?\b[^.|]{0,40}(CPU|cores|machine time|table below)"
        )
        assert not re.search(machine_time, bare), f"{page.name}: a run time in words outside a time marker"


@SLOW
def test_the_complete_edition_a_deck_names_is_the_notebook_and_every_box_is_fitted_to_its_slide(decks):
    for deck in sorted(decks.glob("[0-9][0-9]_*.html")):
        page = deck.read_text()
        links = re.findall(r'<a href="([^"]*)">complete edition</a>', page)
        assert links and all(link.endswith(f"notebooks/{deck.stem}.ipynb") for link in links), (deck.stem, links)
        assert 'Reveal.on("slidechanged", e => fitBoxes(e.currentSlide))' in page


@SLOW
def test_the_speaker_notes_carry_every_part_of_the_lesson_plans_script_with_its_minutes(decks):
    for plan in sorted((ROOT / "docs" / "lessons").glob("[0-9][0-9]_*.md")):
        parts = re.findall(r"^\*\*(\d+)–(\d+) · (.*?)\.?\*\*", plan.read_text(), re.MULTILINE)
        page = (decks / f"{plan.stem}.html").read_text()
        cues = re.findall(r'<div class="cue"><p><b>minutes (\d+)–(\d+) · (Exercise \d)?', page)
        parts = [(a, b, name[:10] if re.match(r"Exercise \d", name) else "") for a, b, name in parts]
        assert sorted(cues) == sorted(parts) and parts, plan.stem  # every part, once
        # in the plan's order, but for an end-of-chapter exercise done together: on its slide in the Exercises section
        together = [part for part in parts if part[2]]
        assert [c for c in cues if c not in together] == [p for p in parts if p not in together], plan.stem
        if together:  # in the plan's order, after every part the plan has before them (the wrap-up may follow)
            assert [c for c in cues if c in together] == together, plan.stem
            earlier = [k for k, c in enumerate(cues) if c not in together and int(c[0]) < int(together[0][0])]
            assert max(earlier, default=-1) < min(cues.index(c) for c in together), plan.stem


@SLOW
def test_no_slide_holds_only_headings(decks):
    """A figure or a tall box goes on the slide of the heading before it, not on the next one, which would leave a
    slide with the heading alone."""
    for deck in sorted(decks.glob("[0-9][0-9]_*.html")):
        for slide in re.findall(r"<section>(?!<section>)(.*?)</section>", deck.read_text(), re.DOTALL):
            shown = re.sub(r'<aside class="notes">.*?</aside>', "", slide, flags=re.DOTALL)
            rest = re.sub(r'<h\d[^>]*>.*?</h\d>|<p class="continued">.*?</p>', "", shown, flags=re.DOTALL)
            assert rest.strip(), (deck.stem, _text(shown)[:80])


def test_a_sections_later_cues_go_where_their_topics_begin():
    """A section's first cue is on its first slide; each later one on the slide of the first text holding a name its
    title quotes, or of the first ### heading after the previous cue's that shares a word with its title, or of the
    first text holding the first name its script quotes; else as far on as its minutes are into the section's rest."""
    build = _tool("build_slides")
    Slide, Piece = build.Slide, build.Piece
    slides = [
        Slide([Piece("<h2>1. Tokens</h2><p>Bytes first; merges and scoring come later.</p>", 100)]),
        Slide([Piece("<p>Your turn: <code>my_byte_table</code></p>", 100)]),
        Slide([Piece("<h3>Pieces: where merges never cross</h3>", 100), Piece("<h3>Scoring, by rank</h3>", 50)]),
        Slide([Piece("<p>Predict, then run.</p><pre>my_prediction = None</pre>", 100)]),
        Slide([Piece("<pre>learn_bpe(lines, 500)</pre>", 100)]),
        Slide([Piece("<p>a table</p>", 100)]),
        Slide([Piece("<p>another table</p>", 100)]),
    ]
    parts = [
        ("minutes 0–10 · §1 Tokens", "Say: bytes."),
        ("minutes 10–20 · `my_byte_table`", "In-class exercise."),
        ("minutes 20–30 · §1 Pieces and merges", "Run live."),
        ("minutes 30–32 · §1 The scores", "Run live."),
        ("minutes 32–40 · Prediction", "Poll."),
        ("minutes 40–44 · §1 The trainer", "Run live: `learn_bpe` against the other."),
        ("minutes 44–48 · §1 What it learned", "Say what the tables say."),
        ("minutes 48–50 · §1 Nothing found", "Say."),
    ]
    notes = [f'<div class="cue">{name}</div>' for name, _ in parts[1:]]
    slides[2].notes.append("<p>a solution</p>")
    build.place_cues(slides, notes, parts)
    where = [next(k for k, s in enumerate(slides) if note in s.notes) for note in notes]
    assert where == [1, 2, 2, 3, 4, 5, 6]
    assert slides[2].notes == [*notes[1:3], "<p>a solution</p>"]  # the cues before the slide's other notes


def test_an_exercise_done_together_is_cued_on_its_own_slide():
    build = _tool("build_slides")
    Slide, Piece = build.Slide, build.Piece
    slides = [
        Slide([Piece("<h2>Exercises</h2><p>Carry it further.</p>", 100)]),
        Slide([Piece("<p><strong>Exercise 1.</strong> Write <code>my_mask</code>.</p>", 100)]),
        Slide([Piece("<p><strong>Exercise 2: padding.</strong> Write <code>my_padding</code>.</p>", 100)]),
    ]
    parts = [("minutes 70–75 · Exercise 2 together", "`my_padding(tokens)`: compare with the pad id.")]
    build.place_cues(slides, ["<div>cue</div>"], parts, first=False)
    assert [s.notes for s in slides] == [[], [], ["<div>cue</div>"]]


@SLOW
def test_the_discussion_slide_names_the_slide_of_an_exercise_done_before_it(decks):
    """A lesson plan that does an end-of-chapter exercise together before the discussion (01, 03, 05): the
    Discussion slide's notes give the number the deck shows on that exercise's slide, whose notes hold its cue."""
    pointed = 0
    for stem in chapters():
        page = (decks / f"{stem}.html").read_text()
        top = re.findall(r"<section>(<section>.*?</section>)</section>|<section>((?:(?!<section>).)*?)</section>",
                         page.split('<div class="slides">', 1)[1], re.DOTALL)  # fmt: skip
        numbered = {}
        for h, (stack, alone) in enumerate(top, start=1):
            leaves = re.findall(r"<section>(.*?)</section>", stack, re.DOTALL) if stack else [alone]
            for v, leaf in enumerate(leaves, start=1):
                numbered[f"{h}.{v}" if stack else f"{h}"] = leaf
        for name, number in re.findall(r"<i>Before the discussion</i>: (.*?), on slide ([\d.]+) further on", page):
            pointed += 1
            assert f'<div class="cue"><p><b>{name}</b></p>' in numbered[number], (stem, name, number)
    assert pointed >= 3


def test_a_sentence_that_introduces_code_goes_to_the_code_s_slide():
    """A paragraph ending in a colon ("One optimizer step:") is not left at the foot of a slide whose next one
    shows the code it introduces; it stays where moving it would leave only headings behind."""
    build = _tool("build_slides")
    Slide, Piece = build.Slide, build.Piece
    slide = Slide([Piece("<h2>Training</h2>", 60), Piece("<p>A loss.</p>", 40), Piece("<p>One step:</p>\n", 40)])
    assert [p.html for p in slide.take_lead_in()] == ["<p>One step:</p>\n"] and len(slide.pieces) == 2
    assert slide.take_lead_in() == []  # "A loss." ends with a full stop
    alone = Slide([Piece("<h2>Training</h2>", 60), Piece("<p>One step:</p>", 40)])
    assert alone.take_lead_in() == [] and len(alone.pieces) == 2


def test_a_code_cell_taller_than_a_slide_is_cut_between_its_statements_the_output_with_the_last_part():
    build = _tool("build_slides")
    helper = "def helper(x):\n" + "".join(f"    x = x + {i}\n" for i in range(12)) + "    return x"
    loop = (
        "# then run it\nfor step in range(3):\n    print(helper(step))\n\n    # a blank line inside: no cut\n    pass"
    )
    source = f"{helper}\n\n\n{loop}"
    assert build.code_parts(source, 2000, 100) == [source]  # fits: whole
    room = 24 + build.CODE_LINE * 15
    assert build.code_parts(source, room, 100) == [helper, loop]  # before the loop and its comment, never inside
    assert build.code_parts(helper, 100, 0) == [helper]  # one statement: whole, and its box scrolls
    # no blank line between statements: cut between them all the same, into parts as even as they can be
    lines = [f"x{i} = {i}" for i in range(30)]
    parts = build.code_parts("\n".join(lines), room, 0)
    assert "\n".join(parts) == "\n".join(lines) and len(parts) == 2  # 15 lines to a part
    assert max(p.count("\n") for p in parts) - min(p.count("\n") for p in parts) <= 1
    magic = "%%writefile job.py\nimport torch\n" + "\n".join(lines)  # a cell magic: cut as the Python it holds
    assert build.code_parts(magic, room, 0)[0].startswith("%%writefile job.py\nimport torch")


def test_a_slide_shows_an_import_list_on_one_wrapped_line_and_no_formatter_notes():
    build = _tool("build_slides")
    source = "from course_utils import (\n    History,\n    train,\n)\nx = f(1,  2)  # fmt: skip\nimport torch\n"
    assert build.slide_code(source) == "from course_utils import (History, train)\nx = f(1,  2)\nimport torch\n"
    kept = "from a import (\n    b,  # why b\n)\n"
    assert build.slide_code(kept) == kept  # a list with comments stays as written


def _blank_png(width, height):
    """A white PNG of that size, base64 as a notebook stores it."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def test_a_figure_drawn_panel_by_panel_for_a_projector_gets_a_slide_per_panel():
    """An output whose metadata holds ``projector_panels`` (a grid too small on a slide) is shown panel by panel,
    each alone on its slide at its own size (drawn for it), not the grid."""
    build = _tool("build_slides")

    grid, panel = _blank_png(1200, 1150), _blank_png(700, 630)
    output = nbformat.v4.new_output(
        "display_data", data={"image/png": grid}, metadata={"projector_panels": [panel] * 3}
    )
    cell = nbformat.v4.new_code_cell("attention_grid(w)", outputs=[output])
    pieces = build.output_pieces(cell)
    assert len(pieces) == 3 and all(panel in p.html and grid not in p.html for p in pieces)
    assert all('style="width: 700px; height: 630px"' in p.html and p.height == build.BUDGET for p in pieces)
    plain = build.output_pieces(nbformat.v4.new_code_cell("plot()", outputs=[{**output, "metadata": {}}]))
    assert len(plain) == 1 and grid in plain[0].html


def test_a_figure_drawn_smaller_for_a_projector_replaces_it_on_the_slide_with_its_text_size():
    """An output whose metadata holds ``projector_png`` (the figure drawn smaller, its text as it is) is shown by
    that copy, enlarged to the slide; each figure carries the size of its smallest text for the browser check."""
    build = _tool("build_slides")

    wide, copy = _blank_png(1111, 331), _blank_png(820, 244)
    metadata = {"text_px": 13.2, "projector_png": copy, "projector_text_px": 13.2}
    output = nbformat.v4.new_output("display_data", data={"image/png": wide}, metadata=metadata)
    [piece] = build.output_pieces(nbformat.v4.new_code_cell("plot()", outputs=[output]))
    assert copy in piece.html and wide not in piece.html
    assert 'style="width: 1230px; height: 366px" data-text-px="13.2"' in piece.html  # 1.5 times: 19.8 px of text
    plain = {**output, "metadata": {"text_px": 15.3}}
    [piece] = build.output_pieces(nbformat.v4.new_code_cell("plot()", outputs=[plain]))
    assert wide in piece.html and 'style="width: 1240px; height: 369px" data-text-px="15.3"' in piece.html  # 1240 wide


def test_every_figure_in_the_decks_shows_its_smallest_text_at_18_px_or_more():
    """What the browser check measures at 1280x800, read from the committed notebooks: every figure a deck shows
    (a notebook's own, a chart's static twin, a grid's panels) knows its smallest text and shows it at 18 px or
    more, as large as its slide draws it."""
    build = _tool("build_slides")
    size = re.compile(r'width: (\d+)px; height: \d+px" data-text-px="([\d.]+)" src="data:image/png;base64,([^"]+)"')
    shown, small, unknown = 0, [], []
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for k, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type != "code":
                continue
            for piece in build.output_pieces(cell):
                if '<img class="figure"' not in piece.html:
                    continue
                shown += 1
                found = size.search(piece.html)
                if not found:
                    unknown.append(f"{path.stem} cell {k}")
                    continue
                width, text_px, png = int(found[1]), float(found[2]), found[3]
                natural = build._png_size(base64.b64decode(png))[0]
                if text_px * width / natural < 17.75:
                    small.append(f"{path.stem} cell {k}: {text_px * width / natural:.1f} px")
    assert shown > 30
    assert not unknown, f"figures without the size of their text (re-execute the chapter): {unknown}"
    assert not small, f"figures whose text is under 18 px on a slide: {small}"


def test_a_paragraph_cut_by_hand_shows_what_its_slide_says_and_the_notes_keep_the_rest():
    build = _tool("build_slides")
    block = (
        "Why divide?\nWithout it the softmax saturates. The derivation\ngoes on at length. So we divide by its root."
    )
    assert build.slide_paragraph(block, {"after": "the softmax saturates."}) == (
        "Why divide?\nWithout it the softmax saturates.",
        "The derivation\ngoes on at length. So we divide by its root.",
    )  # matched across the source's line breaks
    middle = {"after": "Without it the softmax saturates.", "resume": "So we divide"}
    assert build.slide_paragraph(block, middle) == (
        "Why divide?\nWithout it the softmax saturates. So we divide by its root.",
        "The derivation\ngoes on at length.",
    )  # the answer stays on the slide
    assert build.slide_paragraph(block, {"after": "not in it"}) == (block, "")


def test_every_cut_names_one_paragraph_of_its_chapter(tmp_path, monkeypatch):
    """A cut whose text the chapter no longer has (or has twice) fails the deck's build, naming it."""
    build = _tool("build_slides")
    assert set(build.tomllib.loads(build.CUTS.read_text())) <= set(chapters())
    stale = tmp_path / "cuts.toml"
    stale.write_text("[[05_decoder]]\nafter = 'a sentence no chapter has.'\n")
    monkeypatch.setattr(build, "CUTS", stale)
    with pytest.raises(
        SystemExit, match=re.escape("05_decoder: cuts.toml's cut after 'a sentence no chapter has.' matches 0")
    ):
        build.build_deck("05_decoder", build.markdown_renderer())


@SLOW
def test_the_decks_cut_long_paragraphs_but_never_a_polls_question_or_choices(decks):
    page = (decks / "07_gpt.html").read_text()
    assert "<i>The chapter goes on:</i>" in page
    slide = next(
        s for s in re.findall(r"<section>(?!<section>)(.*?)</section>", page, re.DOTALL) if "Predict, then run" in s
    )
    assert all(f"({letter})" in slide.split("<aside")[0] for letter in "abcd")


@SLOW
def test_the_checkers_verdicts_show_without_an_emoji_font(decks):
    pages = [deck.read_text() for deck in sorted(decks.glob("[0-9][0-9]_*.html"))]
    assert not any("\u2705" in page for page in pages)  # ✅: an empty box where no emoji font is installed
    assert '<span class="pass">\u2713</span>' in (decks / "09_bug_lab.html").read_text()  # its probes' verdicts


@SLOW
def test_a_slide_holds_at_most_a_listening_share_of_prose(decks):
    """Past ``WORDS`` words of prose a class reads the slide instead of listening: a slide takes a paragraph only while
    it stays within them, and a list or a table goes on over sub-slides. The builder never cuts a paragraph by itself:
    one longer than ``WORDS`` is cut by hand in docs/slides/cuts.toml, or, where a slide shows it whole (an exercise's
    instructions, a poll's question, the closing sections), made two paragraphs in the chapter."""
    build = _tool("build_slides")
    for path in decks.glob("[0-9][0-9]_*.html"):
        text = NOTES.sub("", path.read_text())
        for slide in re.findall(r"<section(?:(?!<section).)*?</section>", text, re.DOTALL):
            blocks = re.findall(r"<(?:p|ul|ol|table)\b.*?</(?:p|ul|ol|table)>", slide, re.DOTALL)
            prose: list[str] = []
            for block in blocks:  # a sentence that introduces a list is one block with it, as the builder cuts them
                if prose and re.match(r"<[uo]l\b", block) and prose[-1].endswith(":</p>"):
                    prose[-1] += block
                elif not block.startswith('<p class="continued"'):
                    prose.append(block)
            words = sum(build._words(b) for b in prose)
            assert words <= build.WORDS, (
                f"{path.name}: a slide of {words} words in {len(prose)} blocks: {html.unescape(prose[0])[:120]}"
            )


def test_the_word_count_of_a_slide_reads_prose_not_code_or_figures():
    build = _tool("build_slides")
    slide = build.Slide([build.Piece("<p>one <code>two</code> three</p>", 50), build.Piece("<pre>a b c d</pre>", 50),
                         build.Piece('<img class="figure" alt="a long text alternative">', 300),
                         build.Piece('<p>a formula <math><mi>x</mi><mo>+</mo><mi>y</mi></math> counts once</p>', 40)])  # fmt: skip
    assert slide.words == 3 + 5


def test_a_long_list_or_table_is_cut_between_items_or_rows_into_parts_of_about_equal_length():
    build = _tool("build_slides")

    def words(block):
        return len(block.split())

    item = " ".join(["word"] * 60)
    listed = "Three things to know:\n\n" + "\n".join(
        f"{n}. {item}\n   {item}" for n in range(1, 5)
    )  # 4 items, 120 each
    parts = build.split_long(listed, words)
    assert len(parts) == 4 and "\n".join(parts) == listed  # 4 items of 120 words: no two fit on one slide
    assert parts[0].startswith("Three things to know:\n\n1. ")  # the sentence that introduces it stays with its start
    assert parts[1].startswith("2. ") and parts[2].startswith("3. ")  # numbers kept: the next part starts at 2
    assert all(words(p) <= build.WORDS for p in parts)
    six = "- " + "\n- ".join([item] * 6)  # 366 words: two parts of three items, not 5 + 1
    assert [p.count("\n- ") + 1 for p in build.split_long(six, words)] == [3, 3]
    nested = "- " + item + "\n  - a nested item\n- " + item + "\n  - " + item + "\n- " + item + "\n- " + item
    assert [p.split("\n")[0][:6] for p in build.split_long(nested, words)] == ["- word", "- word"]  # at its own level

    header = "| Mistake | What happens | Fix |\n|---|---|---|\n"
    rows = [f"| {n} {' '.join(['x'] * 40)} | y | z |" for n in range(8)]
    parts = build.split_long(header + "\n".join(rows), words)
    assert len(parts) == 2 and all(p.startswith(header) for p in parts)  # each part repeats the header
    assert [r for p in parts for r in p.splitlines()[2:]] == rows

    paragraph = " ".join(["word"] * 300)
    assert build.split_long(paragraph, words) == [paragraph]  # a paragraph is cut by hand, in cuts.toml, or not at all
    assert build.split_long(listed, lambda b: 10) == [listed]  # within WORDS: whole
