"""Training utilities, and a small Transformer that actually learns."""

import math
import os

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from course_utils import (
    CharTokenizer,
    TrainConfig,
    Transformer,
    causal_mask,
    encode_pairs,
    exact_match,
    lr_factor,
    noam_lr,
    random_batches,
    reversal_pairs,
    seq2seq_loss,
    set_seed,
    train,
)
from course_utils.training import train_step


@pytest.mark.slow
def test_a_small_transformer_learns_to_reverse_strings():
    set_seed(0)
    tok = CharTokenizer("abcdefghij")
    src, tgt = encode_pairs(reversal_pairs(20000, length=6, seed=0), tok, tok)
    model = Transformer(
        tok.vocab_size, tok.vocab_size, d_model=32, n_heads=4, n_layers=1, d_ff=64, dropout=0.0, max_len=16
    )
    config = TrainConfig(steps=250, batch_size=64, lr=5e-3, warmup_steps=40, schedule="cosine", label_smoothing=0.0)
    history = train(
        model,
        random_batches(src, tgt, batch_size=64),
        lambda m, s, t: seq2seq_loss(m, s, t, tok.pad_id),
        config,
        progress=False,
    )
    held_out = reversal_pairs(300, length=6, seed=123)
    accuracy, _ = exact_match(model, held_out, tok, tok)
    assert history.loss[-1] < history.loss[0] / 5
    assert accuracy >= 0.9, f"exact-match accuracy {accuracy:.3f} on held-out strings"


def test_warm_up_rises_linearly_then_decays_as_inverse_square_root():
    config = TrainConfig(lr=1.0, warmup_steps=100)
    factors = [lr_factor(s, config) for s in range(400)]
    assert factors[99] == pytest.approx(1.0) and factors[0] == pytest.approx(0.01)
    assert factors[49] == pytest.approx(0.5)
    assert factors[399] == pytest.approx(math.sqrt(100 / 400))


def test_cosine_schedule_ends_at_a_tenth_of_the_peak():
    config = TrainConfig(steps=300, warmup_steps=30, schedule="cosine")
    assert lr_factor(29, config) == pytest.approx(1.0)
    assert lr_factor(299, config) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="schedule must be one of"):
        TrainConfig(schedule="linear")
    with pytest.raises(ValueError, match="label_smoothing"):
        TrainConfig(label_smoothing=1.0)


def test_noam_lr_is_the_papers_formula_and_peaks_at_warmup():
    assert noam_lr(4000, 512, 4000) == pytest.approx(512**-0.5 * 4000**-0.5)
    assert noam_lr(4000, 512, 4000) > max(noam_lr(3999, 512, 4000), noam_lr(4001, 512, 4000))


def test_seq2seq_loss_shifts_the_target_and_ignores_padding():
    torch.manual_seed(0)
    model = Transformer(10, 10, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0).eval()
    src = torch.tensor([[4, 5, 6]])
    tgt = torch.tensor([[1, 7, 8, 2, 0, 0]])
    loss = seq2seq_loss(model, src, tgt, pad_id=0, label_smoothing=0.1)
    logits = model(src, tgt[:, :3], None, causal_mask(3))  # <bos> 7 8 predicts 7 8 <eos>; padding never counts
    assert_close(loss, F.cross_entropy(logits[0], tgt[0, 1:4], label_smoothing=0.1))


@pytest.mark.slow
def test_train_records_history_and_evaluations():
    model = Transformer(10, 10, d_model=16, n_heads=2, n_layers=1, d_ff=32)
    src, tgt = torch.randint(3, 10, (32, 5)), torch.randint(3, 10, (32, 4))
    seen = []
    history = train(
        model, random_batches(src, tgt, batch_size=8), lambda m, s, t: seq2seq_loss(m, s, t, 0),
        TrainConfig(steps=6, warmup_steps=2), progress=False,
        eval_fn=lambda m: seen.append((m.training, torch.is_grad_enabled())) or {"metric": 1.0}, eval_every=3,
    )  # fmt: skip
    assert history.steps == list(range(1, 7)) and len(history.loss) == 6 and len(history.lr) == 6
    assert [s for s, _ in history.evals] == [3, 6] and seen == [(False, False), (False, False)]
    assert len(history.eval_seconds) == 2 and 0 < history.eval_seconds[0] < history.eval_seconds[1] <= history.seconds


@pytest.mark.slow
@pytest.mark.parametrize("training", [True, False])
def test_train_leaves_the_model_in_the_mode_it_found(training):
    model = Transformer(10, 10, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.5).train(training)
    modes = []

    def loss_fn(m, s, t):
        modes.append(m.training)  # dropout must be on while training
        return seq2seq_loss(m, s, t, 0)

    src, tgt = torch.randint(3, 10, (16, 5)), torch.randint(3, 10, (16, 4))
    train(model, random_batches(src, tgt, batch_size=8), loss_fn, TrainConfig(steps=3), progress=False)
    assert modes == [True] * 3
    assert model.training == training and all(m.training == training for m in model.modules())


def test_train_restores_the_mode_even_when_a_step_fails():
    model = Transformer(10, 10, d_model=16, n_heads=2, n_layers=1, d_ff=32).eval()

    def broken(m, s, t):
        raise RuntimeError("a bug in the loss")

    src, tgt = torch.randint(3, 10, (16, 5)), torch.randint(3, 10, (16, 4))
    with pytest.raises(RuntimeError, match="a bug in the loss"):
        train(model, random_batches(src, tgt, batch_size=8), broken, TrainConfig(steps=3), progress=False)
    assert not model.training


def test_eval_mode_restores_the_mode_even_when_the_block_raises():
    from course_utils.utils import eval_mode

    model = torch.nn.Sequential(torch.nn.Dropout(0.5)).train()
    with pytest.raises(ValueError), eval_mode(model):
        assert not model.training and not model[0].training
        raise ValueError
    assert model.training and model[0].training


def _lm_loss(model, x, y):
    return model(x, y)[1]


def test_float16_autocast_with_a_gradient_scaler_trains(monkeypatch, capsys):
    """The path of a GPU without bfloat16 (Colab's T4): float16 autocast, the loss scaled before backward and the
    gradients unscaled before clipping. Taken on the CPU as a GPU dry run takes it; the loss falls, nothing overflows."""
    from course_utils import GPT
    from course_utils.training import loop

    monkeypatch.setenv("COURSE_GPU_DRY_RUN", "1")
    monkeypatch.setenv("COURSE_AMP_DTYPE", "float16")
    model = GPT(16, block_size=16, d_model=32, n_heads=4, n_layers=2, dropout=0.1, bias=False).train()
    config = TrainConfig(steps=60, batch_size=8, lr=3e-3, warmup_steps=5, schedule="constant", label_smoothing=0.0)
    optimizer = loop.make_optimizer(model, config)
    x = torch.randint(0, 16, (8, 16), generator=torch.Generator().manual_seed(1))
    y = x.flip(1)  # the reversed sequence: learnable, far from the start's loss of ln 16
    seen: list[torch.dtype] = []
    hook = model.blocks[0].feed_forward.w_1.register_forward_hook(lambda _m, _i, out: seen.append(out.dtype))
    losses = [float(train_step(model, optimizer, _lm_loss, (x, y), config)) for _ in range(60)]
    hook.remove()
    assert seen[0] == torch.float16, "the forward pass runs in float16 under autocast"
    scaler = loop._SCALERS[optimizer]
    assert scaler.is_enabled() and scaler.get_scale() > 1
    assert all(math.isfinite(v) for v in losses)
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert sum(losses[-5:]) / 5 < 0.6 * losses[0], losses
    assert "float16 autocast with a gradient scaler" in capsys.readouterr().out


def test_a_float16_step_whose_gradients_overflow_is_skipped_and_the_scale_lowered(monkeypatch):
    from course_utils.training import loop

    monkeypatch.setenv("COURSE_GPU_DRY_RUN", "1")
    monkeypatch.setenv("COURSE_AMP_DTYPE", "float16")
    model = torch.nn.Linear(4, 1)
    config = TrainConfig(steps=1, batch_size=2, lr=0.1, warmup_steps=0, schedule="constant", label_smoothing=0.0)
    optimizer = loop.make_optimizer(model, config)
    before = [p.detach().clone() for p in model.parameters()]
    train_step(model, optimizer, lambda m, x: m(x).float().sum() * 1e38, (torch.ones(2, 4),), config)
    for p, q in zip(model.parameters(), before, strict=True):
        assert torch.equal(p, q), "an overflowing step must leave the weights as they were"
    assert loop._SCALERS[optimizer].get_scale() < 2.0**16


@pytest.mark.parametrize(
    ("gpu", "capability", "bf16", "chosen", "expected", "line"),
    [
        ("NVIDIA A100", (8, 0), True, None, torch.bfloat16, ""),
        ("Tesla T4", (7, 5), False, None, torch.float16, "float16 autocast with a gradient scaler: the Tesla T4 has"),
        ("Tesla V100", (7, 0), False, "bfloat16", torch.bfloat16, "the Tesla V100 emulates it, slower than float16"),
        ("NVIDIA A100", (8, 0), True, "float16", torch.float16, "COURSE_AMP_DTYPE=float16"),
        ("Tesla K80", (3, 7), False, None, None, "training in float32: the Tesla K80 (compute capability 3.7)"),
    ],
)
def test_each_gpu_trains_in_the_dtype_it_computes_well_and_says_so_in_one_line(
    monkeypatch, capsys, gpu, capability, bf16, chosen, expected, line
):
    from course_utils.training import loop

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _device=None: gpu)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda _device=None: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: bf16)
    loop._say_once.cache_clear()
    assert loop._cuda_autocast_dtype.__wrapped__(torch.device("cuda"), chosen) == expected
    out = capsys.readouterr().out
    assert (line in out) if line else out == ""
    assert out.count("\n") <= 1


def test_an_unknown_autocast_dtype_is_refused_with_the_values_it_takes(monkeypatch):
    from course_utils.training import loop

    monkeypatch.setenv("COURSE_GPU_DRY_RUN", "1")
    monkeypatch.setenv("COURSE_AMP_DTYPE", "fp8")
    with pytest.raises(ValueError, match="COURSE_AMP_DTYPE must be one of bfloat16, float16"):
        loop._autocast_dtype(torch.device("cpu"), amp=True)


def test_batches_go_to_a_gpu_from_pinned_memory_without_waiting(monkeypatch):
    """A copy from ordinary (pageable) memory waits for the GPU's queue to empty; from pinned memory it does not."""
    from course_utils.training import loop

    calls = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: calls.append("pin") or self)
    monkeypatch.setattr(torch.Tensor, "to", lambda self, *a, **k: calls.append(("to", *a, k)) or self)
    loop._to_device(torch.zeros(2), torch.device("cuda"))
    assert calls == ["pin", ("to", torch.device("cuda"), {"non_blocking": True})]
    calls.clear()
    loop._to_device(torch.zeros(2), torch.device("cpu"))
    assert calls == [("to", torch.device("cpu"), {"non_blocking": True})], "nothing to pin for the CPU"


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads the resident memory from /proc")
def test_a_long_run_holds_no_more_memory_at_its_end_than_after_its_first_steps():
    from course_utils import GPT

    def resident_mb() -> float:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6

    torch.manual_seed(0)
    model = GPT(1024, block_size=96, d_model=64, n_heads=4, n_layers=1)

    def batches():
        while True:
            x = torch.randint(0, 1024, (16, 96))
            yield x, x

    seen = []
    config = TrainConfig(steps=90, batch_size=16, warmup_steps=5, label_smoothing=0.0)
    train(model, batches(), lambda m, x, y: m(x, y)[1], config, eval_fn=lambda m: seen.append(resident_mb()) or {},
          eval_every=30, progress=False)  # fmt: skip
    # a step's logits are 6.3 MB: a run that kept one small tensor per step held about that much more per step
    assert seen[-1] - seen[0] < 60, f"{seen[0]:.0f} MB after 30 steps, {seen[-1]:.0f} MB after 90"


def test_a_gradient_clip_of_zero_is_refused():
    with pytest.raises(ValueError, match="grad_clip is the largest gradient norm, > 0"):
        TrainConfig(grad_clip=0.0)  # every step would scale the gradients to 0 and learn nothing
    assert TrainConfig(grad_clip=None).grad_clip is None


def test_what_train_is_given_wrong_gets_a_clear_error():
    from course_utils import GPT, estimate_loss, random_windows, translate

    set_seed(0)
    model = GPT(vocab_size=10, block_size=8, d_model=8, n_heads=2, n_layers=1)
    config = TrainConfig(steps=3, warmup_steps=0)
    windows = random_windows(torch.randint(0, 10, (100,)), 8, 2)
    history = train(model, windows, lambda m, x, y: m(x, y)[1].reshape(1), config, progress=False)  # (1,): one number
    assert len(history.loss) == 3
    with pytest.raises(
        TypeError, match=r"one number \(a tensor of one element\); got tuple: a model's \(logits, loss\)"
    ):
        train(model, windows, lambda m, x, y: m(x, y), config, progress=False)
    with pytest.raises(TypeError, match=r"got a tensor of shape \(2, 8, 10\)"):
        train(model, windows, lambda m, x, y: m(x)[0], config, progress=False)
    two = iter([next(windows), next(windows)])
    with pytest.raises(ValueError, match="the batches ran out after 2 of 3 steps: pass an endless stream"):
        train(model, two, lambda m, x, y: m(x, y)[1], config, progress=False)
    with pytest.raises(ValueError, match="iters >= 1"):
        estimate_loss(model, {"val": torch.randint(0, 10, (100,))}, 2, iters=0)
    tok = CharTokenizer("abc")
    translator = Transformer(tok.vocab_size, tok.vocab_size, d_model=8, n_heads=2, n_layers=1, d_ff=16)
    with pytest.raises(TypeError, match="a list of sentences; got one string"):
        translate(translator, tok, "abc")
    with pytest.raises(ValueError, match=r"T >= 2 \(<bos>, then at least one token to predict\); got shape \(1, 1\)"):
        seq2seq_loss(translator, torch.tensor([[4, 5]]), torch.tensor([[1]]), tok.pad_id)
