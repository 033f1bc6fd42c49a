"""Every scheme on the shipped text: finite metrics, sensible order, the CLI's table and JSON."""

import json
import math

import pytest

from kvlab.cli.main import main
from kvlab.lm import all_variants, score_tokens
from kvlab.lm.quality import error_by_position, quality_rows


@pytest.fixture(scope="module")
def all_scores(model, corpus_ids):
    return score_tokens(model, corpus_ids[:64], all_variants(model.config.head_size), chunk_size=32)


def test_every_registered_scheme_that_fits_is_scored(all_scores):
    labels = set(all_scores)
    assert {"auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_per_token_head",
            "int8_per_token_head (truncate)", "int8_per_token_head (nearest)"} <= labels
    assert "kivi4_g128" not in labels  # a 128-channel group does not fit SmolLM2's 64-channel heads


def test_metrics_are_finite_and_ordered_by_precision(all_scores):
    kl = {k: s.mean_kl for k, s in all_scores.items()}
    for label, s in all_scores.items():
        assert s.num_predictions == 63
        assert math.isfinite(s.perplexity) and s.perplexity > 1, label
        assert 0 <= s.top1_agreement <= 1 and kl[label] > -1e-6, label
    base = all_scores["auto"]
    assert base.mean_kl == 0 and base.top1_agreement == 1
    # identical codes, identical results
    assert kl["fp8"] == kl["fp8_e4m3"]
    # more mantissa, less divergence; rounding to nearest beats vLLM's truncating int8 store
    assert kl["float16"] < kl["bfloat16"] < kl["int8_per_token_head (nearest)"]
    assert kl["int8_per_token_head (nearest)"] < kl["int8_per_token_head (truncate)"]
    assert kl["fp8_e4m3"] < kl["fp8_e5m2"]
    if "kivi2" in kl:
        assert kl["kivi4"] < kl["kivi2"] and kl["int8_per_token_head (nearest)"] < kl["int4_per_token_head"]


def test_error_by_position_bins_cover_every_prediction(all_scores):
    s = all_scores["fp8_e5m2"]
    bins = error_by_position(s, 20)
    assert [(b["start"], b["end"]) for b in bins] == [(0, 20), (20, 40), (40, 60), (60, 63)]
    assert sum(b["mean_kl"] * (b["end"] - b["start"]) for b in bins) == pytest.approx(s.mean_kl * 63)
    rows = quality_rows(all_scores)
    assert rows[0].kv_cache_dtype == "auto" and rows[0].tokens == 64


def test_cli_json_has_one_object_per_scheme(model, capsys):
    code = main(["quality", "--kv-cache-dtype", "bfloat16", "int8_per_token_head", "--max-tokens", "24",
                 "--new-tokens", "3", "--json"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["kv_cache_dtype"], r["rounding"]) for r in rows] == [
        ("auto", None), ("bfloat16", None), ("int8_per_token_head", "truncate"),
        ("int8_per_token_head", "nearest")]
    for r in rows:
        assert {"kv_cache_dtype", "tokens", "perplexity", "top1_agreement", "mean_kl"} <= set(r)
        assert r["tokens"] == 24 and len(r["first_divergence"]) == 8
    assert rows[0]["first_divergence"] == [None] * 8 and rows[0]["mean_kl"] == 0


def test_cli_table_scores_a_text_file(model, tmp_path, capsys):
    f = tmp_path / "t.txt"
    f.write_text("The cat sat on the mat. The dog sat on the log. A bird sat on a tree.", encoding="utf-8")
    assert main(["quality", "--kv-cache-dtype", "fp8_e5m2", "--text-file", str(f), "--new-tokens", "0"]) == 0
    out = capsys.readouterr().out
    assert "fp8_e5m2" in out and "perplexity" in out and "(not generated)" in out
