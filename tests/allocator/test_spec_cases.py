"""The test cases of the spec's §7 (taken from vLLM's tests/v1/core), each for the profile it names."""

from __future__ import annotations

import pytest

from kvlab.allocator import BlockPool, KVCacheManager, SlidingWindowManager, TokenRequest
from kvlab.allocator.managers import ChunkedLocalManager
from kvlab.sizing import (
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroup,
    KVCachePool,
    SlidingWindowSpec,
    blocks_per_request,
    estimate_max_model_len,
    group_layers,
    max_concurrency,
    plan_kv_cache,
)

GiB = 2**30


def full(block=16, heads=2, dim=64, dtype="float32", **kw):
    return FullAttentionSpec(block_size=block, num_kv_heads=heads, head_size=dim, model_dtype=dtype, **kw)


def swa(window, block=16, heads=2, dim=64, dtype="float32"):
    return SlidingWindowSpec(
        block_size=block, num_kv_heads=heads, head_size=dim, model_dtype=dtype, sliding_window=window
    )


P16 = full().page_size_bytes  # 16,384 B


def test_p16_page_is_16384_bytes():
    assert P16 == 16_384


# -- 1. concurrency -------------------------------------------------------------------------------------
def test_1_max_concurrency():
    big_full = full(heads=32, dim=128, dtype="float16")
    big_swa = swa(1024, heads=32, dim=128, dtype="float16")
    layers = tuple(f"l{i}" for i in range(32))
    g_full, g_swa = KVCacheGroup(layers, big_full), KVCacheGroup(layers, big_swa)
    L, T = 16384, 1024
    assert blocks_per_request((g_swa,), L, T) == [129]
    assert max_concurrency(1536, sum(blocks_per_request((g_full,), L, T))) == pytest.approx(1.5)
    assert max_concurrency(387, sum(blocks_per_request((g_swa,), L, T))) == pytest.approx(3.0)
    both = sum(blocks_per_request((g_full, g_swa), L, T))
    assert max_concurrency((1024 + 129) * 3, both) == pytest.approx(3.0)


# -- 2. estimate_max_model_len ------------------------------------------------------------------------
@pytest.mark.parametrize(("max_model_len", "expected"), [(16385, 16384), (16383, 16383)])
def test_2_estimate_max_model_len(max_model_len, expected):
    specs = {f"l{i}": full(heads=32, dim=128, dtype="float16") for i in range(32)}
    grouping = group_layers(specs)
    assert estimate_max_model_len(grouping, 8 * GiB, max_model_len, 8192) == expected


def test_2_startup_error_reports_the_estimate():
    specs = {f"l{i}": full(heads=32, dim=128, dtype="float16") for i in range(32)}
    with pytest.raises(ValueError, match="estimated maximum model length is 16384"):
        plan_kv_cache(specs, 8 * GiB, max_model_len=16385, in_flight_tokens=8192, profile="vllm-0.21")


# -- 3. lookahead ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("lookahead", [2, 4])
def test_3_allocate_with_lookahead(lookahead):
    spec = full(block=4)
    config = KVCacheConfig((KVCacheGroup(("l0",), spec),), (KVCachePool(10, (0,), spec.page_size_bytes),))
    manager = KVCacheManager(config, max_model_len=100)
    request = TokenRequest("r", [1, 2, 3], hash_block_size=4)
    blocks = manager.allocate_slots(request, 3, num_lookahead_tokens=lookahead)
    assert len(blocks[0]) == 2


# -- 4-7, 9, 10: grouping and num_blocks ------------------------------------------------------------------
def _plan(specs, memory, **kw):
    kw.setdefault("profile", "vllm-0.21")
    return plan_kv_cache(specs, memory, max_model_len=16, in_flight_tokens=16, **kw)


def _layer_groups(plan):
    return [[int(n) for n in g.layer_names] for g in plan.config.groups]


def test_4_one_full_one_swa():
    plan = _plan({"1": full(), "2": swa(1)}, 2 * 32 * P16)
    assert _layer_groups(plan) == [[1], [2]]
    assert plan.num_blocks == 64
    assert len(plan.config.tensors) == 1 and plan.config.tensors[0].shared_by == ("1", "2")


def test_5_two_full_four_swa():
    specs = {"1": full(), "2": full(), "3": swa(1), "4": swa(1), "5": swa(1), "6": swa(1)}
    plan = _plan(specs, 2 * 32 * P16)
    assert _layer_groups(plan) == [[1, 2], [3, 5], [4, 6]]
    assert plan.num_blocks == 32


def test_6_three_full_seven_swa_with_padding():
    specs = {str(i): full() for i in (1, 2, 3)} | {str(i): swa(1) for i in range(4, 11)}
    plan = _plan(specs, 3 * 32 * P16)
    assert _layer_groups(plan) == [[1, 2, 3], [4, 7, 10], [5, 8], [6, 9]]
    assert plan.num_blocks == 32
    assert plan.grouping.padding_layers == 2
    assert any("2 padding layers" in w for w in plan.grouping.warnings)


def test_7_group_size_rule_one_and_a_half():
    specs = {str(i): full() for i in range(1, 7)} | {str(i): swa(1) for i in range(7, 12)}
    grouping = group_layers(specs)
    assert grouping.group_size == 6
    assert [[int(n) for n in g.layer_names] for g in grouping.groups] == [
        [1, 2, 3, 4, 5, 6],
        [7, 8, 9, 10, 11],
    ]


def test_8_page_unification_scales_block_size():
    grouping = group_layers({"1": full(dim=64), "2": swa(1, dim=32)})
    assert [g.block_size for g in grouping.groups] == [16, 32]


def test_8_non_divisible_pages_raise_classic_and_pad_new():
    specs = {"1": full(dim=64), "2": swa(1, dim=96)}
    with pytest.raises(NotImplementedError):
        _plan(specs, 64 * P16, profile="vllm-0.21")
    plan = _plan(specs, 64 * P16, profile="vllm-0.33")
    pages = {g.kind: g.spec for g in plan.config.groups}
    assert pages["full"].page_size_padded == pages["sliding_window"].page_size_bytes == 24_576
    assert pages["full"].real_page_size_bytes == P16


def test_9_num_gpu_blocks_override():
    plan = _plan({"1": full(), "2": swa(1)}, 1000 * P16, num_gpu_blocks_override=16)
    assert plan.num_blocks == 16


def test_10_disable_hybrid_promotes_to_one_full_group():
    plan = _plan({"1": full(), "2": swa(8)}, 2 * 32 * P16, disable_hybrid=True)
    assert len(plan.config.groups) == 1
    spec = plan.config.groups[0].spec
    assert isinstance(spec, FullAttentionSpec) and spec.sliding_window == 8
    assert plan.num_blocks == 32


# -- 11, 12: remove_skipped_blocks ------------------------------------------------------------------------
def _manager_with_table(manager_cls, spec):
    pool = BlockPool(1011)
    table = pool.blocks[1000:1011]
    pool.touch(table)
    manager = manager_cls(spec, pool, group_id=0)
    manager.req_to_blocks["r"] = list(table)
    return pool, manager


def _null_prefix(manager):
    table = manager.req_to_blocks["r"]
    return next((i for i, b in enumerate(table) if not b.is_null), len(table))


def test_11_sliding_window_remove_skipped_blocks():
    pool, manager = _manager_with_table(SlidingWindowManager, swa(4, block=2))
    expected = {0: 0, 4: 0, 5: 1, 6: 1, 7: 2, 11: 4}
    for computed, nulls in expected.items():
        before = pool.free_queue.block_ids()
        manager.remove_skipped_blocks("r", computed)
        assert _null_prefix(manager) == nulls
    assert pool.free_queue.block_ids()[len(before) :] == [1003, 1002]


def test_12_chunked_local_remove_skipped_blocks():
    spec = ChunkedLocalAttentionSpec(block_size=2, num_kv_heads=2, head_size=64, attention_chunk_size=4)
    _, manager = _manager_with_table(ChunkedLocalManager, spec)
    for computed, nulls in {0: 0, 4: 2, 6: 2, 12: 6}.items():
        manager.remove_skipped_blocks("r", computed)
        assert _null_prefix(manager) == nulls


# -- 13: get_num_blocks_to_allocate with evictable hits ----------------------------------------------------
def test_13_sliding_window_blocks_to_allocate_counts_evictable_hits():
    pool = BlockPool(100)
    manager = SlidingWindowManager(swa(4, block=2), pool, group_id=0)
    evictable = pool.blocks[1:11]
    assert manager.get_num_blocks_to_allocate("new", 40, evictable, 0) == 20
    mixed = [pool.null_block] * 5 + pool.blocks[11:16]
    assert manager.get_num_blocks_to_allocate("new", 40, mixed, 0) == 15


# -- 14: sliding-window cache hit ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("F" * 10, 0),
        ("T", 1),
        ("TF", 1),
        ("TT", 2),
        ("TTF", 2),
        ("TTT", 3),
        ("TTFTFFTTFTTT", 12),
        ("TTFTFFTTFFF", 8),
        ("TTFTFFTTFFFT", 8),
    ],
)
def test_14_sliding_window_cache_hit(pattern, expected):
    spec = swa(4, block=2)
    pool = BlockPool(len(pattern) + 2)
    hashes = [f"h{i}".encode() for i in range(len(pattern))]
    for i, hit in enumerate(pattern):
        if hit == "T":
            pool.cache_full_blocks([pool.blocks[i + 1]], [hashes[i]], 0, 1, group_id=0)
    hits = SlidingWindowManager.find_longest_cache_hit(hashes, len(pattern) * 2, [0], pool, spec)[0]
    assert len(hits) == expected


# -- 15, 16: prefill with prefix caching --------------------------------------------------------------------
def _single_group_manager(profile_prepend: bool, num_blocks=11):
    spec = full(block=16)
    config = KVCacheConfig(
        (KVCacheGroup(("l0",), spec),), (KVCachePool(num_blocks, (0,), spec.page_size_bytes),)
    )
    return KVCacheManager(config, max_model_len=1024, prepend_unhashed=profile_prepend)


def _admit(manager, request):
    hits, n = manager.get_computed_blocks(request)
    new = manager.allocate_slots(request, request.num_tokens - n, n, hits)
    request.num_computed_tokens = request.num_tokens
    return hits, n, new


@pytest.mark.parametrize(
    ("profile", "free_order", "third", "eviction"),
    [
        ("vllm-0.33", [5, 4, 6, 7, 8, 9, 10, 3, 2, 1], [5], [5, 4, 6, 7, 8, 9, 10, 3, 2, 1]),
        ("vllm-0.21", [6, 7, 8, 9, 10, 4, 5, 3, 2, 1], [6], [7, 8, 9, 10, 4, 5, 6, 3, 2, 1]),
    ],
)
def test_15_prefill_free_order_and_eviction(profile, free_order, third, eviction):
    manager = _single_group_manager(profile == "vllm-0.33")
    common = list(range(48))
    r0 = TokenRequest("r0", common + list(range(1000, 1007)))
    _, _, new = _admit(manager, r0)
    assert [b.block_id for b in new[0]] == [1, 2, 3, 4]
    r1 = TokenRequest("r1", common + list(range(2000, 2005)))
    hits, n, new = _admit(manager, r1)
    assert n == 48 and [b.block_id for b in hits[0]] == [1, 2, 3]
    assert [b.block_id for b in new[0]] == [5]
    assert all(b.ref_cnt == 2 for b in hits[0])
    assert manager.num_free_blocks() == 5
    manager.free(r0)
    manager.free(r1)
    assert manager.block_pool.free_queue.block_ids() == free_order
    r2 = TokenRequest("r2", common + list(range(3000, 3006)))
    _, _, new = _admit(manager, r2)
    assert [b.block_id for b in new[0]] == third
    manager.free(r2)
    r3 = TokenRequest("r3", list(range(5000, 5160)))
    _, n, new = _admit(manager, r3)
    assert n == 0 and [b.block_id for b in new[0]] == eviction


def test_16_prefill_hybrid_model():
    full_spec, swa_spec = full(block=16), swa(32, block=16)
    groups = (
        KVCacheGroup(("f",), full_spec),
        KVCacheGroup(("s1",), swa_spec),
        KVCacheGroup(("s2",), swa_spec),
    )
    config = KVCacheConfig(groups, (KVCachePool(21, (0, 1, 2), full_spec.page_size_bytes),))
    manager = KVCacheManager(config, max_model_len=1024)
    common = list(range(48))
    r0 = TokenRequest("r0", common + list(range(1000, 1007)))
    _, _, new = _admit(manager, r0)
    assert [[b.block_id for b in t] for t in new] == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
    r1 = TokenRequest("r1", common + list(range(2000, 2005)))
    hits, n, new = _admit(manager, r1)
    assert n == 48
    assert [[b.block_id for b in t] for t in hits] == [[1, 2, 3], [0, 6, 7], [0, 10, 11]]
    assert [[b.block_id for b in t] for t in new] == [[13], [14], [15]]


# -- 19: page sizes ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("dtype", "page"),
    [
        ("bfloat16", 65_536),
        ("auto", 65_536),
        ("fp8", 32_768),
        ("fp8_e4m3", 32_768),
        ("int8_per_token_head", 33_792),
        ("fp8_per_token_head", 33_792),
    ],
)
def test_19_page_sizes(dtype, page):
    spec = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, kv_cache_dtype=dtype)
    assert spec.page_size_bytes == page
