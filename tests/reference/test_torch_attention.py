"""The float32 PyTorch backend of kvlab.attention against the float64 oracle."""

import pytest
import torch

import kvlab
from kvlab.cache import build_paged_example


@pytest.mark.parametrize("scheme", ["bfloat16", "fp8_e4m3", "int8_per_token_head", "fp8_per_token_head"])
@pytest.mark.parametrize(("window", "softcap"), [(None, None), (13, None), (None, 20.0), (5, 7.5)])
def test_torch_backend_matches_float64_reference(scheme, window, softcap, seed):
    # prefill chunks with context, a fresh prefill, decodes; GQA 8:2; block tables shuffled
    ex = build_paged_example([9, 1, 21, 1], [40, 17, 21, 600], num_q_heads=8, num_kv_heads=2, head_size=64,
                             scheme=scheme, block_size=16, query_dtype=torch.float32, seed=seed)
    ex.query.mul_(3.0)  # sharper softmax than N(0,1) queries give
    ref = kvlab.attention(ex.query, ex.cache, ex.batch, backend="reference", sliding_window=window,
                          softcap=softcap)
    out = kvlab.attention(ex.query, ex.cache, ex.batch, backend="torch", sliding_window=window,
                          softcap=softcap)
    assert out.dtype == torch.float32 and out.shape == ref.shape
    assert torch.isfinite(out).all()
    assert kvlab.relative_error(out, ref) < 2e-6


def test_torch_backend_sees_the_window_and_the_causal_limit(seed):
    # one query at position 5 with window 1 sees only key 5: the output is V[5] exactly
    ex = build_paged_example([1], [6], num_q_heads=2, num_kv_heads=1, head_size=32, scheme="float16",
                             query_dtype=torch.float32, seed=seed)
    out = kvlab.attention(ex.query, ex.cache, ex.batch, backend="torch", sliding_window=1)
    v5 = ex.values[0][5].float()  # [1, 32]
    torch.testing.assert_close(out[0], v5.expand(2, -1), rtol=0, atol=1e-6)


def test_torch_backend_refuses_bad_window():
    ex = build_paged_example([1], [4], num_q_heads=2, num_kv_heads=1, head_size=32, scheme="float16")
    with pytest.raises(ValueError, match="sliding_window must be None or an integer >= 1"):
        kvlab.attention(ex.query, ex.cache, ex.batch, backend="torch", sliding_window=0)
