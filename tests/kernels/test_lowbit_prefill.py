"""Dequantize-then-attend prefill over a low-bit cache, against the float64 references.

* The scratch cache must hold the reference's dequantized K/V (``LowBitPagedCache.gather``, float64)
  rounded once to the query dtype: within one unit in the last place of that dtype, residual blocks
  exact.
* Attention must match the float64 reference on the dequantized cache within the 16-bit kernel's
  rounding plus one rounding of each K/V element to the query dtype (``2 u``), and the unquantized
  truth within the scheme's own error on top. Outputs start as NaN.
* It is the default path for batches with a prefill chunk; the fused kernel stays the decode path and
  runs when asked for (``dequantize_first=False``) or given its launch options.
* Its scratch holds ``used blocks × B × H × (D + Dv)`` numbers of the query dtype (hand-worked below).
"""

from __future__ import annotations

import pytest
import torch

import kvlab
from kvlab import relative_error
from kvlab.kernels.dequantized_scratch import DequantizedPrefillCall, dequantized_scratch_bytes
from kvlab.kernels.lowbit_attention_call import (
    LowBitAttentionCall,
    lowbit_paged_attention,
    prepare_lowbit_call,
)
from kvlab.kernels.lowbit_prefill import prepare_dequantized_prefill
from kvlab.reference import reference_attention

from .conftest import UNIT_ROUNDOFF, poisoned, small_example
from .test_lowbit_kernels import _tolerances

SCHEMES = ["int4_per_token_head", "kivi4", "kivi2", "kivi2_g64_r2"]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_scratch_holds_the_dequantized_blocks(target, seed, scheme):
    ex = small_example(target, seed, [7, 20], [37, 50], scheme)
    call = prepare_dequantized_prefill(ex.query, ex.cache, ex.batch)
    call.scratch.key.fill_(float("nan"))
    call.scratch.value.fill_(float("nan"))
    call.run()
    u = UNIT_ROUNDOFF[ex.query.dtype]
    for i, n in enumerate(ex.batch.seq_lens.tolist()):
        want_k, want_v = ex.cache.gather(ex.batch.block_table[i], n)
        got = kvlab.PagedKVCache.gather(call.scratch, call.batch.block_table[i], n)
        for g, w in zip(got, (want_k, want_v), strict=True):
            g, w = g.double().cpu(), w.cpu()
            assert torch.isfinite(g).all()
            # one rounding of the float64 value to the query dtype: at most u·|w| (2u for a double rounding)
            assert ((g - w).abs() <= 2 * u * w.abs() + 1e-30).all()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_prefill_chunks_match_the_references(target, seed, scheme):
    """Chunks crossing block boundaries, GQA 4:1, a decode beside them, sliding window on one call."""
    ex = small_example(target, seed, [7, 20, 1], [37, 50, 30], scheme)
    for opts in ({}, dict(sliding_window=24)):
        q = ex.query
        out = poisoned((q.shape[0], q.shape[1], ex.cache.head_size_v), q.dtype, target.device)
        got = prepare_dequantized_prefill(q, ex.cache, ex.batch, out=out, **opts).run()
        assert got is out and torch.isfinite(out).all()
        ref = kvlab.attention(q, ex.cache, ex.batch, **opts)
        truth = reference_attention(q, ex.keys, ex.values, ex.batch, **opts)
        k_tol = _tolerances("kivi2", q.dtype)[0]  # KIVI's: one rounding of K and V to the dot dtype
        own_kernel, own_truth = _tolerances(scheme, q.dtype)
        assert relative_error(out, ref) <= k_tol
        assert relative_error(out, truth) <= k_tol + (own_truth - own_kernel)


def test_default_prefill_path_is_dequantize_first(target, seed):
    """A batch with a prefill chunk takes the dequantize-first call; decodes alone, an explicit
    ``dequantize_first=False`` or a fused launch option take the fused kernel; asking for both is refused."""
    prefill = small_example(target, seed, [7, 1], [37, 30], "kivi2")
    decode = small_example(target, seed, [1, 1], [37, 30], "kivi2")
    picked = prepare_lowbit_call(prefill.query, prefill.cache, prefill.batch)
    assert isinstance(picked, DequantizedPrefillCall)
    assert isinstance(prepare_lowbit_call(decode.query, decode.cache, decode.batch), LowBitAttentionCall)
    fused = prepare_lowbit_call(prefill.query, prefill.cache, prefill.batch, dequantize_first=False)
    assert isinstance(fused, LowBitAttentionCall)
    assert isinstance(prepare_lowbit_call(prefill.query, prefill.cache, prefill.batch, tile_n=32),
                      LowBitAttentionCall)
    with pytest.raises(ValueError, match="shape the fused kernel's launch; leave them None"):
        prepare_lowbit_call(prefill.query, prefill.cache, prefill.batch, tile_n=32, dequantize_first=True)
    # the one-call entry point runs that default, and it matches the float64 reference
    q = prefill.query
    out = poisoned((q.shape[0], q.shape[1], prefill.cache.head_size_v), q.dtype, target.device)
    assert lowbit_paged_attention(q, prefill.cache, prefill.batch, out=out) is out
    ref = kvlab.attention(q, prefill.cache, prefill.batch)
    assert relative_error(out, ref) <= _tolerances("kivi2", q.dtype)[0]


def test_bad_input_gets_the_fused_paths_message(target, seed):
    ex = small_example(target, seed, [7], [37], "int4_per_token_head")
    with pytest.raises(ValueError, match="softcap must be None"):
        prepare_dequantized_prefill(ex.query, ex.cache, ex.batch, softcap=float("inf"))


@pytest.mark.parametrize("query_dtype, itemsize", [(torch.bfloat16, 2), (torch.float32, 4)])
def test_scratch_bytes(target, seed, query_dtype, itemsize):
    """Sequences of 37 and 50 tokens in blocks of 16 read 3 + 4 = 7 distinct blocks; 2 KV heads of 64:
    7 × 16 × 2 × (64 + 64) = 28,672 numbers, 57,344 B in bf16 and 114,688 B in fp32."""
    ex = small_example(target, seed, [7, 20], [37, 50], "kivi4", query_dtype=query_dtype)
    call = prepare_dequantized_prefill(ex.query, ex.cache, ex.batch)
    assert call.scratch_bytes == 28_672 * itemsize
    assert dequantized_scratch_bytes(7, 16, 2, 64, 64, query_dtype) == 28_672 * itemsize
    # the module docstring's example: 8,192 tokens of 8 KV heads of 128 in bf16 is 32 MiB
    assert dequantized_scratch_bytes(512, 16, 8, 128, 128, torch.bfloat16) == 32 * 2**20
