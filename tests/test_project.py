"""The project's promises about its own files: requirements, notebooks, outputs."""

import base64
import fnmatch
import importlib.util
import json
import os
import re
import subprocess
import tomllib
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# What Google Colab preinstalls (its published package list, 2026-08): our lower bounds must not exceed it.
COLAB = {"torch": "2.11.0", "numpy": "2.1.3", "matplotlib": "3.10.0", "pandas": "2.2.3", "altair": "5.5.0",
         "tqdm": "4.67", "ipywidgets": "7.7.1", "tokenizers": "0.21.4", "regex": "2024.11.6"}  # fmt: skip
# Required but not preinstalled on Colab: small, pure-Python packages that pip adds with the course.
NOT_ON_COLAB = {"sacrebleu"}
CONDA_NAMES = {"torch": "pytorch"}


def version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def requirements() -> dict[str, str]:
    found = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            m = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([\d.]+)", line)
            assert m, f"requirements.txt must hold lower bounds only (name>=version): {line!r}"
            found[m.group(1)] = m.group(2)
    return found


def test_requirements_are_lower_bounds_that_colab_already_meets():
    reqs = {name: bound for name, bound in requirements().items() if name not in NOT_ON_COLAB}
    assert set(reqs) == set(COLAB)
    for name, bound in reqs.items():
        assert version(bound) <= version(COLAB[name]), f"{name}>={bound} would make Colab reinstall {name}"


def test_environment_yml_mirrors_requirements():
    deps = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.fullmatch(r"  - ([A-Za-z0-9_.-]+)>=([\d.]+)", line)
        if m:
            deps[m.group(1)] = m.group(2)
    for name, bound in requirements().items():
        assert deps.get(CONDA_NAMES.get(name, name)) == bound, f"environment.yml lacks {name}>={bound}"


def test_ci_constraints_pin_every_requirement_exactly():
    pins = dict(line.split("==") for line in (ROOT / ".ci/constraints.txt").read_text().splitlines() if "==" in line)
    for name, bound in requirements().items():
        assert name in pins and version(pins[name].split("+")[0]) >= version(bound)


def load_builder():
    spec = importlib.util.spec_from_file_location("build", ROOT / "notebooks" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_source_has_its_notebook_and_they_agree():
    builder = load_builder()
    sources = sorted((ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py"))
    assert [s.stem for s in sources] == [n.stem for n in NOTEBOOKS]
    for src in sources:
        committed = nbformat.read(ROOT / "notebooks" / f"{src.stem}.ipynb", as_version=4)
        assert builder.comparable(committed) == builder.comparable(builder.build(src)), (
            f"{src.stem}.ipynb differs from notebooks/src/{src.name}: run `make outputs`"
        )
        student = nbformat.read(ROOT / "notebooks" / "student" / f"{src.stem}.ipynb", as_version=4)
        assert builder.comparable(student) == builder.comparable(builder.build(src, "student")), (
            f"student/{src.stem}.ipynb differs from notebooks/src/{src.name}: run `make notebooks`"
        )


def make_recipe(target: str) -> str:
    """The commands `make target` runs, as make itself expands them (a dry run)."""
    run = subprocess.run(["make", "-n", "-W", ".venv/.installed", "-W", ".venv-colab/.installed", target],
                         cwd=ROOT, capture_output=True, text=True, check=True)  # fmt: skip
    return run.stdout


def _notebooks_conftest():
    spec = importlib.util.spec_from_file_location("notebooks_conftest", ROOT / "notebooks" / "conftest.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("made", "own", "chosen"),
    [
        ("AVX512", "AVX512", "avx2"),  # CI's machine, outputs made on one like it: the next kernels down
        ("AVX512", "AVX2", None),  # a laptop without AVX-512: its own kernels are already others
        ("AVX2", "AVX2", "default"),
        ("AVX2", "AVX512", None),
        ("AVX512", "SVE256", None),  # an ARM processor rounds otherwise anyway
        ("SVE256", "SVE256", "default"),
    ],
)
def test_the_notebooks_run_on_other_cpu_kernels_than_their_outputs_were_made_with(
    made, own, chosen, tmp_path, monkeypatch
):
    """The committed outputs come from one processor's kernels (named per chapter in run_times.json by make
    outputs); make test's kernels compute on others, so that a compared output that depends on the processor's
    rounding fails in CI, not on a student's laptop; an ATEN_CPU_CAPABILITY already set is kept."""
    import torch

    conftest = _notebooks_conftest()
    times = tmp_path / "run_times.json"
    times.write_text(json.dumps({"01_a": {"kernels": made}, "02_b": {"kernels": "DEFAULT"}}))
    monkeypatch.setattr(conftest, "RUN_TIMES", times)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: own)
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    assert conftest.other_kernels("01_a") == chosen  # each chapter by its own outputs' kernels
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    conftest.other_kernels.cache_clear()
    assert conftest.other_kernels("01_a") is None


def test_a_chapter_made_on_the_only_kernels_left_runs_on_them_with_a_warning(tmp_path, monkeypatch):
    import torch

    conftest = _notebooks_conftest()
    times = tmp_path / "run_times.json"
    times.write_text(json.dumps({"01_a": {"kernels": "DEFAULT"}, "02_b": {"kernels": "AVX512"}}))
    monkeypatch.setattr(conftest, "RUN_TIMES", times)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    with pytest.warns(UserWarning, match="01_a: its outputs were made with DEFAULT kernels and none other"):
        assert conftest.other_kernels("01_a") is None
    assert conftest.other_kernels("02_b") is None  # DEFAULT, this processor's own, differs from AVX-512's
    with pytest.warns(UserWarning, match="03_new"):  # a chapter make outputs has not run: every chapter's kernels
        assert conftest.other_kernels("03_new") is None


def test_every_chapters_outputs_name_the_kernels_they_were_made_with():
    """The choice above needs them: make outputs (notebooks/build.py --execute) records them with the run times."""
    times = json.loads((ROOT / "docs" / "lessons" / "run_times.json").read_text())
    assert {path.stem for path in NOTEBOOKS} <= set(times)
    assert all(entry.get("kernels") for entry in times.values())


def test_ci_runs_the_dry_run_on_colabs_libraries():
    """CI's dry run (every student edition through the grader, the training chapters' complete editions, 3 steps
    of training each) runs in the environment of Colab's older library versions; make test's nbval in CI's."""
    assert "make gpu-dry-run" in (ROOT / ".ci/run").read_text()
    runs = [line for line in make_recipe("gpu-dry-run").splitlines() if "gpu_dry_run.py" in line]
    assert len(runs) == 1 and all(line.split()[1] == ".venv-colab/bin/python" for line in runs), runs
    assert "--float16-too 06 10" in runs[0]  # and the float16 path of a GPU without bfloat16 (Colab's T4)
    colab = (ROOT / ".ci" / "constraints-colab.txt").read_text()
    assert "altair==5.5.0" in colab and "transformers==4." in colab


def test_make_test_runs_every_checkers_answers_across_the_graders_link_too():
    """Without TESTS_REMOTE_ANSWERS=1 the [remote] runs of the checkers' tests (tests/conftest.py) silently vanish."""
    runs = [line for line in make_recipe("test").splitlines() if "pytest" in line]
    assert len(runs) == 1 and "TESTS_REMOTE_ANSWERS=1" in runs[0] and " tests notebooks " in runs[0], runs


def test_the_quick_tier_leaves_out_what_trains_or_runs_notebooks():
    quick = [line for line in make_recipe("quick").splitlines() if "pytest" in line]
    assert len(quick) == 1 and '-m "not slow"' in quick[0] and "notebooks" not in quick[0]


def test_torch_cpu_installs_pytorchs_cpu_build_before_the_course(tmp_path):
    """`make lab TORCH=cpu` on Linux: PyTorch's CPU-only build from pytorch.org's index first, torch alone (its
    dependencies come from PyPI with the course's, at the pinned versions, which that index may not hold); the
    course's install then keeps it. Without TORCH, no other index; another value is refused, saying what to write."""

    def dry_run(*settings: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("TORCH", "TORCH_INDEX")}  # the defaults, whatever set
        return subprocess.run(["make", "-n", "--no-print-directory", "lab", f"VENV={tmp_path / 'venv'}", *settings],
                              cwd=ROOT, capture_output=True, text=True, env=env)  # fmt: skip

    lines = dry_run("TORCH=cpu").stdout.splitlines()
    first = [i for i, line in enumerate(lines) if "--index-url https://download.pytorch.org/whl/cpu" in line]
    course = [i for i, line in enumerate(lines) if '-e ".[test]"' in line]
    assert len(first) == 1 and len(course) == 1 and first[0] < course[0], lines
    assert "--no-deps" in lines[first[0]] and lines[first[0]].endswith(" torch"), lines[first[0]]
    assert lines[-1].endswith("jupyter lab notebooks/student/01_attention.ipynb"), lines[-1]  # the student edition
    assert "--index-url" not in dry_run().stdout
    refused = dry_run("TORCH=cuda")
    assert refused.returncode != 0 and "the one choice is TORCH=cpu" in refused.stderr


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_outputs_come_from_one_clean_run(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1)), "run `make outputs`"
    assert not [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert path.stat().st_size < 2_000_000, "keep notebooks under 2 MB"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_interactive_chart_has_a_static_twin_for_viewers_without_javascript(path):
    builder = load_builder()
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        outputs = cell.get("outputs", [])
        for index, output in enumerate(outputs):
            if builder.altair_spec(output) is None:
                continue
            twin = outputs[index + 1] if index + 1 < len(outputs) else {}
            assert twin.get("metadata", {}).get(builder.TWIN), (
                f"a chart without its image: `make outputs`\n{cell.source}"
            )
            png = base64.b64decode(twin["data"]["image/png"])
            assert png.startswith(b"\x89PNG") and len(png) > 5_000


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_stores_the_text_a_screen_reader_says_for_it(path):
    """The website and the decks describe a figure with the text stored beside it (``plots.figure_alt``): its titles,
    axes, legend and colour bar. A figure drawn before that text existed falls back to its place in a section, which
    says nothing of what it shows, so a stored figure without one means the chapter needs `make outputs` again."""
    builder = load_builder()
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if "image/png" not in output.get("data", {}) or output.get("metadata", {}).get(builder.TWIN):
                continue  # a chart's twin is described by the chart's own description
            alt = output.get("metadata", {}).get("alt", "")
            assert len(alt.split()) >= 3, f"a figure stored without its text: `make outputs`\n{cell.source}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_notebook_opens_in_colab_from_its_own_badge(path):
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["course"]
    nb = json.loads(path.read_text())
    first = "".join(nb["cells"][0]["source"])
    badge = f"https://colab.research.google.com/github/{cfg['repository']}/blob/{cfg['branch']}/notebooks/{path.name}"
    assert first.startswith("# ") and badge in first
    text = json.dumps(nb)
    assert "{{" not in text, "an unstamped placeholder"
    assert f"git+https://github.com/{cfg['repository']}@{cfg['branch']}" in text
    assert 'renderers.enable("mimetype")' not in text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_section_opens_a_slide(path):
    nb = json.loads(path.read_text())
    markdown = [c for c in nb["cells"] if c["cell_type"] == "markdown"]
    slides = [c for c in markdown if c["metadata"].get("slideshow", {}).get("slide_type") == "slide"]
    assert slides and slides[0] is nb["cells"][0]
    for cell in markdown:
        text = "".join(cell["source"])
        if text.startswith("## "):
            assert cell in slides, text[:60]
        assert not re.search(r"\n## ", text.split("```")[0]), "a section heading inside a cell cannot open a slide"


def exercise_cells(nb):
    """The chapter's exercise cells: (in-chapter stubs, predictions, end-of-chapter exercises)."""
    cells, seen_exercises_heading = ([], [], []), False
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        seen_exercises_heading |= cell["cell_type"] == "markdown" and source.startswith("## Exercises")
        if "exercise" in cell["metadata"].get("tags", []):
            kind = 1 if "check_prediction(" in source else 2 if seen_exercises_heading else 0
            cells[kind].append(source)
    return cells


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_chapter_has_stubs_in_the_text_a_prediction_and_two_exercises_at_its_end(path):
    nb = json.loads(path.read_text())
    stubs, predictions, end = exercise_cells(nb)
    assert len(stubs) >= 1 and len(predictions) >= 1 and len(end) >= 2, (
        f"{path.stem}: {tuple(map(len, (stubs, predictions, end)))}"
    )
    for source in stubs + end:
        assert re.search(r"^[ \t]+### BEGIN SOLUTION", source, re.MULTILINE), "a function's body is the exercise"
        assert re.search(r"^check_\w+\(\w+", source, re.MULTILINE), "its checker is called on the function"
    for source in predictions:
        assert re.search(r'^### BEGIN SOLUTION\nmy_prediction = "\w"\n### END SOLUTION\ncheck_prediction\("[\w-]+", my_prediction\)',
                         source, re.MULTILINE), source  # fmt: skip
    for cell in nb["cells"]:
        if "exercise" in cell["metadata"].get("tags", []):
            assert cell["metadata"]["jupyter"]["source_hidden"], "a solution is folded away in the complete edition"
    code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "from course_utils.checks import" in code
    assert "set_seed(" in code and "get_device()" in code


def test_every_prediction_question_is_asked_by_exactly_one_chapter():
    from course_utils.checks.predictions import QUESTIONS

    asked = [
        (m.group(1), path.stem[:2])
        for path in NOTEBOOKS
        for cell in nbformat.read(path, as_version=4).cells
        for m in re.finditer(r'check_prediction\("([\w-]+)"', cell.source)
    ]
    assert sorted(q for q, _ in asked) == sorted(QUESTIONS)
    assert all(QUESTIONS[q].chapter == chapter for q, chapter in asked)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_student_edition_is_the_same_chapter_with_stubs(path):
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["course"]
    complete = nbformat.read(path, as_version=4)
    student = nbformat.read(ROOT / "notebooks" / "student" / path.name, as_version=4)
    assert len(student.cells) == len(complete.cells)
    badge = f"https://colab.research.google.com/github/{cfg['repository']}/blob/{cfg['branch']}/notebooks/student/"
    assert badge + path.name in student.cells[0].source and "{{" not in json.dumps(student)
    assert "Student edition" in student.cells[0].source and "Complete edition" in complete.cells[0].source
    stubs = 0
    for ours, theirs in zip(complete.cells, student.cells):
        if "exercise" in ours.metadata.get("tags", []):
            assert "### BEGIN SOLUTION" not in theirs.source and theirs.source.startswith("# ✏️")
            if "check_prediction(" in ours.source:
                assert "my_prediction = None  # your answer here" in theirs.source
            else:
                assert "raise NotImplementedError" in theirs.source
            stubs += 1
        elif ours.cell_type == "code":  # everything else runs as in the complete edition (a measurement under a title)
            titled = theirs.source.startswith("# @title")
            assert (theirs.source.split("\n", 1)[1] if titled else theirs.source) == ours.source
        assert not theirs.get("outputs"), "the student edition ships without outputs"
    assert stubs >= 4


@pytest.mark.parametrize("src", sorted((ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py")), ids=lambda p: p.stem)
def test_a_notebook_edited_in_jupyter_goes_back_to_its_source(src, tmp_path):
    """`build.py --pull` undoes the build (placeholders, images, slides) and rebuilds to the same notebook."""
    builder = load_builder()
    built = builder.build(src)
    nbformat.write(built, tmp_path / f"{src.stem}.ipynb")
    builder.pull(tmp_path / f"{src.stem}.ipynb", tmp_path / src.name)
    text = (tmp_path / src.name).read_text()
    assert "{{PIP_SPEC}}" in text and "{{COLAB_BADGE}}" in text and "attachment:" not in text
    assert builder.comparable(builder.build(tmp_path / src.name)) == builder.comparable(built)


def test_every_image_the_notebooks_show_is_drawn_by_the_project(tmp_path):
    spec = importlib.util.spec_from_file_location("draw", ROOT / "images" / "draw.py")
    draw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(draw)
    draw.main(tmp_path)
    drawn = sorted(p.name for p in tmp_path.iterdir())
    assert drawn == sorted(draw.DIAGRAMS) == sorted(p.name for p in (ROOT / "images").glob("*.png"))
    shown = {
        m
        for src in (ROOT / "notebooks" / "src").glob("*.py")
        for m in re.findall(r"\.\./images/([\w.-]+)", src.read_text())
    }
    assert shown and shown <= set(drawn)


def test_every_subpackage_ships_in_the_wheel():
    """Colab installs a built wheel, not the checkout: a package left out of it would fail to import there."""
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = [".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "course_utils").rglob("__init__.py")]
    assert packages and all(any(fnmatch.fnmatch(name, pattern) for pattern in include) for name in packages)


def test_every_environment_variable_is_in_one_table_and_the_readme():
    """The package reads COURSE_* variables only through course_utils.settings; the README's table lists them
    all, with the same values and meanings."""
    from course_utils.settings import SETTINGS

    names = {s.name for s in SETTINGS}
    mentioned = set()
    for folder in ("course_utils", "notebooks/src", "tests", "tools", "benchmarks", "docs", ".ci"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in {".py", ".md", ""} and "__pycache__" not in path.parts:
                mentioned |= set(re.findall(r"\bCOURSE_[A-Z_]+\b", path.read_text(encoding="utf-8", errors="ignore")))
    mentioned |= set(re.findall(r"\bCOURSE_[A-Z_]+\b", (ROOT / "Makefile").read_text(encoding="utf-8")))
    assert mentioned - names == set()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for setting in SETTINGS:
        assert f"| `{setting.name}` | {setting.values} | {setting.meaning} |" in readme, setting.name
    package = [p for p in (ROOT / "course_utils").rglob("*.py") if p.name != "settings.py"]
    reading = [p.name for p in package if re.search(r"environ(\.get)?\s*[\[(]\s*[\"']COURSE_", p.read_text())]
    assert reading == [], "read COURSE_* variables through course_utils.settings"


@pytest.mark.parametrize(
    ("cell", "error"),
    [
        ("# %%\ndef f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n", "not tagged exercise"),
        ('# %% tags=["exercise"]\ndef f():\n    ### BEGIN SOLUTION\n    return 1\n', "unbalanced"),
        ('# %% tags=["exercise"]\ndef f():\n    return 1\n    ### END SOLUTION\n', "unbalanced"),
        ('# %% tags=["exercise"]\n### BEGIN SOLUTION\n### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n', "unbalanced"),
    ],
)
def test_the_build_refuses_a_source_that_would_leak_a_solution(tmp_path, cell, error):
    builder = load_builder()
    src = tmp_path / "01_broken.py"
    src.write_text("# %% [markdown]\n# # 01 · Broken\n\n" + cell, encoding="utf-8")
    with pytest.raises(builder.SourceError, match=error):
        builder.build(src, "student")


def test_every_exercise_cell_ends_with_its_checker_calls_and_reaches_no_further():
    """The grader takes a submission's answer (an exercise cell without its checker calls) and calls the checkers
    itself; an answer of the course's own is never flagged for review."""
    from course_utils.grade import CHECK_CALL, _answer, _calls, _exercise_cells, reviews

    for path in [*NOTEBOOKS, *sorted((ROOT / "notebooks" / "student").glob("[0-9][0-9]_*.ipynb"))]:
        for cell in _exercise_cells(nbformat.read(path, as_version=4)):
            lines = cell.source.rstrip().splitlines()
            calls = [i for i, line in enumerate(lines) if CHECK_CALL.match(line)]
            assert calls and calls == list(range(len(lines) - len(calls), len(lines))), (path.name, lines[:2])
            assert reviews(_answer(cell.source), _calls(cell.source)) == {}, (path.name, lines[:2])
        outside = [c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
        outside = [c for c in outside if "exercise" not in c.metadata.get("tags", []) and CHECK_CALL.search(c.source)]
        assert outside == [], f"{path.name}: a checker called outside an exercise cell is never graded"


def test_the_predictions_answers_are_spread_over_the_letters():
    """A student who notices that every answer is "b" stops predicting; the answers vary, and no text the student
    sees before a question shows a letter as the example answer."""
    from collections import Counter

    from course_utils.checks.predictions import QUESTIONS

    letters = Counter(q.answer for q in QUESTIONS.values())
    assert len(letters) >= 3 and max(letters.values()) <= 0.4 * len(QUESTIONS), letters
    from course_utils.checks.bug_lab import MYSTERIES  # chapter 09's diagnoses: the same rule, among themselves

    diagnoses = Counter(m.answer for m in MYSTERIES.values())
    assert len(diagnoses) >= 3 and max(diagnoses.values()) <= 0.5 * len(MYSTERIES), diagnoses
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            if "exercise" not in cell.metadata.get("tags", []):
                assert not re.search(r'my_prediction = "[a-d]"', cell.source), (path.name, cell.source[:80])


@pytest.mark.slow  # a few seconds: draws the panels
def test_a_charts_choices_too_small_together_on_a_slide_are_drawn_alone_for_the_decks():
    """The static twin of a chart with a dropdown shows every choice in a grid; shown on a slide, a grid of four
    heads of 24 tokens would shrink the charts' 12-px labels below 18 px, so each head is drawn alone at 1.5 times
    (18-px labels) for a slide of its own. Two heads of 5 tokens need none."""
    import base64
    import io

    import torch
    from PIL import Image

    from course_utils import attention_chart
    from course_utils.teaching._vega import static_png, to_png

    builder = load_builder()
    tokens = [f"t{i}" for i in range(24)]
    spec = attention_chart(torch.rand(4, 24, 24).softmax(-1), tokens, head_names=list("abcd")).to_dict()
    panels = builder.projector_panels(spec, static_png(spec))
    assert len(panels) == 4
    first = Image.open(io.BytesIO(base64.b64decode(panels[0])))
    one = Image.open(io.BytesIO(to_png(spec)))
    assert abs(first.width - 1.5 * one.width) <= 2  # every label 1.5 times its 12 px
    small = attention_chart(torch.rand(2, 5, 5).softmax(-1), list("abcde"), head_names=["a", "b"]).to_dict()
    assert builder.projector_panels(small, static_png(small)) == []


def test_every_diagrams_labels_are_legible_on_a_slide(tmp_path):
    """A slide shows a diagram at most 1200 x 620 px, shrunk to fit, never enlarged: every label must come out at
    least 18 px tall there (the originals' smallest were 10-12 px)."""
    spec = importlib.util.spec_from_file_location("draw", ROOT / "images" / "draw.py")
    draw = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(draw)
    shown = draw.main(tmp_path)
    assert sorted(shown) == sorted(draw.DIAGRAMS)
    assert all(px >= 18 for px in shown.values()), shown
    fig = draw.transformer()  # the same labels in a PNG 750 px tall would shrink to 15 px: the check can fail
    assert draw.smallest_label_on_slide(fig, (880, 750)) < 18
    draw.plt.close(fig)


def test_the_readmes_badges_and_addresses_name_the_repository_pyproject_names():
    """After a fork the address changes in pyproject.toml; a README that still names the old one sends students to
    another repository's notebooks."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    cfg = project["tool"]["course"]
    owner, name = cfg["repository"].split("/")
    assert project["project"]["urls"]["Repository"] == f"https://github.com/{cfg['repository']}"
    readme = (ROOT / "README.md").read_text()
    badges = re.findall(r"https://colab\.research\.google\.com/github/([^)\s]+)", readme)
    assert len(badges) >= 24  # every chapter, both editions
    for badge in badges:
        assert badge.startswith(f"{cfg['repository']}/blob/{cfg['branch']}/notebooks/"), badge
    for site in re.findall(r"https://([\w-]+)\.github\.io/([\w-]+)", readme):
        assert site == (owner, name), site
    assert f"git clone https://github.com/{cfg['repository']} " in readme
    for installed in re.findall(r"git\+https://github\.com/([\w-]+/[\w-]+)", readme):
        assert installed == cfg["repository"], installed
