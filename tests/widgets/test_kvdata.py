"""K/V data sources: the MiniLM forward pass, the synthetic generator, the benchmark CSV reader."""

from __future__ import annotations

import math

import pytest
import torch

from kvlab.kvdata import (
    SyntheticKVConfig,
    find_benchmark_csv,
    kv_sample,
    load_benchmark_results,
    minilm_unavailable_reason,
    rope_rotate,
    synthetic_kv,
)
from kvlab.kvdata import samples as samples_module

needs_minilm = pytest.mark.skipif(minilm_unavailable_reason() is not None,
                                  reason=f"real K/V unavailable: {minilm_unavailable_reason()}")


@needs_minilm
def test_minilm_forward_pass_reproduces_the_models_published_similarities():
    # The model's documentation shows these cosine similarities of its sentence embeddings
    # (mean-pooled, normalised last layer) for three sentences: 0.6660, 0.1046, 0.1411.
    from kvlab.kvdata import load_minilm

    model = load_minilm()
    sentences = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
    emb = torch.stack([model.sentence_embedding(s) for s in sentences])
    sim = emb @ emb.T
    assert sim[0, 1].item() == pytest.approx(0.6660, abs=5e-4)
    assert sim[0, 2].item() == pytest.approx(0.1046, abs=5e-4)
    assert sim[1, 2].item() == pytest.approx(0.1411, abs=5e-4)


@needs_minilm
def test_minilm_sample_is_one_layers_real_projections():
    s = kv_sample("minilm", num_tokens=100, layer=3)
    assert s.source == "minilm" and s.note == ""
    assert tuple(s.keys.shape) == (100, 12, 32) and tuple(s.queries.shape) == (100, 12, 32)
    other = kv_sample("minilm", num_tokens=100, layer=4)
    assert not torch.equal(s.keys, other.keys)
    assert torch.isfinite(s.keys).all() and s.keys.abs().max() > 1.0


def test_minilm_request_falls_back_to_synthetic_with_a_note(monkeypatch):
    monkeypatch.setattr(samples_module, "minilm_unavailable_reason", lambda: "the package X is not installed")
    s = kv_sample("minilm", num_tokens=64, num_kv_heads=2, head_size=32)
    assert s.source == "synthetic"
    assert "not installed" in s.note and "synthetic" in s.note


def test_synthetic_data_is_reproducible_per_seed(seed):
    a = synthetic_kv(64, 2, 32, seed=seed)
    b = synthetic_kv(64, 2, 32, seed=seed)
    c = synthetic_kv(64, 2, 32, seed=seed + 1)
    assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
    assert not torch.equal(a.keys, c.keys)


def test_outlier_channels_carry_the_offset(seed):
    cfg = SyntheticKVConfig(outlier_strength=30.0, rope=False)
    data = synthetic_kv(512, 2, 64, config=cfg, seed=seed)
    mean_abs = data.keys.abs().mean(dim=0)  # [heads, channels]
    for h, chans in enumerate(data.outlier_channels):
        others = [c for c in range(64) if c not in chans]
        assert mean_abs[h, chans].min() > 5 * mean_abs[h, others].max()


def test_rope_rotates_pairs_without_changing_their_length(seed):
    x = torch.randn(40, 3, 16, generator=torch.Generator().manual_seed(seed))
    y = rope_rotate(x, torch.arange(40), 10_000.0)
    norm = lambda t: (t[..., :8] ** 2 + t[..., 8:] ** 2).sqrt()
    torch.testing.assert_close(norm(y), norm(x), rtol=1e-5, atol=1e-5)
    # position 0 is not rotated; position p turns pair 0 by p radians
    torch.testing.assert_close(y[0], x[0])
    p = 7
    angle = math.atan2(y[p, 0, 8], y[p, 0, 0]) - math.atan2(x[p, 0, 8], x[p, 0, 0])
    assert math.remainder(angle - p, 2 * math.pi) == pytest.approx(0.0, abs=1e-5)


def test_benchmark_csv_is_found_from_a_subfolder_and_typed(tmp_path):
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    header = "scheme,batch,context,kind,median_us,bytes,gbps,pct_copy_bw,rel_err_truth,device,copy_bw_gbps\n"
    row = "bfloat16,16,4096,decode,123.5,1000000,8.1,0.3,1e-3,H100,3000\n"
    (results / "h100.csv").write_text(header + row)
    (results / "widgets_cpu.csv").write_text("explorer,median_ms\nmemory,3\n")
    (results / "notes.csv").write_text("a,b\n1,2\n")
    nb = tmp_path / "notebooks"
    nb.mkdir()
    found = find_benchmark_csv(nb)
    assert [p.name for p in found] == ["h100.csv"]
    res = load_benchmark_results(found)
    (row,) = res.select(kind="decode", scheme="bfloat16")
    assert row["batch"] == 16 and row["context"] == 4096 and row["median_us"] == 123.5
    assert res.values("device") == ["H100"]


def test_benchmark_csv_with_a_bad_number_names_file_line_and_column(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("scheme,batch,context,kind,median_us,bytes,gbps,pct_copy_bw,rel_err_truth,device,copy_bw_gbps\n"
                 "bf16,16,4096,decode,fast,1,1,1,1,H100,1\n")
    with pytest.raises(ValueError, match=r"bad.csv line 2: column 'median_us'"):
        load_benchmark_results(p)
