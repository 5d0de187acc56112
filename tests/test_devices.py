"""Device-clean code, tested without a GPU: a model on a GPU fails the moment the code around it creates a tensor on
the CPU (``torch.zeros(T)``, ``torch.arange(n)``, ``torch.tensor(ids)`` without ``device=``). No GPU here, so these
tests watch for the cause instead of the crash: every tensor the course's decoding, training, probes and plots
create from nothing inside ``course_utils`` must say where (``device=``, or ``*_like``, or a derived tensor's
``.device``), unless it is made on purpose for the CPU (``device="cpu"``, or a CPU-only ``torch.Generator``).
And the models run forward and backward on PyTorch's ``meta`` device, which holds shapes without data: a tensor
created on the CPU inside them would meet a meta tensor and fail."""

import inspect
import math
from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode

import course_utils
from course_utils import (
    GPT,
    Encoder,
    MultiHeadAttention,
    TrainConfig,
    Transformer,
    attention_chart,
    attention_grid,
    attention_heatmap,
    batch_probe,
    beam_search,
    causal_mask,
    causality_probe,
    equality_probe,
    greedy_decode,
    padding_mask,
    padding_probe,
    position_probe,
    random_batches,
    seq2seq_loss,
    sinusoidal_encoding,
    train,
)

PACKAGE = Path(course_utils.__file__).parent
FACTORIES = {
    torch.zeros, torch.ones, torch.full, torch.empty, torch.arange, torch.tensor, torch.randn, torch.rand,
    torch.randint, torch.randperm, torch.eye, torch.linspace,
}  # fmt: skip


class FactoryWatch(TorchFunctionMode):
    """Records tensor factories called from course_utils without a device (where the tensor lands is then the
    CPU, whatever the model's device)."""

    def __init__(self) -> None:
        super().__init__()
        self.unplaced: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in FACTORIES and kwargs.get("device") is None:
            caller = next(
                (f for f in inspect.stack()[1:6] if Path(f.filename).is_relative_to(PACKAGE)), None
            )  # the nearest frame in the package, if the call came from it
            if caller is not None:
                self.unplaced.append(f"{Path(caller.filename).relative_to(PACKAGE)}:{caller.lineno} {func.__name__}")
        return func(*args, **kwargs)


def watched(fn, *args, **kwargs):
    with FactoryWatch() as watch:
        fn(*args, **kwargs)
    return watch.unplaced


V = 12


def tokens(B=3, T=8, seed=0):
    return torch.randint(1, V, (B, T), generator=torch.Generator().manual_seed(seed))


def small_transformer():
    torch.manual_seed(0)
    return Transformer(V, V, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0).eval()


def small_gpt():
    torch.manual_seed(0)
    return GPT(V, block_size=16, d_model=16, n_heads=2, n_layers=1, dropout=0.0).eval()


def test_gpt_generation_creates_every_tensor_on_the_model_device():
    model = small_gpt()
    assert watched(model.generate, tokens(B=2, T=3), 5) == []
    assert watched(model.generate, tokens(B=2, T=3), 5, top_k=3, use_cache=True) == []


@pytest.mark.parametrize("beam_size", [1, 3])
@pytest.mark.parametrize("use_cache", [False, True])
def test_beam_search_and_greedy_decoding_create_every_tensor_on_the_model_device(beam_size, use_cache):
    model, src = small_transformer(), tokens()
    mask = padding_mask(src, 0)
    kwargs = {"max_len": 6, "bos_id": 1, "eos_id": 2, "pad_id": 0, "use_cache": use_cache}
    assert watched(beam_search, model, src, mask, beam_size=beam_size, **kwargs) == []
    assert watched(greedy_decode, model, src, mask, max_len=6, bos_id=1, eos_id=2) == []


def test_training_creates_every_tensor_on_the_model_device():
    model = small_transformer().train()
    src, tgt = tokens(B=16), tokens(B=16, T=9)
    config = TrainConfig(steps=2, batch_size=4, lr=1e-3, warmup_steps=1, schedule="cosine", label_smoothing=0.1)
    batches = random_batches(src, tgt, batch_size=4, seed=0)
    unplaced = watched(train, model, batches, lambda m, s, t: seq2seq_loss(m, s, t, 0), config, progress=False)
    assert unplaced == []


def test_the_probes_create_every_tensor_on_the_model_device():
    model = small_gpt()

    def logits(t):
        return model(t)[0]

    assert watched(causality_probe, logits, tokens(), V) == []
    assert watched(position_probe, logits, tokens()) == []
    assert watched(batch_probe, logits, tokens()) == []
    torch.manual_seed(0)
    embed, encoder = torch.nn.Embedding(V, 16), Encoder(16, 2, 32, n_layers=1, dropout=0.0).eval()
    padded = tokens()
    padded[0, 5:] = 0
    assert watched(padding_probe, lambda t: encoder(embed(t), padding_mask(t, 0)), padded, 0) == []
    x = torch.randn(2, 5, 16)
    assert watched(equality_probe, torch.nn.LayerNorm(16), torch.nn.LayerNorm(16, eps=1e-3), x) == []
    table = sinusoidal_encoding(10, 16)
    assert watched(equality_probe, torch.cat([table[:, 0::2], table[:, 1::2]], 1), table) == []


def test_the_plots_read_weights_from_any_device():
    """The plotting helpers copy what they draw to the CPU themselves (a CUDA tensor cannot become a NumPy array);
    here the meta device stands in: it has no data, so the copy is the only way through, and it fails loudly."""
    weights = torch.softmax(torch.randn(2, 4, 4), -1)
    for draw in (attention_heatmap, attention_grid):
        draw(weights if draw is attention_grid else weights[0], list("abcd"))
    attention_chart(weights, list("abcd"))
    with pytest.raises((NotImplementedError, RuntimeError)):  # no data on meta: the helpers do try to copy it
        attention_heatmap(weights[0].to("meta"), list("abcd"))


# --- the models on the meta device: shapes without data ----------------------------------------------------------


def test_every_model_runs_forward_and_backward_on_the_meta_device():
    with torch.device("meta"):
        gpt = GPT(V, block_size=16, d_model=16, n_heads=2, n_layers=2, dropout=0.1)
        transformer = Transformer(V, V, d_model=16, n_heads=2, n_layers=2, d_ff=32, dropout=0.1)
        attention = MultiHeadAttention(16, 2)
    ids, tgt = torch.zeros(2, 8, dtype=torch.long, device="meta"), torch.zeros(2, 9, dtype=torch.long, device="meta")
    logits, loss = gpt(ids, ids)
    loss.backward()
    src_mask = (ids != 0)[:, None, None, :]
    out = transformer(ids, tgt[:, :-1], src_mask, causal_mask(8, device="meta"))
    out.sum().backward()
    x = torch.zeros(2, 8, 16, device="meta", requires_grad=True)
    attention(x, x, x, mask=causal_mask(8, device="meta"))[0].sum().backward()
    assert logits.device.type == out.device.type == "meta" and x.grad is not None


def test_the_gpu_recipe_gpt_builds_at_its_real_size_on_the_meta_device():
    """SHAKESPEARE_GPT_GPU's model, 10.65 M parameters without its position table, as nanoGPT counts them."""
    recipe = course_utils.SHAKESPEARE_GPT_GPU.model
    with torch.device("meta"):
        model = GPT(
            65, **{k: getattr(recipe, k) for k in ("block_size", "d_model", "n_heads", "n_layers", "dropout", "bias")}
        )
    ids = torch.zeros(2, recipe.block_size, dtype=torch.long, device="meta")
    model(ids, ids)[1].backward()
    n = sum(p.numel() for p in model.parameters()) - recipe.block_size * recipe.d_model
    assert math.isclose(n / 1e6, 10.65, abs_tol=0.005)


def test_evaluation_helpers_create_every_tensor_on_the_model_device():
    from course_utils import CharTokenizer, estimate_loss, exact_match, learn_bpe, translate

    ids = torch.randint(0, V, (400,), generator=torch.Generator().manual_seed(0))
    assert watched(estimate_loss, small_gpt(), {"train": ids, "val": ids}, batch_size=4, iters=2) == []
    tok = CharTokenizer.from_texts(["abcdefghij"])
    model = Transformer(tok.vocab_size, tok.vocab_size, d_model=16, n_heads=2, n_layers=1, d_ff=32).eval()
    assert watched(exact_match, model, [("abc", "cba"), ("de", "ed")], tok, tok, max_len=6) == []
    bpe = learn_bpe(["a small text", "another small text"], vocab_size=40)
    translator = Transformer(bpe.vocab_size, bpe.vocab_size, d_model=16, n_heads=2, n_layers=1, d_ff=32).eval()
    assert watched(translate, translator, bpe, ["a text", "small"], beam_size=2, max_extra=3) == []


def test_a_masked_fused_attention_leaves_cudnn_out_where_pytorch_could_pick_it(monkeypatch):
    """PyTorch 2.11 tries cuDNN's attention first on Hopper GPUs, and with an explicit mask that kernel crashed the
    course's GPU run. The branch that leaves it out runs here on the CPU, and computes what PyTorch computes."""
    from course_utils.model import attention

    chosen = []
    real = attention.sdpa_kernel

    def spy(backends):
        chosen.append(list(backends))
        return real(backends)

    monkeypatch.setattr(attention, "sdpa_kernel", spy)
    monkeypatch.setattr(attention, "_CUDNN_DEVICES", ("cpu",))
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)[:, None, :, None]  # on the queries axis
    out, _ = mha(x, x, x, mask)
    assert chosen and all(torch.nn.attention.SDPBackend.CUDNN_ATTENTION not in b for b in chosen)
    expected, _ = mha(x, x, x, mask, need_weights=True)  # the readable path, which never calls the fused kernel
    torch.testing.assert_close(out, expected)
    chosen.clear()
    mha(x, x, x, is_causal=True)  # no mask: PyTorch's own choice of kernel
    assert not chosen
