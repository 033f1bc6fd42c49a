"""The Triton paged-attention kernel against the float64 references.

Each run is checked twice: against the reference on the *dequantized* cache (only the kernel's own
rounding may differ, :func:`conftest.kernel_tolerance`) and against the *unquantized* K/V (the
scheme's error on top, :func:`conftest.scheme_tolerance`). Outputs start as NaN, so an element the
kernel forgets to write fails; caches come poisoned (NaN, or NaN scales for int8) wherever nothing
was written, including the block-table padding, so a kernel that reads past a sequence fails too.
"""

from __future__ import annotations

import pytest
import torch

import kvlab
from kvlab import AttentionBatch, PagedKVCache, build_paged_example, relative_error
from kvlab.kernels import (
    AttentionTiling,
    choose_num_splits,
    choose_tiling,
    paged_attention,
    prepare_paged_attention,
)
from kvlab.reference import paged_attention_reference, reference_attention

from .conftest import kernel_tolerance, poisoned, scheme_tolerance


def _check(ex, target, *, scheme, rounding="nearest", kv_dtype=torch.bfloat16, **opts):
    """Run the kernel into a NaN-filled output and compare it with both references."""
    q = ex.query
    out = poisoned((q.shape[0], q.shape[1], ex.cache.head_size_v), q.dtype, target.device)
    launch = {k: opts.pop(k) for k in ("fused_merge",) if k in opts}  # launch options of prepare only
    if launch:
        result = prepare_paged_attention(q, ex.cache, ex.batch, out=out, **opts, **launch).run()
    else:
        result = paged_attention(q, ex.cache, ex.batch, out=out, **opts)
    assert result is out
    assert torch.isfinite(out).all(), f"{int((~torch.isfinite(out)).sum())} outputs unwritten or poisoned"
    ref_opts = {k: v for k, v in opts.items() if k != "num_splits"}
    ref = paged_attention_reference(q, ex.cache, ex.batch, **ref_opts)
    truth = reference_attention(q, ex.keys, ex.values, ex.batch, **ref_opts)
    k_tol = kernel_tolerance(q.dtype, scheme, kv_dtype)
    err = relative_error(out, ref)
    assert err <= k_tol, f"kernel vs dequantized reference: {err:.3g} > {k_tol:.3g}"
    t_tol = k_tol + scheme_tolerance(scheme, rounding, kv_dtype)
    err_truth = relative_error(out, truth)
    assert err_truth <= t_tol, f"kernel vs unquantized truth: {err_truth:.3g} > {t_tol:.3g}"
    return out


def _example(target, seed, query_lens, seq_lens, *, hq, hkv, d, scheme, block=16, **kw):
    return build_paged_example(query_lens, seq_lens, num_q_heads=hq, num_kv_heads=hkv, head_size=d,
                               scheme=scheme, block_size=block, seed=seed, device=target.device, **kw)


SCHEMES = ["bfloat16", "float16", "fp8", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head"]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_mixed_prefill_and_decode_batch(target, seed, scheme):
    if target.large:
        qlens, slens, hq, hkv, d = [1, 1, 37, 0, 1, 1, 300], [1, 16, 1000, 70, 4097, 2048, 300], 32, 8, 128
    else:
        qlens, slens, hq, hkv, d = [1, 1, 6, 0, 1], [1, 16, 40, 9, 33], 8, 2, 64
    ex = _example(target, seed, qlens, slens, hq=hq, hkv=hkv, d=d, scheme=scheme)
    _check(ex, target, scheme=scheme)


@pytest.mark.parametrize("scheme", ["bfloat16", "int8_per_token_head", "fp8"])
def test_prefill_chunks_over_a_context_longer_than_a_tile(target, seed, scheme):
    """Chunks whose first query sits several key tiles into the sequence: the tiles left of it take
    the kernel's unmasked path, the diagonal ones the masked path; a split adds segment edges."""
    qlens, slens = ([70, 3, 1], [3000, 900, 500]) if target.large else ([5, 3], [150, 140])
    ex = _example(target, seed, qlens, slens, hq=8, hkv=2, d=64, scheme=scheme)
    _check(ex, target, scheme=scheme)
    _check(ex, target, scheme=scheme, num_splits=3)


def test_bf16_queries_beyond_fp16_range_over_an_fp16_cache(target, seed):
    """bf16 queries read an fp16 cache with fp16 dots: the query is scaled by a power of two into
    fp16's range (2^17 is past its largest finite value, 65504) and the scale is undone exactly."""
    qlens, slens = ([1, 9], [777, 120]) if target.large else ([1, 4], [19, 26])
    ex = _example(target, seed, qlens, slens, hq=4, hkv=1, d=64, scheme="float16")
    ex.query.mul_(2.0**-12)  # N(0, 1) · 2^-12: a softmax that is not one-hot...
    ex.query[0, 0, 3] = 2.0**17  # ...except for one head of one token, whose scores are huge
    _check(ex, target, scheme="float16", scale=2.0**-11)


def test_int8_truncation_as_vllm_stores_it(target, seed):
    qlens, slens = ([1, 5, 1], [900, 60, 2000]) if target.large else ([1, 5], [30, 21])
    ex = _example(target, seed, qlens, slens, hq=8, hkv=2, d=64, scheme="int8_per_token_head",
                  rounding="truncate")
    _check(ex, target, scheme="int8_per_token_head", rounding="truncate")


def test_float32_cache_and_queries_in_fp32(target, seed):
    """An ``auto`` cache of fp32 K/V, with fp32 queries: both dots run in fp32."""
    qlens, slens = ([3, 1], [500, 999]) if target.large else ([3, 1], [20, 35])
    ex = _example(target, seed, qlens, slens, hq=4, hkv=2, d=64, scheme="auto", kv_dtype=torch.float32,
                  query_dtype=torch.float32)
    _check(ex, target, scheme="auto", kv_dtype=torch.float32)


@pytest.mark.parametrize("query_dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("scheme", ["bfloat16", "int8_per_token_head", "fp8"])
def test_query_dtypes(target, seed, query_dtype, scheme):
    qlens, slens = ([1, 9], [777, 120]) if target.large else ([1, 4], [19, 26])
    ex = _example(target, seed, qlens, slens, hq=4, hkv=1, d=64, scheme=scheme, query_dtype=query_dtype)
    out = _check(ex, target, scheme=scheme)
    assert out.dtype == query_dtype


@pytest.mark.parametrize("hq,hkv", [(4, 4), (8, 2), (8, 1)], ids=["gqa1", "gqa4", "gqa8"])
def test_grouped_query_attention(target, seed, hq, hkv):
    scale = 4 if target.large else 1
    qlens, slens = ([3, 1, 17], [300, 1500, 17]) if target.large else ([3, 1], [20, 37])
    ex = _example(target, seed, qlens, slens, hq=hq * scale, hkv=hkv * scale, d=64,
                  scheme="int8_per_token_head")
    _check(ex, target, scheme="int8_per_token_head")


@pytest.mark.parametrize("d", [64, 80, 128, 256, 512])
@pytest.mark.parametrize("scheme", ["bfloat16", "fp8_per_token_head"])
def test_head_sizes(target, seed, d, scheme):
    qlens, slens, hq, hkv = ([1, 20], [700, 300], 16, 4) if target.large else ([1, 2], [24, 18], 2, 1)
    ex = _example(target, seed, qlens, slens, hq=hq, hkv=hkv, d=d, scheme=scheme)
    _check(ex, target, scheme=scheme)


@pytest.mark.parametrize("block", [16, 32, 64])
def test_block_sizes_and_block_boundary_lengths(target, seed, block):
    slens = [block, block + 1, 2 * block, 1]
    qlens = [1, 1, 4, 1]
    if target.large:
        slens, qlens = slens + [50 * block + 3], qlens + [block + 1]
    ex = _example(target, seed, qlens, slens, hq=8, hkv=2, d=64, scheme="int8_per_token_head", block=block)
    _check(ex, target, scheme="int8_per_token_head")


def _poison_positions(cache: PagedKVCache, batch: AttentionBatch, seq: int, upto: int) -> None:
    """Make K/V positions ``[0, upto)`` of one sequence unreadable (NaN, or NaN scales for int8)."""
    if upto <= 0:
        return
    pos = torch.arange(upto, device=cache.device)
    blocks = batch.block_table[seq].long()[pos // cache.block_size]
    offs = pos % cache.block_size
    if cache.key_scale is not None:
        cache.key_scale[blocks, offs] = float("nan")
        cache.value_scale[blocks, offs] = float("nan")
    if cache.key.dtype != torch.int8:
        cache.key[blocks, offs] = float("nan")
        cache.value[blocks, offs] = float("nan")


@pytest.mark.parametrize("window", [1, 5, 16, 1000])
@pytest.mark.parametrize("scheme", ["bfloat16", "int8_per_token_head", "fp8"])
def test_sliding_window_never_reads_keys_left_of_it(target, seed, window, scheme):
    """Keys left of every query's window are poisoned: the kernel must skip them, not mask them."""
    qlens, slens = ([1, 40, 1, 3], [3000, 500, 3, 1200]) if target.large else ([1, 12, 1], [70, 50, 3])
    ex = _example(target, seed, qlens, slens, hq=8, hkv=2, d=64, scheme=scheme)
    _check(ex, target, scheme=scheme, sliding_window=window)  # before poisoning: the reference on clean K/V
    for i, (q, s) in enumerate(zip(qlens, slens, strict=True)):
        _poison_positions(ex.cache, ex.batch, i, (s - q) - window + 1)  # left of the first query's window
    out = poisoned(ex.query.shape, ex.query.dtype, target.device)
    paged_attention(ex.query, ex.cache, ex.batch, sliding_window=window, out=out)
    assert torch.isfinite(out).all(), "a key left of the sliding window was read (or an output not written)"
    truth = reference_attention(ex.query, ex.keys, ex.values, ex.batch, sliding_window=window)
    tol = kernel_tolerance(ex.query.dtype, scheme) + scheme_tolerance(scheme)
    assert relative_error(out, truth) <= tol


@pytest.mark.parametrize("softcap", [2.0, 30.0])
@pytest.mark.parametrize("scheme", ["bfloat16", "fp8_per_token_head"])
def test_softcap_and_custom_scale(target, seed, softcap, scheme):
    qlens, slens = ([1, 30], [2000, 400]) if target.large else ([1, 6], [40, 22])
    ex = _example(target, seed, qlens, slens, hq=8, hkv=2, d=64, scheme=scheme)
    _check(ex, target, scheme=scheme, softcap=softcap, scale=0.5)


@pytest.mark.parametrize("d", [80, 512])
def test_split_k_merges_every_channel_slice(target, seed, d):
    """The merge works on slices of output channels; a padded head size leaves a partial last slice."""
    qlens, slens = ([1, 1, 5], [3000, 700, 800]) if target.large else ([1, 1], [70, 33])
    ex = _example(target, seed, qlens, slens, hq=4, hkv=2, d=d, scheme="int8_per_token_head")
    _check(ex, target, scheme="int8_per_token_head", num_splits=3)


@pytest.mark.parametrize("num_splits", [2, 5, 16])
def test_split_k_with_empty_segments(target, seed, num_splits):
    """More segments than tiles leaves some segments empty; they must drop out of the merge."""
    qlens, slens = ([1, 1, 1, 7], [1, 5000, 260, 900]) if target.large else ([1, 1, 1, 3], [1, 100, 260, 40])
    ex = _example(target, seed, qlens, slens, hq=8, hkv=2, d=64, scheme="fp8_per_token_head")
    _check(ex, target, scheme="fp8_per_token_head", num_splits=num_splits)
    _check(ex, target, scheme="fp8_per_token_head", num_splits=num_splits, sliding_window=50)


def test_different_k_and_v_head_sizes(target, seed):
    gen = torch.Generator(device=target.device).manual_seed(seed)
    qlens, slens = [2, 1], [40, 23]
    table = [[0, 1, 2], [3, 4, 5]]
    batch = AttentionBatch.from_lengths(qlens, slens, table, device=target.device)
    full = AttentionBatch.from_lengths(slens, slens, table, device=target.device)
    cache = PagedKVCache.allocate("int8_per_token_head", 7, 16, 2, 64, head_size_v=96, device=target.device)
    keys = [torch.randn(s, 2, 64, generator=gen, device=target.device) for s in slens]
    values = [torch.randn(s, 2, 96, generator=gen, device=target.device) for s in slens]
    cache.write(torch.cat(keys), torch.cat(values), full.slot_mapping(16))
    query = torch.randn(3, 4, 64, generator=gen, device=target.device).to(torch.bfloat16)
    out = paged_attention(query, cache, batch, out=poisoned((3, 4, 96), torch.bfloat16, target.device))
    assert out.shape == (3, 4, 96) and torch.isfinite(out).all()
    k_tol = kernel_tolerance(torch.bfloat16, "int8_per_token_head")
    assert relative_error(out, paged_attention_reference(query, cache, batch)) <= k_tol
    truth = reference_attention(query, keys, values, batch)
    assert relative_error(out, truth) <= k_tol + scheme_tolerance("int8_per_token_head")


def test_batch_of_empty_queries_only(target, seed):
    ex = _example(target, seed, [0, 0], [5, 17], hq=4, hkv=2, d=64, scheme="bfloat16")
    out = paged_attention(ex.query, ex.cache, ex.batch)
    assert out.shape == (0, 4, 64)


def test_kvlab_attention_dispatches_to_this_kernel(target, seed):
    ex = _example(target, seed, [1, 3], [30, 19], hq=4, hkv=2, d=64, scheme="int8_per_token_head")
    direct = paged_attention(ex.query, ex.cache, ex.batch, sliding_window=8)
    via = kvlab.attention(ex.query, ex.cache, ex.batch, backend="triton", sliding_window=8)
    assert torch.equal(direct, via)


def test_automatic_split_k(target, seed):
    """In the interpreter no split is chosen; on a GPU, one long sequence gets split automatically."""
    slen = 8192 if target.large else 40
    ex = _example(target, seed, [1], [slen], hq=8, hkv=2, d=64, scheme="int8_per_token_head")
    out = poisoned(ex.query.shape, ex.query.dtype, target.device)
    call = prepare_paged_attention(ex.query, ex.cache, ex.batch, out=out)
    assert (call.tiling.num_splits > 1) == target.large
    call.run()
    assert torch.isfinite(out).all()
    ref = paged_attention_reference(ex.query, ex.cache, ex.batch)
    assert relative_error(out, ref) <= kernel_tolerance(ex.query.dtype, "int8_per_token_head")


@pytest.mark.parametrize("scheme", ["int8_per_token_head", "fp8"])
def test_split_8bit_decode_in_narrow_programs(target, seed, scheme):
    """Narrow programs (64-key tiles on 2 warps, many segments under the register cap; a sweep
    candidate), with the batch's other sequences ending mid-tile and mid-segment, against both
    references."""
    ex = _example(target, seed, [1, 1, 1], [5000, 1000, 77] if target.large else [70, 33, 5],
                  hq=32, hkv=8, d=128, scheme=scheme)
    tiling = AttentionTiling(block_m=16, block_q=1, tile_n=64, num_warps=2, num_stages=2,
                             num_splits=8 if target.large else 2, max_registers=128)
    out = poisoned(ex.query.shape, ex.query.dtype, target.device)
    prepare_paged_attention(ex.query, ex.cache, ex.batch, out=out, tiling=tiling).run()
    assert torch.isfinite(out).all()
    ref = paged_attention_reference(ex.query, ex.cache, ex.batch)
    assert relative_error(out, ref) <= kernel_tolerance(ex.query.dtype, scheme)
    truth = reference_attention(ex.query, ex.keys, ex.values, ex.batch)
    tol = kernel_tolerance(ex.query.dtype, scheme) + scheme_tolerance(scheme)
    assert relative_error(out, truth) <= tol


@pytest.mark.parametrize("half", [True, False], ids=["fp16", "bf16"])
@pytest.mark.parametrize("scheme", ["fp8_e4m3", "fp8_e5m2"])
def test_fp16_dots_over_per_tensor_fp8(target, seed, scheme, half):
    """Per-tensor fp8 read through fp16 dots (codes to fp16, bf16 query scaled into fp16 by a power of
    two, ``p`` rounded to fp16; a sweep variant) or bf16 dots (the default): a prefill chunk and
    decodes, against both references. ``p`` in fp16 is finer than in bf16, so the bf16 kernel
    tolerance holds."""
    qlens, slens = ([1, 300, 1], [3000, 1200, 77]) if target.large else ([1, 9, 1], [40, 30, 5])
    ex = _example(target, seed, qlens, slens, hq=8, hkv=2, d=128, scheme=scheme)
    out = poisoned(ex.query.shape, ex.query.dtype, target.device)
    call = prepare_paged_attention(ex.query, ex.cache, ex.batch, out=out, fp8_half_dots=half)
    assert str(call._launch.consts["DOT_DTYPE"]) == ("fp16" if half else "bf16")
    call.run()
    assert torch.isfinite(out).all()
    ref = paged_attention_reference(ex.query, ex.cache, ex.batch)
    assert relative_error(out, ref) <= kernel_tolerance(ex.query.dtype, scheme)
    truth = reference_attention(ex.query, ex.keys, ex.values, ex.batch)
    assert relative_error(out, truth) <= kernel_tolerance(ex.query.dtype, scheme) + scheme_tolerance(scheme)


# -- refusals ---------------------------------------------------------------------------------------------


def test_bad_calls_are_refused_with_one_clear_error(target, seed):
    ex = _example(target, seed, [1, 2], [9, 20], hq=4, hkv=2, d=64, scheme="bfloat16")
    q, c, b = ex.query, ex.cache, ex.batch
    with pytest.raises(ValueError, match="out must be"):
        paged_attention(q, c, b, out=torch.empty(3, 4, 32, dtype=q.dtype, device=q.device))
    with pytest.raises(ValueError, match="out must be"):
        paged_attention(q, c, b, out=torch.empty(3, 4, 64, dtype=torch.float32, device=q.device))
    with pytest.raises(ValueError, match="num_splits"):
        paged_attention(q, c, b, num_splits=0)
    with pytest.raises(ValueError, match="sliding_window"):
        paged_attention(q, c, b, sliding_window=0)
    with pytest.raises(ValueError, match="softcap"):
        paged_attention(q, c, b, softcap=-1.0)
    with pytest.raises(ValueError, match="scale"):
        paged_attention(q, c, b, scale=float("nan"))
    with pytest.raises(ValueError, match="float16, bfloat16 or float32"):
        paged_attention(q.double(), c, b)
    with pytest.raises(ValueError, match="multiple of"):
        paged_attention(q[:, :3], c, b)
    big = _example(target, seed, [1], [3], hq=1, hkv=1, d=640, scheme="bfloat16")
    with pytest.raises(ValueError, match="head sizes up to 512"):
        paged_attention(big.query, big.cache, big.batch)


def test_tensors_on_the_wrong_device_are_refused(target, seed):
    wrong = torch.device("meta") if target.device.type == "cpu" else torch.device("cpu")
    message = "interpreter runs on CPU tensors" if target.device.type == "cpu" else "needs CUDA tensors"
    cache = PagedKVCache.allocate("bfloat16", 2, 16, 2, 64, device=wrong)
    batch = AttentionBatch.from_lengths([1], [5], [[0]], device="cpu")  # metadata cannot live on "meta"
    with pytest.raises(ValueError, match=message):
        paged_attention(torch.empty(1, 4, 64, device=wrong), cache, batch)


# -- launch decisions (plain Python) ----------------------------------------------------------------


def test_split_k_heuristic():
    assert choose_num_splits(8, 512, None) == 1  # interpreter: never
    assert choose_num_splits(10_000, 512, 132) == 1  # the grid already fills the GPU
    one_seq = choose_num_splits(8, 32768 // 128, 132)  # B=1, 8 KV heads, 32K keys in 128-key tiles
    assert one_seq > 16 and 8 * one_seq >= 132
    assert choose_num_splits(8, 8, 132) == 8  # short context: as many segments as tiles (33 wanted)
    assert choose_num_splits(8, 512, 132, programs_per_sm=4) == 66  # 4 × 132 / 8 programs
    assert choose_num_splits(128, 256, 132) >= choose_num_splits(512, 256, 132)


def test_tiling_choice_and_validation():
    t = choose_tiling(group=4, head_size=128, head_size_v=128, kv_element_bytes=1, max_query_len=1,
                      max_seq_len=32768, num_tokens=64, num_seqs=64, num_kv_heads=8, num_sms=132)
    assert t.block_q == 1 and t.block_m == 16 and t.tile_n >= 64 and t.max_registers is not None
    b = choose_tiling(group=4, head_size=128, head_size_v=128, kv_element_bytes=2, max_query_len=1,
                      max_seq_len=32768, num_tokens=1, num_seqs=1, num_kv_heads=8, num_sms=132)
    assert b.max_registers is None and b.num_splits > 1
    p = choose_tiling(group=4, head_size=128, head_size_v=128, kv_element_bytes=2, max_query_len=512,
                      max_seq_len=8192, num_tokens=8192, num_seqs=1, num_kv_heads=8, num_sms=132)
    assert p.block_q * 4 <= p.block_m and p.num_splits == 1
    # one sequence of 1,024 tokens, bf16: 8 programs × 16 tiles of 64 keys < 2 × 132 programs wanted,
    # so tiles shrink to 32 keys (8 × 32 = 256 tiles), then 33 segments are capped at 32 tiles
    short = choose_tiling(group=4, head_size=128, head_size_v=128, kv_element_bytes=2, max_query_len=1,
                          max_seq_len=1024, num_tokens=1, num_seqs=1, num_kv_heads=8, num_sms=132)
    assert (short.tile_n, short.num_splits) == (32, 32)
    # B=16, 8-bit: 128 programs < 2 × 132, split into 4 segments of 128-key tiles (512 programs, four
    # per multiprocessor under the register cap); B=64 (512 programs) is not split
    b16 = choose_tiling(group=4, head_size=128, head_size_v=128, kv_element_bytes=1, max_query_len=1,
                        max_seq_len=32768, num_tokens=16, num_seqs=16, num_kv_heads=8, num_sms=132)
    assert (b16.tile_n, b16.num_warps, b16.num_splits, b16.max_registers) == (128, 4, 4, 128)
    assert (t.tile_n, t.num_warps, t.num_splits) == (128, 4, 1)
    with pytest.raises(ValueError, match="power of two"):
        AttentionTiling(block_m=24, block_q=1, tile_n=64)
    with pytest.raises(ValueError, match="num_splits"):
        AttentionTiling(block_m=16, block_q=1, tile_n=64, num_splits=1000)
    with pytest.raises(ValueError, match="max_registers"):
        AttentionTiling(block_m=16, block_q=1, tile_n=64, max_registers=300)
