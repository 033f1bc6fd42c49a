"""Every lesson notebook (notebooks/*.py) runs top to bottom in a real kernel without an error.

Run time and peak memory of each run are recorded (pytest's ``record_property`` and
``tests/_artifacts/notebook_runs.csv``); the limits themselves are checked by
``benchmarks/widgets_bench.py``, not here.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from kvlab.lessons import run_notebook

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.py"))
ARTIFACTS = ROOT / "tests" / "_artifacts"

pytestmark = pytest.mark.notebooks


def _record(name: str, seconds: float, peak_rss: int) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    out = ARTIFACTS / "notebook_runs.csv"
    new = not out.exists()
    with out.open("a", newline="") as fh:
        w = csv.writer(fh)
        if new:
            w.writerow(["notebook", "seconds", "peak_rss_mib"])
        w.writerow([name, f"{seconds:.2f}", f"{peak_rss / 2**20:.0f}"])


def test_there_are_six_lessons():
    assert len(NOTEBOOKS) >= 6, [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_headless(path, record_property):
    run = run_notebook(path, timeout_s=300)
    record_property("seconds", round(run.seconds, 2))
    record_property("peak_rss_mib", round(run.peak_rss_bytes / 2**20))
    _record(path.stem, run.seconds, run.peak_rss_bytes)
    assert run.error is None, f"{path.name}: {run.error}"
    code = [c for c in run.notebook.cells if c.cell_type == "code"]
    assert code and all(c.execution_count for c in code), "a code cell did not run"
    assert run.peak_rss_bytes > 0, "the kernel's memory was never sampled"
    # the lesson ends with a summary section
    last = run.notebook.cells[-1]
    assert last.cell_type == "markdown" and "Summary" in last.source
