"""The family picker: one bar per family, bytes split by what stores them, the picked family's sentence."""

from __future__ import annotations

import pytest

from kvlab.analysis.family_views import FAMILIES, FAMILY_NAMES, family_request_bytes, get_family
from kvlab.widgets.family_picker import build_family_picker

GIB = 2**30


def test_rows_split_bytes_by_what_stores_them():
    rows = {r.family: r for r in family_request_bytes(32768)}
    # Llama 3.1 8B: 32 layers x 8 heads x (128 + 128) x 2 B = 131,072 B per token, nothing else
    dense = rows["dense (GQA)"]
    assert (dense.attention, dense.state, dense.draft) == (32768 * 131072, 0, 0)
    # DeepSeek-V3: 61 MLA layers x 576 x 2 B per token (block 64 divides 32,768)
    assert rows["MLA"].attention == 61 * 576 * 2 * 32768
    # Gemma 4 E4B: only the 24 unshared layers cost memory (20 sliding, 4 full of head 512)
    assert rows["cross-layer KV sharing"].attention > 0
    hybrid, mtp = rows["gated DeltaNet hybrid"], rows["speculative decoding (MTP)"]
    # Qwen3-Next at TP 4: 36 state layers, one 278,528 B page each (block 272 x 1,024 B per token)
    assert hybrid.state == 36 * 278_528 and hybrid.draft == 0
    # with MTP (2 tokens) the conv keeps 5 rows: state 2,048 x 5 x 2 + 262,144 = 282,624 B -> block 288,
    # page 294,912 B, and 1 + 2 pages per request
    assert mtp.state == 36 * 3 * 294_912 and mtp.draft > 0


def test_picker_shows_the_sentence_and_bolds_the_family():
    picker = build_family_picker(family="MLA", debounce_s=0)
    assert picker.last_error is None
    assert (get_family("MLA").trick[:40] in picker.summary.value
            and "requests of 32,768 tokens fit" in picker.summary.value)
    fig = picker.figures["bytes"]
    assert [t.name for t in fig.data] == ["attention K/V", "state pages", "draft K/V"]
    assert len(fig.data[0].y) == len(FAMILIES) and "<b>MLA</b>" in fig.data[0].y
    picker.controls["family"].value = "Mamba-2 hybrid"
    picker.refresh()
    assert "<b>Mamba-2 hybrid</b>" in picker.figures["bytes"].data[0].y
    assert "nemotron-nano-9b-v2" in picker.summary.value


def test_too_little_memory_is_reported_not_raised():
    picker = build_family_picker(family="dense (GQA)", kv_memory_gib=1.0, max_model_len=131072, debounce_s=0)
    assert "vLLM would not start" in picker.summary.value


def test_unknown_family_is_refused():
    with pytest.raises(ValueError, match="family must be one of"):
        get_family("retnet")
    assert len(set(FAMILY_NAMES)) == len(FAMILY_NAMES) >= 8
