"""The frontier: bytes and attention error per scheme, measured through the paged caches."""

from __future__ import annotations

import math

import pytest

from kvlab.analysis.frontier import FrontierPoint, frontier, on_frontier
from kvlab.kvdata.samples import kv_sample


@pytest.fixture(scope="module")
def points():
    sample = kv_sample("synthetic", num_tokens=256, num_kv_heads=2, head_size=64, outlier_strength=20.0)
    names = ("bfloat16", "int8_per_token_head", "int4_per_token_head", "kivi4", "kivi2", "kivi2_g32_r4",
             "kivi2_g64")
    return {p.scheme: p for p in frontier(sample, names)}


def test_bytes_worked_by_hand(points):
    """2 KV heads, head 64, block 16. bf16: 2*2*64*2 = 512 B. kivi2: codes 2*2*64/4 = 64; V pairs
    2 heads * 2 groups * 4 B = 16; K pairs 2 * 64 * 4 B / 16 = 32 -> 112 B = 3.5 bits per element.
    kivi2_g64: 64 + 8 + 32 = 104 B."""
    assert points["bfloat16"].bytes_per_token == 512 and points["bfloat16"].bits_per_element == 16.0
    assert points["kivi2"].bytes_per_token == 112 and points["kivi2"].bits_per_element == 3.5
    assert points["kivi2_g64"].bytes_per_token == 104
    assert points["int4_per_token_head"].bytes_per_token == 2 * (64 + 8)
    assert not points["kivi2"].is_vllm and points["int8_per_token_head"].is_vllm


def test_errors_order_as_the_formats_say(points):
    e = {k: p.rel_error for k, p in points.items()}
    assert e["bfloat16"] < e["int8_per_token_head"] < e["kivi4"] < e["kivi2"]
    assert e["kivi2_g32_r4"] < e["kivi2"]  # 64 of 256 tokens kept exact
    # outlier key channels: per-channel 4-bit keys beat per-token 4-bit by a wide margin
    assert 3 * e["kivi4"] < e["int4_per_token_head"]


def test_residual_longer_than_context_refused():
    sample = kv_sample("synthetic", num_tokens=64, num_kv_heads=1, head_size=32)
    with pytest.raises(ValueError, match="longer than the 64-token context"):
        frontier(sample, ("kivi2_g32_r8",))


def test_group_larger_than_head_is_a_noted_gap():
    sample = kv_sample("synthetic", num_tokens=32, num_kv_heads=1, head_size=32)
    (p,) = frontier(sample, ("kivi2_g64",))
    assert math.isnan(p.rel_error) and "does not divide" in p.note


def test_pareto_frontier_worked_by_hand():
    def pt(name, bits, err):
        return FrontierPoint(name, True, 0, bits, err, "hand", 1)

    pts = [pt("a", 16, 0.01), pt("b", 8, 0.05), pt("c", 8, 0.2), pt("d", 4, 0.3), pt("e", 5, 0.4)]
    assert [p.scheme for p in on_frontier(pts)] == ["d", "b", "a"]


def test_figure_shows_every_measured_point(points):
    from kvlab.plots.frontier import frontier_figure

    fig = frontier_figure(list(points.values()), "t", highlight="kivi2")
    shown = [name for tr in fig.data if tr.mode == "markers+text" for name in tr.text]
    assert sorted(shown) == sorted(points)
    kvlab_trace = next(tr for tr in fig.data if tr.name.startswith("kvlab"))
    assert "kivi2" in kvlab_trace.text and "bfloat16" not in kvlab_trace.text
    line = next(tr for tr in fig.data if tr.name == "frontier")
    assert list(line.x) == sorted(line.x)
    assert fig.layout.yaxis.type == "log"
