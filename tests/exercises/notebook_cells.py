"""Reading the exercise and solution notebooks (jupytext percent files) for the tests.

* the learner's code is in cells tagged ``stub`` (exercise notebooks) and ``solution`` (solutions),
  each self-contained (its own imports), in the same order;
* each check is a cell tagged ``check``.

:func:`load_cells` imports tagged cells as a real module (Triton's ``@jit`` needs source files);
:func:`with_solutions` returns the exercise notebook with every stub cell replaced by its solution.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
from pathlib import Path
from types import ModuleType

import jupytext
import nbformat

from kvlab.exercises.catalogue import Exercise

ROOT = Path(__file__).resolve().parents[2]
EXERCISE_DIR = ROOT / "notebooks" / "exercises"
SOLUTION_DIR = ROOT / "notebooks" / "solutions"
_counter = itertools.count()


def exercise_path(exercise: Exercise) -> Path:
    return EXERCISE_DIR / f"{exercise.slug}.py"


def solution_path(exercise: Exercise) -> Path:
    return SOLUTION_DIR / f"{exercise.slug}.py"


def read(path: Path) -> nbformat.NotebookNode:
    return jupytext.read(path)


def tagged(nb: nbformat.NotebookNode, tag: str) -> list[nbformat.NotebookNode]:
    """Code cells carrying ``tag``, in order."""
    return [c for c in nb.cells if c.cell_type == "code" and tag in c.metadata.get("tags", [])]


def defined_names(source: str) -> set[str]:
    """Top-level functions and classes a cell defines."""
    tree = ast.parse(source)
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def load_cells(path: Path, tag: str, tmp_dir: Path) -> ModuleType:
    """Import the cells of ``path`` tagged ``tag`` as one module written under ``tmp_dir``."""
    cells = tagged(read(path), tag)
    assert cells, f"{path.name} has no cell tagged {tag!r}"
    name = f"_exercise_cells_{next(_counter)}"
    file = tmp_dir / f"{name}.py"
    file.write_text("\n\n".join(c.source for c in cells) + "\n")
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def with_solutions(exercise: Exercise) -> nbformat.NotebookNode:
    """The exercise notebook with each stub cell's source replaced by the matching solution cell."""
    nb = read(exercise_path(exercise))
    stubs = tagged(nb, "stub")
    solutions = tagged(read(solution_path(exercise)), "solution")
    assert len(stubs) == len(solutions), (
        f"{exercise.slug}: {len(stubs)} stub cells but {len(solutions)} solution cells"
    )
    for stub, solution in zip(stubs, solutions, strict=True):
        assert defined_names(stub.source) == defined_names(solution.source), (
            f"{exercise.slug}: a stub defines {sorted(defined_names(stub.source))}, its solution "
            f"{sorted(defined_names(solution.source))}"
        )
        stub.source = solution.source
    return nb


def check_outputs(nb: nbformat.NotebookNode) -> list[str]:
    """The plain-text result shown by every executed ``check`` cell (one per cell; '' when none)."""
    texts = []
    for cell in tagged(nb, "check"):
        shown = [o["data"]["text/plain"] for o in cell.get("outputs", [])
                 if o.get("output_type") in ("execute_result", "display_data")
                 and "text/plain" in o.get("data", {})]
        texts.append("\n".join(shown))
    return texts
