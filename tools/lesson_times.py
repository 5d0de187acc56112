"""Put the measured run times into the lesson plans (docs/lessons/NN_*.md, each section's) and the README (each
notebook's, through tools/figures.py), and say them in words in the plans and the instructor guide.

    python tools/lesson_times.py            # rewrite the tables and the phrases between their markers
    python tools/lesson_times.py --check    # exit 1 if one differs from docs/lessons/run_times.json

The times come from ``notebooks/build.py --execute`` (``make outputs``), which records how long each ``##``
section's cells ran and on which machine, in docs/lessons/run_times.json. A plan's table is never written by hand,
nor is a time said in words: ``<!-- time:07_gpt -->...<!-- /time -->`` holds how long notebook 07 runs, as
``in_words`` says it ("about a minute and a half"), ``<!-- time:07_gpt#5 -->`` how long its section 5's cells run,
and ``<!-- time:longest -->`` the longest notebook's time.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "docs" / "lessons"
START, END = "<!-- run-times:start -->", "<!-- run-times:end -->"
PHRASE = re.compile(r"<!-- time:([\w#]+) -->(.*?)<!-- /time -->", re.DOTALL)
GUIDE = ROOT / "docs" / "instructor_guide.md"


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def in_words(seconds: float) -> str:
    """A run time as a sentence says it, close enough to hold on another laptop of the same kind."""
    if seconds < 15:
        return "seconds"
    for below, words in ((35, "about half a minute"), (50, "under a minute"), (75, "about a minute"),
                         (105, "about a minute and a half"), (120, "under two minutes")):  # fmt: skip
        if seconds < below:
            return words
    count = round(seconds / 60)
    said = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    return f"about {said[count - 2] if count <= 10 else count} minutes"


def phrase_seconds(key: str, times: dict) -> float:
    """The seconds a marker's key names: a notebook's whole run, one of its sections' (``NN_name#k``: the section
    whose title starts with ``k.``), or the longest notebook's (``longest``)."""
    if key == "longest":
        return max(entry["whole"] for entry in times.values())
    stem, _, number = key.partition("#")
    if stem not in times:
        raise SystemExit(f"<!-- time:{key} -->: no notebook {stem} in run_times.json")
    if not number:
        return times[stem]["whole"]
    found = [seconds for title, seconds in times[stem]["sections"] if title.startswith(f"{number}. ")]
    if len(found) != 1:
        raise SystemExit(f"<!-- time:{key} -->: {stem} has no section {number}")
    return found[0]


def phrased(text: str, times: dict) -> str:
    """``text`` with every time marker's phrase said anew from ``times``."""
    return PHRASE.sub(lambda m: f"<!-- time:{m[1]} -->{in_words(phrase_seconds(m[1], times))}<!-- /time -->", text)


def table(entry: dict, skip_training: bool = False) -> str:
    rows = [f"| {section} | {_seconds(seconds)} |" for section, seconds in entry["sections"]]
    total = sum(seconds for _, seconds in entry["sections"])
    return "\n".join(
        [
            "| Section | Its cells run in |",
            "| --- | ---: |",
            *rows,
            f"| all the cells | {_seconds(total)} |",
            f"| **the whole notebook, the kernel's start included** (the README's figure) | **{_seconds(entry['whole'])}** |",
            "",
            f"Measured by `make outputs` on {entry['machine']}"
            + (f" ({entry['kernels']} kernels)" if entry.get("kernels") else "")
            + (
                ", training included\n(with `SKIP_TRAINING` the training cells load shipped weights instead)."
                if skip_training
                else "."
            ),
        ]
    )


def updated(text: str, entry: dict, skip_training: bool = False) -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(text):
        raise SystemExit(f"no {START} ... {END} markers")
    return pattern.sub(lambda _: f"{START}\n{table(entry, skip_training)}\n{END}", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    times = json.loads((LESSONS / "run_times.json").read_text())
    stale = []
    for path in sorted(LESSONS.glob("[0-9][0-9]_*.md")):
        if path.stem not in times:
            stale.append(f"{path.name}: no measured times (run `make outputs`)")
            continue
        text = path.read_text()
        source = ROOT / "notebooks" / "src" / f"{path.stem}.py"
        skip = source.exists() and "SKIP_TRAINING" in source.read_text()
        new = phrased(updated(text, times[path.stem], skip), times)
        if new != text:
            if args.check:
                stale.append(f"{path.name}: its run-times table, or a time said in words, differs from run_times.json")
            else:
                path.write_text(new)
                print(f"{path.name}: run times written")
    text = GUIDE.read_text()
    if (new := phrased(text, times)) != text:
        if args.check:
            stale.append(f"{GUIDE.name}: a time said in words differs from run_times.json")
        else:
            GUIDE.write_text(new)
            print(f"{GUIDE.name}: run times written")
    # The README's table of run times is rendered from the same file, with the others it shows (tools/figures.py).
    figures = subprocess.run([sys.executable, str(ROOT / "tools" / "figures.py"), *(["--check"] if args.check else [])])
    if figures.returncode:
        stale.append("README.md: a table differs from its results file (python tools/figures.py)")
    for problem in stale:
        print(problem)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
