"""Open every page of the built website (``make site``) in headless Chromium with no network, as a reader would.

For each page it checks that the page loads with no request that failed or left the machine, no console error and
no uncaught script error; that every image loaded and every interactive chart drew; that no formula failed to
typeset. Then that the search page finds a term of chapter 05, and that in dark mode the text stays readable
(contrast of at least 4.5:1) and every figure sits on its white card. It saves screenshots of three pages at phone
and laptop widths (and one in dark mode) and a JSON report in build/site-check/, and exits 1 on any problem.

Needs Chromium (Debian/Ubuntu: ``apt-get install chromium``) and Playwright's Python package
(``pip install -e ".[site]"``); Playwright drives the system's Chromium, it downloads no browser.

    python tests/browser/check_site.py [--out build/site-check] [--only 05_decoder index]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SITE = ROOT / "build" / "site"
SEARCH_TERM, SEARCH_CHAPTER = "teacher forcing", "05_decoder"
HIDDEN_TERM = "discussion"  # in every lesson plan: the students' search finds no page of the Teaching section
SHOTS = ["index", "chapters/05_decoder", "chapters/10_gpt2_and_llama"]
WIDTHS = {"phone": (390, 844), "laptop": (1366, 900)}

# Runs in the page once it has loaded: what a reader would miss.
INSPECT = """async () => {
  const mathFont = await document.fonts.load('16px "Course Math"', "x").then(f => f.length > 0, () => false);
  const images = Array.from(document.querySelectorAll("article img, .bd-article img"));
  const charts = Array.from(document.querySelectorAll(".course-chart"));
  return {
    images: images.length,
    images_missing: images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => (i.alt || i.src).slice(-80)),
    output_images: document.querySelectorAll(".cell_output img").length,
    charts: charts.length,
    charts_drawn: charts.filter(c => c.querySelector("svg, canvas")).length,
    math_font: mathFont,  // the math font shipped with the site loads (a reader without one of their own gets it)
    // formulas folded away (an exercise's hidden solution) are not on screen: counted as neither
    math_sources: Array.from(document.querySelectorAll(".bd-article span.math, .bd-article div.math"))
                       .filter(m => !m.closest("details:not([open])")).length,
    // a formula is drawn when its MathML has a size (a browser without MathML shows it as flat text)
    math: Array.from(document.querySelectorAll(".bd-article span.math math, .bd-article div.math math"))
                .filter(m => !m.closest("details:not([open])") && m.getBoundingClientRect().height > 0).length,
    math_errors: Array.from(document.querySelectorAll("merror")).map(e => e.textContent.slice(0, 80)),
    // a display formula wider than the column must start at its left edge (and scroll), not be cut off there
    math_cut: Array.from(document.querySelectorAll(".bd-article div.math > math"))
                   .filter(m => m.getBoundingClientRect().left < m.parentElement.getBoundingClientRect().left - 1)
                   .map(m => m.textContent.slice(0, 60)),
  };
}"""

# Relative luminance and contrast ratio (WCAG 2) of the body text on its background, and the figures' backgrounds.
DARK = """() => {
  const rgb = s => (s.match(/[\\d.]+/g) || [0, 0, 0]).slice(0, 3).map(Number);
  const lum = c => {
    const [r, g, b] = c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const p = document.querySelector(".bd-article p") || document.body;
  const fg = rgb(getComputedStyle(p).color);
  const bg = rgb(getComputedStyle(document.body).backgroundColor);
  const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
  const cards = Array.from(document.querySelectorAll(".cell_output img, .cell_output .course-chart"));
  return {
    theme: document.documentElement.dataset.theme,
    contrast: (hi + 0.05) / (lo + 0.05),
    background_luminance: lum(bg),
    figures: cards.length,
    figures_not_on_white: cards.filter(c => getComputedStyle(c).backgroundColor !== "rgb(255, 255, 255)").length,
  };
}"""


def check_page(context, page_path: Path) -> dict:
    page = context.new_page()
    problems: dict[str, list[str]] = {"requests": [], "console": []}
    page.on("requestfailed", lambda r: problems["requests"].append(f"{r.url[-100:]} ({r.failure})"))
    page.on("console", lambda m: problems["console"].append(m.text[:200]) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems["console"].append(f"uncaught: {str(e)[:200]}"))
    page.goto(page_path.as_uri(), wait_until="load")
    page.wait_for_timeout(300)
    if page.query_selector(".course-chart, span.math, div.math"):  # charts and formulas draw after the load event
        page.wait_for_timeout(1000)
    found = page.evaluate(INSPECT)
    page.close()
    return {**found, **problems}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site-check")
    parser.add_argument("--only", nargs="*", default=[], help="check only the pages whose path contains one of these")
    args = parser.parse_args()
    if not (SITE / "index.html").exists():
        sys.exit("no site in build/site: run `make site` first")
    browser_path = next(
        (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None
    )
    if browser_path is None:
        sys.exit("Chromium not found: install it (Debian/Ubuntu: `sudo apt-get install chromium`)")
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    pages = sorted(p for p in SITE.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts)
    pages = [p for p in pages if not args.only or any(o in str(p) for o in args.only)]
    report: dict = {"pages": {}, "failures": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox", "--disable-gpu"])
        context = browser.new_context(viewport={"width": 1366, "height": 900})

        def offline(route):  # the network is cut: only the site's own files load
            if route.request.url.startswith("file://"):
                route.continue_()
            else:
                route.abort("internetdisconnected")

        context.route("**/*", offline)
        for path in pages:
            name = str(path.relative_to(SITE))
            result = check_page(context, path)
            report["pages"][name] = result
            for kind in ("requests", "console", "images_missing", "math_errors", "math_cut"):
                report["failures"] += [f"{name}: {kind}: {item}" for item in result[kind]]
            if result["math_sources"] and not result["math_font"]:
                report["failures"].append(f"{name}: the site's math font did not load")
            if result["math"] < result["math_sources"]:
                report["failures"].append(f"{name}: {result['math_sources'] - result['math']} formulas not typeset")
            staged = ROOT / "build" / "site-src" / path.relative_to(SITE).with_suffix(".ipynb")
            if staged.exists():  # every figure the notebook stores is on its page
                cells = json.loads(staged.read_text())["cells"]
                figures = sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))
                if result["output_images"] != figures:
                    report["failures"].append(f"{name}: {result['output_images']} figures shown of {figures} stored")
            if result["charts_drawn"] != result["charts"]:
                report["failures"].append(f"{name}: {result['charts'] - result['charts_drawn']} charts not drawn")
            print(f"{name:45} {result['images']:3} images, {result['charts']:2} charts, {result['math']:4} formulas, "
                  f"{len(result['requests']) + len(result['console'])} errors")  # fmt: skip

        # Search, as a reader types it in the search box.
        page = context.new_page()
        search_errors: list[str] = []
        page.on("console", lambda m: search_errors.append(m.text[:200]) if m.type == "error" else None)
        page.goto((SITE / "search.html").as_uri() + f"?q={SEARCH_TERM.replace(' ', '+')}", wait_until="load")
        page.wait_for_selector("#search-results ul li, ul.search li", timeout=20000)
        hits = page.eval_on_selector_all("#search-results ul li a, ul.search li a", "as => as.map(a => a.href)")
        report["search"] = {"term": SEARCH_TERM, "hits": len(hits)}
        if not any(SEARCH_CHAPTER in h for h in hits):
            report["failures"].append(f"search for {SEARCH_TERM!r} does not find chapter {SEARCH_CHAPTER}: {hits[:5]}")
        print(f"search {SEARCH_TERM!r}: {len(hits)} pages, chapter {SEARCH_CHAPTER} among them: "
              f"{any(SEARCH_CHAPTER in h for h in hits)}")  # fmt: skip
        page.goto((SITE / "search.html").as_uri() + f"?q={HIDDEN_TERM}", wait_until="load")
        page.wait_for_timeout(3000)
        hits = page.eval_on_selector_all("#search-results ul li a, ul.search li a", "as => as.map(a => a.href)")
        report["failures"] += [
            f"search for {HIDDEN_TERM!r} finds an instructors' page: {h}" for h in hits if "/teaching/" in h
        ]
        page.wait_for_timeout(1000)
        report["failures"] += [f"search page: console: {e}" for e in search_errors]
        page.close()

        # On a phone, no student's page is wider than the screen (a wide table or formula scrolls in its own box).
        page = browser.new_page(viewport=dict(zip(("width", "height"), WIDTHS["phone"], strict=True)))
        page.route("**/*", offline)
        for path in [SITE / "index.html", *sorted((SITE / "chapters").glob("*.html"))]:
            page.goto(path.as_uri(), wait_until="load")
            page.wait_for_timeout(300)
            wide = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            if wide > 1:
                report["failures"].append(f"{path.relative_to(SITE)}: {wide} px wider than a phone's screen")
        page.close()

        # The sidebar's toggle: on a phone it opens the chapters as a panel, on a laptop it folds the sidebar.
        for width, (w, h) in WIDTHS.items():
            page = browser.new_page(viewport={"width": w, "height": h})
            page.route("**/*", offline)
            page.goto((SITE / "chapters/05_decoder.html").as_uri(), wait_until="load")
            page.wait_for_timeout(500)
            visible = [t for t in page.query_selector_all(".primary-toggle") if t.is_visible()]
            if not visible:
                report["failures"].append(f"{width}: no visible sidebar toggle")
            else:
                visible[0].click()
                page.wait_for_timeout(500)
                opened = page.evaluate(
                    "() => { const m = document.querySelector('#pst-primary-sidebar-modal');"
                    " const s = document.querySelector('#pst-primary-sidebar');"
                    " return (m && m.open) || (s && s.classList.contains('pst-sidebar-hidden')); }"
                )
                if not opened:
                    report["failures"].append(f"{width}: the sidebar toggle does nothing")
                print(f"sidebar toggle at {width} width works: {bool(opened)}")
            page.close()

        # Screenshots at phone and laptop widths; dark mode checked on a chapter with figures and charts.
        for width, (w, h) in WIDTHS.items():
            page = browser.new_page(viewport={"width": w, "height": h})
            page.route("**/*", offline)
            for shot in SHOTS:
                page.goto((SITE / f"{shot}.html").as_uri(), wait_until="load")
                page.wait_for_timeout(1500)
                page.screenshot(path=args.out / f"{shot.replace('/', '_')}.{width}.png")
            page.close()
        page = browser.new_page(viewport={"width": 1366, "height": 900}, color_scheme="dark")
        page.route("**/*", offline)
        page.add_init_script("localStorage.setItem('theme', 'dark'); localStorage.setItem('mode', 'dark');")
        dark = {}
        for shot in [*SHOTS[1:], "chapters/01_attention", "chapters/03_positional_encoding"]:
            page.goto((SITE / f"{shot}.html").as_uri(), wait_until="load")
            page.wait_for_timeout(1500)
            dark[shot] = page.evaluate(DARK)
            if dark[shot]["theme"] != "dark" or dark[shot]["background_luminance"] > 0.1:
                report["failures"].append(f"{shot}: dark mode not applied ({dark[shot]})")
            if dark[shot]["contrast"] < 4.5:
                report["failures"].append(f"{shot}: dark-mode text contrast {dark[shot]['contrast']:.1f} < 4.5")
            if dark[shot]["figures_not_on_white"]:
                report["failures"].append(
                    f"{shot}: {dark[shot]['figures_not_on_white']} figures not on white in dark mode"
                )
        page.goto((SITE / "chapters/03_positional_encoding.html").as_uri(), wait_until="load")
        page.wait_for_timeout(1500)
        page.screenshot(path=args.out / "chapters_03_positional_encoding.dark.png")
        report["dark"] = dark
        print("dark mode:", {k: f"contrast {v['contrast']:.1f}, {v['figures']} figures" for k, v in dark.items()})
        browser.close()

    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    for failure in report["failures"]:
        print("FAIL", failure)
    print(f"{len(pages)} pages checked offline: {len(report['failures'])} problems; screenshots in {args.out}")
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
