"""Put the measured run times into the lesson plans (docs/lessons/NN_*.md, each section's) and the README (each
notebook's, through tools/figures.py).

    python tools/lesson_times.py            # rewrite the tables between the run-times markers
    python tools/lesson_times.py --check    # exit 1 if a table differs from docs/lessons/run_times.json

The times come from ``notebooks/build.py --execute`` (``make outputs``), which records how long each ``##``
section's cells ran and on which machine, in docs/lessons/run_times.json. A plan's table is never written by hand.
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


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


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
        new = updated(text, times[path.stem], skip)
        if new != text:
            if args.check:
                stale.append(f"{path.name}: its run-times table differs from run_times.json")
            else:
                path.write_text(new)
                print(f"{path.name}: run times written")
    # The README's table of run times is rendered from the same file, with the others it shows (tools/figures.py).
    figures = subprocess.run([sys.executable, str(ROOT / "tools" / "figures.py"), *(["--check"] if args.check else [])])
    if figures.returncode:
        stale.append("README.md: a table differs from its results file (python tools/figures.py)")
    for problem in stale:
        print(problem)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
