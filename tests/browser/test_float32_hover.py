"""Heatmap hover values sent as float32 read, in the browser, exactly as the float64 values would
(:func:`kvlab.plots.quantization.float32_reading_as`). The browser itself formats both
(``Number.prototype.toPrecision``, what d3's ``g`` format and so plotly's ``%{customdata:.3g}`` use).
"""

from __future__ import annotations

import numpy as np
import pytest

from kvlab.plots.quantization import HOVER_DIGITS, float32_reading_as

pytestmark = pytest.mark.browser

TO_PRECISION_JS = "([values, digits]) => values.map((v) => v.toPrecision(digits))"


def _near_boundaries(rng: np.random.Generator, n: int) -> np.ndarray:
    """Float64 values just beside a rounding boundary of their 3-digit reading ((k + 0.5) units of the
    last digit), on either side, closer than float32's spacing: their float32 may read otherwise."""
    significand = rng.integers(100, 1000, n) + 0.5
    exponent = rng.integers(-9, 2, n).astype(float)
    offset = rng.uniform(1e-9, 6e-8, n) * rng.choice([-1.0, 1.0], n)
    return significand * 10.0 ** (exponent - 2) * (1.0 + offset)


def test_float32_hover_values_read_as_the_float64_ones_in_the_browser(browser, seed):
    rng = np.random.default_rng(seed)
    special = [0.0, 1e-7, 9.995, 0.3125]  # 0.3125 is a tie at 3 digits, exact in binary
    values = np.concatenate([_near_boundaries(rng, 3000), rng.lognormal(-4.0, 3.0, 3000), special])
    sent = float32_reading_as(values.reshape(2, -1), HOVER_DIGITS).ravel()
    assert sent.dtype == np.float32
    page = browser.new_page()
    try:
        read = lambda xs: page.evaluate(TO_PRECISION_JS, [[float(x) for x in xs], HOVER_DIGITS])  # noqa: E731
        want, got = read(values), read(sent)
        naive = read(values.astype(np.float32))
    finally:
        page.close()
    wrong = [(v, w, g) for v, w, g in zip(values, want, got, strict=True) if w != g]
    assert wrong == []
    # the values beside a boundary do need the care: plain rounding to float32 reads otherwise for some
    assert sum(w != n for w, n in zip(want, naive, strict=True)) > 100
    # and each sent value is the float32 nearest the value, or its neighbour towards it
    ulp = np.abs(np.spacing(values.astype(np.float32))).astype(np.float64)
    assert np.all(np.abs(sent.astype(np.float64) - values) <= 1.5 * ulp)
