"""Structural checks of the built notebooks, run by the tests (tests/test_notebook_audit.py) and by hand:

    python tools/audit_notebooks.py            # every notebook in notebooks/, one line per finding

1. No Markdown heading hides in a code cell (``# ## 3. Title`` without its ``# %% [markdown]`` marker
   renders as a comment: the section vanishes from the notebook, its table of contents and its slides).
2. Numbered section headings (``## 1. ...``, ``## 2. ...``) count up from 1 without gaps.
3. Every measured-looking number a Markdown cell states (``0.174``, ``99.7%``, ``1.3×``, ``47,117``) appears in
   the chapter: in an output, or in the code (where a constant is set). A claim that no cell prints is a claim
   that can silently go stale. Constants that are nobody's output (the paper's values) are listed in ALLOWED.
4. A number stated in Markdown that only a cell whose output nbval does not compare prints (a trained model's
   figure, a timing, a sampled text: what another processor prints otherwise) is given as this run's: its sentence
   says so ("in the run saved here", "this run", "your run"), or gives it as approximate ("about", "≈").
5. No forward references: each public name of ``course_utils`` belongs to the chapter that teaches it
   (TAUGHT_IN); a notebook that imports a name from a later chapter must mark it as a preview, in a Markdown
   line that starts ``> **Preview**`` and names it in backticks, with what it does.
6. A comparison from training ("beats", "learns more slowly", "a far lower loss") shows its uncertainty: the code
   of its section trains over several seeds or draws an interval, or the sentence gives it as one run's ("in this
   run").
7. A speed claim ("faster", "less time", "speed-up") beside a cell that prints a timing is asserted: nbval masks
   timings (and may not compare the cell at all), so only an ``assert`` on the times keeps the claim checked.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

# Numbers a chapter may state without printing them: the paper's (and its models') published figures.
ALLOWED = {
    "27.3",  # BLEU of the paper's big model, English-German (Table 2)
    "28.4",
    "41.8",
    "37,000",  # the paper's vocabulary (about 37,000 tokens), batches (about 25,000 tokens) and steps (100,000)
    "25,000",
    "100,000",
    "35.41",  # published Multi30k figures chapter 08 compares with: the Deep Graph Library's example ...
    "36.45",
    "36.52",  # ... and Ben Trevett's pytorch-seq2seq notebook 6  # ... and English-French
    "1,050,624",
}

# (the exercises' "### BEGIN SOLUTION" / "### END SOLUTION" markers are code, not headings)
CODE_HEADING = re.compile(r"^#[ \t]*#{1,6}[ \t]+(?!(?:BEGIN|END) SOLUTION$)\S.*$", re.MULTILINE)
SECTION = re.compile(r"^##\s+(\d+)\.\s.*$", re.MULTILINE)
HEADING = re.compile(r"^(#{1,6})\s+(.*)$", re.MULTILINE)
# A claim: a decimal with at least two places, a percentage, a ratio (1.3x, 1.3×), or a grouped integer.
CLAIM = re.compile(
    r"(?<![\w.,$^{/])(?:"
    r"(?P<pct>\d+(?:\.\d+)?)\s?%"
    r"|(?P<ratio>\d+(?:\.\d+)?)\s?[×x](?![\w])"
    r"|(?P<grouped>\d{1,3}(?:,\d{3})+)(?![\d.])"
    r"|(?P<dec>\d+\.\d{2,})"
    r")"
)
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.DOTALL)
LINK = re.compile(r"\]\([^)]*\)")


# The chapter that teaches each public name of course_utils (tests check this covers ``course_utils.__all__``).
TAUGHT_IN = {
    "01": [
        "scaled_dot_product_attention", "causal_mask", "padding_mask", "attention_heatmap", "attention_chart",
        "set_seed", "get_device", "use_offline_charts",
    ],
    "02": [
        "MultiHeadAttention", "record_attention", "attention_grid", "count_parameters", "train", "TrainConfig",
        "History", "loss_curve", "lr_factor", "packed_linear",
    ],
    "03": [
        "PositionalEncoding", "sinusoidal_encoding", "positional_encoding_heatmap", "positional_encoding_chart",
        "positional_waves",
    ],
    "04": ["LayerNorm", "FeedForward", "EncoderLayer", "Encoder"],
    "05": [
        "DecoderLayer", "Decoder", "target_mask", "CharTokenizer", "reversal_pairs", "encode_pairs", "random_batches",
        "seq2seq_loss", "greedy_decode", "exact_match",
    ],
    "06": [
        "Transformer", "TransformerConfig", "DateTask", "noam_lr", "Recipe", "DATE_TRANSFORMER", "load_pretrained",
        "TorchTransformer",
    ],
    "07": [
        "GPT", "GPTBlock", "GPTConfig", "estimate_loss", "KVCache", "load_tiny_shakespeare", "random_windows",
        "split_ids", "SHAKESPEARE_GPT_CPU", "SHAKESPEARE_GPT_GPU", "evaluation_curve", "synchronize", "gpu_branch",
        "checkpoint_path", "download_all",
    ],
    "08": [
        "BPETokenizer", "pretokenize", "merge_pair", "learn_bpe", "learn_bpe_fast", "load_multi30k", "MULTI30K_QUICK",
        "MULTI30K_TRANSLATOR", "train_translator", "beam_search", "length_penalty", "translate", "bleu", "bleu_difference", "pad_batch",
    ],
    "09": [
        "ProbeReport", "causality_probe", "dependency_heatmap", "equality_probe", "padding_probe", "position_probe", "batch_probe",
        "output_probe",
    ],
    "10": [
        "from_hf", "from_hf_state", "GPT2_NAMES", "GPT2_PACKED", "LLAMA_NAMES", "CausalLM", "Llama", "LlamaConfig", "RMSNorm", "SwiGLU", "apply_rotary", "expand_kv",
        "GroupedQueryAttention", "peak_memory",
    ],
    "11": ["average_gradients", "shard", "spawn", "backend_for", "same_on_every_rank", "load_checkpoint", "CheckpointMismatch"],
    "12": [
        "ByteBPE", "bytes_to_unicode", "GPT2_PATTERN", "gpt2_files", "load_gpt2_tokenizer", "learn_bpe_incremental",
        "learn_merges", "merge_tree", "train_byte_bpe", "BYTE_GPT", "pretraining_texts", "LoRALinear", "add_lora", "merge_lora",
        "lora_parameters", "ChatTemplate", "IGNORE", "encode_example", "mask_prompt", "pad_examples", "instruction_pairs",
        "SequenceClassifier",
    ],
}  # fmt: skip
CHAPTER_OF = {name: chapter for chapter, names in TAUGHT_IN.items() for name in names}
ATTRIBUTE = re.compile(r"\bcourse_utils\.(\w+)")
PREVIEW = re.compile(r"^>\s*\*\*Preview\b.*$", re.MULTILINE)


@dataclass(frozen=True)
class Finding:
    notebook: str
    cell: int
    kind: str
    text: str

    def __str__(self) -> str:
        return f"{self.notebook} cell {self.cell}: {self.kind}: {self.text}"


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _output_text(cell: dict) -> str:
    """What a code cell's outputs say in words: streams, plain-text results, errors (not HTML or images)."""
    parts = []
    for output in cell.get("outputs", []):
        if "text" in output:
            parts.append(_source({"source": output["text"]}))
        plain = output.get("data", {}).get("text/plain")
        if plain is not None and "image/png" not in output.get("data", {}):
            parts.append(_source({"source": plain}))
        if output.get("output_type") == "error":
            parts.append(f"{output.get('ename', '')}: {output.get('evalue', '')}")
    return "\n".join(parts)


def headings_in_code(name: str, cells: list[dict]) -> list[Finding]:
    return [
        Finding(name, i, "Markdown heading inside a code cell", match.group(0))
        for i, cell in enumerate(cells)
        if cell["cell_type"] == "code"
        for match in CODE_HEADING.finditer(_source(cell))
    ]


# A tab, backspace, form feed, vertical tab or carriage return in Markdown is almost always LaTeX that lost its
# backslash to a string escape (\text -> a tab and "ext", \frac -> a form feed and "rac", \beta -> a backspace).
CONTROL = re.compile(r"[\t\b\f\v\r]")


def control_characters(name: str, cells: list[dict]) -> list[Finding]:
    return [
        Finding(name, i, "a control character in Markdown (a LaTeX backslash lost?)", repr(line.strip())[:80])
        for i, cell in enumerate(cells)
        if cell["cell_type"] == "markdown"
        for line in _source(cell).split("\n")
        if CONTROL.search(line)
    ]


def section_order(name: str, cells: list[dict]) -> list[Finding]:
    findings, expected = [], 1
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        for match in SECTION.finditer(_source(cell)):
            number = int(match.group(1))
            if number != expected:
                findings.append(Finding(name, i, f"section {number} where {expected} was due", match.group(0).strip()))
            expected = number + 1
    return findings


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def _places(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def _supported(value: float, places: int, candidates: Iterable[float], percent: bool) -> bool:
    for candidate in candidates:
        for shown in (candidate, candidate * 100) if percent else (candidate,):
            if abs(round(shown, places) - value) < 0.5 * 10**-places + 1e-9:
                return True
    return False


def _compared(cell: dict) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    return "nbval-ignore-output" not in tags and "NBVAL_IGNORE_OUTPUT" not in _source(cell)


def _numbers(text: str) -> set[float]:
    found = set()
    for match in NUMBER.finditer(text):
        try:
            found.add(_value(match.group(0).rstrip(",")))
        except ValueError:
            continue
    return found


# Words that give a figure as one run's, or as approximate.
THIS_RUN = re.compile(
    r"\b(?:this run|the run (?:saved|shown)|runs? saved|in the run|saved run|your run|about|around|roughly)\b|≈|~",
    re.IGNORECASE,
)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(*`$])|\n\s*\n|\n(?=\s*[-|#>])")


def _sentence(text: str, position: int) -> str:
    starts = [0] + [m.end() for m in SENTENCE_END.finditer(text) if m.end() <= position]
    end = next((m.start() for m in SENTENCE_END.finditer(text) if m.start() > position), len(text))
    return text[starts[-1] : end]


def unsupported_numbers(name: str, cells: list[dict], allowed: set[str] = ALLOWED) -> list[Finding]:
    code = [c for c in cells if c["cell_type"] == "code"]
    candidates = _numbers("\n".join(_source(c) + ("\n" + _output_text(c) if _compared(c) else "") for c in code))
    of_this_run = _numbers("\n".join(_output_text(c) for c in code if not _compared(c)))
    findings = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        text = LINK.sub("]", MATH.sub(" ", _source(cell)))
        for match in CLAIM.finditer(text):
            claim = match.group(0).strip()
            number = next(g for g in match.groups() if g is not None)
            if claim in allowed or number in allowed:
                continue
            value, places, percent = _value(number), _places(number), match.group("pct") is not None
            if _supported(value, places, candidates, percent):
                continue
            if not _supported(value, places, of_this_run, percent):
                findings.append(Finding(name, i, "number stated but printed nowhere in the chapter", claim))
            elif not THIS_RUN.search(_sentence(text, match.start())):
                findings.append(
                    Finding(name, i, "a figure of this run (its output is not compared) stated as fixed", claim)
                )
    return findings


def used_names(cells: list[dict]) -> dict[str, int]:
    """Public names of course_utils a notebook's code uses (imported, or as ``course_utils.name``): name -> cell."""
    used: dict[str, int] = {}
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        code = _source(cell)
        for block in re.finditer(r"^from course_utils import (\([^)]*\)|[^\n]*)", code, re.MULTILINE):
            for name in re.findall(r"\b[A-Za-z_]\w*\b", re.sub(r"#[^\n]*", "", block.group(1))):
                used.setdefault(name, i)
        for match in ATTRIBUTE.finditer(re.sub(r"#[^\n]*", "", code)):
            used.setdefault(match.group(1), i)
    return {name: cell for name, cell in used.items() if name in CHAPTER_OF}


def forward_references(name: str, cells: list[dict]) -> list[Finding]:
    chapter = name[:2]
    previews = "\n".join(
        m.group(0) for c in cells if c["cell_type"] == "markdown" for m in PREVIEW.finditer(_source(c))
    )
    return [
        Finding(name, cell, f"uses `{used}`, taught in chapter {CHAPTER_OF[used]}, with no '> **Preview**' note", used)
        for used, cell in used_names(cells).items()
        if CHAPTER_OF[used] > chapter and f"`{used}`" not in previews
    ]


HEADING = re.compile(r"^#{1,3} ", re.MULTILINE)
TRAINS = re.compile(r"\b(?:train|fit|train_translator)\(")
SPREAD = re.compile(r"\bSEEDS\b|\bfor seed in\b|bootstrap|bleu_difference|\binterval\b", re.IGNORECASE)
COMPARISON = re.compile(
    r"\b(?:beats?|outperforms?|(?:better|worse|faster|slower) than|learns? (?:more slowly|faster)|"
    r"(?:far|much|several times) (?:higher|lower|better|worse)|(?:higher|lower) loss|scores? (?:higher|lower))\b",
    re.IGNORECASE,
)
SPEED = re.compile(r"\b(?:faster|slower|less time|speed-?up|quicker)\b", re.IGNORECASE)
TIMING = re.compile(r"\d+\.\d+ ?m?s\b")
TIMING_ASSERT = re.compile(r"^\s*assert\b.*(?:second|timing|time|speed)", re.IGNORECASE | re.MULTILINE)


def _prose(cell: dict) -> str:
    """A Markdown cell's sentences: no tables, no math, links reduced to their text, no emphasis marks."""
    lines = [line for line in _source(cell).split("\n") if not line.lstrip().startswith("|")]
    return LINK.sub("]", MATH.sub(" ", "\n".join(lines))).replace("*", "")


def _section_code(cells: list[dict], i: int) -> str:
    """The code of the section (between two headings) that holds cell i."""
    start, end = i, i + 1
    while start > 0 and not (cells[start]["cell_type"] == "markdown" and HEADING.search(_source(cells[start]))):
        start -= 1
    while end < len(cells) and not (cells[end]["cell_type"] == "markdown" and HEADING.search(_source(cells[end]))):
        end += 1
    return "\n".join(_source(c) for c in cells[start:end] if c["cell_type"] == "code")


def comparisons_without_spread(name: str, cells: list[dict]) -> list[Finding]:
    findings = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        code = _section_code(cells, i)
        if not TRAINS.search(code) or SPREAD.search(code):
            continue
        text = _prose(cell)
        for match in COMPARISON.finditer(text):
            sentence = _sentence(text, match.start()).strip()
            if not THIS_RUN.search(sentence) and not sentence.endswith("?"):
                findings.append(Finding(name, i, "a comparison from one training run, without spread or 'this run'",
                                        sentence[:120]))  # fmt: skip
    return findings


def unchecked_speed_claims(name: str, cells: list[dict]) -> list[Finding]:
    code = [j for j, c in enumerate(cells) if c["cell_type"] == "code"]
    findings = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        beside = [j for j in code if j < i][-1:] + [j for j in code if j > i][:1]  # the code cells either side
        timed = [j for j in beside if TIMING.search(_output_text(cells[j]))]
        if not timed or any(TIMING_ASSERT.search(_source(cells[j])) for j in timed):
            continue
        text = _prose(cell)
        findings += [
            Finding(name, i, "a speed claim beside printed timings that no assert checks",
                    _sentence(text, m.start()).strip()[:120])
            for m in SPEED.finditer(text)
        ]  # fmt: skip
    return findings


def audit(path: Path) -> list[Finding]:
    cells = json.loads(path.read_text())["cells"]
    name = path.stem
    checks = (
        headings_in_code, control_characters, section_order, unsupported_numbers, forward_references,
        comparisons_without_spread, unchecked_speed_claims,
    )  # fmt: skip
    return [finding for check in checks for finding in check(name, cells)]


def main(paths: list[str]) -> int:
    targets = [Path(p) for p in paths] or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    findings = [f for path in targets for f in audit(path)]
    for finding in findings:
        print(finding)
    print(f"{len(findings)} findings in {len(targets)} notebooks")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
