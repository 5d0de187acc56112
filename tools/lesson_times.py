"""Put the measured run times into the lesson plans (docs/lessons/NN_*.md, each section's) and the README (each
notebook's).

    python tools/lesson_times.py            # rewrite the tables between the run-times markers
    python tools/lesson_times.py --check    # exit 1 if a table differs from docs/lessons/run_times.json

The times come from ``notebooks/build.py --execute`` (``make outputs``), which records how long each ``##``
section's cells ran and on which machine, in docs/lessons/run_times.json. A plan's table is never written by hand.
"""

from __future__ import annotations

import argparse
import json
import re
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


README = ROOT / "README.md"
README_ROW = re.compile(r"^\| CPU, 2 cores \|.*\|$", re.MULTILINE)


def readme_row(times: dict) -> str:
    """The README's row of whole-notebook run times, from the same measurements as the lesson plans."""
    return "| CPU, 2 cores | " + " | ".join(f"{times[stem]['whole']:.0f} s" for stem in sorted(times)) + " |"


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
    readme = README.read_text()
    row = readme_row(times)
    if not README_ROW.search(readme):
        stale.append("README.md: no row '| CPU, 2 cores | ...' in its table of run times")
    elif README_ROW.search(readme).group(0) != row:  # pyright: ignore[reportOptionalMemberAccess]
        if args.check:
            stale.append("README.md: its run times differ from run_times.json")
        else:
            README.write_text(README_ROW.sub(row, readme))
            print("README.md: run times written")
    for problem in stale:
        print(problem)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
