# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Exercise 6 — A block pool with reference counts
#
# *Follows lesson `04_block_allocator_and_prefix_caching`. About 30 minutes.*
#
# vLLM's block pool owns every block id of the KV cache. Write a small one, `TinyBlockPool`, that
# behaves exactly like `kvlab.allocator.BlockPool` with prefix caching off:
#
# * **Block 0 is the null block.** It stands for "no block here" in sliding-window tables and is
#   never handed out, never freed and never in the free queue. A pool of `num_blocks` blocks has
#   `num_blocks - 1` usable ones.
# * The **free queue** starts as `1, 2, …, num_blocks - 1` (head first).
# * `get_new_blocks(n)` takes `n` blocks from the **head** of the queue and gives each a reference
#   count of 1. If fewer than `n` blocks are free it raises `ValueError` and changes nothing.
# * `touch(block_ids)` adds one reference to each block (a prefix-cache hit: another request now
#   uses it). A touched block whose count was 0 **leaves** the free queue.
# * `free_blocks(block_ids)` removes one reference from each; a block whose count reaches 0 joins
#   the **tail** of the queue, in the order given. (Engines pass a request's blocks last-first, so
#   the deepest block of a prefix is reused first.)
# * `ref_count(block_id)` and `free_block_ids()` (the queue, head to tail) let the check look inside.
#
# The check replays random histories — requests allocating, sharing prefixes and finishing — on
# your pool and on kvlab's, and compares them after **every** step.

# %% tags=["stub"]
class TinyBlockPool:
    """Block ids ``0 … num_blocks - 1``; block 0 is the null block."""

    def __init__(self, num_blocks: int) -> None:
        raise NotImplementedError("write __init__")

    def get_new_blocks(self, n: int) -> list[int]:
        """Take ``n`` blocks from the head of the free queue (ref count 1 each)."""
        raise NotImplementedError("write get_new_blocks")

    def touch(self, block_ids: list[int]) -> None:
        """One more reference on each block; a free block leaves the free queue."""
        raise NotImplementedError("write touch")

    def free_blocks(self, block_ids: list[int]) -> None:
        """One reference less on each block; at 0 it joins the tail of the free queue."""
        raise NotImplementedError("write free_blocks")

    def ref_count(self, block_id: int) -> int:
        """Requests holding the block."""
        raise NotImplementedError("write ref_count")

    def free_block_ids(self) -> list[int]:
        """The free queue, head (reused next) to tail."""
        raise NotImplementedError("write free_block_ids")


# %% [markdown]
# <details><summary>Hint 1 — the state</summary>
#
# Two things are enough: a list of reference counts indexed by block id, and the free queue as a
# Python list (head = index 0). vLLM uses a doubly-linked list so that removing a block from the
# middle is O(1); a list is fine here.
# </details>
#
# <details><summary>Hint 2 — the error case</summary>
#
# Check `n` against the number of free blocks *before* taking anything, so that a refused request
# leaves the pool as it was.
# </details>
#
# <details><summary>Hint 3 — touch</summary>
#
# Look at the count before incrementing it: a block with count 0 is in the free queue and must be
# removed from it (`list.remove`).
# </details>

# %% tags=["check"]
from kvlab.exercises import check_block_pool

check_block_pool(TinyBlockPool)

# %% [markdown]
# ## Think about it
#
# 1. A request's blocks are freed last-first. With prefix caching on, why is that the right order
#    for the blocks of a shared prompt?
# 2. Why can a block with reference count 2 never be in the free queue, while a block with count 0
#    may still be *useful*?
# 3. vLLM checks that an allocation fits **before** calling `get_new_blocks`. What would go wrong in
#    a scheduler if the pool handed out the blocks it has and raised only afterwards?
