"""The frontier's real-model column (:mod:`kvlab.analysis.frontier_lm`) on SmolLM2-135M."""

from __future__ import annotations

import math

import pytest

from kvlab.analysis.frontier_lm import MODEL_LABEL, model_quality
from kvlab.lm import find_model_file

pytestmark = pytest.mark.skipif(find_model_file() is None, reason="SmolLM2 model file not installed")


@pytest.fixture(scope="module")
def rows():
    return model_quality(["bfloat16", "kivi2_g32_r2", "kivi2", "kivi2_g128"], max_tokens=16)


def test_a_residual_longer_than_the_text_is_a_bf16_cache(rows):
    """16 tokens, block 16, residual of 2 blocks: no block has left the residual, so every K/V value is
    the bf16 one and kivi2_g32_r2 must predict exactly what the bf16 cache predicts, while kivi2
    (residual of 1 block: the one full block is quantized to 2 bits) must not."""
    bf16, resid, kivi2 = rows["bfloat16"], rows["kivi2_g32_r2"], rows["kivi2"]
    assert resid.perplexity == pytest.approx(bf16.perplexity, rel=1e-5)
    assert resid.top1_agreement == bf16.top1_agreement
    assert resid.mean_kl == pytest.approx(bf16.mean_kl, abs=1e-7)
    assert kivi2.mean_kl > 10 * max(bf16.mean_kl, 1e-6)


def test_baseline_first_and_a_scheme_that_does_not_fit_gets_a_note(rows):
    assert list(rows) == ["auto", "bfloat16", "kivi2_g32_r2", "kivi2", "kivi2_g128"]
    base = rows["auto"]
    assert base.top1_agreement == 1.0 and base.mean_kl == 0.0 and base.model == MODEL_LABEL
    assert base.tokens == 16 and math.isfinite(base.perplexity)
    bad = rows["kivi2_g128"]
    assert math.isnan(bad.perplexity) and "G=128" in bad.note and "64" in bad.note


def test_the_committed_frontier_table_is_what_the_model_gives_now():
    """``benchmarks/results/frontier.csv`` (quoted in ``docs/lowbit_schemes.md``) must be the numbers
    the scoring path gives today: its model columns once went stale unnoticed. Two
    schemes at the file's 512 tokens, against the file's values as written (4 significant digits)."""
    import csv
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "frontier.csv"
    with path.open(newline="") as f:
        table = {r["scheme"]: r for r in csv.DictReader(f)}
    now = model_quality(["int4_per_token_head", "kivi2_g32_r8"], max_tokens=512)
    for scheme in ("int4_per_token_head", "kivi2_g32_r8"):
        row = table[scheme]
        assert now[scheme].perplexity == pytest.approx(float(row["lm_perplexity"]), rel=1e-3), scheme
        assert now[scheme].top1_agreement == pytest.approx(float(row["lm_top1_agreement"]), abs=1e-3), scheme
