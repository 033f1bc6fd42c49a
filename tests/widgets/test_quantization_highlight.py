"""A new highlighted scheme in lesson 02's attention and bytes figures changes only what plotly.js
restyles without recalculating: the lines' opacity and width, and the outline (a layout shape)."""

from __future__ import annotations

import pytest

from kvlab.analysis import ContextError, scheme_bytes
from kvlab.plots.quantization import ATTENTION_MARKER_PX, attention_error_figure, scale_bytes_figure
from kvlab.widgets.quantization_explorer import COMPARED_SCHEMES


def _series():
    return {s: [ContextError(context=c, rel_error=1e-3 * (i + 1) * c / 64) for c in (64, 128, 256)]
            for i, s in enumerate(COMPARED_SCHEMES)}


def _traces(fig):
    return [t.to_plotly_json() for t in fig.data]


@pytest.mark.parametrize("a,b", [("bfloat16", "fp8_e4m3"), ("int8_per_token_head", "fp8_e5m2")])
def test_the_attention_highlight_moves_by_opacity_and_line_width_only(a, b):
    before = _traces(attention_error_figure(_series(), highlight=a, title="t"))
    after = _traces(attention_error_figure(_series(), highlight=b, title="t"))
    for old, new in zip(before, after, strict=True):
        changed = {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
        if old["name"] in (a, b):
            assert changed == {"opacity", "line"}
            assert old["line"]["color"] == new["line"]["color"]
        else:
            assert changed == set()
        assert new["marker"] == {"size": ATTENTION_MARKER_PX}
    strong = {t["name"]: (t["opacity"], t["line"]["width"]) for t in after}
    assert strong[b] == (1.0, 3) and strong[a] == (0.45, 1.5)


def test_the_bytes_highlight_is_an_outline_around_its_data_bar_and_the_bars_stay_the_same():
    rows = scheme_bytes(COMPARED_SCHEMES, 8, 128)
    figs = {s: scale_bytes_figure(rows, highlight=s, title="t") for s in ("bfloat16", "int8_per_token_head")}
    assert _traces(figs["bfloat16"]) == _traces(figs["int8_per_token_head"])
    assert "line" not in _traces(figs["bfloat16"])[0]["marker"]
    for scheme, fig in figs.items():
        (shape,) = fig.layout.shapes
        i = COMPARED_SCHEMES.index(scheme)
        # int8 per-token-head with 8 heads × 128 channels: 2 × 8 × 128 = 2,048 data bytes per token;
        # bfloat16: 2 bytes each, 4,096; the bar spans 0.8 of its category (bargap 0.2)
        data_bytes = {"bfloat16": 4096, "int8_per_token_head": 2048}[scheme]
        assert (shape.x0, shape.x1, shape.y0, shape.y1) == pytest.approx((i - 0.4, i + 0.4, 0, data_bytes))
        assert fig.layout.bargap == pytest.approx(0.2)
        assert shape.line.color == "#000000" and shape.line.width == 2
    assert scale_bytes_figure(rows, title="t").layout.shapes == ()
