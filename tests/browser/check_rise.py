"""Start a RISE presentation from JupyterLab with the network cut, as an instructor would in a classroom.

``make lab`` installs ``jupyterlab-rise``, which bundles reveal.js; its presentation is served by JupyterLab itself at
``/rise/<notebook>`` (the "Render as slideshow" button, or alt+r, opens that page). This script starts JupyterLab on a
free local port, opens that page for a chapter in headless Chromium at 1280×800 with every request to another host
refused, and checks that a deck starts (reveal.js slides, not the notebook page), that the arrow keys move through
it, that formulas are typeset (MathJax, bundled with JupyterLab), and that no request failed and no script raised.
It saves a screenshot of the first slides in build/rise-check/ and exits 1 on any problem.

    python tests/browser/check_rise.py [--chapter 04_encoder] [--out build/rise-check]

Needs Chromium (Debian/Ubuntu: ``apt-get install chromium``) and ``pip install -e ".[lab,browser]"``.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BADGE = "https://colab.research.google.com/assets/colab-badge.svg"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chapter", default="04_encoder")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "rise-check")
    args = parser.parse_args()
    browser_path = next(
        (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None
    )
    if browser_path is None:
        sys.exit("Chromium not found: install it (Debian/Ubuntu: `sudo apt-get install chromium`)")
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    lab = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", f"--port={port}", "--ip=127.0.0.1",
         "--ServerApp.token=", "--ServerApp.password=", f"--ServerApp.root_dir={ROOT / 'notebooks'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    failures: list[str] = []
    try:
        for _ in range(120):  # JupyterLab takes a few seconds to start on a 2-core machine
            try:
                urllib.request.urlopen(f"{base}/api", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            sys.exit("JupyterLab did not start within a minute")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=browser_path, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            requests: list[str] = []
            errors: list[str] = []
            known: list[str] = []  # errors of RISE's own code, with the presentation working: reported, not failed

            def offline(route):  # only the local JupyterLab answers
                url = route.request.url
                if url.startswith(base) or url.startswith("data:"):
                    route.continue_()
                else:
                    if url != BADGE:  # the "Open in Colab" badge needs the network, as its link does
                        requests.append(url[:100])
                    route.abort("internetdisconnected")

            def failed(request) -> None:
                url = request.url
                optional = url.startswith(f"{base}/files/") and url.endswith(".css")  # RISE's optional custom CSS
                if not (optional or url == BADGE or url.startswith("attachment:") or url in requests):
                    requests.append(f"{url[:100]} ({request.failure})")

            page.route("**/*", offline)
            page.on("requestfailed", failed)
            page.on("pageerror", lambda e: errors.append(str(e)[:200]))

            def console(message) -> None:
                text = message.text
                if message.type != "error" or text.startswith("Failed to load resource"):  # requests: judged above
                    return
                if "Refused to apply style" in text and "/files/" in text and ".css'" in text:  # RISE's optional CSS
                    return
                url = message.location.get("url", "")
                if ("Maximum call stack size exceeded" in text and "/static/rise/" in url) or (
                    "doesn't exist in shared scope" in text and "jupyterlab-manager" in text
                ):  # RISE's own bundle: a recursion in the Jupyter UI toolkit's FAST web components that RISE's page
                    # loads (jupyterlab_rise's 4437.bundle.js, @microsoft/fast-foundation), and ipywidgets' manager in
                    # RISE's page (jupyterlab-contrib/rise#119); neither comes from the course's notebooks:
                    known.append(text.splitlines()[0][:120])  # counted and shown; the checks below still require
                    return  # that the deck appears, moves and typesets
                errors.append(f"console: {text[:200]}")

            page.on("console", console)
            page.goto(f"{base}/rise/{args.chapter}.ipynb", wait_until="load")
            try:
                page.wait_for_selector(".reveal .slides section", timeout=60000)
            except Exception:
                failures.append("no reveal.js deck appeared")
            page.wait_for_timeout(3000)
            first = page.evaluate("() => document.querySelectorAll('.reveal .slides > section').length")
            page.screenshot(path=args.out / f"{args.chapter}.rise-0.png")
            # The arrow key, to the end of the deck: until the slide shown (reveal.js's address) stops changing.
            seen: list[str] = []
            for step in range(300):
                where = page.evaluate("() => location.hash")
                if seen and where == seen[-1]:
                    break
                seen.append(where)
                page.keyboard.press("ArrowRight")
                page.wait_for_timeout(250)
                if step < 4:
                    page.screenshot(path=args.out / f"{args.chapter}.rise-{step + 1}.png")
            math = page.evaluate("() => document.querySelectorAll('mjx-container, .MathJax').length")
            raw = page.evaluate(
                "() => (document.querySelector('.reveal').innerText"
                ".match(/\\$\\$|\\\\(frac|sqrt|mathrm|text|operatorname|begin|left|right|cdot|top)\\b/) || [])[0]"
            )
            print(f"RISE on {args.chapter}: {first} slides, {len(set(seen))} reached with the arrow key, "
                  f"{math} formulas typeset, {len(requests)} requests refused or failed, {len(errors)} script errors")  # fmt: skip
            for text in sorted(set(known)):  # what RISE and ipywidgets' extension log, told apart from failures
                print(f"  known, not failed ({known.count(text)}x): {text}")
            if first < 5:
                failures.append(f"only {first} slides: not a deck")
            if len(set(seen)) < first:
                failures.append(f"the arrow key reaches {len(set(seen))} of the {first} slides")
            if raw:
                failures.append(f"raw LaTeX on a slide: {raw!r}")
            if not math:
                failures.append("no formula was typeset: MathJax did not run offline")
            failures += [f"request: {r}" for r in requests] + [f"script error: {e}" for e in errors]
            browser.close()
    finally:
        lab.terminate()
        lab.wait(timeout=20)
    for failure in failures:
        print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
