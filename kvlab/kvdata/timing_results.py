"""The step-time model's validation (predicted vs measured GPU steps), as committed in
``benchmarks/results/timing_validation_<device>.csv``, for the lessons to plot."""

from __future__ import annotations

import csv
from pathlib import Path

_INTS = ("sequences", "tokens", "context")
_TEXT = ("scheme", "kind")


def load_timing_validation(start: Path | str | None = None) -> list[dict] | None:
    """Rows of the newest ``timing_validation_*.csv`` in the nearest ``benchmarks/results/`` at or
    above ``start`` (default: the working directory), numbers converted; ``None`` when there is none
    (an installed package without the repository's benchmark results)."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        files = sorted((folder / "benchmarks" / "results").glob("timing_validation_*.csv"))
        if files:
            with files[-1].open(newline="") as f:
                rows = list(csv.DictReader(f))
            return [
                {k: (v if k in _TEXT else int(v) if k in _INTS else float(v)) for k, v in r.items()}
                for r in rows
            ]
    return None
