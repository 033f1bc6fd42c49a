"""The exercise notebooks run headless: with the solutions in place every check passes; untouched,
every check reports a failure and no cell raises."""

from __future__ import annotations

import pytest
from nbclient import NotebookClient

from kvlab.exercises.catalogue import EXERCISES

from .notebook_cells import check_outputs, exercise_path, read, tagged, with_solutions

pytestmark = pytest.mark.notebooks
IDS = [e.slug for e in EXERCISES]


def _execute(nb, tmp_path):
    """Run every cell in a fresh kernel; a cell that raises fails the test (CellExecutionError)."""
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    return nb


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_notebook_with_solutions_passes_every_check(exercise, tmp_path):
    nb = _execute(with_solutions(exercise), tmp_path)
    results = check_outputs(nb)
    assert len(results) == len(exercise.checks)
    for text in results:
        assert text.startswith("✓") and "passed" in text, text


@pytest.mark.parametrize("exercise", EXERCISES, ids=IDS)
def test_untouched_notebook_runs_and_reports_failures(exercise, tmp_path):
    nb = read(exercise_path(exercise))
    assert len(tagged(nb, "stub")) >= 1
    results = check_outputs(_execute(nb, tmp_path))
    assert len(results) == len(exercise.checks)
    for text in results:
        assert text.startswith("✗"), text
