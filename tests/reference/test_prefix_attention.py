"""Attention at the ends of several prefixes of one sequence against the per-sequence reference.

``prefix_attention`` does its checks and conversions once for all prefixes; each prefix's output must
equal :func:`reference_attention` on a batch of that one sequence, bit for bit, on fresh random
inputs (float32 and float64, grouped-query heads, with and without a window and a softcap).
"""

from __future__ import annotations

import pytest
import torch

from kvlab.cache.batch import AttentionBatch
from kvlab.reference import prefix_attention, reference_attention

OPTIONS = [dict(), dict(sliding_window=5), dict(softcap=3.0, scale=0.2)]
DTYPES = [(torch.float32, torch.float32), (torch.float32, torch.float64), (torch.bfloat16, torch.float64)]


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize(("dtype", "kv_dtype"), DTYPES)
@pytest.mark.parametrize("num_queries", [1, 3])
def test_each_prefix_equals_the_per_sequence_reference(options, dtype, kv_dtype, num_queries, gen):
    tokens, hq, hkv, d, dv = 45, 6, 2, 16, 8
    query = (torch.randn(tokens, hq, d, generator=gen) * 2).to(dtype)
    keys = (torch.randn(tokens, hkv, d, generator=gen) * 2).to(kv_dtype)
    values = torch.randn(tokens, hkv, dv, generator=gen).to(kv_dtype)
    contexts = sorted({num_queries, 7, int(torch.randint(num_queries, tokens, (1,), generator=gen)), tokens})
    got = prefix_attention(query, keys, values, contexts, num_queries=num_queries, **options)
    assert len(got) == len(contexts)
    for c, out in zip(contexts, got, strict=True):
        batch = AttentionBatch.from_lengths([num_queries], [c], [[0]])
        want = reference_attention(query[c - num_queries : c], [keys[:c]], [values[:c]], batch, **options)
        assert out.dtype == torch.float64 and out.shape == (num_queries, hq, dv)
        assert torch.equal(out, want), f"context {c}: differs from reference_attention"


def test_bad_arguments_are_refused_with_what_is_allowed(gen):
    q, k = torch.randn(10, 4, 8, generator=gen), torch.randn(10, 2, 8, generator=gen)
    v = torch.randn(10, 2, 8, generator=gen)
    with pytest.raises(ValueError, match=r"context length 11 must be within \[2, 10\] tokens"):
        prefix_attention(q, k, v, [4, 11], num_queries=2)
    with pytest.raises(ValueError, match=r"context length 1 must be within \[2, 10\] tokens"):
        prefix_attention(q, k, v, [1], num_queries=2)
    with pytest.raises(ValueError, match="num_queries must be an integer >= 1"):
        prefix_attention(q, k, v, [4], num_queries=0)
    with pytest.raises(ValueError, match="values hold as many tokens and heads"):
        prefix_attention(q, k, v[:9], [4], num_queries=1)
    with pytest.raises(ValueError, match="num_q_heads .3. must be a multiple of num_kv_heads .2."):
        prefix_attention(q[:, :3], k, v, [4], num_queries=1)
    with pytest.raises(ValueError, match="query must have 3 dimensions"):
        prefix_attention(q[0], k, v, [4], num_queries=1)
