"""Both editions of every chapter, as the instructors' grader sees them.

The complete edition is executed by nbval (``make test``), which compares every checker's printed verdict with the
committed one: here it is enough to check, without running anything, that every exercise's verdict is a committed
pass that nbval compares. The student edition runs top to bottom through the grader, every exercise not attempted
yet and training skipped (COURSE_SKIP_TRAINING), as a class without time to train would, in ``make gpu-dry-run``
(``tools/gpu_dry_run.py``), where it also takes the GPU's code paths; here, what makes that run enough.
"""

import ast
import re
from pathlib import Path

import nbformat
import pytest

from course_utils.grade import CHECK_CALL, exercises

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CHAPTERS = sorted(path.name for path in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("name", CHAPTERS)
def test_the_complete_edition_stores_a_compared_pass_for_every_exercise(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    verdicts = []
    for cell in nb.cells:
        if cell.cell_type != "code" or not CHECK_CALL.search(cell.source):
            continue
        assert "nbval-ignore-output" not in cell.metadata.get("tags", []), "nbval must compare every verdict"
        printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        verdicts += [line for line in printed.splitlines() if line.startswith(("✅", "❌"))]
    assert verdicts and all(line.startswith("✅") for line in verdicts)
    assert len(verdicts) == len(exercises(NOTEBOOKS / name)), "one verdict per exercise"


# What a GPU run or a training run decides; an exercise cell takes none of it, so the GPU dry run's run of the
# student editions (make gpu-dry-run), stubs in place of the exercises, leaves no GPU path untaken.
GPU_OR_TRAINING = re.compile(r"gpu_branch|get_device|cuda|autocast|SKIP_TRAINING|\btrain\w*\(|estimate_loss")


def _bound(tree: ast.Module) -> set[str]:
    """The names a cell binds in the notebook's namespace: by assignment, loop, ``with``, import, ``def`` or ``class``
    (not inside a function, a class or a comprehension, whose names are their own)."""
    names: set[str] = set()
    own_scope = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
                 ast.DictComp, ast.GeneratorExp)  # fmt: skip

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(child.name)
            if isinstance(child, own_scope):
                continue
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                names.add(child.id)
            elif isinstance(child, ast.alias):
                names.add((child.asname or child.name).split(".")[0])
            visit(child)

    visit(tree)
    return names


@pytest.mark.parametrize("name", CHAPTERS)
def test_no_exercise_takes_a_gpu_branch_or_trains(name):
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in nb.cells:
        if "exercise" in cell.metadata.get("tags", []):
            assert not GPU_OR_TRAINING.search(cell.source), cell.source[:80]


def _parse(source: str) -> ast.Module:
    """A code cell as Python: IPython's own syntax (`!torchrun ...`) turned into the calls it stands for."""
    from IPython.core.inputtransformer2 import TransformerManager

    return ast.parse(TransformerManager().transform_cell(source))


@pytest.mark.parametrize("name", CHAPTERS)
def test_no_check_outside_an_exercise_reads_what_an_exercise_binds(name):
    """The GPU dry run turns the chapter's asserts into reports (after 3 training steps, trained figures fail); a
    failed assert about an exercise's stub would then go unseen. A stub's function raises where it is called, an error
    the dry run counts; only a name an exercise binds, read by an assert, could hide one."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code" and not c.source.lstrip().startswith("%")]
    exercise = set().union(*(_bound(_parse(c.source)) for c in code if "exercise" in c.metadata.get("tags", [])))
    assert exercise
    for cell in code:
        if "exercise" not in cell.metadata.get("tags", []):
            for node in ast.walk(_parse(cell.source)):
                if isinstance(node, ast.Assert):
                    read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                    assert not read & exercise, f"{ast.unparse(node)[:80]} reads {read & exercise}"


@pytest.mark.parametrize("name", CHAPTERS)
def test_a_predictions_verdict_is_folded_in_the_complete_edition(name):
    """The verdict of a prediction names its answer: presented as it is (RISE), the complete edition must not show it
    on the question's slide, before the cells that measure it."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    predictions = [c for c in nb.cells if c.cell_type == "code" and "check_prediction(" in c.source]
    assert predictions
    for cell in predictions:
        assert cell.metadata.get("jupyter", {}).get("outputs_hidden") is True, cell.source[:80]


@pytest.mark.parametrize("name", CHAPTERS)
def test_the_measurement_after_a_prediction_is_folded_in_the_student_edition(name):
    """The cell after a prediction asserts what it measures, which answers the prediction: in the student edition its
    code is folded (JupyterLab) and shown as a titled form (Colab), so the question is answered before it is read."""
    cells = [c for c in nbformat.read(NOTEBOOKS / "student" / name, as_version=4).cells if c.cell_type == "code"]
    measured = [c for c in cells if "runs-first" not in c.metadata.get("tags", [])]  # chapter 06 trains in between
    after = [measured[i + 1] for i, c in enumerate(measured[:-1]) if "check_prediction(" in c.source]
    assert after
    for cell in after:
        assert cell.metadata.get("jupyter", {}).get("source_hidden") is True and cell.metadata.get("cellView") == "form"
        assert cell.source.startswith("# @title The measurement"), cell.source[:80]


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_cell_that_asserts_a_predictions_answer_is_folded_in_the_student_edition(name):
    """A later cell that asserts what a prediction asked (chapter 04 measures its runs in a second cell) is folded
    as the first one is: tagged "measurement" in the source."""
    cells = [c for c in nbformat.read(NOTEBOOKS / "student" / name, as_version=4).cells if c.cell_type == "code"]
    for cell in cells:
        if "what the prediction above asked" in cell.source:
            assert cell.metadata.get("jupyter", {}).get("source_hidden") is True, cell.source[:80]
            assert cell.source.startswith("# @title The measurement"), cell.source[:80]
