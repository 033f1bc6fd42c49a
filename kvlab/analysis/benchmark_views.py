"""Kernel benchmark rows compared across schemes: speed-up over bfloat16 at each context length."""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.kvdata.benchmark_results import BenchmarkResults


@dataclass(frozen=True)
class Speedup:
    """One scheme at one context against the baseline scheme.

    Attributes:
        scheme: the scheme.
        context: tokens per sequence.
        median_us: its median time (µs).
        baseline_us: the baseline's median time at the same shape (µs).
        pct_copy_bw: its share of the copy bandwidth (%).
    """

    scheme: str
    context: int
    median_us: float
    baseline_us: float
    pct_copy_bw: float

    @property
    def speedup(self) -> float:
        """``baseline_us / median_us`` (> 1: faster than the baseline)."""
        return self.baseline_us / self.median_us


def fastest_per_point(rows: list[dict]) -> tuple[list[dict], int]:
    """One row per (kind, scheme, batch, context, device): the fastest one.

    Tuning sweeps measure several launch configurations of one shape; a plot over context wants one
    point per shape. Returns the kept rows and how many rows were dropped.
    """
    best: dict[tuple, dict] = {}
    for r in rows:
        key = (r["kind"], r["scheme"], r["batch"], r["context"], r["device"])
        if key not in best or r["median_us"] < best[key]["median_us"]:
            best[key] = r
    return list(best.values()), len(rows) - len(best)


def speedups(results: BenchmarkResults, *, kind: str = "decode", batch: int = 16, device: str | None = None,
             source: str | None = None, baseline: str = "bfloat16") -> list[Speedup]:
    """Every scheme's time against ``baseline`` at the same kind, batch, context and device.

    ``source`` picks one results file (by name) when several were loaded; default the first.

    Raises:
        ValueError: when the selection has no row of ``baseline`` to compare with.
    """
    device = device or (results.values("device") or [None])[0]
    source = source or (results.values("source") or [None])[0]
    rows = results.select(kind=kind, batch=batch, device=device, source=source)
    base = {r["context"]: r["median_us"] for r in rows if r["scheme"] == baseline}
    if not base:
        raise ValueError(f"no {baseline} rows for kind={kind}, batch={batch}, device={device}")
    return [Speedup(r["scheme"], r["context"], r["median_us"], base[r["context"]], r["pct_copy_bw"])
            for r in sorted(rows, key=lambda r: (r["scheme"], r["context"]))
            if r["context"] in base and r["scheme"] != baseline]
