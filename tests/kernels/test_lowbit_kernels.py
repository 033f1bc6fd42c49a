"""Triton kernels of kvlab's low-bit schemes against the reference writer and the float64 reference.

* Writes must reproduce the reference cache bit for bit (codes, scales, zero points, residual), for
  random inputs with zero-range channels, outlier channels and padding slots, written in one step or
  in chunks that cross block boundaries.
* Attention must match the float64 reference on the *dequantized* cache within the kernel's own
  rounding: ``conftest.kernel_tolerance``, plus, for KIVI, one rounding of each dequantized K and V
  element to the dot dtype (``2 u``; see the kernel's docstring). Against the unquantized K/V the
  scheme's own error is added: twice the RMS of rounding to a step of ``4.5 σ / levels`` (the range
  of a group of N(0, 1) values is about 4 to 4.5 σ).
Outputs start as NaN; caches start with NaN scales.
"""

from __future__ import annotations

import math

import pytest
import torch

import kvlab
from kvlab import AttentionBatch, PagedKVCache, build_paged_example, relative_error
from kvlab.kernels.lowbit_attention_call import lowbit_paged_attention, prepare_lowbit_attention
from kvlab.kernels.lowbit_cache_write import write_lowbit_cache
from kvlab.quantization import get_scheme
from kvlab.reference import reference_attention

from .conftest import UNIT_ROUNDOFF, kernel_tolerance, poisoned

LOWBIT = ["int4_per_token_head", "kivi4", "kivi2", "kivi2_g64_r2"]
_FIELDS = ("key_codes", "value_codes", "key_scale", "value_scale", "key_zero", "value_zero",
           "residual_page", "residual_key", "residual_value")


def _assert_same(ref, tri):
    for name in _FIELDS:
        a, b = getattr(ref, name), getattr(tri, name)
        if a is None:
            continue
        b = b.cpu()
        same = (a == b) | (torch.isnan(a) & torch.isnan(b)) if a.is_floating_point() else a == b
        assert same.all(), f"{name}: {int((~same).sum())} entries differ from the reference"


def _kv(n, heads, d, gen, dtype):
    """N(0, 1) K/V, keys with an outlier channel (x 20) and a constant (zero-range) channel."""
    # the example passes its device's generator
    k = torch.randn(n, heads, d, generator=gen, device=gen.device)
    k[:, :, 3] *= 20.0
    k[:, :, 5] = 0.75
    v = torch.randn(n, heads, d, generator=gen, device=gen.device)
    v[:, 0, 32:64] = -1.5  # one whole value group constant
    return k.to(dtype), v.to(dtype)


@pytest.mark.parametrize("scheme", LOWBIT + ["kivi4_g128"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_write_matches_reference_bits(target, scheme, dtype, gen):
    n, heads, d = (300, 8, 128) if target.large else (37, 2, 128)
    num_blocks = n // 16 + 4
    ref = PagedKVCache.allocate(scheme, num_blocks, 16, heads, d)
    tri = PagedKVCache.allocate(scheme, num_blocks, 16, heads, d, device=target.device)
    k, v = _kv(n, heads, d, gen, dtype)
    table = torch.randperm(num_blocks, generator=gen)[: -(-n // 16)].tolist()
    batch = AttentionBatch.from_lengths([n], [n], [table])
    slots = batch.slot_mapping(16)
    ref.write(k, v, slots, batch=batch)
    write_lowbit_cache(tri, k.to(target.device), v.to(target.device), slots.to(target.device),
                       batch=AttentionBatch.from_lengths([n], [n], [table], device=target.device))
    _assert_same(ref, tri)


@pytest.mark.parametrize("scheme, head, chunks", [("kivi2_g32_r2", 96, [5, 14, 30, 1]),
                                                  ("kivi4_g32_r3", 64, [17, 16, 20]),
                                                  ("int4_per_token_head", 80, [3, 40])])
def test_chunked_writes_with_a_residual_spanning_blocks(target, scheme, head, chunks, gen):
    """Prefill in chunks that cross block boundaries, then decodes; compare after every step."""
    n = sum(chunks)
    ref = PagedKVCache.allocate(scheme, 8, 16, 2, head)
    tri = PagedKVCache.allocate(scheme, 8, 16, 2, head, device=target.device)
    k, v = _kv(n, 2, head, gen, torch.bfloat16)
    table = [6, 2, 7, 0]
    done = 0
    for c in chunks:
        batch = AttentionBatch.from_lengths([c], [done + c], [table])
        slots = batch.slot_mapping(16)
        ref.write(k[done:done + c], v[done:done + c], slots, batch=batch)
        write_lowbit_cache(tri, k[done:done + c].to(target.device), v[done:done + c].to(target.device),
                           slots.to(target.device),
                           batch=AttentionBatch.from_lengths([c], [done + c], [table], device=target.device))
        done += c
        _assert_same(ref, tri)


def _tolerances(scheme, query_dtype):
    sch = get_scheme(scheme)
    k_tol = kernel_tolerance(query_dtype, "int8_per_token_head")
    if sch.mode.name == "KIVI":
        k_tol += 2 * UNIT_ROUNDOFF[query_dtype]
    step = 4.5 / sch.levels
    return k_tol, k_tol + 2 * step / math.sqrt(12.0)


def _check(ex, target, scheme, **opts):
    q = ex.query
    out = poisoned((q.shape[0], q.shape[1], ex.cache.head_size_v), q.dtype, target.device)
    got = lowbit_paged_attention(q, ex.cache, ex.batch, out=out, **opts)
    assert got is out and torch.isfinite(out).all(), "outputs left unwritten or poisoned"
    ref_opts = {k: v for k, v in opts.items()
                if k not in ("num_splits", "tile_n", "tiles_per_step", "dequantize_first")}
    ref = kvlab.attention(q, ex.cache, ex.batch, **ref_opts)
    truth = reference_attention(q, ex.keys, ex.values, ex.batch, **ref_opts)
    k_tol, t_tol = _tolerances(scheme, q.dtype)
    assert relative_error(out, ref) <= k_tol
    assert relative_error(out, truth) <= t_tol
    return out


def _example(target, seed, qlens, slens, scheme, *, hq=8, hkv=2, d=64, block=16, **kw):
    return build_paged_example(qlens, slens, num_q_heads=hq, num_kv_heads=hkv, head_size=d, scheme=scheme,
                               block_size=block, seed=seed, device=target.device, **kw)


@pytest.mark.parametrize("dequantize_first", [False, None], ids=["fused", "default"])
@pytest.mark.parametrize("scheme", LOWBIT)
def test_mixed_prefill_and_decode(target, seed, scheme, dequantize_first):
    """Partial last blocks, a 0-token sequence, GQA 4:1, a prefill chunk crossing a block boundary;
    in the fused kernel and in the default path (dequantize-first, as the batch has a prefill chunk)."""
    if target.large:
        qlens, slens, d = [1, 1, 37, 0, 1, 300], [1, 16, 1000, 70, 4097, 300], 128
    else:
        qlens, slens, d = [1, 1, 7, 0, 1], [1, 16, 37, 20, 50], 64
    ex = _example(target, seed, qlens, slens, scheme, d=d)
    _check(ex, target, scheme, dequantize_first=dequantize_first)


@pytest.mark.parametrize("scheme", ["kivi2", "int4_per_token_head"])
def test_fp16_query_block_32_and_split_k(target, seed, scheme):
    slens = [2000, 4500] if target.large else [45, 70]
    ex = _example(target, seed, [1, 1], slens, scheme, block=32, query_dtype=torch.float16,
                  kv_dtype=torch.float16, hq=4, hkv=4)
    _check(ex, target, scheme, num_splits=3)


@pytest.mark.parametrize("scheme", ["kivi2", "kivi2_g64_r2"])
def test_split_2bit_decode_in_128_key_tiles(target, seed, scheme):
    """The rule's launch for two long 2-bit KIVI sequences (on a GPU: 16 programs, 16 segments of
    more than 4 tiles of 64 keys, so 128-key tiles), one ending mid-segment, against both references."""
    gen = torch.Generator().manual_seed(seed)
    long = int(torch.randint(9000, 14000, (1,), generator=gen)) if target.large else 90
    ex = _example(target, seed, [1, 1], [long, long // 3 + 5], scheme, hq=32, hkv=8, d=128)
    call = prepare_lowbit_attention(ex.query, ex.cache, ex.batch)
    if target.large:
        assert (call.tile_n, call.num_splits) == (128, 16)
    _check(ex, target, scheme)


@pytest.mark.parametrize("scheme, step", [("kivi4_g32_r2", 2), ("kivi2", 4), ("int4_per_token_head", 2)])
def test_several_tiles_per_loop_step(target, seed, scheme, step):
    """A loop step's later tiles that fall past its split-K segment, or into blocks still in the
    residual, must see no keys: 113 tokens in 3 segments leave the second step of a segment half in
    the next one; 45 tokens unsplit put a step across the residual (tile 2 of 0..3)."""
    slens = [2000, 4513, 45] if target.large else [45, 113, 17]
    ex = _example(target, seed, [1, 1, 1], slens, scheme)
    _check(ex, target, scheme, num_splits=3, tiles_per_step=step)
    _check(_example(target, seed, [1], [45], scheme), target, scheme, num_splits=1, tiles_per_step=step)


@pytest.mark.parametrize("scheme", ["kivi4", "kivi2_g64_r2"])
def test_packed_fma_decode(target, seed, scheme):
    """KIVI's ``c · s + z`` as packed ``fma.rn.f16x2`` (``packed_fma=True``; the interpreter runs the
    pure-Triton fallback) against the float64 references, and on the GPU within fp16 rounding of one
    dequantized element of the default scalar-FMA kernel (both round ``c · s + z`` once)."""
    slens = [1000, 4097, 33] if target.large else [45, 70, 17]
    ex = _example(target, seed, [1, 1, 1], slens, scheme, d=128 if target.large else 64)
    q = ex.query
    out = poisoned((q.shape[0], q.shape[1], ex.cache.head_size_v), q.dtype, target.device)
    prepare_lowbit_attention(q, ex.cache, ex.batch, out=out, packed_fma=True).run()
    assert torch.isfinite(out).all(), "outputs left unwritten or poisoned"
    k_tol, t_tol = _tolerances(scheme, q.dtype)
    assert relative_error(out, kvlab.attention(q, ex.cache, ex.batch)) <= k_tol
    assert relative_error(out, reference_attention(q, ex.keys, ex.values, ex.batch)) <= t_tol
    scalar = prepare_lowbit_attention(q, ex.cache, ex.batch, packed_fma=False).run()
    assert relative_error(out, scalar) <= 2 * UNIT_ROUNDOFF[torch.float16] + UNIT_ROUNDOFF[q.dtype]


def test_tiles_per_step_is_checked(target, seed):
    ex = _example(target, seed, [1], [30], "kivi2")
    with pytest.raises(ValueError, match="tiles_per_step must be 1, 2 or 4, got 3"):
        prepare_lowbit_attention(ex.query, ex.cache, ex.batch, tiles_per_step=3)


@pytest.mark.parametrize("scheme", ["kivi4_g32_r2", "int4_per_token_head"])
def test_sliding_window_and_softcap(target, seed, scheme):
    slens = [3000, 40] if target.large else [60, 40]
    ex = _example(target, seed, [5, 1], slens, scheme)
    _check(ex, target, scheme, sliding_window=19, softcap=30.0, tile_n=32)  # two blocks per tile


def test_outlier_and_constant_channels(target, seed, gen):
    def source(n, h, d, g):
        return _kv(n, h, d, g, torch.float32)

    ex = _example(target, seed, [1, 3], [200 if target.large else 40, 35], "kivi2", kv_source=source)
    q = ex.query
    out = lowbit_paged_attention(q, ex.cache, ex.batch)
    ref = kvlab.attention(q, ex.cache, ex.batch)
    assert relative_error(out, ref) <= _tolerances("kivi2", q.dtype)[0]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1e5])
def test_bad_input_is_refused_by_the_triton_write(target, bad):
    cache = PagedKVCache.allocate("kivi2", 4, 16, 1, 32, device=target.device)
    k = torch.randn(3, 1, 32, device=target.device)
    k[1, 0, 2] = bad
    with pytest.raises(ValueError, match="non-finite|fp16"):
        write_lowbit_cache(cache, k, torch.zeros_like(k), torch.arange(3, device=target.device))
    assert torch.isnan(cache.residual_key).all(), "nothing may be stored when the write is refused"


def test_block_size_not_a_power_of_two_is_refused(target, seed):
    ex = _example(target, seed, [1], [30], "int4_per_token_head", block=24)
    message = "block_size must be a power of two .*got 24; the nearest are 16 and 32"
    with pytest.raises(ValueError, match=message):
        lowbit_paged_attention(ex.query, ex.cache, ex.batch)
