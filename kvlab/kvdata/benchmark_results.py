"""Reading the kernel benchmark results that ``kvlab bench`` writes (CSV under ``benchmarks/results/``).

The file format belongs to :mod:`kvlab.bench.results` (its docstring lists every column); this module
reads those files with :func:`kvlab.bench.results.read_csv`, checks the columns the lessons plot and
converts them to numbers.

One row is one measurement: a kernel ``kind`` (``decode``, ``prefill``, ``write`` or ``sdpa``) on one
cache ``scheme`` at one ``batch`` × ``context`` shape, on one ``device``. The columns the lessons use:

=================  =====================================================================
``median_us``      median time of one call, microseconds
``bytes``          bytes the call must move (cache read + query + output), bytes
``gbps``           ``bytes / median time``, GB/s (10⁹ bytes per second)
``pct_copy_bw``    ``gbps`` as a percentage of ``copy_bw_gbps``
``copy_bw_gbps``   the device's measured copy bandwidth, GB/s (the roofline)
``rel_err_truth``  relative error of the output against the float64 truth
=================  =====================================================================

Other columns are kept as strings; ``source`` is added: the file name the row came from.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kvlab.bench.results import read_csv

#: Columns a results file must have.
BENCHMARK_COLUMNS: tuple[str, ...] = (
    "scheme", "batch", "context", "kind", "median_us", "bytes", "gbps", "pct_copy_bw",
    "rel_err_truth", "device", "copy_bw_gbps",
)
_INT_COLUMNS = ("batch", "context", "bytes")
_FLOAT_COLUMNS = ("median_us", "gbps", "pct_copy_bw", "rel_err_truth", "copy_bw_gbps")
#: Converted when present and not empty (``None`` when empty).
_OPTIONAL_INT_COLUMNS = ("query_len", "num_splits", "tile_n", "num_warps", "num_stages")
_OPTIONAL_FLOAT_COLUMNS = ("tflops", "floor_us", "pct_floor", "sdpa_default_us", "sdpa_flash_us",
                           "x_sdpa_default", "x_sdpa_flash")

#: Files in ``benchmarks/results/`` that are not kernel results.
_NOT_KERNEL_RESULTS = ("widgets_cpu.csv", "allocator_cpu.csv")


def _number(value: str, kind: type, column: str, line: int, path: Path):
    try:
        return kind(float(value)) if kind is int else float(value)
    except ValueError as exc:
        raise ValueError(
            f"{path.name} line {line}: column {column!r} must be a number, got {value!r}"
        ) from exc


@dataclass(frozen=True)
class BenchmarkResults:
    """Rows of one or more results files.

    Attributes:
        rows: one dict per measurement, numbers already converted.
        sources: the files read.
    """

    rows: list[dict] = field(default_factory=list)
    sources: list[Path] = field(default_factory=list)

    def values(self, column: str) -> list:
        """Distinct values of a column, sorted."""
        return sorted({r[column] for r in self.rows})

    def select(self, **where) -> list[dict]:
        """Rows whose columns equal the given values, e.g. ``select(kind="decode", batch=16)``."""
        return [r for r in self.rows if all(r.get(k) == v for k, v in where.items())]

    def __len__(self) -> int:
        return len(self.rows)


def load_benchmark_results(paths: Path | str | Iterable[Path | str]) -> BenchmarkResults:
    """Read results CSV files.

    Raises:
        ValueError: a file lacks one of :data:`BENCHMARK_COLUMNS` or holds a non-number in a numeric
            column (the message names the file, line and column).
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    rows: list[dict] = []
    sources: list[Path] = []
    for p in map(Path, paths):
        with p.open(newline="") as fh:
            header = next(csv.reader(fh), [])
        missing = [c for c in BENCHMARK_COLUMNS if c not in header]
        if missing:
            raise ValueError(f"{p.name} is not a kernel benchmark file: missing {', '.join(missing)}")
        for line, raw in enumerate(read_csv(str(p)), start=2):
            row = dict(raw, source=p.name)
            for c in _INT_COLUMNS:
                row[c] = _number(raw[c], int, c, line, p)
            for c in _FLOAT_COLUMNS:
                row[c] = _number(raw[c], float, c, line, p) if raw[c] not in ("", "nan") else float("nan")
            for cols, kind in ((_OPTIONAL_INT_COLUMNS, int), (_OPTIONAL_FLOAT_COLUMNS, float)):
                for c in cols:
                    if c in raw:
                        row[c] = _number(raw[c], kind, c, line, p) if raw[c] not in ("", None) else None
            rows.append(row)
        sources.append(p)
    return BenchmarkResults(rows, sources)


def find_benchmark_csv(start: Path | str | None = None) -> list[Path]:
    """Kernel results files in the nearest ``benchmarks/results/`` at or above ``start`` (default: cwd).

    Notebooks run from ``notebooks/``, so the search walks up to the repository root. Returns the files
    (sorted by name) whose header has every :data:`BENCHMARK_COLUMNS`, or ``[]``.
    """
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        results = folder / "benchmarks" / "results"
        if results.is_dir():
            found = []
            for p in sorted(results.glob("*.csv")):
                if p.name in _NOT_KERNEL_RESULTS:
                    continue
                with p.open(newline="") as fh:
                    header = next(csv.reader(fh), [])
                if all(c in header for c in BENCHMARK_COLUMNS):
                    found.append(p)
            return found
    return []
