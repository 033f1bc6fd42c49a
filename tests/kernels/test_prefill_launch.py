"""Prefill launch shape: two register-capped 128-row programs per multiprocessor at head size 128,
query blocks launched longest first.

The launch order must not change the result: each program owns its rows alone. Both orders are
compared with the float64 reference on fresh inputs, with NaN-filled outputs, on a batch of two
sequences whose query blocks span several programs each (so a reversed block index that mapped to
the wrong sequence, or past its end, would leave rows unwritten or wrong).
"""

from __future__ import annotations

import pytest
import torch

from kvlab import build_paged_example, relative_error
from kvlab.kernels import AttentionTiling, choose_tiling, paged_attention, prepare_paged_attention
from kvlab.reference import paged_attention_reference

from .conftest import kernel_tolerance, poisoned


def _prefill_tiling(head_size: int, kv_element_bytes: int = 2) -> AttentionTiling:
    return choose_tiling(group=4, head_size=head_size, head_size_v=head_size,
                         kv_element_bytes=kv_element_bytes, max_query_len=2048, max_seq_len=8192,
                         num_tokens=2048, num_seqs=1, num_kv_heads=8, num_sms=132)


def test_prefill_rule_head_128_runs_two_capped_programs_per_multiprocessor():
    for element_bytes in (2, 1):
        t = _prefill_tiling(128, kv_element_bytes=element_bytes)
        # 128 rows = 32 query positions × 4 heads on 8 warps; two such programs share a multiprocessor:
        # 65,536 registers / (2 × 256 threads) = 128 each, and 2 stages keep their shared memory
        # (96 KB for bf16) within the multiprocessor's 228 KB
        assert (t.block_m, t.block_q, t.num_warps, t.tile_n) == (128, 32, 8, 64)
        assert (t.max_registers, t.num_stages) == (128, 2)
        assert t.longest_first and t.num_splits == 1


def test_prefill_rule_keeps_one_wide_program_when_the_query_is_scaled():
    # bf16 queries over an fp16 cache: the kernel scales the query into fp16's range (kept in fp32);
    # one 256-row program on 16 warps per multiprocessor, uncapped
    t = choose_tiling(group=4, head_size=128, head_size_v=128, kv_element_bytes=2, max_query_len=2048,
                      max_seq_len=8192, num_tokens=2048, num_seqs=1, num_kv_heads=8, num_sms=132,
                      scaled_query=True)
    assert (t.block_m, t.block_q, t.num_warps, t.num_stages, t.max_registers) == (256, 64, 16, 3, None)


def test_prefill_rule_other_head_sizes_unchanged():
    # head 256: 16384 / 256 = 64 rows on 4 warps, as before; head 64: 128 rows on 8 warps; neither
    # capped, nor an fp32 cache at head 128
    assert (_prefill_tiling(256).block_m, _prefill_tiling(256).num_warps) == (64, 4)
    assert (_prefill_tiling(64).block_m, _prefill_tiling(64).num_warps) == (128, 8)
    assert _prefill_tiling(64, kv_element_bytes=1).max_registers is None
    assert _prefill_tiling(128, kv_element_bytes=4).max_registers is None


def test_decode_is_never_launched_longest_first():
    t = choose_tiling(group=4, head_size=128, head_size_v=128, kv_element_bytes=1, max_query_len=1,
                      max_seq_len=4096, num_tokens=4, num_seqs=4, num_kv_heads=8, num_sms=132)
    assert not t.longest_first


@pytest.mark.parametrize("scheme", ["bfloat16", "fp8", "int8_per_token_head"])
def test_launch_order_does_not_change_the_result(target, seed, scheme):
    qlens, slens = ([300, 77], [1200, 77]) if target.large else ([13, 6], [40, 6])
    ex = build_paged_example(qlens, slens, num_q_heads=8, num_kv_heads=2, head_size=64, scheme=scheme,
                             seed=seed, device=target.device)
    ref = paged_attention_reference(ex.query, ex.cache, ex.batch)
    tol = kernel_tolerance(ex.query.dtype, scheme)
    outs = []
    for longest_first in (False, True):
        # 16 rows = 4 query positions × 4 heads: several query blocks per sequence
        tiling = AttentionTiling(block_m=16, block_q=4, tile_n=16, num_warps=4, num_stages=2,
                                 longest_first=longest_first)
        out = poisoned(tuple(ex.query.shape), ex.query.dtype, target.device)
        call = prepare_paged_attention(ex.query, ex.cache, ex.batch, out=out, tiling=tiling)
        call.run()
        assert torch.isfinite(out).all(), f"longest_first={longest_first}: rows unwritten"
        err = relative_error(out, ref)
        assert err <= tol, f"longest_first={longest_first}: {err:.3g} > {tol:.3g}"
        outs.append(out.float())
    # one program per rows either way, same arithmetic: the two orders agree bit for bit
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize("scheme", ["bfloat16", "int8_per_token_head", "fp8"])
def test_rule_launch_matches_reference(target, seed, scheme):
    """The default launch (longest first, the rule's rows; for 8-bit caches two register-capped
    programs per multiprocessor) on a prefill chunk over earlier context."""
    qlens, slens = ([700, 1], [2000, 900]) if target.large else ([9, 1], [30, 12])
    ex = build_paged_example(qlens, slens, num_q_heads=16, num_kv_heads=4, head_size=128, scheme=scheme,
                             seed=seed, device=target.device)
    out = poisoned(tuple(ex.query.shape), ex.query.dtype, target.device)
    paged_attention(ex.query, ex.cache, ex.batch, out=out)
    assert torch.isfinite(out).all()
    err = relative_error(out, paged_attention_reference(ex.query, ex.cache, ex.batch))
    assert err <= kernel_tolerance(ex.query.dtype, scheme)
