"""Summaries of element-wise errors: a histogram on a logarithmic axis and a few quantiles."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class LogHistogram:
    """Counts of ``|error|`` in bins equally spaced in ``log10``.

    Attributes:
        edges: ``bins + 1`` bin edges (error units, increasing).
        counts: elements per bin.
        num_exact: elements with zero error (not in any bin; a log axis has no 0).
        total: all elements.
    """

    edges: list[float]
    counts: list[int]
    num_exact: int
    total: int

    @property
    def centers(self) -> list[float]:
        """Geometric centre of each bin."""
        return [math.sqrt(a * b) for a, b in zip(self.edges[:-1], self.edges[1:], strict=True)]


def log_error_histogram(
    errors: torch.Tensor, bins: int = 40, low: float | None = None, high: float | None = None
) -> LogHistogram:
    """Histogram of non-zero ``|errors|`` over ``[low, high]`` with log-spaced bins.

    Args:
        errors: any tensor of errors (absolute values are taken).
        bins: number of bins.
        low, high: range (error units); default the smallest and largest non-zero error. Values
            outside are clipped into the first/last bin, so ``sum(counts) + num_exact == total``.
    """
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    e = errors.detach().cpu().numpy().astype(np.float64, copy=False).ravel()
    nz = np.abs(e[(e > 0) | (e < 0)])  # |e| > 0 (NaN excluded), with abs taken on the copy only
    total, exact = int(e.size), int(e.size - nz.size)
    if nz.size == 0:
        return LogHistogram([], [], exact, total)
    lo = float(nz.min()) if low is None else low
    hi = float(nz.max()) if high is None else high
    if not 0 < lo <= hi:
        raise ValueError(f"histogram range must satisfy 0 < low <= high, got {lo}, {hi}")
    if hi == lo:
        hi = lo * 1.0001
    log_lo, log_hi = math.log10(lo), math.log10(hi)
    logs = np.clip(np.log10(nz, out=nz), log_lo, log_hi, out=nz)  # nz is a copy: reused in place
    counts, _ = np.histogram(logs, bins=bins, range=(log_lo, log_hi))
    edges = np.logspace(log_lo, log_hi, bins + 1)
    return LogHistogram(edges.tolist(), [int(c) for c in counts], exact, total)
