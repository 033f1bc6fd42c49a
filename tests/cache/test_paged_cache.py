"""The paged cache's write path, slot mapping and batch metadata."""

import pytest
import torch

from kvlab import AttentionBatch, PagedKVCache, get_scheme, quantize_per_tensor, quantize_per_token_head
from kvlab.cache import build_paged_example

SCHEMES = ["bfloat16", "float16", "fp8", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head"]


def _bytes(t):
    return t.view(torch.uint8) if t.element_size() == 1 else t.view(torch.int16)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_write_stores_the_quantizer_output_at_each_slot_and_skips_negative_slots(gen, scheme):
    cache = PagedKVCache.allocate(scheme, num_blocks=6, block_size=16, num_kv_heads=2, head_size=64,
                                  k_scale=0.01, v_scale=0.02)
    before_k, before_v = _bytes(cache.key).clone(), _bytes(cache.value).clone()
    n = 40
    key, value = torch.randn(n, 2, 64, generator=gen), torch.randn(n, 2, 64, generator=gen)
    slots = torch.randperm(cache.num_slots, generator=gen)[:n]
    slots[::7] = -1  # padding tokens
    report = cache.write(key, value, slots)
    keep = slots >= 0
    assert (report.num_written, report.num_skipped) == (int(keep.sum()), int((~keep).sum()))

    sch = get_scheme(scheme)
    flat_k = cache.key.view(-1, 2, 64)
    if sch.mode.is_per_token_head:
        codes, scales = quantize_per_token_head(key[keep], sch)
        assert torch.equal(cache.key_scale.view(-1, 2)[slots[keep]], scales)
    elif sch.is_quantized:
        codes = quantize_per_tensor(key[keep], cache.k_scale, sch).codes
    else:
        codes = key[keep].to(sch.storage_dtype)
    assert torch.equal(_bytes(flat_k[slots[keep]]), _bytes(codes))
    # every slot not written keeps its poison bytes
    untouched = torch.ones(cache.num_slots, dtype=torch.bool)
    untouched[slots[keep]] = False
    assert torch.equal(_bytes(cache.key).view(-1, 2, 64)[untouched], before_k.view(-1, 2, 64)[untouched])
    assert torch.equal(_bytes(cache.value).view(-1, 2, 64)[untouched], before_v.view(-1, 2, 64)[untouched])


def test_fresh_caches_are_poisoned_so_unwritten_reads_show():
    for scheme in SCHEMES:
        cache = PagedKVCache.allocate(scheme, 2, 16, 1, 64)
        k, v = cache.dequantize()
        assert bool(torch.isnan(k).all()) and bool(torch.isnan(v).all()), scheme


def test_non_finite_values_are_located_in_the_callers_coordinates_and_padding_is_ignored(gen):
    cache = PagedKVCache.allocate("int8_per_token_head", 4, 16, 2, 64)
    key, value = torch.randn(5, 2, 64, generator=gen), torch.randn(5, 2, 64, generator=gen)
    key[0] = float("nan")  # a padding row: skipped, so harmless
    value[3, 1, 7] = float("inf")
    slots = torch.tensor([-1, 0, 1, 2, 3])
    with pytest.raises(ValueError, match=r"value contains 1 non-finite value\(s\).*index \(3, 1, 7\)"):
        cache.write(key, value, slots)
    value[3, 1, 7] = 0.5
    assert cache.write(key, value, slots).num_written == 4


def test_saturation_is_reported_by_the_per_tensor_write(gen):
    cache = PagedKVCache.allocate("fp8", 2, 16, 1, 64, k_scale=1e-3, v_scale=1.0)
    key = torch.randn(8, 1, 64, generator=gen)
    key[0, 0, 0] = 1.0  # 1.0 / 1e-3 = 1000 > 448
    report = cache.write(key, torch.randn(8, 1, 64, generator=gen), torch.arange(8))
    assert report.key_saturated == int((key.abs() / 1e-3 > 448).sum()) >= 1
    assert report.value_saturated == 0
    assert bool(torch.isfinite(cache.dequantize()[0].view(-1, 64)[:8]).all())


def test_gather_returns_each_sequence_in_token_order(seed):
    ex = build_paged_example([3, 1], [37, 16], num_q_heads=4, num_kv_heads=2, head_size=64,
                             scheme="bfloat16", kv_dtype=torch.bfloat16, seed=seed)
    for i, n in enumerate(ex.batch.seq_lens_list):
        k, v = ex.cache.gather(ex.batch.block_table[i], n)
        assert torch.equal(k, ex.keys[i].double()) and torch.equal(v, ex.values[i].double())


def test_slot_mapping_follows_the_block_table(gen):
    table = torch.randperm(20, generator=gen)[:12].to(torch.int32).reshape(3, 4)
    batch = AttentionBatch.from_lengths([5, 1, 0], [37, 50, 8], table)
    slots = batch.slot_mapping(16).tolist()
    expected = []
    for i, (q, s) in enumerate(zip([5, 1, 0], [37, 50, 8], strict=True)):
        for pos in range(s - q, s):
            expected.append(int(table[i, pos // 16]) * 16 + pos % 16)
    assert slots == expected
    assert batch.positions().tolist() == [32, 33, 34, 35, 36, 49]


@pytest.mark.parametrize("make,match", [
    (lambda c: c.write(torch.randn(3, 2, 64), torch.randn(3, 2, 64), torch.tensor([0, 1, 999])),
     "slot_mapping holds slot 999, but the cache has 96 slots"),
    (lambda c: c.write(torch.randn(3, 2, 64), torch.randn(3, 2, 64), torch.tensor([4, 4, 5])),
     "writes the same slot twice"),
    (lambda c: c.write(torch.randn(3, 2, 32), torch.randn(3, 2, 32), torch.tensor([0, 1, 2])),
     r"key must be \[num_tokens, 2, 64\]"),
    (lambda c: c.write(torch.randn(3, 64), torch.randn(3, 64), torch.tensor([0, 1, 2])),
     "key must have 3 dimensions"),
    (lambda c: c.write(torch.randn(3, 2, 64), torch.randn(3, 2, 64), torch.tensor([0, 1])),
     "one slot per token"),
    (lambda c: c.write(torch.randn(3, 2, 64), torch.randn(3, 2, 64), torch.tensor([0.0, 1, 2])),
     "slot_mapping must be an int32 or int64"),
    (lambda c: c.write(torch.full((1, 2, 64), float("nan")), torch.randn(1, 2, 64), torch.tensor([0])),
     "key contains 128 non-finite"),
    (lambda c: c.write(torch.randn(2, 2, 64), torch.randn(2, 2, 64), torch.tensor([0, 1]), rounding="up"),
     "rounding must be one of"),
])
def test_bad_writes_are_refused_with_a_clear_message(make, match):
    cache = PagedKVCache.allocate("int8_per_token_head", 6, 16, 2, 64)
    with pytest.raises(ValueError, match=match):
        make(cache)


def test_cache_construction_checks_dtypes_and_scales():
    with pytest.raises(ValueError, match="unknown kv_cache_dtype 'int4'"):
        PagedKVCache.allocate("int4", 4, 16, 2, 64)
    good = PagedKVCache.allocate("int8_per_token_head", 4, 16, 2, 64)
    with pytest.raises(ValueError, match="must be stored as torch.int8"):
        PagedKVCache(good.scheme, good.key.float(), good.value, good.key_scale, good.value_scale)
    with pytest.raises(ValueError, match="needs key_scale"):
        PagedKVCache(good.scheme, good.key, good.value)
    with pytest.raises(ValueError, match="k_scale must be a positive finite number"):
        PagedKVCache.allocate("fp8", 4, 16, 2, 64, k_scale=0.0)


@pytest.mark.parametrize("kwargs,match", [
    (dict(query_lens=[2, 1], seq_lens=[1, 5]), r"seq_lens\[0\] = 1 is smaller than its 2 new query tokens"),
    (dict(query_lens=[1], seq_lens=[5, 5]), "one entry per sequence"),
    (dict(query_lens=[-1], seq_lens=[5]), ">= 0"),
])
def test_bad_batches_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        table = [[0, 1]] * len(kwargs["seq_lens"])
        AttentionBatch.from_lengths(kwargs["query_lens"], kwargs["seq_lens"], table)


def test_batch_is_checked_against_the_cache():
    batch = AttentionBatch.from_lengths([1], [40], [[0, 1]])
    with pytest.raises(ValueError, match="needs 3 blocks of 16, but block_table has only 2 columns"):
        batch.check_against(num_blocks=8, block_size=16)
    batch = AttentionBatch.from_lengths([1], [20], [[0, 9]])
    with pytest.raises(ValueError, match="uses block id 9; valid ids are 0..7"):
        batch.check_against(num_blocks=8, block_size=16)


def test_batch_checks_block_ids_against_each_cache_shape():
    # one batch serves every layer: a shape it passed is remembered, another shape is still checked
    from kvlab.cache.batch import AttentionBatch

    b = AttentionBatch.from_lengths([2, 1], [10, 17], [[3, 1], [0, 2, 4]])
    b.check_against(num_blocks=5, block_size=8)
    b.check_against(num_blocks=5, block_size=8)
    with pytest.raises(ValueError, match="block id 4; valid ids are 0..3"):
        b.check_against(num_blocks=4, block_size=8)
    with pytest.raises(ValueError, match="sequence 1 has 17 tokens and needs 5 blocks of 4"):
        b.check_against(num_blocks=5, block_size=4)
    # slots come from the host copy of the table: block * size + offset
    assert b.slot_mapping(8).tolist() == [1 * 8 + 0, 1 * 8 + 1, 4 * 8 + 0]
    assert b.positions().tolist() == [8, 9, 16]
