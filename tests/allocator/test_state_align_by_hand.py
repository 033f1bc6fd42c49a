"""The ``align``-mode state group (``AlignedStateManager``) step by step, on a pool of 10 blocks (9 usable).

Blocks of 16 tokens. A request's table is as long as an attention table, all null blocks except the
running state at the last position:

- 96 tokens: ceil(96 / 16) = 6 entries, ``[null] x 5 + [p]``; 1 page in use, 8 free.
- then 130 tokens at once: 9 entries, ``p`` stays at index 5 (remembered as the last state), two nulls,
  and a fresh page ``q`` at index 8: ``[null] x 5 + [p, null, null, q]``; 2 pages in use, 7 free.
- ``p`` is freed only once the computed tokens pass its block: at 96 tokens (``5 >= ceil(96 / 16) - 1``)
  it stays; at 130 (``5 < 8``) it is freed and its slot becomes the null block. The plain tail-first rule
  would not reach it (it stops at the null at index 7).
"""

from __future__ import annotations

import pytest

from kvlab.allocator.block_pool import BlockPool
from kvlab.allocator.state_align import AlignedStateManager
from kvlab.sizing.state_spec import MambaSpec

SPEC = MambaSpec(block_size=16, state_bytes=1000, mamba_cache_mode="align")


def _nulls(table):
    return [b.is_null for b in table]


def test_the_running_state_moves_forward_and_the_old_page_is_freed_late():
    pool = BlockPool(10)
    m = AlignedStateManager(SPEC, pool, 0)
    assert len(m.allocate_new_blocks("r", 96)) == 1
    table = m.req_to_blocks["r"]
    assert _nulls(table) == [True] * 5 + [False]
    assert (m.num_blocks_in_use, pool.get_num_free_blocks(), m.last_state_index) == (1, 8, {})
    p = table[5]
    assert m.allocate_new_blocks("r", 96) == []  # the table is already long enough
    assert len(m.allocate_new_blocks("r", 130)) == 1
    assert _nulls(table) == [True] * 5 + [False, True, True, False]
    assert table[5] is p and m.last_state_index == {"r": 5}
    assert (m.num_blocks_in_use, pool.get_num_free_blocks()) == (2, 7)
    m.remove_skipped_blocks("r", 96)
    assert table[5] is p and (m.num_blocks_in_use, pool.get_num_free_blocks()) == (2, 7)
    m.remove_skipped_blocks("r", 130)
    assert table[5] is m.null_block and _nulls(table) == [True] * 8 + [False]
    assert (m.num_blocks_in_use, pool.get_num_free_blocks()) == (1, 8)
    m.free("r")
    assert (m.last_state_index, m.num_blocks_in_use, pool.get_num_free_blocks()) == ({}, 0, 9)


def test_one_fresh_page_only_when_the_table_grows():
    """After the steps above the table has 9 entries: 144 tokens (9 blocks) need no new page, 145 need
    one; a new request of 32 tokens needs one. Only the state after the last token is kept:
    skipped tokens = n - 1 (0 for n = 0)."""
    m = AlignedStateManager(SPEC, BlockPool(10), 0)
    m.allocate_new_blocks("r", 96)
    m.allocate_new_blocks("r", 130)
    assert m.get_num_blocks_to_allocate("r", 144, [], 0) == 0
    assert m.get_num_blocks_to_allocate("r", 145, [], 0) == 1
    assert m.get_num_blocks_to_allocate("x", 32, [], 0) == 1
    assert (m.num_skipped_tokens(0), m.num_skipped_tokens(5)) == (0, 4)


def test_a_state_cached_this_step_is_not_a_hit_until_the_next():
    """Caching 96 tokens hashes block 5, the state page. A lookup for 100 tokens finds it as
    ``[null] x 5 + [p]``; for 95 tokens (5 whole blocks) nothing is cached. The page counts as cached in
    this step until the next step starts."""
    pool = BlockPool(10)
    m = AlignedStateManager(SPEC, pool, 0)
    m.allocate_new_blocks("r", 96)
    hashes = [f"h{i}".encode() for i in range(6)]
    m.cache_blocks("r", hashes, 96)
    p = m.req_to_blocks["r"][5]
    assert p.block_hash is not None and m.cached_this_step == {p.block_hash}
    (hit,) = AlignedStateManager.find_longest_cache_hit(hashes, 100, [0], pool, SPEC)
    assert _nulls(hit) == [True] * 5 + [False] and hit[5] is p
    assert AlignedStateManager.find_longest_cache_hit(hashes, 95, [0], pool, SPEC) == [[]]
    assert m.hit_cached_this_step(hit) is True
    m.new_step_starts()
    assert m.hit_cached_this_step(hit) is False and m.hit_cached_this_step([]) is False


def test_speculative_pages_are_refused():
    spec = MambaSpec(block_size=16, state_bytes=1000, mamba_cache_mode="align", num_speculative_blocks=1)
    with pytest.raises(ValueError) as err:
        AlignedStateManager(spec, BlockPool(4), 0)
    assert str(err.value) == (
        "the simulator does not model speculative decoding with mamba_cache_mode='align' (capacity sizes it)")


def test_the_plain_state_manager():
    """mode 'none': 1 page per request (2 with one speculative page), whatever the length; nothing to
    adopt; an empty table and 0 cached blocks once a request is registered."""
    from kvlab.allocator.free_queue import KVCacheBlock
    from kvlab.allocator.state_manager import StateManager, state_manager_class

    plain = MambaSpec(block_size=16, state_bytes=1000)
    m = StateManager(plain, BlockPool(10), 3)
    assert (m.pages, m.group_id, m.blocks_required(10_000), m.num_skipped_tokens(500)) == (1, 3, 1, 0)
    assert StateManager(MambaSpec(block_size=16, state_bytes=1000, num_speculative_blocks=1),
                        BlockPool(10), 0).pages == 2
    m.save_new_computed_blocks("r", [], 0)
    assert (m.req_to_blocks, m.num_cached_block) == ({"r": []}, {"r": 0})
    for make, message in [
        (lambda: m.save_new_computed_blocks("r", [KVCacheBlock(1)], 16),
         "a state group has no prefix hits to adopt"),
        (lambda: StateManager(SPEC, BlockPool(10), 0),
         "StateManager serves mamba_cache_mode='none'; got 'align' (use state_manager_class)"),
        (lambda: state_manager_class(MambaSpec(block_size=16, state_bytes=1000, mamba_cache_mode="all")),
         "the simulator does not model mamba_cache_mode='all' (a state page per block)"),
    ]:
        with pytest.raises(ValueError) as err:
            make()
        assert str(err.value) == message
    assert state_manager_class(plain) is StateManager and state_manager_class(SPEC) is AlignedStateManager
