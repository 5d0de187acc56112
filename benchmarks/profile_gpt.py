"""Where a training step of chapter 07's GPT spends its time, beside nanoGPT's architecture: PyTorch's profiler over a
few steps of each model, the same loop as bench_gpt.py (forward, loss, backward, clipping, AdamW).

For each model it prints the operators and kernels that take the most time (on a GPU: device time, so the kernels;
on a CPU: CPU time), how many operators and device kernels one step launches, and writes the whole comparison as
JSON to benchmarks/results/. Where a small model's step is bound by launching kernels rather than by running them,
the launch count tells more than the kernels' times.

First, on any machine, it counts the operators one training step runs (``operators_per_step``: every ATen operator
that computes, each a kernel launch on a GPU; views apart), in float32 and in bfloat16 autocast as on a GPU, and
those of the graphs ``torch.compile`` traces (``compiled_operators``), for the GPU preset's structure: the CPU's
proxy for kernel launches, the same on every processor. tests/test_gpt.py holds the course's GPT within 3% of
nanoGPT's architecture by both.

    python benchmarks/profile_gpt.py --device cuda           # the GPU preset
    python benchmarks/profile_gpt.py --preset cpu --steps 2  # the script itself, on a CPU
    python benchmarks/profile_gpt.py --count-only            # only the operator counts (seconds, on a CPU)
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
from collections.abc import Iterator
from dataclasses import replace

import torch
from bench_gpt import MODELS, PRESETS, build_model, lm_loss
from common import OperatorCount, add_record_argument, machine, save
from torch.profiler import ProfilerActivity, profile

from course_utils import CharTokenizer, GPTConfig, get_device, load_tiny_shakespeare, random_windows, split_ids
from course_utils.training.loop import TrainConfig, make_optimizer, train_step
from course_utils.utils import synchronize


@contextlib.contextmanager
def gpu_precision(on: bool) -> Iterator[None]:
    """Within the block, ``train_step`` computes in bfloat16 autocast on the CPU too, as on a GPU (when ``on``), or
    in float32 (when not), whatever the environment says."""
    names = ("COURSE_GPU_DRY_RUN", "COURSE_AMP_DTYPE")
    before = {name: os.environ.pop(name, None) for name in names}
    if on:
        os.environ["COURSE_GPU_DRY_RUN"] = "1"
    try:
        yield
    finally:
        for name, value in before.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value


def operators_per_step(
    kind: str, sizes: GPTConfig, config: TrainConfig, vocab_size: int = 65, autocast: bool = False
) -> OperatorCount:
    """The operators one training step of ``kind`` (one of ``MODELS``) runs on the CPU: forward, loss, backward,
    clipping, AdamW, after one step not counted. The number depends on the structure (layers, dropout, biases,
    autocast), not on the sizes, so ``sizes`` may be shrunk to count in a second."""
    set_batch = torch.Generator().manual_seed(0)
    x, y = (torch.randint(0, vocab_size, (2, sizes.block_size), generator=set_batch) for _ in range(2))
    model = build_model(kind, vocab_size, sizes, torch.device("cpu"))
    optimizer = make_optimizer(model, config)
    with gpu_precision(on=autocast):
        train_step(model, optimizer, lm_loss, (x, y), config)
        with OperatorCount() as count:
            train_step(model, optimizer, lm_loss, (x, y), config)
    return count


def compiled_operators(kind: str, sizes: GPTConfig, vocab_size: int = 65) -> collections.Counter[str]:
    """The operators that compute in the forward and backward graphs ``torch.compile`` traces for one loss and its
    backward pass of ``kind``, in bfloat16 autocast (AOTAutograd's graphs, before Inductor fuses their pointwise
    operators; views apart): what a compiled step runs on a GPU, bar the fusion."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    count: collections.Counter[str] = collections.Counter()

    def counting(graph: torch.fx.GraphModule, _inputs: object) -> object:
        for node in graph.graph.nodes:
            target = node.target
            if node.op == "call_function" and isinstance(target, torch._ops.OpOverload) and not target.is_view:
                count[target.overloadpacket.__name__] += 1
        return make_boxed_func(graph.forward)

    torch._dynamo.reset()
    model = build_model(kind, vocab_size, sizes, torch.device("cpu"))
    compiled = torch.compile(model, backend=aot_autograd(fw_compiler=counting, bw_compiler=counting))
    x, y = (
        torch.randint(0, vocab_size, (2, sizes.block_size), generator=torch.Generator().manual_seed(i)) for i in (0, 1)
    )
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = lm_loss(compiled, x, y)
    loss.backward()
    torch._dynamo.reset()
    return count


def count_operators(sizes: GPTConfig, config: TrainConfig) -> dict[str, dict[str, dict[str, int]]]:
    """``operators_per_step`` for both models, in float32 and in bfloat16 autocast, and ``compiled_operators``,
    printed and returned: {precision: {model: {"operators": n, "matrix_products": m}}}."""
    small = replace(sizes, d_model=64, n_heads=4, block_size=32)  # the same structure, counted in a second
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for autocast in (False, True):
        precision = "bfloat16 autocast" if autocast else "float32"
        found = {kind: operators_per_step(kind, small, config, autocast=autocast) for kind in MODELS}
        ours, theirs = (sum(found[kind].computing.values()) for kind in MODELS)
        print(f"operators per training step, {precision}: {MODELS[0]} {ours}, {MODELS[1]} {theirs} "
              f"(ratio {ours / theirs:.3f}); matrix products {found[MODELS[0]].computing['mm']} and "
              f"{found[MODELS[1]].computing['mm']}")  # fmt: skip
        counts[precision] = {
            kind: {"operators": sum(c.computing.values()), "matrix_products": c.computing["mm"]}
            for kind, c in found.items()
        }
    graphs = {kind: compiled_operators(kind, small) for kind in MODELS}
    ours, theirs = (sum(graphs[kind].values()) for kind in MODELS)
    print(f"operators in the compiled graphs of a loss and its backward pass, bfloat16: {MODELS[0]} {ours}, "
          f"{MODELS[1]} {theirs} (ratio {ours / theirs:.3f}); matrix products {graphs[MODELS[0]]['mm']} and "
          f"{graphs[MODELS[1]]['mm']}")  # fmt: skip
    counts["compiled graphs, bfloat16"] = {
        kind: {"operators": sum(c.values()), "matrix_products": c["mm"]} for kind, c in graphs.items()
    }
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None)
    parser.add_argument("--preset", choices=PRESETS, default=None, help="default: gpu on CUDA, else cpu")
    parser.add_argument("--steps", type=int, default=5, help="profiled steps per model, after 10 warm-up steps")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--count-only", action="store_true", help="only count the operators of one step (CPU)")
    add_record_argument(parser)
    args = parser.parse_args()
    device = torch.device(args.device) if args.device else get_device()
    recipe = PRESETS[args.preset or ("gpu" if device.type == "cuda" else "cpu")]
    sizes, config = recipe.model, recipe.training
    counts = count_operators(PRESETS["gpu"].model, PRESETS["gpu"].training)
    if args.count_only:
        save({"torch": torch.__version__, "operators_per_step": counts}, "operators-gpt", device, args.record)
        return
    text = load_tiny_shakespeare()
    tokenizer = CharTokenizer(text, specials=False)
    train_ids, _ = split_ids(text, tokenizer)
    windows = random_windows(train_ids, sizes.block_size, config.batch_size, seed=0)
    batches = [tuple(t.to(device) for t in next(windows)) for _ in range(10 + args.steps)]

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sort_by = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    result: dict = {"device": str(device), "machine": machine(device), "torch": torch.__version__, "models": {},
                    "operators_per_step": counts}  # fmt: skip
    for kind in MODELS:
        model = build_model(kind, tokenizer.vocab_size, sizes, device)
        optimizer = make_optimizer(model, config)
        for batch in batches[:10]:
            train_step(model, optimizer, lm_loss, batch, config)
        synchronize(device)
        with profile(activities=activities) as prof:
            for batch in batches[10:]:
                train_step(model, optimizer, lm_loss, batch, config)
            synchronize(device)
        events = prof.key_averages()
        ops = sum(e.count for e in events if e.key.startswith("aten::")) / args.steps
        kernels = sum(e.count for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA) / args.steps
        table = events.table(sort_by=sort_by, row_limit=args.top)
        print(f"=== {kind}: {ops:.0f} aten operators and {kernels:.0f} device kernels per step")
        print(table)
        result["models"][kind] = {"aten_ops_per_step": ops, "kernels_per_step": kernels, "table": table}
    save(result, f"profile-gpt-{device.type}", device, args.record)


if __name__ == "__main__":
    main()
