"""kvlab against every real vLLM start-up log in tests/data/vllm_startup_logs.json.

Each entry is checked the way its lines allow (``check``): from the logged memory (every byte count
that rounds to the two-decimal GiB), from a logged block count, from the size and concurrency
alone, from a start-up error, from a logged block size, or a refusal. Entries whose ``expect`` is
``mismatch`` must still mismatch (so a fix shows up here) and carry their explanation.
"""

from __future__ import annotations

import math

import pytest

from kvlab.serving.startup_log import GIB, predict_from_blocks, predict_from_logged_memory
from tests.sizing.startup_log_entries import engine_config, load_entries, logged

ENTRIES = load_entries()
BY_CHECK = {}
for _e in ENTRIES:
    BY_CHECK.setdefault(_e["check"], []).append(_e)


def ids(entries):
    return [e["id"] for e in entries]


def test_the_file_covers_at_least_twenty_logs_with_sources_and_families():
    assert len(ENTRIES) >= 20
    assert len({e["id"] for e in ENTRIES}) == len(ENTRIES)
    for e in ENTRIES:
        assert e["url"].startswith("https://github.com/"), e["id"]
        assert e["lines"] and e["flags"] is not None and e["vllm_version"], e["id"]
        if e["expect"] != "match":
            assert len(e["explanation"]) > 40, e["id"]
    families = " ".join(e["family"] for e in ENTRIES)
    for family in ("dense", "sliding_window", "mla", "gated_deltanet", "mamba2", "speculative",
                   "kv_sharing", "gpt-oss"):
        assert family in families, family


@pytest.mark.parametrize("family", ["kv_sharing", "gpt-oss", "mla", "gated_deltanet", "speculative"])
def test_each_family_has_a_start_up_that_succeeded_and_matches(family):
    """A memory line, a size line and a concurrency line from one start-up that went through."""
    full = [e for e in BY_CHECK["startup"]
            if family in e["family"] and e["expect"] == "match"
            and {"available", "size", "concurrency"} <= set(e["lines"])]
    assert full, f"no successful start-up log for {family}"


@pytest.mark.parametrize("entry", BY_CHECK["startup"], ids=ids(BY_CHECK["startup"]))
def test_startup_lines_from_the_logged_memory(entry):
    config, got = engine_config(entry), logged(entry)
    if "max_model_len" in got:
        assert got["max_model_len"] == entry["kvlab"]["max_model_len"]
    pred = predict_from_logged_memory(config, got["available_gib"])
    found = pred.pairs_with(got.get("tokens"), got.get("concurrency"))
    if "blocks" in got:
        found = tuple(n for n in found if n == got["blocks"])
    if entry["expect"] == "mismatch":
        assert not found, f"{entry['id']} now matches kvlab: update the file"
        return
    assert found, (
        f"{entry['id']}: kvlab predicts {pred.kv_cache_tokens} tokens / {pred.concurrency} "
        f"for {pred.num_blocks} blocks, the log says {got.get('tokens')} / {got.get('concurrency')}"
    )
    if "v0_tokens" in got:  # the V0 engine refused: blocks x 16 tokens < max_model_len
        assert got["blocks"] * pred.block_size == got["v0_tokens"] < got["error_len"]
        with pytest.raises(ValueError, match="needs .* of KV cache"):
            config.replace(kv_cache_memory=int((got["available_gib"] + 0.005) * GIB)).plan()


@pytest.mark.parametrize("entry", BY_CHECK["blocks"], ids=ids(BY_CHECK["blocks"]))
def test_concurrency_from_a_logged_block_count(entry):
    got = logged(entry)
    pred = predict_from_blocks(engine_config(entry), (got["blocks"],))
    assert pred.concurrency == (got["concurrency"],)


@pytest.mark.parametrize("entry", BY_CHECK["no_memory"], ids=ids(BY_CHECK["no_memory"]))
def test_size_and_concurrency_come_from_one_block_count(entry):
    config, got = engine_config(entry), logged(entry)
    r = predict_from_blocks(config, (1,)).blocks_per_request
    c = float(got["concurrency"])
    window = range(math.floor((c - 0.01) * r), math.ceil((c + 0.01) * r) + 1)
    pred = predict_from_blocks(config, window)
    assert pred.pairs_with(got["tokens"], got["concurrency"]), (
        f"{entry['id']}: no block count gives {got['tokens']} tokens and {got['concurrency']}x with R={r}"
    )


@pytest.mark.parametrize("entry", BY_CHECK["error"], ids=ids(BY_CHECK["error"]))
def test_startup_errors_quote_kvlabs_need_and_estimate(entry):
    config, got = engine_config(entry), logged(entry)
    pred = predict_from_logged_memory(config, got["error_available_gib"])
    assert round(pred.needed_gib, 2) == got["needed_gib"]
    assert pred.needed_gib > got["error_available_gib"]
    with pytest.raises(ValueError, match=f"max_model_len={got['error_len']} tokens needs"):
        config.replace(kv_cache_memory=int(got["error_available_gib"] * GIB)).plan()
    if "estimate" in got:
        lo, hi = pred.max_model_len_estimates
        assert lo <= got["estimate"] <= hi


@pytest.mark.parametrize("entry", BY_CHECK["block_size"], ids=ids(BY_CHECK["block_size"]))
def test_hybrid_block_size(entry):
    assert engine_config(entry).hybrid_block_choice().block_size == logged(entry)["block_size"]


@pytest.mark.parametrize("entry", BY_CHECK["refused"], ids=ids(BY_CHECK["refused"]))
def test_unsupported_configurations_are_refused_by_name(entry):
    with pytest.raises(ValueError, match=entry["refusal"]):
        engine_config(entry).plan()
