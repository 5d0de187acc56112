"""Each probe flags the bug it is made for, on a deliberately buggy module, and stays quiet on the correct one;
each mystery module of the bug lab is caught by the probe its diagnosis names."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils import (
    GPT,
    Encoder,
    GPTBlock,
    LayerNorm,
    MultiHeadAttention,
    batch_probe,
    causal_mask,
    causality_probe,
    equality_probe,
    output_probe,
    padding_mask,
    padding_probe,
    position_probe,
    sinusoidal_encoding,
)
from course_utils.checks import check_diagnosis, check_future_leak
from course_utils.checks.bug_lab import MYSTERIES, PAD, VOCAB, mystery_model

V = 12


def tokens(B=3, T=10, seed=0, low=1):
    return torch.randint(low, V, (B, T), generator=torch.Generator().manual_seed(seed))


class NoMaskBlock(GPTBlock):
    def forward(self, x, cache=None):
        h = self.norm1(x)
        x = x + self.self_attn(h, h, h)[0]  # no is_causal
        return x + self.feed_forward(self.norm2(x))


def gpt(leaky=False, dropout=0.0):
    torch.manual_seed(0)
    model = GPT(V, block_size=16, d_model=32, n_heads=4, n_layers=2, dropout=dropout)
    if leaky:
        for i, block in enumerate(model.blocks):
            new = NoMaskBlock(32, 4, 128)
            new.load_state_dict(block.state_dict())
            model.blocks[i] = new
    return model.eval()


def logits(model):
    return lambda t: model(t)[0]


# --- causality ---------------------------------------------------------------------------------------------------


def test_causality_probe_is_quiet_on_a_causal_model():
    report = causality_probe(logits(gpt()), tokens(), V)
    assert not report.flagged and report.value < 1e-5 and report.detail.triu(1).max() < 1e-5


def test_causality_probe_flags_a_missing_mask():
    report = causality_probe(logits(gpt(leaky=True)), tokens(), V)
    assert report.flagged and report.value > 0.01 and "no causal mask" in report.likely_bug
    assert report.detail.triu(2).max() > 0.01  # leaks from far ahead too


def test_causality_probe_names_an_off_by_one_mask():
    report = causality_probe(mystery_model("A"), tokens(T=8), VOCAB)
    assert report.flagged and "off-by-one" in report.likely_bug


def test_causality_probe_names_nan_rows_from_a_flipped_torch_mask():
    torch.manual_seed(0)
    embed, attn = nn.Embedding(V, 16), nn.MultiheadAttention(16, 2, batch_first=True)

    def flipped(t):  # the course's mask (True = may attend) given to torch (True = blocked)
        x = embed(t)
        return attn(x, x, x, attn_mask=causal_mask(t.size(1)))[0]

    report = causality_probe(flipped, tokens(T=6), V)
    assert report.flagged and math.isnan(report.value) and "True = blocked" in report.likely_bug


def test_every_probe_reports_dropout_left_on():
    model = gpt(dropout=0.3).train()
    for report in (
        causality_probe(logits(model), tokens(), V),
        padding_probe(logits(model), tokens(), PAD),
        position_probe(logits(model), tokens()),
        batch_probe(logits(model), tokens()),
    ):
        assert report.flagged and "model.eval()" in report.likely_bug, report


# --- equality ----------------------------------------------------------------------------------------------------


class UnbiasedLayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight, self.bias, self.eps = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d)), eps

    def forward(self, x):
        return self.weight * (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + self.eps) + self.bias


def test_equality_probe_is_quiet_on_the_course_layer_norm():
    x = torch.randn(4, 7, 16)
    report = equality_probe(LayerNorm(16), nn.LayerNorm(16), x)
    assert not report.flagged and report.value < 1e-5


def test_equality_probe_names_both_layer_norm_bugs():
    x = torch.randn(4, 7, 16, generator=torch.Generator().manual_seed(0))
    report = equality_probe(UnbiasedLayerNorm(16), nn.LayerNorm(16), x)
    assert report.flagged and "unbiased std" in report.likely_bug and "epsilon in the wrong place" in report.likely_bug


class WideScaleAttention(MultiHeadAttention):
    def forward(self, query, key, value, mask=None, **kwargs):
        q, k, v = (self._split_heads(w(x)) for w, x in ((self.w_q, query), (self.w_k, key), (self.w_v, value)))
        weights = (q @ k.transpose(-2, -1) / math.sqrt(self.d_model)).softmax(-1)  # sqrt(d_model), not sqrt(d_k)
        out = (weights @ v).transpose(1, 2).reshape(query.shape)
        return self.w_o(out), weights


def torch_attention():
    torch.manual_seed(0)
    return nn.MultiheadAttention(32, 4, batch_first=True).eval()


def test_equality_probe_is_quiet_on_the_course_attention():
    reference = torch_attention()
    ours = MultiHeadAttention.from_torch(reference)
    x = torch.randn(2, 6, 32)
    report = equality_probe(
        lambda x: ours(x, x, x, need_weights=True), lambda x: reference(x, x, x, average_attn_weights=False), x
    )
    assert not report.flagged


def test_equality_probe_names_the_wrong_scale():
    reference = torch_attention()
    ours = WideScaleAttention.from_torch(reference)
    x = 3 * torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(0))
    report = equality_probe(lambda x: ours(x, x, x), lambda x: reference(x, x, x, average_attn_weights=False), x)
    assert report.flagged and "sqrt(d_model) instead of sqrt(d_k)" in report.likely_bug


def test_equality_probe_names_a_flipped_mask():
    reference = torch_attention()
    ours = MultiHeadAttention.from_torch(reference)
    x, keep = torch.randn(2, 6, 32), torch.ones(6, 6, dtype=torch.bool).tril()
    keep[-1, :3] = False  # leave every row something to attend to either way
    report = equality_probe(
        lambda x: ours(x, x, x, mask=~keep, need_weights=True),  # torch's convention given to the course's module
        lambda x: reference(x, x, x, attn_mask=~keep, average_attn_weights=False),
        x,
    )
    assert report.flagged and "other convention" in report.likely_bug


def test_equality_probe_names_2i_applied_twice():
    d = 32
    buggy = torch.zeros(50, d)
    pos = torch.arange(50.0)
    for i in range(0, d, 2):
        buggy[:, i] = torch.sin(pos / 10000 ** (2 * i / d))
        buggy[:, i + 1] = torch.cos(pos / 10000 ** (2 * i / d))
    report = equality_probe(buggy, sinusoidal_encoding(50, d))
    assert report.flagged and "2i is applied twice" in report.likely_bug
    assert not equality_probe(sinusoidal_encoding(50, d), sinusoidal_encoding(50, d)).flagged


def test_equality_probe_reports_a_shape_mismatch():
    report = equality_probe(torch.zeros(2, 3), torch.zeros(3, 2))
    assert report.flagged and "shapes differ" in report.finding


def test_mystery_c_is_caught_by_the_equality_probe():
    reference = torch_attention()
    mystery = mystery_model("C", reference)
    x = torch.randn(2, 6, 32)
    report = equality_probe(lambda x: mystery(x, x, x), lambda x: reference(x, x, x), x)
    assert report.flagged


# --- padding -----------------------------------------------------------------------------------------------------


def encoder_model(wrong_axis=False):
    torch.manual_seed(0)
    embed, encoder = nn.Embedding(V, 32), Encoder(32, 4, 64, n_layers=2, dropout=0.0).eval()
    pe = sinusoidal_encoding(32, 32)

    def run(t):
        mask = padding_mask(t, PAD)  # (B, 1, 1, T)
        return encoder(embed(t) + pe[: t.size(1)], mask.transpose(-1, -2) if wrong_axis else mask)

    return run


def padded_tokens():
    t = tokens(B=3, T=8)
    t[0, 5:] = PAD
    t[2, 3:] = PAD
    return t


def test_padding_probe_is_quiet_with_a_padding_mask():
    report = padding_probe(encoder_model(), padded_tokens(), PAD)
    assert not report.flagged


def test_padding_probe_flags_a_mask_on_the_queries_axis():
    report = padding_probe(encoder_model(wrong_axis=True), padded_tokens(), PAD)
    assert report.flagged and "(B, 1, T, 1)" in report.likely_bug


def test_padding_probe_catches_mystery_d():
    report = padding_probe(mystery_model("D"), padded_tokens(), PAD)
    assert report.flagged and "pooling" in report.likely_bug


# --- position ----------------------------------------------------------------------------------------------------


def positional_model(kind):
    torch.manual_seed(0)
    d = 32
    embed, encoder = nn.Embedding(V, d), Encoder(d, 4, 64, n_layers=1, dropout=0.0).eval()
    nn.init.normal_(embed.weight, std=1.0 if kind == "drowned" else d**-0.5)
    pe = sinusoidal_encoding(32, d)

    def run(t):
        x = embed(t) * math.sqrt(d)
        return encoder(x if kind == "none" else x + pe[: t.size(1)])

    return run


def test_position_probe_is_quiet_with_a_positional_encoding():
    report = position_probe(positional_model("correct"), tokens())
    assert not report.flagged and report.value > 0.3


def test_position_probe_flags_a_missing_encoding():
    report = position_probe(positional_model("none"), tokens())
    assert report.flagged and "no positional information" in report.likely_bug


def test_position_probe_flags_a_drowned_encoding():
    report = position_probe(positional_model("drowned"), tokens())
    assert report.flagged and "N(0, 1)" in report.likely_bug


def test_position_probe_flags_mystery_b_and_the_equality_probe_finds_its_scale():
    mystery = mystery_model("B")
    report = position_probe(mystery, tokens())
    assert report.flagged and report.causes == ("weak_positions",)
    with torch.no_grad():
        added = mystery.inputs(tokens()) - mystery.embed(tokens()) * math.sqrt(32)  # what the encoding contributes
    second = equality_probe(added[0], sinusoidal_encoding(10, 32))
    assert second.flagged and "x 0.17678" in second.finding


def test_mystery_d_needs_a_second_experiment():
    mystery = mystery_model("D")
    first = padding_probe(mystery, padded_tokens(), PAD)
    assert first.flagged and {"mean_over_padding", "no_padding_mask"} <= set(first.causes)
    assert not padding_probe(mystery.states, padded_tokens(), PAD).flagged


# --- batch and output --------------------------------------------------------------------------------------------


def head(kind):
    torch.manual_seed(0)
    embed, proj = nn.Embedding(V, 16), nn.Linear(16, V)

    def run(t):
        z = proj(embed(t))  # (B, T, V)
        if kind == "no dim":
            with pytest.warns(UserWarning):
                return F.log_softmax(z)  # dim 0 for a 3-d input
        return {"logits": z, "log-probs": F.log_softmax(z, dim=-1), "probs": z.softmax(-1)}[kind]

    return run


def test_batch_probe():
    assert not batch_probe(head("logits"), tokens()).flagged
    report = batch_probe(head("no dim"), tokens())
    assert report.flagged and "without dim" in report.likely_bug


@pytest.mark.parametrize(
    ("kind", "flagged", "words"),
    [("logits", False, "raw logits"), ("log-probs", False, "harmless"), ("probs", True, "cannot go below"),
     ("no dim", True, "without dim")],
)  # fmt: skip
def test_output_probe(kind, flagged, words):
    report = output_probe(head(kind)(tokens()))
    assert report.flagged == flagged and words in (report.finding + report.likely_bug)


def test_a_quiet_report_reads_the_same_on_every_processor():
    """The size of a rounding error depends on the processor's kernels: a quiet probe never prints its digits."""
    quiet = [padding_probe(encoder_model(), padded_tokens(), PAD), batch_probe(head("logits"), tokens())]
    for report in quiet:
        assert not report.flagged and str(report).endswith("(up to float rounding)")
    assert "largest change 0" in str(causality_probe(logits(gpt()), tokens(), V))  # exactly 0 is exact everywhere


def test_reports_print_their_finding_and_likely_bug():
    text = str(causality_probe(logits(gpt(leaky=True)), tokens(), V))
    assert text.startswith("⚠️ causality probe:") and "likely bug:" in text


# --- the bug lab's checkers --------------------------------------------------------------------------------------


def mystery_probes():
    """Each mystery's probe as the chapter's solution runs it, by the mystery's name."""
    ids = torch.randint(1, 12, (4, 10), generator=torch.Generator().manual_seed(0))
    padded = ids.clone()
    padded[0, 6:] = 0
    reference = nn.MultiheadAttention(32, 4, batch_first=True).eval()
    x = torch.randn(2, 6, 32)
    return {
        "A": lambda: causality_probe(mystery_model("A"), ids, 12),
        "B": lambda: position_probe(mystery_model("B"), ids),
        "C": lambda: equality_probe(
            lambda x: mystery_model("C", reference)(x, x, x, need_weights=True),
            lambda x: reference(x, x, x, average_attn_weights=False),
            x,
        ),
        "D": lambda: padding_probe(mystery_model("D"), padded, 0),
    }


def test_check_diagnosis_accepts_the_probes_of_its_explanation_and_explains_the_others(capsys):
    """Each mystery diagnosed as the chapter's solution does it: with the probe its explanation names."""
    for name, mystery in MYSTERIES.items():
        assert mystery.probe in mystery_probes()[name].__code__.co_names
        for letter in mystery.choices:

            def diagnose(name=name, letter=letter):
                print(mystery_probes()[name]())
                return letter

            verdict = check_diagnosis(diagnose, name)
            assert bool(verdict) == (letter == mystery.answer), verdict.message
            assert mystery.why[letter] in verdict.message
    capsys.readouterr()


def test_check_future_leak():
    def reference(fn, tokens, j, new_id):
        changed = tokens.clone()
        changed[:, j] = new_id
        with torch.no_grad():
            return float((fn(changed)[:, :j] - fn(tokens)[:, :j]).abs().max())

    def through_j(fn, tokens, j, new_id):
        changed = tokens.clone()
        changed[:, j] = new_id
        with torch.no_grad():
            return float((fn(changed)[:, : j + 1] - fn(tokens)[:, : j + 1]).abs().max())

    def in_place(fn, tokens, j, new_id):
        before = fn(tokens).detach()
        tokens[:, j] = new_id
        return float((fn(tokens)[:, :j] - before[:, :j]).abs().max())

    assert check_future_leak(reference)
    verdict = check_future_leak(through_j)
    assert not verdict and "position j itself" in verdict.message
    verdict = check_future_leak(in_place)
    assert not verdict and "changed its input tokens in place" in verdict.message


def test_equality_probe_holds_equal_infinities_equal():
    """Masked scores hold -inf: the same -inf in both is no difference (inf - inf would be NaN)."""
    scores = torch.randn(2, 4, 4).masked_fill(~torch.ones(4, 4, dtype=torch.bool).tril(), float("-inf"))
    report = equality_probe(scores, scores.clone())
    assert not report.flagged and report.value == 0
    worse = scores.clone()
    worse[0, 3, 0] += 1.0
    flagged = equality_probe(worse, scores)
    assert flagged.flagged and flagged.value == pytest.approx(1.0) and "nan" not in str(flagged).lower()


def test_tokens_that_are_no_batch_of_ids_are_named_with_their_dtype_and_shape():
    model = logits(gpt(leaky=False))
    with pytest.raises(ValueError, match=r"integer ids of shape \(B, T\); got torch.float32 \(2, 6\)"):
        causality_probe(model, torch.zeros(2, 6), V)
    with pytest.raises(ValueError, match=r"got torch.int64 \(6,\)"):
        causality_probe(model, torch.zeros(6, dtype=torch.long), V)
    with pytest.raises(ValueError, match="got list"):
        causality_probe(model, [[1, 2, 3]], V)
