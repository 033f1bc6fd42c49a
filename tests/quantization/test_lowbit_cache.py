"""The low-bit paged cache: what a write stores, what the residual keeps, what a read returns.

Bounds come from the formulas (half a step, plus the fp16 rounding of scale and zero point); the
residual must return the bf16 values bit for bit.
"""

from __future__ import annotations

import pytest
import torch

from kvlab import AttentionBatch, PagedKVCache
from kvlab.cache import LowBitPagedCache


def _sequence_write(cache, n, chunks, gen, table):
    """Write one sequence of n tokens in the given chunk sizes; return its K, V (bf16)."""
    k = torch.randn(n, cache.num_kv_heads, cache.head_size, generator=gen).to(torch.bfloat16)
    v = torch.randn(n, cache.num_kv_heads, cache.head_size_v, generator=gen).to(torch.bfloat16)
    done = 0
    for c in chunks:
        batch = AttentionBatch.from_lengths([c], [done + c], [table])
        cache.write(k[done:done + c], v[done:done + c], batch.slot_mapping(cache.block_size), batch=batch)
        done += c
    return k, v


def _kivi_bound(x: torch.Tensor, bits: int, dim: int) -> torch.Tensor:
    """Half a step of the min/max quantizer over dim, with the fp16 slack of its scale and zero."""
    x = x.double()
    lo, hi = x.amin(dim, keepdim=True), x.amax(dim, keepdim=True)
    step = (hi - lo) / (2**bits - 1) + 2.0**-14
    return step * (0.5 + 2**-10) + 2.0**-10 * lo.abs() + 1e-9


def test_allocate_dispatches_and_poisons():
    cache = PagedKVCache.allocate("kivi2", 4, 16, 2, 64)
    assert isinstance(cache, LowBitPagedCache)
    assert cache.key_codes.shape == (4, 16, 2, 16) and cache.key_scale.shape == (4, 2, 64)
    assert cache.value_scale.shape == (4, 2, 2, 16)  # token-minor values
    k, v = cache.gather(torch.tensor([1, 2]), 20)
    assert torch.isnan(k).all() and torch.isnan(v).all()


def test_where_one_int4_token_lands_worked_by_hand():
    """Slot 17 (block 1, offset 1), head 1, K = V = [7, -7, 0, 3.5]: scale 7 / 7 = 1, codes
    q + 8 = [15, 1, 8, 12] (3.5 rounds half to even, to 4), bytes 15 | 1 << 4 = 31 and 8 | 12 << 4 = 200.
    Keys are token-major ([block, offset, head, byte]); values token-minor ([block, head, byte, offset])."""
    cache = PagedKVCache.allocate("int4_per_token_head", 2, 16, 2, 4)
    x = torch.zeros(1, 2, 4)
    x[0, 1] = torch.tensor([7.0, -7.0, 0.0, 3.5])
    x[0, 0] = torch.tensor([1.0, 2.0, 3.0, 4.0])  # head 0 of the same token, elsewhere
    cache.write(x, x, torch.tensor([17]))
    assert cache.key_codes[1, 1, 1].tolist() == [31, 200]
    assert cache.value_codes[1, 1, :, 1].tolist() == [31, 200]
    assert cache.value_codes[1, 1, :, 0].tolist() == [0, 0] and cache.value_codes[0].eq(0).all()
    assert cache.key_scale[1, 1, 1] == 1.0 and cache.value_scale[1, 1, 1] == 1.0


def test_int4_cache_error_within_half_step(gen):
    cache = PagedKVCache.allocate("int4_per_token_head", 6, 16, 2, 64)
    table = [4, 0, 2]
    k, v = _sequence_write(cache, 37, [37], gen, table)
    gk, gv = cache.gather(torch.tensor(table), 37)
    for got, x in ((gk, k), (gv, v)):
        step = x.double().abs().amax(-1, keepdim=True) / 7
        assert ((got - x.double()).abs() <= step * (0.5 + 1e-6)).all()
    assert cache.nbytes == 6 * 16 * 2 * (64 + 8)


@pytest.mark.parametrize("residual, chunks", [(1, [40]), (1, [7, 13, 20]), (2, [40]), (3, [15, 2, 23])])
def test_kivi_residual_and_quantized_blocks(gen, residual, chunks):
    """40 tokens, block 16: residual 1 -> blocks 0, 1 quantized, 8 residual tokens; residual 2 ->
    block 0 quantized, 24 residual tokens; residual 3 -> nothing quantized."""
    cache = PagedKVCache.allocate(f"kivi2_g32_r{residual}", 8, 16, 2, 64)
    table = [5, 1, 6]
    k, v = _sequence_write(cache, 40, chunks, gen, table)
    quantized_blocks = max(0, 40 // 16 - (residual - 1))
    assert cache.residual_tokens() == 40 - 16 * quantized_blocks
    gk, gv = cache.gather(torch.tensor(table), 40)
    cut = 16 * quantized_blocks
    assert torch.equal(gk[cut:], k[cut:].double()) and torch.equal(gv[cut:], v[cut:].double())
    for b in range(quantized_blocks):
        kb, vb = k[16 * b:16 * b + 16], v[16 * b:16 * b + 16]
        assert ((gk[16 * b:16 * b + 16] - kb.double()).abs() <= _kivi_bound(kb, 2, 0)).all()
        vg = vb.reshape(16, 2, 2, 32)
        err = (gv[16 * b:16 * b + 16].reshape(16, 2, 2, 32) - vg.double()).abs()
        assert (err <= _kivi_bound(vg, 2, -1)).all()
        assert cache.residual_page[table[b]] == -1


def test_chunked_write_matches_one_write(gen):
    """Quantization happens per full block from the bf16 residual, so chunking changes nothing."""
    a = PagedKVCache.allocate("kivi4_g64", 8, 16, 2, 64)
    b = PagedKVCache.allocate("kivi4_g64", 8, 16, 2, 64)
    state = gen.get_state()
    _sequence_write(a, 50, [50], gen, [3, 0, 7, 2])
    gen.set_state(state)
    _sequence_write(b, 50, [9, 9, 32], gen, [3, 0, 7, 2])
    for x, y in ((a.key_codes, b.key_codes), (a.key_scale, b.key_scale), (a.value_zero, b.value_zero)):
        assert torch.equal(x[[3, 0, 7]], y[[3, 0, 7]])


def test_kivi_refusals(gen):
    cache = PagedKVCache.allocate("kivi2_g32_r2", 4, 16, 1, 32)
    k = torch.randn(3, 1, 32, generator=gen)
    with pytest.raises(ValueError, match="pass batch="):
        cache.write(k, k, torch.tensor([0, 1, 2]))
    k[1, 0, 3] = float("nan")
    one = PagedKVCache.allocate("kivi2", 4, 16, 1, 32)
    with pytest.raises(ValueError, match="non-finite"):
        one.write(k, k, torch.tensor([0, 1, 2]))
    one.write(torch.ones(16, 1, 32), torch.ones(16, 1, 32), torch.arange(16))
    with pytest.raises(ValueError, match="already quantized"):
        one.write(torch.ones(1, 1, 32), torch.ones(1, 1, 32), torch.tensor([3]))
    small = LowBitPagedCache.allocate("kivi2", 4, 16, 1, 32, residual_pages=1)
    with pytest.raises(ValueError, match="residual pool is full"):
        small.write(torch.ones(2, 1, 32), torch.ones(2, 1, 32), torch.tensor([0, 17]))


def test_all_equal_block_comes_back_within_fp16(gen):
    """A zero-range channel reconstructs as its value rounded to fp16 (the zero point)."""
    cache = PagedKVCache.allocate("kivi2", 2, 16, 1, 32)
    x = torch.full((16, 1, 32), 1.2345)
    cache.write(x, x, torch.arange(16))
    gk, gv = cache.gather(torch.tensor([0]), 16)
    assert (gk - 1.2345).abs().max() <= 1.2345 * 2**-11 + 2**-14
    assert (gv - 1.2345).abs().max() <= 1.2345 * 2**-11 + 2**-14


def test_dequantize_whole_cache_matches_gather(gen):
    """Block 2 holds 16 quantized tokens, block 0 five residual ones; the other slots stay NaN."""
    cache = PagedKVCache.allocate("kivi4", 3, 16, 2, 32)
    k, v = _sequence_write(cache, 21, [21], gen, [2, 0])
    dk, dv = cache.dequantize()
    assert dk.shape == (3, 16, 2, 32) and dv.shape == (3, 16, 2, 32)
    assert torch.equal(dk[0, :5], k[16:].double()) and torch.equal(dv[0, :5], v[16:].double())
    assert ((dk[2] - k[:16].double()).abs() <= _kivi_bound(k[:16], 4, 0)).all()
    assert torch.isnan(dk[1]).all() and torch.isnan(dk[0, 5:]).all()
