"""Training that survives a disconnect (course_utils.training.checkpoint): a run killed with SIGKILL and started again
ends with exactly the weights of a run never stopped; a run killed while writing keeps its previous checkpoint; a
checkpoint of another recipe or model is refused, never silently replaced by a fresh start."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from course_utils import GPT, TrainConfig, train
from course_utils.data.text import random_windows
from course_utils.training import checkpoint as ckpt
from course_utils.training.checkpoint import CheckpointMismatch, load_checkpoint, save_checkpoint

ROOT = Path(__file__).resolve().parents[1]

# A small GPT with dropout (so that the random generators matter) on a text of its own, as a student's script
# would train it; SLOW makes each step take a little time, so that the run can be killed in the middle.
RUN = textwrap.dedent(
    """
    import os, sys, time
    import torch
    from course_utils import GPT, TrainConfig, set_seed, train
    from course_utils.data.text import random_windows

    out, checkpoint, slow = sys.argv[1], sys.argv[2] if sys.argv[2] != "-" else None, float(sys.argv[3])
    torch.set_num_threads(1)
    set_seed(0)
    text = torch.randint(0, 20, (4000,), generator=torch.Generator().manual_seed(1))
    model = GPT(20, block_size=16, d_model=32, n_heads=4, n_layers=2, dropout=0.2)
    config = TrainConfig(steps=60, batch_size=8, lr=3e-3, warmup_steps=5, schedule="cosine", label_smoothing=0.0)

    def loss_fn(model, x, y):
        time.sleep(slow)
        return model(x, y)[1]

    history = train(model, random_windows(text, 16, 8, seed=2), loss_fn, config, progress=False,
                    checkpoint=checkpoint, checkpoint_every=5 if checkpoint else 0)
    torch.save({"model": model.state_dict(), "loss": history.loss, "steps": history.steps}, out)
    """
)


def _run(tmp_path, out, checkpoint="-", slow=0.0, wait=True):
    script = tmp_path / "run.py"
    script.write_text(RUN)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(script), str(out), str(checkpoint), str(slow)]
    if wait:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return None
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.slow
def test_a_run_killed_mid_training_and_resumed_ends_with_the_weights_of_a_run_never_stopped(tmp_path):
    path = tmp_path / "run.ckpt"
    killed = _run(tmp_path, tmp_path / "never.pt", path, slow=0.05, wait=False)  # 3 s: time to kill it mid-run
    assert killed is not None
    step, deadline = 0, time.monotonic() + 120
    while step < 20 and time.monotonic() < deadline:  # until a checkpoint of step 20 or later is on the disk
        time.sleep(0.05)
        try:
            step = load_checkpoint(path)["step"] if path.exists() else 0
        except Exception:
            continue
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    assert 20 <= step < 60, f"the run was killed at step {step}, not in its middle"
    assert not (tmp_path / "never.pt").exists()  # it did not finish

    _run(tmp_path, tmp_path / "resumed.pt", path)  # started again: it goes on from the checkpoint
    _run(tmp_path, tmp_path / "whole.pt")  # a run never stopped, without any checkpoint
    resumed, whole = torch.load(tmp_path / "resumed.pt"), torch.load(tmp_path / "whole.pt")
    assert resumed["steps"] == whole["steps"] == list(range(1, 61))
    assert resumed["loss"] == whole["loss"]  # every step's loss, the ones before the kill read from the checkpoint
    for name, weight in whole["model"].items():
        assert torch.equal(resumed["model"][name], weight), name  # bitwise
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []


def _small(dropout=0.1):
    torch.manual_seed(0)
    return GPT(12, block_size=8, d_model=16, n_heads=2, n_layers=1, dropout=dropout)


CONFIG = TrainConfig(steps=6, batch_size=4, lr=1e-3, warmup_steps=1, label_smoothing=0.0)


def _train(model, path, config=CONFIG, every=2):
    data = torch.arange(200) % 12
    return train(model, random_windows(data, 8, 4), lambda m, x, y: m(x, y)[1], config, progress=False,
                 checkpoint=path, checkpoint_every=every)  # fmt: skip


def test_a_run_killed_while_writing_keeps_its_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "run.ckpt"
    save_checkpoint(path, {"step": 3, "note": "before"})

    def dies_half_way(obj, f, *args, **kwargs):
        f.write(b"half a checkpoint")
        raise KeyboardInterrupt  # the process stopped in the middle of the write

    monkeypatch.setattr(ckpt.torch, "save", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {"step": 4, "note": "after"})
    monkeypatch.undo()
    assert load_checkpoint(path)["note"] == "before"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.ckpt"]  # no partial file left behind


def test_a_checkpoint_of_another_recipe_or_model_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "run.ckpt"
    _train(_small(), path)
    assert load_checkpoint(path)["step"] == 6
    other = TrainConfig(steps=8, batch_size=4, lr=1e-3, warmup_steps=1, label_smoothing=0.0)
    with pytest.raises(CheckpointMismatch, match=r"another recipe \(steps=6 there, 8 here\).*delete it"):
        _train(_small(), path, other)
    wider = GPT(12, block_size=8, d_model=24, n_heads=2, n_layers=1)
    with pytest.raises(CheckpointMismatch, match="another model's weights"):
        _train(wider, path)
    with pytest.raises(
        CheckpointMismatch,
        match=r"built differently \(there: '\(dropout\): Dropout\(p=0\.1.*here: '\(dropout\): Dropout\(p=0\.2",
    ):
        _train(_small(dropout=0.2), path)  # the same shapes: only how it is built tells the two apart
    (tmp_path / "junk.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointMismatch, match=r"junk\.ckpt cannot be read as a training checkpoint"):
        _train(_small(), tmp_path / "junk.ckpt")
    with pytest.raises(ValueError, match="a number of steps >= 0"):
        train(_small(), iter([]), lambda m: m, CONFIG, checkpoint=path, checkpoint_every=-1)


def test_a_finished_run_started_again_trains_no_more_and_returns_its_history(tmp_path):
    path = tmp_path / "run.ckpt"
    first = _train(_small(), path)
    model = _small()
    again = _train(model, path)
    assert again.steps == first.steps and again.loss == first.loss
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), load_checkpoint(path)["model"].values()))


def test_the_callers_records_come_back_with_a_resumed_run_in_their_own_lists(tmp_path):
    """Chapter 07 keeps the samples written at each evaluation: a resumed run has the earlier ones too."""
    path, samples = tmp_path / "run.ckpt", []
    data = torch.arange(200) % 12

    def run(model, steps, records):
        config = TrainConfig(steps=steps, batch_size=4, lr=1e-3, warmup_steps=1, label_smoothing=0.0)
        return train(model, random_windows(data, 8, 4), lambda m, x, y: m(x, y)[1], config, progress=False,
                     eval_fn=lambda m: records.append(f"at {len(records)}") or {}, eval_every=2,
                     checkpoint=path, checkpoint_every=2, keep={"samples": records})  # fmt: skip

    run(_small(), 6, samples)
    assert samples == ["at 0", "at 1", "at 2"] and load_checkpoint(path)["kept"] == {"samples": samples}
    fresh = []  # a new kernel: the list is empty, the checkpoint has what it held
    run(_small(), 6, fresh)
    assert fresh == samples


def test_a_gpu_dry_run_of_a_chapter_keeps_no_checkpoint(tmp_path, monkeypatch):
    """Its few steps on trimmed batches must not become the start of a real run of chapter 07 or 08."""
    monkeypatch.setenv("COURSE_CHECKPOINTS", str(tmp_path))
    assert ckpt.checkpoint_path("07_gpt_cpu") == tmp_path / "07_gpt_cpu.ckpt"
    monkeypatch.setenv("COURSE_GPU_DRY_RUN", "1")
    assert ckpt.checkpoint_path("07_gpt_cpu") is None
    _train(_small(), ckpt.checkpoint_path("07_gpt_cpu"), every=2)  # None with an interval: trains, keeps nothing
    assert list(tmp_path.iterdir()) == []


def test_the_checkpoint_folder_is_drive_on_colab_a_setting_or_beside_the_notebook(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_CHECKPOINTS", raising=False)
    monkeypatch.setattr(ckpt, "COLAB_DRIVE", tmp_path / "no-drive")
    assert ckpt.checkpoint_path("07_gpt_cpu") == Path("checkpoints/07_gpt_cpu.ckpt")
    monkeypatch.setattr(ckpt, "COLAB_DRIVE", tmp_path)  # Drive mounted
    assert ckpt.checkpoint_path("07_gpt_cpu") == tmp_path / "transformers-from-scratch" / "07_gpt_cpu.ckpt"
    monkeypatch.setenv("COURSE_CHECKPOINTS", str(tmp_path / "mine"))
    assert ckpt.checkpoint_path("x") == tmp_path / "mine" / "x.ckpt"
    monkeypatch.setenv("COURSE_CHECKPOINTS", "off")
    assert ckpt.checkpoint_path("x") is None
