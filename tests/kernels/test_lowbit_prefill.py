"""Dequantize-then-attend prefill over a low-bit cache, against the float64 references.

* The scratch cache must hold the reference's dequantized K/V (``LowBitPagedCache.gather``, float64)
  rounded once to the query dtype: within one unit in the last place of that dtype, residual blocks
  exact.
* Attention must match the float64 reference on the dequantized cache within the 16-bit kernel's
  rounding plus one rounding of each K/V element to the query dtype (``2 u``), and the unquantized
  truth within the scheme's own error on top. Outputs start as NaN.
"""

from __future__ import annotations

import pytest
import torch

import kvlab
from kvlab import build_paged_example, relative_error
from kvlab.kernels.lowbit_prefill import prepare_dequantized_prefill
from kvlab.reference import reference_attention

from .conftest import UNIT_ROUNDOFF, poisoned
from .test_lowbit_kernels import _tolerances

SCHEMES = ["int4_per_token_head", "kivi4", "kivi2", "kivi2_g64_r2"]


def _example(target, seed, qlens, slens, scheme, **kw):
    return build_paged_example(qlens, slens, num_q_heads=8, num_kv_heads=2, head_size=64, scheme=scheme,
                               block_size=16, seed=seed, device=target.device, **kw)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_scratch_holds_the_dequantized_blocks(target, seed, scheme):
    ex = _example(target, seed, [7, 20], [37, 50], scheme)
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
    ex = _example(target, seed, [7, 20, 1], [37, 50, 30], scheme)
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
