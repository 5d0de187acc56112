"""Each measured figure the documentation quotes lives in one results file; its table is rendered from it
(tools/figures.py), and a table that differs from its results fails here."""

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import figures
import lesson_quotes


def test_every_table_matches_its_results_file():
    assert figures.stale() == []


def test_a_figure_edited_by_hand_or_a_results_file_updated_alone_is_named(tmp_path, monkeypatch):
    results = {"date": "2026-11-27", "machine": "2 CPU cores", "total_seconds": 30,
               "stages": [{"name": "make test", "seconds": 30, "pytest": "5 passed"}]}  # fmt: skip
    source = tmp_path / "docs" / "figures" / "ci.json"
    source.parent.mkdir(parents=True)
    source.write_text(json.dumps(results))
    page = tmp_path / "README.md"
    page.write_text("Times:\n\n<!-- figures:ci -->\n<!-- /figures:ci -->\n")
    monkeypatch.setattr(figures, "ROOT", tmp_path)
    monkeypatch.setattr(figures, "PAGES", [page])
    assert figures.stale() != []  # the table is not there yet
    page.write_text(figures.rendered(page.read_text()))
    assert figures.stale() == [] and "| `make test` |" in page.read_text() and "| 30 | 5 passed |" in page.read_text()
    page.write_text(page.read_text().replace("| 30 |", "| 29 |"))
    assert figures.stale() != []
    page.write_text(figures.rendered(page.read_text()))
    results["stages"][0]["seconds"] = 31
    source.write_text(json.dumps(results))
    assert figures.stale() != []


def test_a_ci_run_is_summarised_from_its_stage_logs(tmp_path):
    (tmp_path / "ci-stages.tsv").write_text("environment\t12\nmake test\t300\n")
    (tmp_path / "ci-make-test.log").write_text("...\n2,001 passed, 1 xfailed, 7 warnings in 290.12s (0:04:50)\n")
    summary = figures.summarise_ci(tmp_path)
    assert summary["total_seconds"] == 312
    assert summary["stages"][1] == {
        "name": "make test",
        "seconds": 300,
        "pytest": "2,001 passed, 1 xfailed, 7 warnings in 290 s",
    }


def test_every_figure_a_lesson_plan_quotes_is_the_one_its_notebook_printed():
    assert lesson_quotes.main(["--check"]) == 0


def test_a_quoted_figure_edited_by_hand_an_unknown_quote_or_a_missing_one_is_named():
    printed = lesson_quotes.outputs("07_gpt")
    plan = lesson_quotes.plan("07_gpt").read_text(encoding="utf-8")
    edited = plan.replace("<!-- quote:best-validation -->", "<!-- quote:best-validation -->9", 1)
    edited = edited.replace("<!-- quote:gaps -->", "<!-- quote:gap -->", 1)
    fixed, problems = lesson_quotes.rewrite(edited, "07_gpt", printed)
    assert any("best-validation says '9" in p for p in problems)
    assert any("quote 'gap' is not in" in p for p in problems)
    removed = lesson_quotes.MARKED.sub(lambda m: m["value"] if m["name"] == "steps" else m.group(0), plan)
    assert lesson_quotes.rewrite(removed, "07_gpt", printed)[1] == ["07_gpt: quote 'steps' is not in its plan"]
    assert "<!-- quote:best-validation -->9" not in fixed


def test_a_figure_a_plan_quotes_without_a_marker_is_one_its_chapter_prints(tmp_path, monkeypatch):
    plan = lesson_quotes.plan("07_gpt").read_text(encoding="utf-8")
    assert lesson_quotes.unsourced("07_gpt") == []
    stale = tmp_path / "07_gpt.md"  # the same plan, with a figure from no run
    said = lesson_quotes.chapter_text("07_gpt")
    alone = lambda figure: re.search(rf"(?<![\d.]){re.escape(figure)}0*(?!\d)", said)  # noqa: E731
    # a printed figure whose first digits are printed nowhere on their own: 4.2 inside 4.233 is no figure of the run
    best = next(f for f in re.findall(r"\b\d\.[1-9]\d{2,}\b", said) if not alone(f[:-1]))
    cut = best[:-1]
    edited = f"Run live (loss 9.871, 37% of rows, a gap of 7.5e-03, {best} then {cut}):"
    stale.write_text(plan.replace("Run live:", edited, 1), encoding="utf-8")
    monkeypatch.setattr(lesson_quotes, "plan", lambda stem: stale)
    assert [line.split(": ")[1] for line in lesson_quotes.unsourced("07_gpt")] == ["9.871", "37%", "7.5e-03", cut]


def test_run_times_from_another_machine_or_other_kernels_are_marked_and_named(monkeypatch):
    cpu = {
        f"0{n}_chapter": {"machine": "2 CPU cores, x86_64, PyTorch on the CPU", "kernels": kernels, "whole": 10.0 * n}
        for n, kernels in ((1, "AVX512"), (2, "AVX512"), (3, "AVX2"))
    }
    skip = {"date": "2026-11-27", "machine": "2 CPU cores", "seconds": {}}
    gpu = {"environment": {"gpu": "NVIDIA H200", "date": "2026-11-26", "torch": "2.11.0+cu130"}, "notebooks": []}
    files = {figures.RUN_TIMES: cpu, figures.SKIP_TRAINING: skip, figures.GPU_REPORT: gpu}
    monkeypatch.setattr(figures, "_read", lambda relative: files[relative])
    table = figures.run_times_table()
    assert "| 10\u00a0s | 20\u00a0s | 30\u00a0s† |" in table  # the odd one out is marked ...
    assert "2 CPU cores, x86_64, AVX512 kernels; † 2 CPU cores, x86_64, AVX2 kernels" in table  # ... and named
    cpu["03_chapter"]["kernels"] = "AVX512"
    assert "†" not in figures.run_times_table()  # one machine: nothing marked
