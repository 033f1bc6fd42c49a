"""Dequantize-first prefill over an 8-bit cache, against the float64 reference and hand-worked cases.

* The scratch holds exactly the fp8 codes for per-tensor fp8 (the scales stay outside the values), and
  ``r(c · s)`` for the per-token-head schemes: the float64 product rounded once to the query dtype.
* Attention over it matches the float64 reference on the quantized cache within the 16-bit kernel's
  rounding (``kernel_tolerance``), plus one rounding of each K/V element (``2 u``) where the scale is
  folded into the values, and the unquantized truth within the scheme's own error on top.
* The rule sends only long prefill chunks that read most of the batch's context down this path.
"""

from __future__ import annotations

import pytest
import torch

import kvlab
from kvlab import relative_error
from kvlab.kernels.attention import PagedAttentionCall, prepare_paged_attention
from kvlab.kernels.dequantized_prefill import dequantize_first_rule, scratch_dtype
from kvlab.kernels.dequantized_scratch import DequantizedPrefillCall
from kvlab.kernels.launch_config import AttentionTiling
from kvlab.reference import reference_attention

from .conftest import UNIT_ROUNDOFF, kernel_tolerance, poisoned, scheme_tolerance, small_example

SCHEMES = ["fp8_e4m3", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head"]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_scratch_holds_codes_or_dequantized_values(target, seed, scheme):
    ex = small_example(target, seed, [7, 20], [37, 50], scheme)
    call = prepare_paged_attention(ex.query, ex.cache, ex.batch, dequantize_first=True)
    assert isinstance(call, DequantizedPrefillCall)
    call.scratch.key.fill_(float("nan"))
    call.scratch.value.fill_(float("nan"))
    call.run()
    per_tensor = not ex.cache.scheme.has_token_head_scales
    assert call.scratch.key.dtype == (torch.bfloat16 if per_tensor else torch.float16)
    f = torch.finfo(call.scratch.key.dtype)
    u = f.eps / 2  # one rounding to nearest: half a unit in the last place...
    floor = f.tiny * f.eps / 2  # ...or half the subnormal spacing (tiny fp8 codes × small scales)
    for i, n in enumerate(ex.batch.seq_lens.tolist()):
        want = ex.cache.gather(ex.batch.block_table[i], n)  # float64: c·k_scale, or c·s per token-head
        got = kvlab.PagedKVCache.gather(call.scratch, call.batch.block_table[i], n)
        for g, w, s in zip(got, want, (ex.cache.k_scale, ex.cache.v_scale), strict=True):
            g, w = g.double().cpu(), w.double().cpu()
            assert torch.isfinite(g).all()
            if per_tensor:  # the code itself, exactly: times the scale it is the reference's value
                assert s != 1.0 and torch.equal(g * s, w)
            else:  # one rounding of the float64 product
                assert ((g - w).abs() <= u * w.abs() + floor).all()
                assert not torch.equal(g, w)  # the rounding happened: not a float64 copy


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("opts", [{}, dict(sliding_window=24), dict(softcap=5.0)],
                         ids=["full", "window", "softcap"])
def test_prefill_matches_the_references(target, seed, scheme, opts):
    """Chunks crossing block boundaries, GQA 4:1, a decode beside them."""
    ex = small_example(target, seed, [7, 20, 1], [37, 50, 30], scheme)
    q = ex.query
    out = poisoned((q.shape[0], q.shape[1], ex.cache.head_size_v), q.dtype, target.device)
    got = prepare_paged_attention(q, ex.cache, ex.batch, out=out, dequantize_first=True, **opts).run()
    assert got is out and torch.isfinite(out).all()
    ref = kvlab.attention(q, ex.cache, ex.batch, **opts)
    truth = reference_attention(q, ex.keys, ex.values, ex.batch, **opts)
    tol = kernel_tolerance(q.dtype, scheme)
    if ex.cache.scheme.has_token_head_scales:
        tol += 2 * UNIT_ROUNDOFF[q.dtype]
    assert relative_error(out, ref) <= tol
    assert relative_error(out, truth) <= tol + scheme_tolerance(scheme)


def test_fp16_queries(target, seed):
    ex = small_example(target, seed, [20], [50], "int8_per_token_head", query_dtype=torch.float16)
    call = prepare_paged_attention(ex.query, ex.cache, ex.batch, dequantize_first=True)
    assert call.scratch.key.dtype == torch.float16
    ref = kvlab.attention(ex.query, ex.cache, ex.batch)
    tol = kernel_tolerance(torch.float16, "int8_per_token_head") + 2 * UNIT_ROUNDOFF[torch.float16]
    assert relative_error(call.run(), ref) <= tol


def test_values_too_large_for_fp16_keep_bf16(target, seed):
    """One token's V scale raised so that its largest value, 127 × s, passes fp16's 65,504: the scratch
    falls back to bf16 and the result still matches the reference on that same cache (no overflow)."""
    ex = small_example(target, seed, [20], [50], "int8_per_token_head")
    assert scratch_dtype(torch.bfloat16, ex.cache) == torch.float16
    ex.cache.value_scale[ex.batch.block_table[0, 1], 3, 1] = 600.0  # 128 × 600 = 76,800 > 65,504
    assert scratch_dtype(torch.bfloat16, ex.cache) == torch.bfloat16
    assert scratch_dtype(torch.float16, ex.cache) == torch.float16  # fp16 queries: their own dtype
    call = prepare_paged_attention(ex.query, ex.cache, ex.batch, dequantize_first=True)
    assert call.scratch.value.dtype == torch.bfloat16
    out = call.run()
    assert torch.isfinite(out).all()
    ref = kvlab.attention(ex.query, ex.cache, ex.batch)
    tol = kernel_tolerance(torch.bfloat16, "int8_per_token_head") + 2 * UNIT_ROUNDOFF[torch.bfloat16]
    assert relative_error(out, ref) <= tol


def test_rule_by_hand():
    """Saved token conversions ``s · (q // 64 − 1)`` of the long chunks against 3 × the other contexts."""
    assert dequantize_first_rule([128], [1000])  # 1000 · 1 saved, nothing else copied
    assert not dequantize_first_rule([127], [1000])  # one query block: each tile converted once anyway
    assert not dequantize_first_rule([1, 1], [5000, 5000])  # decodes only
    # a 2,048-token chunk over 8,192 saves 8,192 · 31 = 253,952 conversions
    assert dequantize_first_rule([2048] + [1] * 32, [8192] + [2048] * 32)  # 3 × 65,536 = 196,608 copied
    assert not dequantize_first_rule([2048] + [1] * 63, [8192] + [8192] * 63)  # 3 × 516,096
    assert not dequantize_first_rule([2048] + [1] * 11, [8192] + [8192] * 11)  # 3 × 90,112 = 270,336
    assert dequantize_first_rule([2048] + [1] * 10, [8192] + [8192] * 10)  # 3 × 81,920 = 245,760
    assert not dequantize_first_rule([], [])


def test_default_picks_the_path_by_the_rule(target, seed):
    long_chunk = small_example(target, seed, [130], [140], "int8_per_token_head")
    short_chunk = small_example(target, seed, [20], [50], "int8_per_token_head")
    plain = small_example(target, seed, [130], [140], "bfloat16")
    assert isinstance(prepare_paged_attention(long_chunk.query, long_chunk.cache, long_chunk.batch),
                      DequantizedPrefillCall)
    assert isinstance(prepare_paged_attention(short_chunk.query, short_chunk.cache, short_chunk.batch),
                      PagedAttentionCall)
    assert isinstance(prepare_paged_attention(plain.query, plain.cache, plain.batch), PagedAttentionCall)
    # a launch shape given by hand is the fused kernel's
    tiling = AttentionTiling(block_m=64, tile_n=32, num_warps=4, num_stages=2, block_q=16, num_splits=1)
    by_hand = prepare_paged_attention(long_chunk.query, long_chunk.cache, long_chunk.batch, tiling=tiling)
    assert isinstance(by_hand, PagedAttentionCall)


def test_bad_requests_are_refused(target, seed):
    plain = small_example(target, seed, [20], [50], "bfloat16")
    with pytest.raises(ValueError, match="needs an 8-bit scheme, got 'bfloat16'"):
        prepare_paged_attention(plain.query, plain.cache, plain.batch, dequantize_first=True)
    ex = small_example(target, seed, [20], [50], "fp8_e4m3")
    with pytest.raises(ValueError, match="output_scale applies to the fused kernel only"):
        prepare_paged_attention(ex.query, ex.cache, ex.batch, dequantize_first=True, output_scale=2.0)
    for bad in (float("nan"), 0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="output_scale must be a finite number > 0"):
            prepare_paged_attention(ex.query, ex.cache, ex.batch, output_scale=bad)
