"""COURSE_GPU_DRY_RUN=1 makes the CPU take the notebooks' GPU code paths for a few steps (``make gpu-dry-run``)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course_utils import GPT, TrainConfig, gpu_branch, random_windows, train
from course_utils.dry_run import DRY_RUN_ROWS, DRY_RUN_STEPS, DRY_RUN_TOKENS

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import gpu_check
import gpu_dry_run


def test_the_gpu_branch_is_taken_on_a_gpu_or_in_a_dry_run(monkeypatch):
    monkeypatch.delenv("COURSE_GPU_DRY_RUN", raising=False)
    assert gpu_branch("cuda") and not gpu_branch("cpu")
    monkeypatch.setenv("COURSE_GPU_DRY_RUN", "1")
    assert gpu_branch("cpu")


def test_a_dry_run_trains_a_few_steps_under_bfloat16_autocast(monkeypatch):
    monkeypatch.setenv("COURSE_GPU_DRY_RUN", "1")
    torch.manual_seed(0)
    model = GPT(12, block_size=8, d_model=16, n_heads=2, n_layers=1)
    seen = []

    def loss_fn(m, x, y):
        seen.append(torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16)
        rows.append(x.size(0))
        return m(x, y)[1]

    rows = []
    data = torch.randint(0, 12, (200,))
    config = TrainConfig(steps=500, batch_size=4, lr=1e-3, warmup_steps=10, schedule="cosine", label_smoothing=0.0)
    history = train(model, random_windows(data, 8, 4), loss_fn, config, progress=False)
    assert len(history.loss) == DRY_RUN_STEPS and all(seen)
    assert rows == [DRY_RUN_ROWS] * DRY_RUN_STEPS  # the model at its size, its batches cut: minutes become seconds


def test_a_dry_run_generates_and_decodes_a_few_tokens_and_says_it_cut_them(monkeypatch):
    """Generation and decoding run every line of their loop for DRY_RUN_TOKENS tokens: the full length is make test's
    (chapter 08's BLEU over a thousand sentences, 07's samples at the GPU model's size took a minute of a dry run)."""
    from course_utils import Transformer, beam_search, dry_run, greedy_decode

    torch.manual_seed(0)
    gpt = GPT(12, block_size=16, d_model=16, n_heads=2, n_layers=1)
    seq2seq = Transformer(12, 12, d_model=16, n_heads=2, n_layers=1, d_ff=32)
    src = torch.randint(3, 12, (2, 5))  # (B, S)
    prompt = torch.zeros(2, 1, dtype=torch.long)  # (B, 1)
    ids = {"bos_id": 1, "eos_id": 2, "pad_id": 0}

    def lengths():
        return (
            gpt.generate(prompt, 10, temperature=0).size(1) - 1,
            greedy_decode(seq2seq, src, None, max_len=10, **ids).size(1) - 1,  # max_len counts <bos>
            beam_search(seq2seq, src, None, beam_size=2, max_len=10, alpha=0.6, **ids).size(1) - 1,
        )

    monkeypatch.setattr(dry_run, "DRY_RUN_CUTS", [])
    monkeypatch.delenv("COURSE_GPU_DRY_RUN", raising=False)
    seq2seq.generator.weight.data.zero_()  # every token equally likely: no <eos> before max_len, the full length
    assert lengths() == (10, 9, 9) and dry_run.DRY_RUN_CUTS == []
    monkeypatch.setenv("COURSE_GPU_DRY_RUN", "1")
    assert lengths() == (DRY_RUN_TOKENS,) * 3
    assert dry_run.DRY_RUN_CUTS == ["generate", "decode", "decode"]
    assert gpt.generate(prompt, DRY_RUN_TOKENS).size(1) == 1 + DRY_RUN_TOKENS and len(dry_run.DRY_RUN_CUTS) == 3


def test_a_normal_run_keeps_full_precision_on_the_cpu(monkeypatch):
    monkeypatch.delenv("COURSE_GPU_DRY_RUN", raising=False)
    torch.manual_seed(0)
    model = GPT(12, block_size=8, d_model=16, n_heads=2, n_layers=1)
    seen = []

    def loss_fn(m, x, y):
        seen.append(torch.is_autocast_enabled("cpu"))
        return m(x, y)[1]

    config = TrainConfig(steps=5, batch_size=4, lr=1e-3, warmup_steps=1, schedule="cosine", label_smoothing=0.0)
    history = train(model, random_windows(torch.randint(0, 12, (200,)), 8, 4), loss_fn, config, progress=False)
    assert len(history.loss) == 5 and not any(seen)


def test_the_dry_run_reports_a_failed_check_after_a_cut_and_goes_on_but_fails_one_before(monkeypatch):
    from course_utils import dry_run

    softened = gpu_dry_run.soften("x = 1\nassert x == 2, 'x is not 2'\ny = x + 1")
    monkeypatch.setattr(dry_run, "DRY_RUN_CUTS", [])
    with pytest.raises(AssertionError, match="x is not 2"):  # nothing cut short: a check of code
        exec(gpu_dry_run.PRELUDE + softened, {})
    monkeypatch.setattr(dry_run, "DRY_RUN_CUTS", ["train"])
    namespace: dict = {}
    exec(gpu_dry_run.PRELUDE + softened, namespace)  # a training run was cut short: reported, and on
    assert namespace["y"] == 2
    assert gpu_dry_run.soften("%timeit x = 1") == "%timeit x = 1"  # a magic is left alone


def _cells(*sources, cuts=None):
    """Run softened cells one after another as a dry-run kernel would, IPython's hooks called around each; what each
    printed, and the error that stopped them, if any."""
    import contextlib
    import io
    from types import SimpleNamespace

    namespace: dict = {}
    exec(gpu_dry_run.PRELUDE, namespace)
    printed = []
    for source in sources:
        softened = gpu_dry_run.soften(source)
        namespace["_dry_run_cell"](SimpleNamespace(raw_cell=softened))
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(softened, namespace)
        except Exception as error:
            return printed, error
        finally:
            printed.append(out.getvalue().strip())
        namespace["_dry_run_taint"](SimpleNamespace(result=None, info=SimpleNamespace(raw_cell=softened)))
    return printed, None


def test_a_check_is_forgiven_only_where_it_may_see_what_a_generation_cut_short_left(monkeypatch):
    """A generation cut taints its cell and what the cells after compute from it; a check of code elsewhere still
    fails the run. A training cut forgives everything after it, as before."""
    from course_utils import dry_run

    monkeypatch.setattr(dry_run, "DRY_RUN_CUTS", [])
    generated = "from course_utils import dry_run\ndry_run.cut_short('generate')\nout = [1, 2]"
    printed, error = _cells(
        generated,
        "assert len(out) == 8, 'the sample is shorter'",
        "longer = out + [3]\nother = 1",
        "assert longer == [], 'computed from it'\nassert True, 1 / 0  # a message is evaluated only on failure",
        "assert {}['word'] == 1, 'a lookup in a short translation'",  # raises KeyError: reported? no: untainted
    )
    assert printed[1].endswith(gpu_dry_run.GENERATED) and "the sample is shorter" in printed[1]
    assert "computed from it" in printed[3] and "1 / 0" not in printed[3]
    assert isinstance(error, KeyError)  # the last cell reads nothing generated: its check is one of code
    _, error = _cells(generated, "other = 2\nassert other == 3, 'a check of code'")
    assert isinstance(error, AssertionError) and "a check of code" in str(error)
    monkeypatch.setattr(dry_run, "DRY_RUN_CUTS", ["train"])
    printed, error = _cells("assert {}['word'] == 1", "assert 1 == 2, 'two\\nlines'", "y = 1")
    assert error is None and printed[0] == f"{gpu_dry_run.REPORT} KeyError: 'word' (after: train)"
    assert printed[1] == f"{gpu_dry_run.REPORT} two lines (after: train)"  # one line per report
    _, error = _cells("import torch\nassert torch.zeros(2) @ torch.zeros(3) == 0")  # a shape: an error even now
    assert isinstance(error, RuntimeError)


TINY_TRAINING = """from course_utils import GPT, TrainConfig, random_windows, train
config = TrainConfig(steps=50, batch_size=4, lr=1e-3, warmup_steps=1, schedule="cosine", label_smoothing=0.0)
model = GPT(12, block_size=8, d_model=16, n_heads=2, n_layers=1)
train(model, random_windows(torch.randint(0, 12, (200,)), 8, 4), lambda m, x, y: m(x, y)[1], config, progress=False)"""


def _chapter(folder, after_exercise, check_first=False):
    """A chapter of one exercise, both editions, in ``folder``; ``after_exercise``: the cell that follows it. A check
    that fails comes after a training cell (which the dry run cuts short), or before it (``check_first``)."""
    import nbformat

    solution = "def my_causal_mask(size):\n    return torch.tril(torch.ones(size, size, dtype=torch.bool))"
    stub = "def my_causal_mask(size):\n    raise NotImplementedError"
    for edition, body in (("", solution), ("student", stub)):
        nb = nbformat.v4.new_notebook()
        nb.cells = [
            nbformat.v4.new_markdown_cell("# 01 · Tiny"),
            nbformat.v4.new_code_cell("import torch\nfrom course_utils.checks import check_causal_mask"),
            nbformat.v4.new_code_cell(
                body + "\n\n\ncheck_causal_mask(my_causal_mask)", metadata={"tags": ["exercise"]}
            ),
            nbformat.v4.new_code_cell(TINY_TRAINING),
            nbformat.v4.new_code_cell("assert 1 + 1 == 3, 'a trained figure'"),
            nbformat.v4.new_code_cell(after_exercise),
        ]
        if check_first:
            nb.cells[3], nb.cells[4] = nb.cells[4], nb.cells[3]
        (folder / edition).mkdir(exist_ok=True)
        nbformat.write(nb, folder / edition / "01_tiny.ipynb")
    return folder / "01_tiny.ipynb"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("after_exercise", "check_first", "errors"),
    [
        ("y = 1", False, []),
        ("y = my_causal_mask(3)", False, ["NotImplementedError"]),
        ("y = 1", True, ["AssertionError: a trained figure"]),
    ],
    ids=["ok", "needs", "fails-before-training"],
)
def test_the_student_edition_runs_as_a_class_would_every_exercise_not_attempted(
    tmp_path, monkeypatch, after_exercise, check_first, errors
):
    """Every cell but the stubs must run; a cell that needs an exercise's answer is an error, and so is a failed
    check before anything was cut short; after the training cell (cut short), a failed check is only a report."""
    path = _chapter(tmp_path, after_exercise, check_first)
    monkeypatch.setattr(gpu_dry_run, "NOTEBOOKS", tmp_path)
    found, expected, _ = gpu_dry_run.run_student(path, 120)
    assert [e for e in errors if not any(e in line for line in found)] == [] and len(found) == len(errors), found
    assert len(expected) == (0 if check_first else 1) and all("a trained figure" in line for line in expected)


SKIPPING_CHAPTER = """import os
SKIP_TRAINING = os.environ.get("COURSE_SKIP_TRAINING") == "1"
from course_utils import GPT
model = GPT(12, block_size=16, d_model=16, n_heads=2, n_layers=1)
"""
GENERATION = "out = model.generate(torch.zeros(1, 1, dtype=torch.long), 10)"
LENGTH_CHECK = "assert out.size(1) == 11, 'a sample of 10 tokens'"
LOSS_ESTIMATE = "from course_utils import estimate_loss\nestimate_loss(model, {'val': torch.randint(0, 12, (99,))}, 4)"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("cells", "errors"),
    [
        ((GENERATION, LENGTH_CHECK), []),
        ((LOSS_ESTIMATE, "assert 1 + 1 == 3, 'a figure of the shipped weights'"), ["with the shipped weights"]),
        ((GENERATION, "assert 1 + 1 == 3, 'a check of code'"), ["AssertionError: a check of code"]),
    ],
    ids=["after-a-generation", "after-a-loss-estimate", "code-after-a-generation"],
)
def test_with_training_skipped_only_a_check_after_a_generation_was_cut_may_fail(tmp_path, monkeypatch, cells, errors):
    """A chapter that trains only without SKIP_TRAINING runs on its shipped weights, whose every check must hold, but
    those that see what the dry run cut short of a generation or a decoding (a sample, a BLEU score); a loss estimate
    cut short (3 batches of 2 rows) still measures the shipped weights, and a check of code in a cell that reads no
    generated value still holds after one."""
    import nbformat

    path = _chapter(tmp_path, "y = 1")
    for edition in ("", "student"):
        nb = nbformat.read(tmp_path / edition / "01_tiny.ipynb", as_version=4)
        nb.cells[3:5] = [nbformat.v4.new_code_cell(SKIPPING_CHAPTER), *map(nbformat.v4.new_code_cell, cells)]
        nbformat.write(nb, tmp_path / edition / "01_tiny.ipynb")
    monkeypatch.setattr(gpu_dry_run, "NOTEBOOKS", tmp_path)
    assert gpu_dry_run.reads_skip_training(path)
    found, expected, _ = gpu_dry_run.run_student(path, 120)
    assert len(found) == len(errors) and all(e in line for e, line in zip(errors, found)), found
    assert len(expected) == 1 - len(errors) and all(line.endswith(gpu_dry_run.GENERATED) for line in expected)


# --- make gpu-check ------------------------------------------------------------------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the check would run")
def test_gpu_check_refuses_without_cuda_in_one_line():
    done = subprocess.run(
        [sys.executable, str(Path(gpu_check.__file__)), "--preflight"], capture_output=True, text=True
    )
    assert done.returncode == 2 and len(done.stdout.strip().splitlines()) == 1 and "CUDA" in done.stdout


def test_the_gpu_report_renders_every_part_it_holds():
    report = {
        "environment": {"gpu": "NVIDIA H100", "capability": "9.0", "torch": "2.11", "cuda": "13.0", "python": "3.12"},
        "notebooks": [{"notebook": "07_gpt", "seconds": 81.5, "errors": [], "figures": ["this run uses SHAKESPEARE_GPT_GPU"]}],
        "translator": {"recipe": "MULTI30K_TRANSLATOR", "steps": 7000, "train_seconds": 300.0, "test_bleu_greedy": 38.1,
                       "signature": "nrefs:1|case:mixed", "decode_seconds": 4.0},
        "bench-gpt": {"eager": {"ms_per_step": {"ours": 30.0}}},
    }  # fmt: skip
    text = gpu_check.markdown(report)
    assert "| 07_gpt | 81.5 | 0 | this run uses SHAKESPEARE_GPT_GPU |" in text
    assert "test BLEU (greedy) 38.1" in text and "## bench-gpt" in text and "bench-transformer" not in text


@pytest.mark.slow
@pytest.mark.dry_run
def test_gpu_check_runs_end_to_end_at_toy_sizes_on_the_cpu(tmp_path):
    """`--smoke` takes every step of the GPU check on the CPU (data, training, decoding, BLEU, a benchmark, the
    report), so that a GPU session, rare and short, is not spent on a broken script."""
    parts = ["--parts", "translator", "bench-transformer", "profile-gpt", "bench-gpt-kernels"]
    command = [sys.executable, str(Path(gpu_check.__file__)), "--smoke", "--out", str(tmp_path), *parts]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = (tmp_path / "report.md").read_text()
    assert "MULTI30K_QUICK: 5 steps" in report and "## bench-transformer" in report
    assert "## Profile of a training step: course_utils.GPT" in report and "aten::mm" in report
    assert "Attention on `math` only: course_utils.GPT" in report and "A/A" in report


def test_the_gpu_report_names_each_section_slower_on_the_gpu_than_on_the_cpu():
    sections = [["Setup", 9.0], ["4. Training", 30.0], ["5. Sampling", 0.1]]
    report = {
        "notebooks": [{"notebook": "07_gpt", "seconds": 90.0, "errors": [], "figures": [], "sections": sections}],
        "notebooks-float16": [{"notebook": "07_gpt", "seconds": 95.0, "errors": ["cell 3: RuntimeError: x"],
                               "figures": ["best validation loss: 1.5"]}],
    }  # fmt: skip
    text = gpu_check.markdown(report)
    cpu = dict(json.loads((Path(gpu_check.ROOT) / "docs/lessons/run_times.json").read_text())["07_gpt"]["sections"])
    assert f"| 07_gpt | Setup | {cpu['Setup']} | 9.0 |" in text
    assert "5. Sampling" not in text.split("| notebook | section |")[1]
    assert "float16" in text and "| 07_gpt | 95.0 | 1 | best validation loss: 1.5 |" in text
    assert "- 07_gpt, cell 3: RuntimeError: x" in text


def test_the_gpu_report_sets_the_gpt_beside_nanogpts_own_run():
    evals = [{"step": 250, "val_loss": 2.1, "seconds": 4.0}, {"step": 500, "val_loss": 1.8, "seconds": 8.0}]
    report = {
        "bench-gpt": {
            "eager": {"ms_per_step": {"course_utils.GPT": 20.0, "nanoGPT architecture": 15.0}, "ratio": 1.333,
                      "to_loss": {"target": 1.47, "reached": None, "evals": evals}},
            "compiled": {"ms_per_step": {"course_utils.GPT": 14.0, "nanoGPT architecture": 13.0}, "ratio": 1.077,
                         "to_loss": {"target": 1.47, "reached": {"step": 1750, "seconds": 26.2, "val_loss": 1.46}}},
        },
        "nanogpt": {"median_ms_per_iter": 13.5, "evals": [{"step": 1750, "val_loss": 1.4714}], "to_loss": {"reached": None}},
        "notes": ["translator was stopped"],
    }  # fmt: skip
    text = gpu_check.markdown(report)
    assert "| course_utils.GPT, eager | 20.0 | 15.0 | 1.333 | not reached (best 1.8 at step 500) |" in text
    assert "| course_utils.GPT, compiled | 14.0 | 13.0 | 1.077 | 1.46 at step 1750, 26.2 s |" in text
    assert "| nanoGPT's own train.py, compiled | - | 13.5 | - | not reached (best 1.4714 at step 1750) |" in text
    assert "validation loss 1.47 (" in text and "Note: translator was stopped" in text


def test_the_gpu_report_keeps_a_long_trainings_last_figures_and_lists_every_error():
    figures = [f"step {250 * i}: validation loss {2 - i / 10:.3f}" for i in range(1, 11)] + [
        "best validation loss: 1.4"
    ]
    report = {
        "notebooks": [
            {"notebook": "07_gpt", "seconds": 90.0, "errors": [], "figures": figures},
            {"notebook": "09_bug_lab", "seconds": 100.0, "errors": ["cell 31: RuntimeError: devices"], "figures": []},
        ]
    }
    text = gpu_check.markdown(report)
    assert "step 250: validation loss 1.900" in text and "best validation loss: 1.4" in text and "…" in text
    assert "- 09_bug_lab, cell 31: RuntimeError: devices" in text
