"""Prefix-cache keys (spec §3.1): each full block's hash covers its parent, partial blocks get none."""

from __future__ import annotations

import hashlib
import pickle

import pytest

from kvlab.allocator import KVCacheManager, TokenRequest
from kvlab.allocator.hashing import (
    NONE_HASH,
    GroupBlockHashes,
    group_block_hashes,
    hash_block_tokens,
    hash_token_blocks,
)
from kvlab.sizing import FullAttentionSpec, KVCacheConfig, KVCacheGroup, KVCachePool


def test_the_chain_seed_and_one_link_follow_the_spec_formula():
    """``hash_0 = sha256(pickle((NONE_HASH, tokens, None)))`` with NONE_HASH = sha256(b"vllm-none-hash"),
    written out here with hashlib and pickle directly."""
    seed = hashlib.sha256(b"vllm-none-hash").digest()
    assert seed == NONE_HASH
    expected = hashlib.sha256(pickle.dumps((seed, (1, 2, 3, 4), None), protocol=5)).digest()
    assert hash_block_tokens(None, (1, 2, 3, 4)) == expected


def test_a_block_hash_depends_on_every_block_before_it():
    """Two prompts with equal second blocks [5, 6, 7, 8] but different first blocks: the second hashes
    must differ (equal hashes must mean equal prefixes), while equal first blocks hash equally."""
    a = hash_token_blocks([1, 2, 3, 4, 5, 6, 7, 8], 4)
    b = hash_token_blocks([9, 9, 9, 9, 5, 6, 7, 8], 4)
    c = hash_token_blocks([1, 2, 3, 4, 0, 0, 0, 0], 4)
    assert a[1] != b[1]
    assert a[0] == c[0] and a[1] != c[1]
    # the second link, written out: its parent is the first block's hash, not the seed
    link = hashlib.sha256(pickle.dumps((a[0], (5, 6, 7, 8), None), protocol=5)).digest()
    assert a[1] == link


def test_only_full_blocks_are_hashed():
    """10 tokens in blocks of 4: two full blocks (tokens 0-3, 4-7) and a partial one (8-9) -> 2 hashes;
    3 tokens -> 0 hashes; exactly 8 tokens -> 2 hashes."""
    assert len(hash_token_blocks(list(range(10)), 4)) == 2
    assert hash_token_blocks([1, 2, 3], 4) == []
    assert len(hash_token_blocks(list(range(8)), 4)) == 2


def test_a_different_first_block_gets_no_prefix_hit_on_the_second():
    """Request x [1..8] is computed and cached (2 full blocks of 4). Request y shares x's second block
    only; z shares both blocks. Both have 9 tokens, so a hit may cover up to 9 - 1 = 8 tokens (2 blocks).
    Hits: y 0 tokens (the chain breaks at block 0, so its block 1 key differs from x's), z 8 tokens."""
    spec = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8, model_dtype="float32")
    config = KVCacheConfig((KVCacheGroup(("l0",), spec),), (KVCachePool(16, (0,), spec.page_size_bytes),))
    manager = KVCacheManager(config, max_model_len=64)
    x = TokenRequest("x", [1, 2, 3, 4, 5, 6, 7, 8], hash_block_size=4)
    assert manager.allocate_slots(x, 8) is not None
    manager.free(x)
    y = TokenRequest("y", [9, 9, 9, 9, 5, 6, 7, 8, 1], hash_block_size=4)
    z = TokenRequest("z", [1, 2, 3, 4, 5, 6, 7, 8, 1], hash_block_size=4)
    assert manager.get_computed_blocks(y)[1] == 0
    assert manager.get_computed_blocks(z)[1] == 8


# -- a group whose blocks span several hash blocks -----------------------------------------------------
# Hash blocks of 4 tokens, group blocks of 8: ratio 2. Five hashes h0..h4 (20 tokens) give two whole
# group blocks, (h0, h1) and (h2, h3); h4 is half a group block and has no key yet.
H = [bytes([i]) * 4 for i in range(5)]


def test_a_group_block_is_keyed_by_the_hashes_it_spans():
    view = group_block_hashes(H, 2)
    assert len(view) == 2
    assert view[0] == (H[0], H[1])
    assert view[1] == (H[2], H[3])
    assert view[-1] == (H[2], H[3]) and view[-2] == (H[0], H[1])
    assert view[0:2] == [(H[0], H[1]), (H[2], H[3])]
    assert view[1:] == [(H[2], H[3])]
    assert view[::-1] == [(H[2], H[3]), (H[0], H[1])]


def test_a_group_block_past_the_whole_ones_has_no_key():
    """Index 2 would need h4 and h5; index -3 is before the first block. The error names the index
    (after a negative one is counted from the end: -3 + 2 = -1)."""
    view = group_block_hashes(H, 2)
    for bad, named in ((2, "2"), (3, "3"), (-3, "-1")):
        with pytest.raises(IndexError, match=f"^{named}$"):
            view[bad]


def test_ratios_one_and_three():
    """Ratio 1 is the hash list itself (no copy); ratio 3 has one whole group block, (h0, h1, h2)."""
    assert group_block_hashes(H, 1) is H
    view = group_block_hashes(H, 3)
    assert isinstance(view, GroupBlockHashes)
    assert len(view) == 1 and view[0] == (H[0], H[1], H[2]) and view[-1] == (H[0], H[1], H[2])
    assert list(view) == [(H[0], H[1], H[2])]
    assert view.hashes is H and view.ratio == 3
