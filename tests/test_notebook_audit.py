"""The structural audit of the built notebooks (tools/audit_notebooks.py): every rule passes on the course, and
each rule fails on a deliberately broken copy of a chapter."""

import copy
import json
import re
import sys
from pathlib import Path

import pytest

import course_utils

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import audit_notebooks as audit  # noqa: E402

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def cells_of(stem: str) -> list[dict]:
    return json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())["cells"]


def markdown(text: str) -> dict:
    return {"cell_type": "markdown", "source": text}


def code(text: str, printed: str = "") -> dict:
    outputs = [{"output_type": "stream", "name": "stdout", "text": printed}] if printed else []
    return {"cell_type": "code", "source": text, "outputs": outputs}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_chapter_passes_the_audit(path):
    findings = audit.audit(path)
    assert not findings, "\n".join(map(str, findings))


def test_a_heading_in_a_code_cell_is_found():
    cells = [markdown("## 1. One"), code("x = 1\n# ## 2. Two\n# text that never renders")]
    assert [f.text for f in audit.headings_in_code("00", cells)] == ["# ## 2. Two"]
    assert audit.headings_in_code("00", [code("# a comment\nx = 1  # ## not at a line start")]) == []


def test_latex_that_lost_its_backslash_is_found():
    lost = markdown("of order $1/\\sqrt{d_{\text{model}}}$\nand $\frac{1}{2}$")  # a tab; a form feed, a line below
    assert [f.kind for f in audit.control_characters("x", [lost])] == [
        "a control character in Markdown (a LaTeX backslash lost?)"
    ] * 2
    assert audit.control_characters("x", [markdown("$\\sqrt{d_{\\text{model}}}$, a table | a | b |")]) == []


def test_sections_out_of_order_are_found():
    assert audit.section_order("00", [markdown("## 1. A\n\n## 2. B"), markdown("## Pitfalls")]) == []
    findings = audit.section_order("00", [markdown("## 1. A"), markdown("## 3. C\n\n## 4. D")])
    assert [f.kind for f in findings] == ["section 3 where 2 was due"]


def test_numbers_are_matched_at_the_precision_they_are_stated():
    cells = [code("print(w)", "tensor([0.4280, 0.3990, 0.1740])\naccuracy 0.9970\n47,117 positions")]
    stated = "weights 0.428 and 0.17; 99.7% right; 47,117 positions; 0.4280"
    assert audit.unsupported_numbers("00", [*cells, markdown(stated)]) == []
    wrong = "weights 0.43 and 0.182; 99.9% right; 62,832 positions; a 1.3× speed-up"
    found = [f.text for f in audit.unsupported_numbers("00", [*cells, markdown(wrong)])]
    assert found == ["0.182", "99.9%", "62,832", "1.3×"]
    assert audit.unsupported_numbers("00", [*cells, markdown("the paper: $\\sqrt{64} = 8.00$, [v](x/1.5.2)")]) == []


def test_a_claim_broken_in_a_chapter_copy_is_found():
    cells = copy.deepcopy(cells_of("01_attention"))
    printed = "\n".join(audit._output_text(c) for c in cells if c["cell_type"] == "code")
    weight = re.search(r"0\.\d{3}", printed).group(0)  # a weight the chapter prints
    cells.append(markdown(f"The weight is {weight}."))
    assert audit.unsupported_numbers("01_attention", cells) == []
    cells[-1] = markdown(f"The weight is {weight[:-1]}9{9 if weight[-1] != '9' else 8}.")  # a digit off
    assert [f.kind for f in audit.unsupported_numbers("01_attention", cells)] == [
        "number stated but printed nowhere in the chapter"
    ]


def test_a_chapter_copy_with_a_hidden_heading_or_a_skipped_section_is_found():
    cells = copy.deepcopy(cells_of("03_positional_encoding"))
    i, cell = next((i, c) for i, c in enumerate(cells) if c["cell_type"] == "markdown" and "## 3." in audit._source(c))
    cells[i] = code("# " + audit._source(cell).replace("\n", "\n# "))  # its "# %% [markdown]" marker lost
    assert audit.headings_in_code("03", cells) and audit.section_order("03", cells)


def test_each_public_name_belongs_to_one_chapter_that_names_it():
    names = [name for chapter in audit.TAUGHT_IN.values() for name in chapter]
    assert sorted(names) == sorted(course_utils.__all__) and len(set(names)) == len(names)
    for chapter, taught in audit.TAUGHT_IN.items():
        (source,) = (ROOT / "notebooks" / "src").glob(f"{chapter}_*.py")
        text = source.read_text()
        missing = [name for name in taught if not re.search(rf"\b{name}\b", text)]
        assert not missing, f"chapter {chapter} never mentions {missing}"


def test_a_name_from_a_later_chapter_needs_a_preview_note():
    imports = code(
        "from course_utils import (\n    Transformer,  # the model\n    causal_mask,\n)\nm = course_utils.GPT"
    )
    findings = audit.forward_references("05_decoder", [imports])
    assert sorted(f.text for f in findings) == ["GPT", "Transformer"]
    note = markdown("> **Preview** (chapter 06): `Transformer` wraps embeddings, encoder, decoder and a projection.")
    assert [f.text for f in audit.forward_references("05_decoder", [imports, note])] == ["GPT"]
    assert [f.text for f in audit.forward_references("06_transformer", [imports])] == ["GPT"]
    assert audit.forward_references("07_gpt", [imports]) == []


def test_a_figure_only_an_uncompared_cell_prints_must_be_given_as_this_runs():
    trained = code("print(accuracy)", "held-out accuracy 99.15%")
    trained["metadata"] = {"tags": ["nbval-ignore-output"]}
    fixed = markdown("The model gets 99.15% of the dates right. It never saw them.")
    found = audit.unsupported_numbers("00", [trained, fixed])
    assert [(f.kind, f.text) for f in found] == [
        ("a figure of this run (its output is not compared) stated as fixed", "99.15%")
    ]
    for hedged in ("In the run saved here the model gets 99.15% right.", "It gets about 99.15%. It never saw them."):
        assert audit.unsupported_numbers("00", [trained, markdown(hedged)]) == []
    compared = code("print(accuracy)", "held-out accuracy 99.15%")  # a figure every processor prints alike
    assert audit.unsupported_numbers("00", [compared, fixed]) == []


def test_a_comparison_from_one_training_run_must_show_its_spread_or_say_so():
    trains = code("h = train(model, batches, loss_fn, config)")
    claim = markdown("The wide scale learns more slowly than the narrow one.")
    assert [f.kind for f in audit.comparisons_without_spread("00", [markdown("## 1. A"), trains, claim])] == [
        "a comparison from one training run, without spread or 'this run'"
    ]
    scoped = markdown("In this run the wide scale learns more slowly than the narrow one.")
    seeds = code("for seed in SEEDS:\n    h = train(model, batches, loss_fn, config)")
    assert audit.comparisons_without_spread("00", [markdown("## 1. A"), trains, scoped]) == []
    assert audit.comparisons_without_spread("00", [markdown("## 1. A"), seeds, claim]) == []
    assert audit.comparisons_without_spread("00", [markdown("## 1. A"), code("x = 1"), claim]) == []


def test_a_speed_claim_beside_printed_timings_must_be_asserted():
    timed = code("t0, t1 = time_both()\nprint(t0, t1)", printed="1.25 s without, 0.31 s with")
    claim = markdown("The cache is faster.")
    assert len(audit.unchecked_speed_claims("00", [timed, claim])) == 1
    asserted = code("t0, t1 = time_both()\nprint(t0, t1)\nassert t1 < t0, 'the cached time'", printed="1.25 s, 0.31 s")
    assert audit.unchecked_speed_claims("00", [asserted, claim]) == []
    assert audit.unchecked_speed_claims("00", [code("x = 1", printed="no timing here"), claim]) == []
