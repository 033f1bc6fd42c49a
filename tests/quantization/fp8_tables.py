"""An independent fp8 decoder built from the bit layout alone (no torch fp8 casts), used to check
the quantizers' rounding."""

from __future__ import annotations

import numpy as np


def fp8_values(fmt: str) -> np.ndarray:
    """All finite non-negative values of an fp8 format, decoded from (exponent, mantissa) bits."""
    exp_bits, man_bits, bias = {"e4m3": (4, 3, 7), "e5m2": (5, 2, 15)}[fmt]
    values = []
    for e in range(2**exp_bits):
        for m in range(2**man_bits):
            if fmt == "e4m3" and e == 15 and m == 7:
                continue  # e4m3fn: the all-ones pattern is NaN, no infinities
            if fmt == "e5m2" and e == 31:
                continue  # e5m2: exponent all ones is Inf/NaN (IEEE-like)
            if e == 0:
                values.append(m / 2**man_bits * 2.0 ** (1 - bias))  # subnormal
            else:
                values.append((1 + m / 2**man_bits) * 2.0 ** (e - bias))
    return np.array(values, dtype=np.float64)


def round_to_fp8(y: np.ndarray, fmt: str) -> np.ndarray:
    """Round to the nearest fp8 value, ties to the value with an even mantissa (saturating)."""
    grid = fp8_values(fmt)  # sorted ascending, index parity = mantissa parity
    mag = np.minimum(np.abs(y.astype(np.float64)), grid[-1])
    hi = np.clip(np.searchsorted(grid, mag), 1, len(grid) - 1)
    lo = hi - 1
    d_lo, d_hi = mag - grid[lo], grid[hi] - mag
    pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
    out = np.where(pick_hi, grid[hi], grid[lo])
    return np.sign(y) * out
