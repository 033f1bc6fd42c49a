"""The low-bit explorer: the chosen KIVI scheme on the frontier, with its bytes and what it refuses."""

from __future__ import annotations

import pytest

from kvlab.widgets.frontier_explorer import build_frontier_explorer, gemma_concurrency


@pytest.fixture(scope="module")
def explorer():
    return build_frontier_explorer(context=128, debounce_s=0)


def test_default_view_names_the_scheme_and_its_bytes(explorer):
    """kivi2, G=32, block 16, 4 KV heads x 128: 3.5 bits per element; Llama-3.1-8B layer 896 B."""
    msg = explorer.status.message
    assert explorer.last_error is None, msg
    assert "kivi2_g32_r1 (kvlab scheme, not a vLLM --kv-cache-dtype)" in msg
    assert "3.50 bits per element" in msg and "896 B per token" in msg
    fig = explorer.figures["frontier"]
    assert any(tr.name == "kivi2_g32_r1" for tr in fig.data)
    shown = [t for tr in fig.data if tr.mode == "markers+text" for t in tr.text]
    assert {"bfloat16", "int8_per_token_head", "int4_per_token_head", "kivi2_g32_r1"} <= set(shown)


def test_four_bits_and_residual(explorer):
    """kivi4, G=128, block 32: codes 128 + V pairs 4 + K pairs 128 * 4 / 32 = 16 -> 148 B per head
    and token -> 8 * 148 / 256 = 4.625 bits per element."""
    explorer.controls["bits"].value = 4
    explorer.controls["group"].value = 128
    explorer.controls["block_size"].value = 32
    explorer.controls["residual"].value = 2
    explorer.update()
    assert explorer.last_error is None, explorer.status.message
    assert "kivi4_g128_r2" in explorer.status.message and "4.62 bits per element" in explorer.status.message
    explorer.controls["residual"].value = 8  # 8 x 32 = 256 tokens > 128
    explorer.update()
    assert "longer than the 128-token context" in explorer.last_error


def test_two_bit_multiplies_gemma_concurrency():
    """Gemma 4 31B pages shrink 4096 -> 896 B per token and head group (16-token blocks): more than
    four times the requests fit (page-size unification rounds it, so the bound is loose)."""
    assert gemma_concurrency("kivi2", 16) > 4 * gemma_concurrency("bfloat16", 16)
