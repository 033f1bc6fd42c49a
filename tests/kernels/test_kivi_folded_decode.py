"""The folded-scale KIVI decode kernel (:mod:`kvlab.kernels.kivi_folded_decode`) against the float64
reference on the dequantized cache and on the unquantized K/V, with the tolerances of the low-bit
kernel's tests (``test_lowbit_kernels``) for a bf16 query: the folded kernel rounds ``q · s`` and
``p · s`` once each to bf16, whatever the 16-bit query dtype (fp16 queries get bf16's tolerance; fp32
queries run fp32 dots), where the low-bit kernel rounds each dequantized element once. Outputs start
as NaN and the cache's never-written scales are NaN (the residual blocks' scales among them), so a
read of either shows.
"""

from __future__ import annotations

import pytest
import torch

import kvlab
from kvlab import relative_error
from kvlab.kernels.kivi_folded_call import stack_rows
from kvlab.kernels.kivi_folded_decode import kivi_folded_decode_kernel
from kvlab.kernels.lowbit_attention_call import prepare_lowbit_attention
from kvlab.reference import reference_attention

from .conftest import poisoned
from .test_lowbit_kernels import _example, _kv, _tolerances


def _check_folded(ex, target, scheme, **opts):
    q = ex.query
    out = poisoned((q.shape[0], q.shape[1], ex.cache.head_size_v), q.dtype, target.device)
    call = prepare_lowbit_attention(q, ex.cache, ex.batch, out=out, folded=True, **opts)
    assert call._launch.kernel is kivi_folded_decode_kernel
    call.run()
    assert torch.isfinite(out).all(), "outputs left unwritten or poisoned"
    ref_opts = {k: v for k, v in opts.items() if k in ("sliding_window", "softcap")}
    k_tol, t_tol = _tolerances(scheme, torch.float32 if q.dtype == torch.float32 else torch.bfloat16)
    assert relative_error(out, kvlab.attention(q, ex.cache, ex.batch, **ref_opts)) <= k_tol
    assert relative_error(out, reference_attention(q, ex.keys, ex.values, ex.batch, **ref_opts)) <= t_tol
    return out


@pytest.mark.parametrize("scheme", ["kivi2", "kivi4", "kivi2_g64_r2", "kivi4_g128", "kivi4_g32_r3"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_decode_batch_matches_both_references(target, seed, scheme, dtype):
    """Partial last blocks, a 1-token sequence, residuals of one to three blocks, GQA 4:1."""
    slens = [1, 16, 1000, 4097, 333] if target.large else [1, 16, 37, 70, 50]
    d = 128 if target.large or scheme.endswith("g128") else 64
    ex = _example(target, seed, [1] * len(slens), slens, scheme, d=d, query_dtype=dtype)
    _check_folded(ex, target, scheme)


def test_fp16_query_block_32_no_gqa_and_split_k(target, seed):
    """One query head per KV head (16 stacked rows for 2 key blocks per tile) and split-K."""
    slens = [2000, 4500] if target.large else [45, 70]
    ex = _example(target, seed, [1, 1], slens, "kivi2", block=32, query_dtype=torch.float16,
                  kv_dtype=torch.float16, hq=4, hkv=4)
    _check_folded(ex, target, "kivi2", num_splits=3)


@pytest.mark.parametrize("scheme, step", [("kivi4_g32_r2", 2), ("kivi2", 4)])
def test_several_tiles_per_step_across_segments_and_residual(target, seed, scheme, step):
    slens = [2000, 4513, 45] if target.large else [45, 113, 17]
    _check_folded(_example(target, seed, [1, 1, 1], slens, scheme), target, scheme, num_splits=3,
                  tiles_per_step=step)


def test_sliding_window_and_softcap(target, seed):
    slens = [3000, 40] if target.large else [60, 40]
    ex = _example(target, seed, [1, 1], slens, "kivi4_g32_r2")
    _check_folded(ex, target, "kivi4_g32_r2", sliding_window=19, softcap=30.0, tile_n=32)


def test_outlier_and_constant_channels(target, seed):
    """A key channel 20× the others, a constant (zero-range) key channel, a constant value group."""
    def source(n, h, d, g):
        return _kv(n, h, d, g, torch.float32)

    ex = _example(target, seed, [1, 1], [200 if target.large else 40, 35], "kivi2", kv_source=source)
    _check_folded(ex, target, "kivi2")


def test_agrees_with_the_low_bit_kernel(target, seed):
    """Two implementations of the same attention (scales folded, or applied per element) within
    both kernels' rounding."""
    slens = [5000, 77] if target.large else [50, 77]
    ex = _example(target, seed, [1, 1], slens, "kivi2")
    folded = prepare_lowbit_attention(ex.query, ex.cache, ex.batch, folded=True).run().clone()
    plain = prepare_lowbit_attention(ex.query, ex.cache, ex.batch, folded=False).run()
    assert relative_error(folded, plain) <= 2 * _tolerances("kivi2", ex.query.dtype)[0]


def test_stack_rows_by_hand():
    # GQA 4:1, 64-key tiles of 16-token blocks (4 copies), head 128 in 4 parts of 32, G = 32 (4 groups)
    assert stack_rows(4, 64, 16, 32, 4, 32) == 4
    # G = 128: one value group, so 16 rows per copy; a 16-key tile of one block likewise
    assert stack_rows(4, 64, 16, 32, 4, 128) == 16
    assert stack_rows(4, 16, 16, 32, 4, 32) == 16
    # 6 query heads round up to 8; 2 blocks per tile need 8
    assert stack_rows(6, 64, 16, 32, 4, 32) == 8
    assert stack_rows(1, 64, 32, 64, 2, 32) == 8


def test_folded_needs_a_kivi_decode_batch(target, seed):
    prefill = _example(target, seed, [3, 1], [30, 20], "kivi2")
    with pytest.raises(ValueError, match="folded=True needs a KIVI cache and a decode batch"):
        prepare_lowbit_attention(prefill.query, prefill.cache, prefill.batch, folded=True)
    int4 = _example(target, seed, [1], [30], "int4_per_token_head")
    with pytest.raises(ValueError, match="folded=True needs a KIVI cache"):
        prepare_lowbit_attention(int4.query, int4.cache, int4.batch, folded=True)
