"""Open every notebook in headless Chromium with the network cut, and check that its images and charts appear.

A classroom often has poor internet. This script exports each committed notebook to HTML (nbconvert's
JupyterLab template) and loads it in Chromium with every network request refused. In the page it counts:

- images (plots, diagrams, the static twin of each chart): each must have loaded;
- interactive Altair charts: Altair's default output fetches Vega from a CDN, so offline these are expected to
  fail (their static twins stand in). The same notebook is then exported again with each chart drawn the way
  ``course_utils.use_offline_charts()`` draws it (Vega inlined), and there every chart must be drawn.

It saves a full-page screenshot of both versions of each notebook and a JSON report, and exits 1 if anything
is missing. Needs Chromium (Debian: ``apt-get install chromium``) and ``pip install -e ".[lab]"``.

    python tests/browser/check_offline.py [01 03 ...] [--out build/browser-check]
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
REPORT_ID = "browser-check-report"
WIDTH = 1100  # pixels: the page is laid out, measured and photographed at this width
# Runs in the page once everything that can load has loaded; Chromium's virtual time makes the wait instant.
REPORT_JS = f"""
<script>
window.addEventListener("load", function () {{
  setTimeout(function () {{
    const images = Array.from(document.querySelectorAll("img"));
    const charts = Array.from(document.querySelectorAll('div[id^="altair-viz-"], div[id^="course-chart-"]'));
    const report = {{
      images: images.length,
      // An image that links to a web page (the "Open in Colab" badge) needs the network as its link does.
      images_missing: images.filter(i => !(i.complete && i.naturalWidth > 0))
                            .filter(i => !(/^https?:/.test(i.src) && i.closest("a[href^='http']")))
                            .map(i => (i.alt || i.src).slice(0, 80)),
      online_only: images.filter(i => /^https?:/.test(i.src) && i.closest("a[href^='http']")).length,
      charts: charts.length,
      charts_drawn: charts.filter(c => c.querySelector("svg, canvas") && !c.querySelector(".error")).length,
      chart_errors: charts.map(c => (c.querySelector(".error, pre") || {{}}).textContent).filter(Boolean)
                          .map(t => t.slice(0, 120)),
      chart_tops: charts.map(c => Math.round(c.getBoundingClientRect().top + window.scrollY)),
      height: document.documentElement.scrollHeight,
    }};
    const pre = document.createElement("pre");
    pre.id = "{REPORT_ID}";
    pre.textContent = JSON.stringify(report);
    document.body.appendChild(pre);
  }}, 5000);
}});
</script>
"""
REPORT = re.compile(rf'<pre id="{REPORT_ID}">(.*?)</pre>', re.S)


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        if found := shutil.which(name):
            return found
    sys.exit("Chromium not found: install it (Debian/Ubuntu: `sudo apt-get install chromium`)")


def chromium(browser: str, page: Path, *extra: str) -> str:
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",  # every request refused: offline
        "--virtual-time-budget=30000", *extra, page.as_uri(),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    return done.stdout


def export(nb: nbformat.NotebookNode) -> str:
    from nbconvert import HTMLExporter

    html, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    head, tail = html.rsplit("</body>", 1)  # the last one: Vega's bundle has the string "</body>" in it
    return head + REPORT_JS + "</body>" + tail


def offline_version(nb: nbformat.NotebookNode, builder, offline_html) -> nbformat.NotebookNode:
    """The notebook as a kernel with ``use_offline_charts()`` would have drawn it."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if (spec := builder.altair_spec(output)) is not None:
                output["data"]["text/html"] = offline_html(spec)
    return nb


def check(path: Path, browser: str, out: Path, builder, offline_html) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    twins = sum(1 for c in nb.cells for o in c.get("outputs", []) if o.get("metadata", {}).get(builder.TWIN))
    problems = []
    results = {}
    for variant, version in (("as-committed", nb), ("offline-charts", offline_version(nb, builder, offline_html))):
        page = out / f"{path.stem}.{variant}.html"
        page.write_text(export(version))
        found = REPORT.search(chromium(browser, page, "--dump-dom", f"--window-size={WIDTH},1000"))
        if not found:
            problems.append(f"{variant}: the page never finished loading")
            continue
        report = json.loads(found.group(1))
        results[variant] = report
        height = min(report["height"] + 40, 16000)
        chromium(browser, page, f"--screenshot={out / f'{path.stem}.{variant}.png'}", f"--window-size={WIDTH},{height}")
        if report["images_missing"]:
            problems.append(f"{variant}: images that did not appear: {report['images_missing']}")
        if variant == "offline-charts" and report["charts_drawn"] != report["charts"]:
            problems.append(
                f"{variant}: {report['charts_drawn']}/{report['charts']} charts drawn {report['chart_errors']}"
            )
    committed = results.get("as-committed", {})
    if committed and committed["charts"] - committed["charts_drawn"] > twins:
        problems.append(f"as-committed: {committed['charts']} charts, only {twins} static twins")
    results["static_twins"] = twins
    (out / f"{path.stem}.json").write_text(json.dumps(results, indent=1))
    local = committed.get("images", 0) - committed.get("online_only", 0)
    line = (
        f"{path.stem:<26} images {local - len(committed.get('images_missing', [])):>2}/{local:<2}"
        f" (+{committed.get('online_only', 0)} web link)  charts drawn offline: default output "
        f"{committed.get('charts_drawn', 0)}/{committed.get('charts', 0)}, static twins {twins}, "
        f"inlined {results.get('offline-charts', {}).get('charts_drawn', 0)}/{results.get('offline-charts', {}).get('charts', 0)}"
    )
    print(line + ("  OK" if not problems else "  FAILED"), flush=True)
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("only", nargs="*", help="notebook name prefixes, e.g. 01 03 (default: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "browser-check", help="screenshots and reports")
    args = parser.parse_args()
    browser = find_chromium()
    builder = load(NOTEBOOKS / "build.py", "build")
    from course_utils.teaching._vega import offline_html

    args.out.mkdir(parents=True, exist_ok=True)
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    paths = [p for p in paths if not args.only or any(p.stem.startswith(o) for o in args.only)]
    failed = {}
    for path in paths:
        if problems := check(path, browser, args.out, builder, offline_html):
            failed[path.name] = problems
    for name, problems in failed.items():
        print(f"{name}:\n  " + "\n  ".join(problems))
    print(f"screenshots and reports in {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
