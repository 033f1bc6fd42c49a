"""The decode shortcut with a sliding-window group: it applies only when no table sheds a block.

Block size 4, window 4, one full-attention group and one sliding-window group in a pool of 20
blocks (19 usable). A 10-token prompt takes 3 blocks per group (ids 1-3 full, 4-6 sliding) and
hashes its 2 full blocks in each group. Decoding token by token (``processed`` = computed tokens):

Sliding window: ``skipped = computed - 4 + 1`` tokens, i.e. ``skipped // 4`` leading blocks.

=====  ========  ========================================================  =======
token  computed  what ``allocate_slots`` must do                            general
=====  ========  ========================================================  =======
110    10        skips 7 tokens → 1 block; block 4 sheds (14 free)           yes
111    11        skips 8 → 2 blocks; block 5 sheds (15 free); 12 // 4 = 3    yes
                 full blocks > 2 hashed: hash block 2
112    12        cdiv(13, 4) = 4 blocks > 3: blocks 7 and 8 (13 free)        yes
113    13        skips 10 → 2 blocks, both null; 4 blocks cover 14 tokens;   no
                 14 // 4 = 3 hashed: nothing to do
114    14        the same with 15 tokens                                    no
115    15        skips 12 → 3 blocks: block 6 sheds (14 free); 16 // 4 = 4   yes
=====  ========  ========================================================  =======
"""

from __future__ import annotations

from kvlab.allocator import KVCacheManager, TokenRequest
from kvlab.sizing import FullAttentionSpec, KVCacheConfig, KVCacheGroup, KVCachePool, SlidingWindowSpec


def test_sliding_window_decode_shortcut_by_hand(monkeypatch):
    full = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8)
    swa = SlidingWindowSpec(block_size=4, num_kv_heads=1, head_size=8, sliding_window=4)
    config = KVCacheConfig(
        (KVCacheGroup(("f",), full), KVCacheGroup(("s",), swa)),
        (KVCachePool(20, (0, 1), full.page_size_bytes),),
    )
    manager = KVCacheManager(config, max_model_len=64, policy="uncapped")
    calls = []
    original = manager.coordinator.get_num_blocks_to_allocate
    monkeypatch.setattr(
        manager.coordinator,
        "get_num_blocks_to_allocate",
        lambda *a, **k: calls.append(1) or original(*a, **k),
    )
    req = TokenRequest("a", list(range(100, 110)), hash_block_size=4)
    manager.allocate_slots(req, 10, full_sequence_must_fit=True)
    req.num_computed_tokens = 10
    assert manager.get_block_ids("a") == [[1, 2, 3], [4, 5, 6]]

    expected = [  # (token, general path, block ids per group afterwards, free blocks)
        (110, True, [[1, 2, 3], [0, 5, 6]], 14),
        (111, True, [[1, 2, 3], [0, 0, 6]], 15),
        (112, True, [[1, 2, 3, 7], [0, 0, 6, 8]], 13),
        (113, False, [[1, 2, 3, 7], [0, 0, 6, 8]], 13),
        (114, False, [[1, 2, 3, 7], [0, 0, 6, 8]], 13),
        (115, True, [[1, 2, 3, 7], [0, 0, 0, 8]], 14),
    ]
    for token, general, ids, free in expected:
        req.append_tokens([token])
        before = len(calls)
        assert manager.has_room(req, 1) == (not general), f"token {token}"
        manager.allocate_slots(req, 1)
        req.num_computed_tokens += 1
        assert (len(calls) > before) == general, f"token {token}"
        assert manager.get_block_ids("a") == ids, f"token {token}"
        assert manager.num_free_blocks() == free, f"token {token}"
