"""Score the course's probes on outside-style modules with planted bugs (tests/outside_style/cases.py).

Runs every case (an exception counts as a failure, with its text) and prints one row per case: its name, the cause
expected ("-" for a correct module), whether the probe flagged it, the causes it reports (``report.causes``, empty
where a report has no such field), a verdict, and the start of ``likely_bug`` for a human to judge. Then the totals.

    .venv/bin/python tools/score_probes.py                # every case
    .venv/bin/python tools/score_probes.py --only hf/     # the cases whose name contains "hf/"
    .venv/bin/python tools/score_probes.py --full         # also print each report's finding and likely_bug in full
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", metavar="SUBSTRING", default="", help="run only the cases whose name contains it")
    parser.add_argument("--full", action="store_true", help="print each report's finding and likely_bug in full")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)  # tiny models: a second thread only adds overhead (60x slower on a busy machine)
    from tests.outside_style.cases import CASES

    cases = [c for c in CASES if args.only in c.name]
    if not cases:
        print(f"no case name contains {args.only!r}")
        return 1

    width = max(len(c.name) for c in cases)
    header = f"{'case':<{width}}  {'expected':<24} {'flag':<5} {'reported causes':<24} {'verdict':<12} likely_bug"
    print(header)
    print("-" * len(header))
    start = time.perf_counter()
    flagged_buggy = right_cause = false_alarms = errors = 0
    for case in cases:
        expected = case.cause or "-"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # log_softmax without dim warns, on purpose
                torch.manual_seed(0)
                report = case.run()
        except Exception as error:  # a case that crashes counts as a failure
            errors += 1
            text = f"{type(error).__name__}: {error}"
            print(f"{case.name:<{width}}  {expected:<24} {'?':<5} {'':<24} {'ERROR':<12} {text[:200]}")
            continue
        causes = tuple(getattr(report, "causes", ()) or ())
        flagged = bool(report.flagged)
        if case.buggy:
            flagged_buggy += flagged
            right = case.cause in causes
            right_cause += right
            if not flagged:
                verdict = "MISSED"
            elif right:
                verdict = "ok"
            elif hasattr(report, "causes"):
                verdict = "WRONG CAUSE"
            else:
                verdict = "flagged"  # no causes field yet: judge likely_bug by eye
        else:
            false_alarms += flagged
            verdict = "FALSE ALARM" if flagged else "ok"
        likely = " ".join(report.likely_bug.split())[:90]
        print(
            f"{case.name:<{width}}  {expected:<24} {'yes' if flagged else 'no':<5} {','.join(causes):<24} "
            f"{verdict:<12} {likely}"
        )
        if args.full:
            print(f"    finding:    {report.finding}")
            if report.likely_bug:
                print(f"    likely_bug: {report.likely_bug}")
    elapsed = time.perf_counter() - start

    buggy = sum(c.buggy for c in cases)
    correct = len(cases) - buggy
    print()
    print(f"cases: {len(cases)} ({buggy} buggy, {correct} correct), {elapsed:.1f} s")
    print(f"buggy cases flagged:  {flagged_buggy}/{buggy}")
    print(f"right cause:          {right_cause}/{buggy}")
    print(f"false alarms:         {false_alarms}/{correct}")
    print(f"errors:               {errors}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
