"""The figures a lesson plan quotes from its chapter's saved run, rewritten from the committed notebook's outputs.

In ``docs/lessons/NN_*.md`` a quoted figure stands between two markers, which Markdown shows as nothing::

    the share of real words per evaluation (<!-- quote:real-words -->32% → 81%<!-- /quote --> in the saved run)

``QUOTES`` says, for each chapter and name, which printed line of the complete edition (``notebooks/NN_*.ipynb``, as
``make outputs`` saved it) holds the figure and how the plan writes it. ``tests/test_figures.py`` fails when a plan's
figure differs from its notebook, names a quote this file does not know, or a known quote is missing from its plan;
and when a plan quotes, outside the markers, a number with decimals or a percentage that its chapter neither prints
nor says (a figure of an older run).
The run times of each section are ``tools/lesson_times.py``'s.

    python tools/lesson_quotes.py            # rewrite every quoted figure from the notebooks
    python tools/lesson_quotes.py --check    # exit 1, naming each figure that differs
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the other tools, also when loaded by path
from lesson_times import PHRASE

ROOT = Path(__file__).resolve().parent.parent
LESSONS = ROOT / "docs" / "lessons"
MARKED = re.compile(r"<!-- quote:(?P<name>[\w-]+) -->(?P<value>.*?)<!-- /quote -->", re.DOTALL)


def unquoted(text: str) -> str:
    """A plan's text with its quote markers (and lesson_times.py's time markers) taken out, each figure left as it
    reads."""
    return PHRASE.sub(lambda m: m[2], MARKED.sub(lambda m: m["value"], text))


def _said(stem: str, sources: bool = False, html: bool = False) -> str:
    """What a committed notebook printed (each stream and plain-text output, in order), and, if asked, its cells'
    sources and HTML outputs too."""
    nb = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    said = []
    for cell in nb["cells"]:
        if sources:
            said.append("".join(cell["source"]))
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            text = out.get("text") or data.get("text/plain", "") or (data.get("text/html", "") if html else "")
            said.append("".join(text) if isinstance(text, list) else text)
    return "\n".join(said)


def outputs(stem: str) -> str:
    """The text a committed notebook printed: every stream and plain-text output of its code cells, in order."""
    return _said(stem)


def _all(pattern: str, text: str) -> list[tuple[str, ...]]:
    found = [m.groups() for m in re.finditer(pattern, text, re.MULTILINE)]
    if not found:
        raise LookupError(f"no printed line matches {pattern!r}")
    return found


def one(pattern: str, form: str = "{0}") -> Callable[[str], str]:
    """The first line matching ``pattern``, its groups written by ``form``."""
    return lambda text: form.format(*_all(pattern, text)[0])


def each(pattern: str, sep: str = ", ", form: str = "{0}") -> Callable[[str], str]:
    """Every line matching ``pattern``, each written by ``form``, joined by ``sep``."""
    return lambda text: sep.join(form.format(*groups) for groups in _all(pattern, text))


def first_last(pattern: str, form: str) -> Callable[[str], str]:
    """The first and the last line matching ``pattern`` (one group each): ``form.format(first, last)``."""
    return lambda text: form.format(_all(pattern, text)[0][0], _all(pattern, text)[-1][0])


def _seconds_per_run(text: str) -> str:
    """Chapter 10's runs of 200 steps: the fastest and the slowest model's median step, times 200."""
    steps = int(_all(r"^GPT, seed 0: .*?\|\s*(\d+)/\d+", text)[0][0])
    ms = [float(m) for (m,) in _all(r"^\S.*? parameters, ([\d.]+) ms a step \(median of the seeds\)", text)]
    return f"{steps * min(ms) / 1000:.1f}–{steps * max(ms) / 1000:.1f} s"


def _previous_head(text: str) -> str:
    """Chapter 07's previous-character head: layer 1's head whose largest weight is 1 back in the most rows."""
    heads = _all(r"^layer 1, head (\d+): largest weight 1 back in +(\d+)% of rows", text)
    head, share = max(heads, key=lambda found: int(found[1]))
    return f"head {head}, {share}% of rows"


def _runs(text: str) -> str:
    return str(len(_all(r"^[\w ,-]+, seed \d+: .*?\|\s*\d+/\d+", text)))


def _changes(text: str) -> str:
    """Chapter 05's largest changes of outputs 0-3 without a mask, to two decimals."""
    found = _all(r"^without a mask +: largest change of outputs 0-5 = (.*)$", text)[0][0]
    return ", ".join(f"{float(v):.2f}" for v in found.split(", ")[:4])


def _failure_kinds(text: str) -> str:
    """Chapter 06's failures by kind, as the plan words them."""
    kinds = dict(re.findall(r"'([^']+)': (\d+)", _all(r"^\d+ failures, .*; wrong fields: (\{.*\})$", text)[0][0]))
    words = {
        "one digit wrong": "with one digit wrong",
        "same digits, other order": "with the right digits in the other order",
    }
    return ", ".join(f"{n} {words.get(kind, kind)}" for kind, n in kinds.items())


def _unseen_formats(text: str) -> str:
    """Chapter 06's held-out dates in formats the model never saw: right or wrong, in the cell's order."""
    return ", ".join(v for (v,) in _all(r"^ *'(?:2026\.01\.11|16th January 2026)' -> \S+ +(right|wrong)", text))


def _run(name: str, column: int) -> Callable[[str], str]:
    """A column of chapter 04's evaluation table (0 first loss, 1 final loss, 2 digits right, 3 sequences sorted)
    in the row of the run ``name``."""
    return one(rf"^{re.escape(name)} +([\d.]+) +([\d.]+) +(\d+%) +(\d+%)$", f"{{{column}}}")


def _sorter_seconds(text: str) -> str:
    """Chapter 04's three sorters: the shortest and the longest run, from their progress bars' steps and rate."""
    runs = _all(r"^(?:post|pre)-norm, [\w -]+: 100%.*?\| *(\d+)/\d+ \[[^,]*, ([\d.]+)it/s", text)
    seconds = [int(steps) / float(rate) for steps, rate in runs]
    return f"{min(seconds):.1f}–{max(seconds):.1f} s"


def _lowest_step(text: str) -> str:
    """Chapter 06's step-by-step decoding: the lowest probability the model gives the token it writes."""
    return min(_all(r"^ +reads <bos>.*-> writes \S+ +\(probability ([\d.]+)\)$", text), key=lambda p: float(p[0]))[0]


RUNS_04 = {"post": "post-norm, no warm-up", "warm": "post-norm, warm-up", "pre": "pre-norm, no warm-up"}


QUOTES: dict[str, dict[str, Callable[[str], str]]] = {
    "01_attention": {
        "time-ratios": one(r"^each doubling of T multiplies the time by\s+([\d., ]+?)\s*$"),
    },
    "02_multi_head_attention": {
        "look-back-weight": one(r"^head 1:\s+([\d.]+)"),
    },
    "04_encoder": {
        **{
            f"{key}-{figure}": _run(run, column)
            for key, run in RUNS_04.items()
            for figure, column in (("first", 0), ("final", 1), ("digits", 2), ("sorted", 3))
        },
        "sorter-seconds": _sorter_seconds,
        "focused-head": one(r"^most focused head: (layer \d+, head \d+), entropy"),
        "focused-entropy": one(r"^most focused head: .*, entropy ([\d.]+),"),
        "focused-keys": one(r"^most focused head: .*like an even split over ([\d.]+) of"),
    },
    "05_decoder": {
        "unmasked-changes": _changes,
        "mirror-head-0": one(r"^head 0: mean weight on the mirrored letter ([\d.]+)"),
        "mirror-head-1": one(r"^head 1: mean weight on the mirrored letter ([\d.]+)"),
        "reverser-last-loss": one(r"^first training loss [\d.]+ \(ln V = [\d.]+\); last ([\d.]+)$"),
    },
    "06_transformer": {
        "last-loss": one(r"^last loss ([\d.]+);"),
        "lowest-step": _lowest_step,
        "train-seconds": one(r"^trained \d+ steps in ([\d.]+) s on"),
        "unseen-formats": _unseen_formats,
        "failures": one(r"^(\d+) failures, "),
        "accuracy": one(r"^held-out exact-match accuracy: ([\d.]+%)"),
        "one-field": one(r"^\d+ failures, (\d+) of them with exactly one field wrong"),
        "failure-kinds": _failure_kinds,
        "year-share": one(r"^ year digits: (\d+%) on the year"),
        "year-uniform": one(r"^ year digits: .*\(a uniform spread: (\d+%)\)"),
        "year-lowest": one(r"^ year digits: .*; lowest format \w+: (\d+%)"),
        "weekday-from-year": one(r"attention on the weekday's letters: year digits (\d+%)"),
    },
    "08_translation": {
        "cache-seconds": one(
            r"^beam 4 on 25 sentences: ([\d.]+) s recomputing every prefix, ([\d.]+) s with caches",
            "{0} s recomputing against {1} s",
        ),
        "test-decoding": one(r"^test 2016, [\d,]+ sentences, decoded in ([\d.]+) s", "{0} s"),
        "live-seconds": one(r"^(\d+) steps in (\d+) s on \w+$", "{0} steps in {1} s"),
    },
    "09_bug_lab": {
        "bench-loss": one(r"^correct reverser: last training loss ([\d.]+), exact match [\d.]+% on held-out"),
        "causal-validation-loss": one(r"^ +causal: train loss [\d.]+, validation loss ([\d.]+);"),
        "encoder-queries-correct": one(r"^ +correct: last training loss ([\d.]+), exact match [\d.]+%$"),
        "encoder-queries-swapped": one(r"^queries from the encoder: last training loss ([\d.]+)"),
        "no-dim-batch": one(r"^ *log_softmax without dim: .*exact match ([\d.]+%) in one batch"),
        "no-dim-single": one(r"^ *log_softmax without dim: .*, ([\d.]+%) one string at a time"),
        "padding-correct": one(r"^keys axis \(correct\): exact match ([\d.]+%)"),
        "padding-correct-more": one(r"^keys axis \(correct\): .*after each source ([\d.]+%)"),
        "padding-buggy": one(r"^ *queries axis: exact match ([\d.]+%)"),
        "padding-buggy-more": one(r"^ *queries axis: .*after each source ([\d.]+%)"),
    },
    "07_gpt": {
        "cpu-parameters": one(r"^SHAKESPEARE_GPT_CPU: ([\d,]+) parameters"),
        "gpu-millions": one(r"^SHAKESPEARE_GPT_GPU: .* = ([\d.]+) M without", "{0} M"),
        "untrained-loss": one(r"^untrained loss: train ([\d.]+)"),
        "ln-vocab": one(r"^untrained loss: .*; ln (\d+) = ([\d.]+)", "$\\ln {0} = {1}$"),
        "steps": lambda text: format(int(_all(r"^(\d+) steps in \d+ s of training", text)[0][0]), ","),
        "training-seconds": one(r"^[\d,]+ steps in (\d+) s of training", "{0} s"),
        "gaps": each(r"^step +\d+: .*, gap ([\d.]+)$"),
        "best-validation": one(r"^best validation loss: ([\d.]+)"),
        "read-cpu": one(r"^this run: training predicts .*, ([\d.]+) times the length"),
        "read-gpu": one(r"^the GPU recipe: training predicts .*, ([\d.]+) times the length"),
        "real-words": first_last(r"^after +\d+ steps: (\d+)% of the sample's words are real", "{0}% → {1}%"),
        "greedy-share": one(r"^temperature 0\.02: .* in ([\d.]+)% of the draws", "{0}%"),
        "greedy-character": one(r"^temperature 0\.02: .*the most likely one, '(.)'", "'{0}'"),
        "previous-head": _previous_head,
        "speakers-unseen": one(
            r"^speakers .*: \d+ in the training part, (\d+) in the validation part, (\d+) of them never",
            "{1} of the {0}",
        ),
        "low-temperature-sample": one(r"^=== temperature 0\.2, top_k None.*\n.*\n(.+?) *$", '"{0}"'),
        "low-temperature-words": one(r"^=== temperature 0\.2, top_k None: .*?, (\d+)% real words", "{0}%"),
    },
    "10_gpt2_and_llama": {
        "exact-gelu-gap": one(r"^largest logit difference with chapter 07's exact GELU: (\S+)$"),
        "runs": _runs,
        "seconds-per-run": _seconds_per_run,
        "gpt-seeds": one(r"^GPT +validation loss by seed: ([\d., ]+); mean"),
        "llama-seeds": one(r"^Llama-style +validation loss by seed: ([\d., ]+); mean"),
        "gpt-mean": one(r"^GPT +validation loss by seed: .*; mean ([\d.]+)"),
        "llama-mean": one(r"^Llama-style +validation loss by seed: .*; mean ([\d.]+)"),
        "learned-mean": one(r"^Llama, learned +validation loss by seed: .*; mean ([\d.]+)"),
        "gpt-parameters": one(r"^GPT +([\d,]+) parameters"),
        "llama-parameters": one(r"^Llama-style +([\d,]+) parameters"),
    },
    "11_distributed": {
        "ddp-step": one(
            r"^one process on \w+ \(\w+\): ([\d.]+) ms a step plain, ([\d.]+) ms under DDP$", "{0} against {1} ms"
        ),
        "weights-moved": one(r"^the weights moved by up to (\S+) in \d+ steps"),
        "calls": one(r"^\{'without no_sync': (\d+), 'with no_sync': (\d+)\}$", "{0} to {1}"),
        "parameters": one(r"^the model: ([\d,]+) parameters"),
        "ddp-bytes": one(r"^the model: .*= ([\d,]+) bytes on every rank under DDP"),
        "held-parameters": one(r"^parameters +([\d,]+) +([\d,]+) ", "{0} and {1}"),
        "rank-0-share": one(r"^bytes on rank 0: [\d,]+ = ([\d.]+%)"),
        "loaded-loss": one(r"^loss on a new batch: loaded ([\d.]+)"),
        "checkpoint-step": one(r"the checkpoint on disk is at step (\d+) of \d+"),
        "same-batches-16": one(r"^ +batches of 16 rows \(2 x 8\): +largest difference (\S+)$"),
        "different-starts": one(r"^2\. different starts, averaged by hand: .* by up to ([\d.]+);"),
        "sgd-off": one(r"^3\. the sum never divided, with SGD .*of lr 0\.5: off by (\S+)$"),
        "adamw-off": one(r"^ +the sum never divided, with AdamW .*: off by (\S+) from lr 1e-3"),
        "adamw-twice": one(r"^ +the sum never divided, with AdamW .*, by (\S+) from lr 2e-3"),
        "dropout-seed-plus-rank": one(r"^4\. .* under the same seed, (\d+%) under the seed plus the rank"),
        "bytes-per-step": one(r"^bytes all-reduced per step: ([\d,]+) "),
        "ring-bytes": each(r"^N = +\d+: each rank sends .* = +([\d,]+) bytes$"),
        "estimate-gradients": one(r"^all-reduced per step: (\d+ MB) of gradients"),
        "estimate-buckets": one(r"^all-reduced per step: .*, in about (\d+) buckets"),
        "estimate-sent": one(r"^all-reduced per step: .*; each GPU sends (\d+ MB) in a ring over one node"),
        "estimate-compute": one(r"^compute per step: .* = ([\d.]+ ms) at"),
        "estimate-backward": one(r"^compute per step: .*, ([\d.]+ ms) of it the backward pass"),
        "estimate-nvlink": one(r"^one node: ([\d.]+ ms) over NVLink"),
        "estimate-infiniband": one(r"^2 nodes, a 400 Gb/s InfiniBand port per GPU: ([\d.]+ ms),"),
        "estimate-ethernet": one(r"^2 nodes, one 100 Gb/s Ethernet port per node: ([\d.]+ ms),"),
        "estimate-ring": one(r"^  a ring through all 16 instead: .*, ([\d.]+ ms) on the network, a 400 Gb/s"),
    },
}


def plan(stem: str) -> Path:
    return LESSONS / f"{stem}.md"


def rewrite(text: str, stem: str, printed: str) -> tuple[str, list[str]]:
    """``text`` (a plan) with each quoted figure as its notebook printed it, and what was wrong in it."""
    known = QUOTES.get(stem, {})
    problems: list[str] = []

    def replace(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in known:
            problems.append(f"{stem}: quote {name!r} is not in tools/lesson_quotes.py's QUOTES")
            return m.group(0)
        value = known[name](printed)
        if value != m["value"]:
            problems.append(f"{stem}: {name} says {m['value']!r}, the notebook printed {value!r}")
        return f"<!-- quote:{name} -->{value}<!-- /quote -->"

    new = MARKED.sub(replace, text)
    used = {m["name"] for m in MARKED.finditer(text)}
    problems += [f"{stem}: quote {name!r} is not in its plan" for name in known if name not in used]
    return new, problems


# A figure a plan may quote: a number with decimals, or a percentage (not inside a formula).
FIGURE = re.compile(r"(?<![\w.$^{])(\d\.\d+e[-+]?\d+|\d[\d,]*\.\d+|\d+(?:\.\d+)? ?%)(?![\w}])")


def chapter_text(stem: str) -> str:
    """Everything a chapter's complete edition says: its cells' sources and what they printed or displayed."""
    return _said(stem, sources=True, html=True)


def unsourced(stem: str) -> list[str]:
    """The figures (decimals, percentages) a plan quotes outside its quote markers and run-time table that its chapter
    neither prints nor says: a figure from an older run, most likely (``line N: figure``)."""
    text = plan(stem).read_text(encoding="utf-8")
    text = re.sub(r"<!-- run-times:start -->.*?<!-- run-times:end -->", lambda m: "\n" * m.group().count("\n"), text,
                  flags=re.DOTALL)  # fmt: skip
    text = MARKED.sub(lambda m: "\n" * m.group().count("\n"), text)
    text = re.sub(r"\$[^$]*\$", "", text)
    said = chapter_text(stem)
    found = []

    def says(figure: str) -> bool:  # a number of its own: 2.4 is in 2.40 and 2.4e+00, not in 12.4, 2.45 or 2.4e-05
        return re.search(rf"(?<![\d.]){re.escape(figure)}0*(?!\d|e[-+]?0*[1-9])", said) is not None

    for m in FIGURE.finditer(text):
        figure = m.group(1)
        if not (says(figure) or says(figure.replace(" %", "%")) or says(figure.replace("%", " %"))):
            found.append(f"{stem}, line {text[: m.start()].count(chr(10)) + 1}: {figure}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 naming what differs")
    args = parser.parse_args(argv)
    problems: list[str] = []
    for stem in sorted(QUOTES):
        path = plan(stem)
        text = path.read_text(encoding="utf-8")
        new, found = rewrite(text, stem, outputs(stem))
        problems += found
        if not args.check and new != text:
            path.write_text(new, encoding="utf-8")
    for path in sorted(LESSONS.glob("[0-9][0-9]_*.md")):
        problems += [f"{line}: not printed by the chapter (mark it as a quote)" for line in unsourced(path.stem)]
        if path.stem not in QUOTES and MARKED.search(path.read_text(encoding="utf-8")):
            problems.append(f"{path.stem}: quotes a figure, and QUOTES has no entry for its chapter")
    if problems:
        print("\n".join(problems), file=sys.stderr)
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())
