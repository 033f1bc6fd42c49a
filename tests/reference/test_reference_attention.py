"""The float64 reference against a dense softmax(QKᵀ)V written independently of it.

The independent path reads codes and scales straight from the cache tensors position by position,
dequantizes them by hand, and loops over query tokens and heads with explicit masks.
"""

import math

import pytest
import torch

from kvlab import paged_attention_reference, reference_attention, relative_error
from kvlab.cache import build_paged_example


def _dequantized_sequence(cache, table_row, n):
    ks, vs = [], []
    for pos in range(n):
        blk, off = int(table_row[pos // cache.block_size]), pos % cache.block_size
        k, v = cache.key[blk, off].double(), cache.value[blk, off].double()
        if cache.key_scale is not None:
            k = k * cache.key_scale[blk, off].double()[:, None]
            v = v * cache.value_scale[blk, off].double()[:, None]
        elif cache.scheme.is_quantized:
            k, v = k * cache.k_scale, v * cache.v_scale
        ks.append(k)
        vs.append(v)
    return torch.stack(ks), torch.stack(vs)


def _dense(query, cache, batch, window=None, softcap=None):
    hq, d = query.shape[1], query.shape[2]
    group = hq // cache.num_kv_heads
    out = torch.zeros(query.shape, dtype=torch.float64)
    starts = batch.query_start_loc.tolist()
    for i, n in enumerate(batch.seq_lens_list):
        k, v = _dequantized_sequence(cache, batch.block_table[i], n)
        q_rows = range(starts[i], starts[i + 1])
        for t, row in enumerate(q_rows):
            p = n - len(q_rows) + t
            visible = [j for j in range(n) if j <= p and (window is None or p - j < window)]
            for h in range(hq):
                g = h // group
                s = torch.stack([query[row, h].double() @ k[j, g] for j in visible]) / math.sqrt(d)
                if softcap is not None:
                    s = softcap * torch.tanh(s / softcap)
                w = torch.exp(s - s.max())
                w = w / w.sum()
                out[row, h] = sum(w[a] * v[j, g] for a, j in enumerate(visible))
    return out


CASES = [
    # query_lens, seq_lens, num_q_heads, num_kv_heads, head_size, window, softcap
    ([1, 1, 1], [17, 32, 5], 4, 4, 64, None, None),          # decodes, GQA 1, block boundaries
    ([5, 1, 0, 3], [40, 16, 9, 3], 8, 2, 64, None, None),    # chunked prefill + decode + idle + first chunk
    ([4, 1], [33, 50], 8, 1, 64, 7, None),                    # GQA 8, window smaller than a block
    ([2, 6], [20, 30], 4, 1, 128, 1000, 30.0),                # GQA 4, window larger than the context, softcap
    ([1, 2], [21, 19], 2, 1, 256, 16, None),                  # window equal to the block size
    ([3], [12], 4, 2, 512, None, 20.0),                        # Gemma-4 full-layer head size
]


@pytest.mark.parametrize("scheme", ["bfloat16", "fp8", "int8_per_token_head", "fp8_per_token_head"])
@pytest.mark.parametrize("qlens,slens,hq,hkv,d,window,softcap", CASES)
def test_reference_matches_an_independent_dense_softmax(
    seed, scheme, qlens, slens, hq, hkv, d, window, softcap
):
    ex = build_paged_example(qlens, slens, num_q_heads=hq, num_kv_heads=hkv, head_size=d,
                             scheme=scheme, seed=seed)
    ref = paged_attention_reference(ex.query, ex.cache, ex.batch, sliding_window=window, softcap=softcap)
    dense = _dense(ex.query, ex.cache, ex.batch, window, softcap)
    assert ref.dtype == torch.float64 and bool(torch.isfinite(ref).all())
    assert relative_error(ref, dense) < 1e-12


def test_on_an_unquantized_cache_the_paged_reference_equals_the_truth(seed):
    ex = build_paged_example([3, 1, 7], [29, 64, 7], num_q_heads=8, num_kv_heads=2, head_size=64,
                             scheme="bfloat16", seed=seed)
    truth = reference_attention(ex.query, ex.keys, ex.values, ex.batch, sliding_window=20)
    paged = paged_attention_reference(ex.query, ex.cache, ex.batch, sliding_window=20)
    assert torch.equal(paged, truth)  # bf16 values are stored exactly: only the gather differs


def test_window_of_one_returns_the_own_value(seed):
    ex = build_paged_example([2, 1], [10, 4], num_q_heads=4, num_kv_heads=2, head_size=64, seed=seed)
    out = reference_attention(ex.query, ex.keys, ex.values, ex.batch, sliding_window=1)
    expected = torch.cat([ex.values[0][8:10], ex.values[1][3:4]]).double().repeat_interleave(2, dim=1)
    assert torch.equal(out, expected)


def test_a_window_wider_than_the_context_changes_nothing(seed):
    ex = build_paged_example([4], [30], num_q_heads=4, num_kv_heads=1, head_size=64, seed=seed)
    full = paged_attention_reference(ex.query, ex.cache, ex.batch)
    assert torch.equal(full, paged_attention_reference(ex.query, ex.cache, ex.batch, sliding_window=30))
    assert not torch.equal(full, paged_attention_reference(ex.query, ex.cache, ex.batch, sliding_window=29))


def test_bad_inputs_are_refused(seed):
    ex = build_paged_example([1], [20], num_q_heads=4, num_kv_heads=2, head_size=64, seed=seed)
    with pytest.raises(ValueError, match="multiple of the cache's num_kv_heads"):
        paged_attention_reference(ex.query[:, :3], ex.cache, ex.batch)
    with pytest.raises(ValueError, match="head size 32 does not match the cache's head_size 64"):
        paged_attention_reference(ex.query[..., :32], ex.cache, ex.batch)
    with pytest.raises(ValueError, match="query has 2 rows but the batch has 1"):
        paged_attention_reference(torch.cat([ex.query, ex.query]), ex.cache, ex.batch)
    with pytest.raises(ValueError, match="sliding_window must be None or an integer >= 1"):
        paged_attention_reference(ex.query, ex.cache, ex.batch, sliding_window=0)
    with pytest.raises(ValueError, match=r"softcap must be None \(no cap\) or a finite number > 0"):
        paged_attention_reference(ex.query, ex.cache, ex.batch, softcap=-1.0)
    with pytest.raises(ValueError, match="query must have 3 dimensions"):
        paged_attention_reference(ex.query[0], ex.cache, ex.batch)
