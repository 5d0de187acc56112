"""The package's layout is its design: rooms (sub-packages) that import one another in one direction, and no
import circle anywhere, counting imports inside functions and under TYPE_CHECKING too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import course_utils

PACKAGE = Path(course_utils.__file__).parent

# Each room may import the rooms listed after it, never those before it (or a sibling at its own rank).
LAYERS = [
    ["grade"],
    ["remote"],  # the link the grader calls answers through
    ["checks"],
    ["teaching"],
    ["training"],
    ["model", "data"],  # the model and the data know nothing of each other
    ["utils", "dry_run"],  # dry_run: what a GPU dry run cuts short, for the model's generation and the training loop
    ["settings"],
]
RANK = {room: rank for rank, rooms in enumerate(LAYERS) for room in rooms}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, anywhere in its source (top level, functions,
    TYPE_CHECKING blocks). ``from .x import y`` counts as importing ``x``, and ``x.y`` too when that is a module;
    ``from . import y``, naming modules only, as importing them alone."""
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                submodules = [f"{target}.{alias.name}" for alias in node.names]
                named_modules_only = node.module is None and all(m in files for m in submodules)  # from . import x
                candidates = submodules if named_modules_only else [target, *submodules]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                continue
            edges |= {c for c in candidates if c in files and c != name}
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (its strongly connected components of more than one module), by Tarjan's
    algorithm. A package importing its own modules is not a circle, nor a module's parent packages running first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_the_package_has_no_import_circle():
    assert cycles(import_graph(PACKAGE)) == []


def test_the_circle_detector_finds_a_circle_through_a_lazy_import(tmp_path):
    """The shape of a circle this package once had: b imports a at the top, a imports b inside a function."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from .b import g\n    return g\n")
    (package / "b.py").write_text("from .a import f\n\ndef g():\n    return f\n")
    assert cycles(import_graph(package)) == [["pkg.a", "pkg.b"]]


def test_rooms_import_downwards_only():
    upward = []
    for module, targets in import_graph(PACKAGE).items():
        here = room(module)
        if here == "__init__":
            continue  # the package's front door re-exports every room
        for target in targets:
            there = room(target)
            if there != here and (there == "__init__" or RANK[there] <= RANK[here]):
                upward.append(f"{module} imports {target}")
    assert upward == []


def test_every_room_is_placed_and_the_top_level_stays_small():
    top_modules = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    rooms = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert len(top_modules) <= 12, top_modules
    assert set(top_modules) | set(rooms) == set(RANK), "a new room or module needs its place in LAYERS"


@pytest.mark.parametrize("room_name", ["model", "data", "training", "teaching", "checks"])
def test_each_room_lists_its_modules_in_its_docstring(room_name):
    room_package = __import__(f"course_utils.{room_name}", fromlist=["_"])
    doc = room_package.__doc__ or ""
    modules = sorted(p.stem for p in (PACKAGE / room_name).glob("*.py") if p.stem != "__init__")
    assert [m for m in modules if f"``{m}``" not in doc] == []


def test_the_module_map_names_every_room():
    doc = course_utils.__doc__ or ""
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    for name in RANK:
        assert f"``{name}" in doc, name
        assert f"`{name}" in readme, name


def test_the_chapters_import_only_from_the_front_door_and_the_graders():
    """Chapters say `from course_utils import ...` (and the graders' `course_utils.checks`): where a name lives
    inside the package may change without a chapter changing meaning."""
    allowed = {"course_utils", "course_utils.checks", "course_utils.checks.bug_lab"}
    sources = sorted((PACKAGE.parent / "notebooks" / "src").glob("*.py"))
    imported = {
        node.module
        for source in sources
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course_utils")
    }
    assert imported - allowed == set()


@pytest.mark.slow  # a few seconds: a second interpreter imports the package
def test_the_graders_processes_load_only_what_they_use_and_a_name_loads_every_room():
    """The grader, its runner and a kernel's end of the link start once per graded notebook: importing them must not
    load the plots (matplotlib) or the conversions' libraries. The first name taken from ``course_utils`` imports
    every room, as an eager package would (the plots' settings included)."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "import course_utils.grade, course_utils.checks, course_utils.remote\n"
        "print(sorted(m for m in ('matplotlib', 'transformers', 'course_utils.teaching') if m in sys.modules))\n"
        "from course_utils import set_seed\n"
        "print(all(f'course_utils.{r}' in sys.modules for r in ('data', 'model', 'teaching', 'training', 'utils')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["[]", "True"], done.stdout + done.stderr
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        course_utils.not_a_name  # noqa: B018
