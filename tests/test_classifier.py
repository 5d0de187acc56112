"""``SequenceClassifier``: a language model's last hidden state through a new head, equal to Hugging Face's
``GPT2ForSequenceClassification`` with the same weights (random configuration, offline), padding included."""

from __future__ import annotations

import pytest
import torch
from test_hf_outside import gpt2_config, make_gpt2
from torch.testing import assert_close

from course_utils.model import GPT, SequenceClassifier, from_hf

transformers = pytest.importorskip("transformers")
PAD = 60


def test_the_classifier_reads_each_rows_last_token_as_hugging_faces_gpt2_classifier_does():
    lm = make_gpt2()
    theirs = transformers.GPT2ForSequenceClassification(gpt2_config(num_labels=3, pad_token_id=PAD)).eval()
    theirs.transformer.load_state_dict(lm.transformer.state_dict())
    ours = SequenceClassifier(from_hf(lm), n_classes=3).eval()
    with torch.no_grad():
        ours.score.weight.copy_(torch.randn(3, 32))
        theirs.score.weight.copy_(ours.score.weight)
    torch.manual_seed(1)
    idx = torch.randint(0, PAD, (4, 24))  # no PAD inside the texts
    lengths = torch.tensor([24, 5, 17, 1])
    idx[torch.arange(24) >= lengths[:, None]] = PAD  # right padding
    with torch.no_grad():
        assert_close(ours(idx, lengths), theirs(idx).logits, rtol=1e-4, atol=1e-5)
        alone = ours(idx[1:2, :5])  # padding changes nothing
        assert_close(ours(idx, lengths)[1:2], alone, rtol=1e-5, atol=1e-5)


def test_the_new_heads_gradient_reaches_the_backbone_and_bad_lengths_are_refused():
    torch.manual_seed(0)
    model = SequenceClassifier(GPT(61, block_size=24, d_model=32, n_heads=4, n_layers=2), n_classes=2)
    idx = torch.randint(0, 61, (3, 10))
    torch.nn.functional.cross_entropy(model(idx), torch.tensor([0, 1, 1])).backward()
    assert model.backbone.token_embed.weight.grad is not None and model.score.weight.grad is not None
    with pytest.raises(ValueError, match=r"lengths must hold one length in 1..10 per row"):
        model(idx, torch.tensor([3, 0, 10]))
    with pytest.raises(ValueError, match="at least 2 classes"):
        SequenceClassifier(model.backbone, 1)
