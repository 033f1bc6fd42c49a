"""The llama forward over kvlab's paged cache: shape from the GGUF, paging, chunking, backends."""

import pytest
import torch

from kvlab.lm import CacheVariant, ModelKVCache, score_tokens


def _prefill_logits(model, ids, chunks, *, scheme="auto", backend="torch", window=None, block_size=16):
    """Logits of every position, the prompt fed in the given chunk sizes."""
    kv = ModelKVCache(model.config, scheme, max_tokens=len(ids), block_size=block_size)
    seq = kv.add_sequence()
    out, pos = [], 0
    with torch.no_grad():
        for n in chunks:
            batch = kv.plan_step([seq], [n])
            h = model.forward(torch.tensor(ids[pos : pos + n]), kv, batch, backend=backend,
                              sliding_window=window)
            out.append(model.logits(h))
            pos += n
    return torch.cat(out)


def test_shape_is_read_from_the_gguf_metadata(model):
    # SmolLM2-135M's published shape
    c = model.config
    assert (c.num_layers, c.hidden_size, c.num_q_heads, c.num_kv_heads, c.head_size) == (30, 576, 9, 3, 64)
    assert (c.intermediate_size, c.rope_base, c.context_length, c.vocab_size) == (1536, 100000.0, 8192, 49152)
    assert model.weights.output is model.weights.token_embedding  # tied embeddings


def test_bf16_cache_agrees_with_the_fp32_cache(model, corpus_ids):
    ids = corpus_ids[:128]
    res = score_tokens(model, ids, [CacheVariant("bfloat16")], chunk_size=64)
    base, bf16 = res["auto"], res["bfloat16"]
    assert base.num_predictions == bf16.num_predictions == 127
    assert bf16.top1_agreement >= 0.97
    assert abs(bf16.perplexity / base.perplexity - 1) < 0.005
    assert 0 < bf16.mean_kl < 5e-4
    # a real text, not noise: a 135M model predicts English prose far better than uniform (49,152)
    assert 5 < base.perplexity < 200


def test_chunked_prefill_and_decode_match_one_prefill(model, corpus_ids):
    ids = corpus_ids[:70]
    whole = _prefill_logits(model, ids, [70])
    pieces = _prefill_logits(model, ids, [23, 16, 30, 1], block_size=8)  # chunks straddle blocks; decode last
    torch.testing.assert_close(pieces, whole, rtol=0, atol=2e-3)


def test_float64_reference_backend_agrees_with_the_torch_backend(model, corpus_ids):
    # an unquantized cache: with int8, a 1e-7 difference can flip a code and grow through 30 layers
    ids = corpus_ids[:20]
    fast = _prefill_logits(model, ids, [12, 8])
    ref = _prefill_logits(model, ids, [12, 8], backend="reference")
    torch.testing.assert_close(fast, ref, rtol=0, atol=2e-3)


def test_sliding_window_is_a_what_if(model, corpus_ids):
    ids = corpus_ids[:48]
    full = _prefill_logits(model, ids, [48])
    wide = _prefill_logits(model, ids, [48], window=48)
    narrow = _prefill_logits(model, ids, [48], window=4)
    torch.testing.assert_close(wide, full, rtol=0, atol=1e-4)
    torch.testing.assert_close(narrow[:4], full[:4], rtol=0, atol=1e-4)  # the first 4 positions see it all
    assert (narrow[8:].argmax(-1) != full[8:].argmax(-1)).float().mean() > 0.1


def test_writing_past_the_pool_is_refused(model):
    kv = ModelKVCache(model.config, "auto", max_tokens=16, block_size=16)
    seq = kv.add_sequence()
    kv.plan_step([seq], [16])
    with pytest.raises(ValueError, match="larger max_tokens"):
        kv.plan_step([seq], [1])


def test_lockstep_runs_match_each_cache_run_alone(model, corpus_ids):
    # scoring runs every scheme's cache in one forward_lockstep: no run may see another's K/V
    ids = torch.tensor(corpus_ids[:40])
    schemes = ("auto", "fp8_e5m2", "kivi2")
    alone, caches, batches = [], [], []
    with torch.no_grad():
        for s in schemes:
            kv = ModelKVCache(model.config, s, max_tokens=40)
            alone.append(model.logits(model.forward(ids, kv, kv.plan_step([kv.add_sequence()], [40]),
                                                    backend="torch")))
            caches.append(ModelKVCache(model.config, s, max_tokens=40, seed=3))
            batches.append(caches[-1].plan_step([caches[-1].add_sequence()], [40]))
        together = model.logits(model.forward_lockstep(ids, caches, batches, backend="torch"))
    assert together.shape == (3, 40, model.config.vocab_size)
    for s, a, b in zip(schemes, alone, together, strict=True):
        assert torch.equal(a.argmax(-1), b.argmax(-1)), s
        torch.testing.assert_close(b, a, rtol=0, atol=2e-3, msg=s)
    # the runs differ from each other: e5m2 and kivi2 really changed the cache
    assert (together[1] - together[0]).abs().max() > 0.05
    assert (together[2] - together[0]).abs().max() > 0.05


def test_lockstep_refuses_caches_at_different_lengths(model):
    a = ModelKVCache(model.config, "auto", max_tokens=32)
    b = ModelKVCache(model.config, "auto", max_tokens=32)
    ba = a.plan_step([a.add_sequence()], [4])
    bb = b.plan_step([b.add_sequence()], [4])
    b.plan_step([0], [4])
    bb2 = b.plan_step([0], [4])
    with pytest.raises(ValueError, match="same sequence lengths"):
        model.forward_lockstep(torch.tensor([1, 2, 3, 4]), [a, b], [ba, bb2])
    with pytest.raises(ValueError, match="one batch per cache"):
        model.forward_lockstep(torch.tensor([1, 2, 3, 4]), [a, b], [bb])
