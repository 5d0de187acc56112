"""Open every deck of ``make slides`` offline in headless Chromium at 1280×800, as an instructor's projector would.

For each deck it fails on a request that failed or left the machine, a console or script error, a deck that is not
a deck (reveal.js did not start), raw LaTeX on a slide (``$$``, ``\\frac``...: a formula not drawn), a MathML error,
an image that did not load, and a slide whose content is taller or wider than the 1280×800 canvas, except inside
the boxes that scroll on purpose (``.scroll``: long code and output); on code or output smaller than 16 px, and on
a figure whose smallest text (its ``data-text-px``, from the notebook's metadata) is under 18 px of the 1280x800
slide as it shows the figure. It checks that no solution and no prediction answer is on a slide (they are in the
speaker notes), and that the speaker notes are there. It saves a screenshot of every slide of the chapter 04 deck,
and the first slide of each other, in build/slides-check/, with a JSON report.

    python tests/browser/check_slides.py [--out build/slides-check] [--only 04 07]

Needs Chromium (Debian/Ubuntu: ``apt-get install chromium``) and Playwright (``pip install -e ".[browser]"``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from course_utils.teaching.plots import SLIDE_TEXT_PX  # a figure's smallest text on the slide, in px

ROOT = Path(__file__).resolve().parents[2]
SLIDES = ROOT / "build" / "slides"
SHOT_ALL = "04_encoder"

# Every slide, measured in the slide's own (unscaled) pixels.
INSPECT = """() => {
  const scale = Reveal.getScale();
  const width = Reveal.getConfig().width, height = Reveal.getConfig().height;
  const out = [];
  const sections = Array.from(document.querySelectorAll(".reveal .slides section"))
                        .filter(s => !s.querySelector(":scope > section"));  // a stack holds sub-slides
  for (const s of sections) {
    const idx = Reveal.getIndices(s);
    Reveal.slide(idx.h, idx.v || 0);
    const top = s.getBoundingClientRect().top, left = s.getBoundingClientRect().left;
    let bottom = 0, right = 0;
    const walk = el => {
      for (const child of el.children) {
        if (child.tagName === "ASIDE") continue;  // speaker notes
        const r = child.getBoundingClientRect();
        bottom = Math.max(bottom, (r.bottom - top) / scale);
        right = Math.max(right, (r.right - left) / scale);
        if (!child.classList.contains("scroll") && !child.matches("div.math")) walk(child);
      }
    };
    walk(s);
    const text = Array.from(s.querySelectorAll("p, li, td, th, h1, h2, h3, blockquote"))
                      .map(e => e.innerText).join("\\n");
    const raw = (text.match(/\\$\\$|\\\\(frac|sqrt|mathrm|text|begin|sum|left|right)\\b|\\$[^$\\s][^$]*\\$/) || [])[0];
    const boxes = Array.from(s.querySelectorAll(".scroll"));
    out.push({
      slide: `${idx.h}/${idx.v || 0}`, bottom: Math.round(bottom), right: Math.round(right),
      // a box that hides some of what it holds: downwards (it scrolls) and sideways (nothing should be)
      clipped: boxes.filter(b => b.scrollHeight > b.clientHeight + 2).map(b => b.textContent.trim().slice(0, 50)),
      cut_sideways: Array.from(s.querySelectorAll(".scroll, pre, table, div.math"))
                         .filter(b => b.scrollWidth > b.clientWidth + 2).map(b => b.textContent.trim().slice(0, 50)),
      raw_latex: raw || null,
      merror: s.querySelectorAll("merror").length,
      images_missing: Array.from(s.querySelectorAll("img")).filter(i => !(i.complete && i.naturalWidth > 0)).length,
      solution: /BEGIN SOLUTION|END SOLUTION/.test(Array.from(s.querySelectorAll(":scope > *:not(aside)"))
                                                    .map(e => e.textContent).join(" ")),
      notes: s.querySelector("aside.notes") ? s.querySelector("aside.notes").textContent.length : 0,
      answer_note: s.querySelector("aside.notes") ? /prediction's answer/.test(s.querySelector("aside.notes").textContent)
                                                  : false,
      prediction: !!s.querySelector(".badge") && s.querySelector(".badge").textContent === "predict",
      poll_question: Array.from(s.querySelectorAll("p, li")).some(p => /\\bpredict/i.test(p.textContent)),
      // a heading with nothing after it on its slide: its content is on the next
      orphan: (() => { const kids = Array.from(s.children).filter(e => e.tagName !== "ASIDE");
                       const last = kids[kids.length - 1];
                       return kids.length > 1 && !!last && /^H[1-4]$/.test(last.tagName) ? last.textContent.slice(0, 60) : null; })(),
      // the smallest code or printed output on the slide, in pixels of the screen (reveal.js scales the slide)
      code_px: Math.min(...Array.from(s.querySelectorAll(":scope > .code pre code, :scope > pre.output, :scope > pre code"))
                            .map(e => parseFloat(getComputedStyle(e).fontSize) * Reveal.getScale()), 99),
      // each output figure's smallest text, in pixels of the 1280x800 slide, as large as the slide shows the image
      figure_text_px: Array.from(s.querySelectorAll("img.figure")).map(i => i.dataset.textPx
        ? parseFloat(i.dataset.textPx) * i.getBoundingClientRect().width / scale / i.naturalWidth : null),
      prediction_shown: /my_prediction\\s*=\\s*["']/.test(Array.from(s.querySelectorAll(":scope > *:not(aside)"))
                                                          .map(e => e.textContent).join(" ")),
    });
  }
  Reveal.slide(0, 0);
  return {width, height, scale, ready: Reveal.isReady(), total: Reveal.getTotalSlides(), slides: out,
          notes_plugin: Reveal.hasPlugin("notes")};  // the speaker view ("s") comes from it
}"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "slides-check")
    parser.add_argument("--only", nargs="*", default=[], help="chapter numbers")
    args = parser.parse_args()
    if not (SLIDES / "index.html").exists():
        sys.exit("no decks in build/slides: run `make slides` first")
    browser_path = next(
        (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None
    )
    if browser_path is None:
        sys.exit("Chromium not found: install it (Debian/Ubuntu: `sudo apt-get install chromium`)")
    from playwright.sync_api import sync_playwright

    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    decks = sorted(p for p in SLIDES.glob("[0-9][0-9]_*.html") if not args.only or p.name[:2] in args.only)
    report: dict = {"decks": {}, "failures": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox", "--disable-gpu"])
        context = browser.new_context(viewport={"width": 1280, "height": 800})

        def offline(route):  # no network: only the deck's own files load
            if route.request.url.startswith("file://") or route.request.url.startswith("data:"):
                route.continue_()
            else:
                route.abort("internetdisconnected")

        context.route("**/*", offline)
        for deck in decks:
            page = context.new_page()
            problems: dict[str, list[str]] = {"requests": [], "console": []}
            page.on("requestfailed", lambda r: problems["requests"].append(f"{r.url[-100:]} ({r.failure})"))  # noqa: B023
            page.on("console", lambda m: problems["console"].append(m.text[:200]) if m.type == "error" else None)  # noqa: B023
            page.on("pageerror", lambda e: problems["console"].append(f"uncaught: {str(e)[:200]}"))  # noqa: B023
            page.goto(deck.as_uri(), wait_until="load")
            ready = page.evaluate("() => typeof Reveal !== 'undefined' && Reveal.isReady()")
            name = deck.stem
            failures: list[str] = [f"{name}: request: {r}" for r in problems["requests"]]
            failures += [f"{name}: console: {c}" for c in problems["console"]]
            seen = {kind: len(items) for kind, items in problems.items()}  # what came later is added at the end
            if not ready:
                report["failures"] += [*failures, f"{name}: reveal.js did not start: not a deck"]
                page.close()
                continue
            page.wait_for_timeout(300)
            found = page.evaluate(INSPECT)
            predictions = 0
            if not found["notes_plugin"]:
                failures.append(f"{name}: the speaker-notes plugin is not loaded: `s` would open nothing")
            for s in found["slides"]:
                where = f"{name} #/{s['slide']}"
                if s["code_px"] < 16:
                    failures.append(
                        f"{where}: code of {s['code_px']:.1f} px on the screen: 16 px or more for the back row"
                    )
                for px in s["figure_text_px"]:
                    if px is None:
                        failures.append(f"{where}: a figure without the size of its text (data-text-px): re-execute "
                                        "its chapter (course_utils.teaching.plots stores it)")  # fmt: skip
                    elif px < SLIDE_TEXT_PX - 0.25:
                        failures.append(f"{where}: a figure's text of {px:.1f} px on the slide: 18 px or more")
                if s["bottom"] > found["height"] + 1:
                    failures.append(f"{where}: {s['bottom']} px tall, the screen has {found['height']}")
                if s["right"] > found["width"] + 1:
                    failures.append(f"{where}: {s['right']} px wide, the screen has {found['width']}")
                if s["clipped"] and found["height"] - s["bottom"] > 150:
                    failures.append(f"{where}: a box hides part of its content while {found['height'] - s['bottom']} "
                                    f"px of the slide are empty: {s['clipped'][0]!r}")  # fmt: skip
                for cut in s["cut_sideways"]:
                    failures.append(f"{where}: cut at the right edge: {cut!r}")
                if s["raw_latex"]:
                    failures.append(f"{where}: raw LaTeX on the slide: {s['raw_latex'][:40]!r}")
                if s["merror"]:
                    failures.append(f"{where}: {s['merror']} formulas with a MathML error")
                if s["images_missing"]:
                    failures.append(f"{where}: {s['images_missing']} images not loaded")
                if s["solution"] or s["prediction_shown"]:
                    failures.append(f"{where}: a solution or a prediction's answer is on the slide")
                if s["orphan"]:
                    failures.append(f"{where}: the heading {s['orphan']!r} ends the slide, its content on the next")
                if s["prediction"] and not s["poll_question"]:
                    failures.append(f"{where}: the prediction's choices without its question (on the slide before)")
                if s["prediction"]:
                    predictions += 1
                    later = found["slides"][found["slides"].index(s) + 1 :]
                    if s["answer_note"] or not any(t["answer_note"] for t in later[:3]):
                        failures.append(f"{where}: the prediction's answer is not in the notes of the slides after it")
            tallest = max(s["bottom"] for s in found["slides"])
            figure_px = [px for s in found["slides"] for px in s["figure_text_px"] if px is not None]
            if name == SHOT_ALL:  # the speaker view, as `s` opens it, shows the notes of the measuring slide
                h, v = next(s["slide"] for s in found["slides"] if s["answer_note"]).split("/")
                page.evaluate(f"() => Reveal.slide({h}, {v})")
                with page.expect_popup(timeout=10000) as popup_info:
                    page.keyboard.press("s")
                speaker = popup_info.value
                notes_text = ""
                for _ in range(20):  # the speaker window fills its notes once it has loaded: later on a busy machine
                    speaker.wait_for_timeout(500)
                    notes_text = speaker.evaluate(
                        "() => Array.from(document.querySelectorAll('iframe, .speaker-controls-notes, body'))"
                        ".map(e => (e.contentDocument ? e.contentDocument.body.innerText : e.innerText)).join(' ')"
                    )
                    if "prediction's answer" in notes_text:
                        break
                speaker.screenshot(path=args.out / f"{name}.speaker-view.png")
                if "prediction's answer" not in notes_text:
                    failures.append(f"{name}: the speaker view does not show the prediction's answer")
                speaker.close()
            shots = found["slides"] if name == SHOT_ALL else found["slides"][:1]
            for s in shots:
                h, v = s["slide"].split("/")
                page.evaluate(f"() => Reveal.slide({h}, {v})")
                page.wait_for_timeout(50)
                page.screenshot(path=args.out / f"{name}.{h}-{v}.png")
            # requests that failed and errors logged while the slides were visited, the speaker view opened and the
            # screenshots taken: as much a failure as one at load
            failures += [f"{name}: request, later: {r}" for r in problems["requests"][seen["requests"] :]]
            failures += [f"{name}: console, later: {c}" for c in problems["console"][seen["console"] :]]
            smallest = f", figures' text {min(figure_px):.1f} px or more" if figure_px else ""
            print(f"{name:28} {len(found['slides']):3} slides, tallest {tallest} px, {predictions} predictions, "
                  f"{sum(bool(s['notes']) for s in found['slides'])} with notes{smallest}, {len(failures)} problems")  # fmt: skip
            report["decks"][name] = {"slides": len(found["slides"]), "tallest": tallest, "problems": failures,
                                     "figure_text_px": min(figure_px, default=None)}  # fmt: skip
            report["failures"] += failures
            page.close()
        browser.close()
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    for failure in report["failures"]:
        print("FAIL", failure)
    print(f"{len(decks)} decks, {len(report['failures'])} problems; screenshots in {args.out.relative_to(ROOT)}/")
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
