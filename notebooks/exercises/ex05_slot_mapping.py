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
# # Exercise 5 — From a block table to a slot mapping
#
# *Follows lesson `03_paged_attention_kernels`. About 15 minutes.*
#
# A paged cache has `num_blocks × block_size` **slots**; slot `s` lives in block `s // block_size` at
# offset `s % block_size`. Each sequence owns a **block table**: the ids of its blocks, in token
# order. Before a step writes the new tokens' K and V, the engine computes one slot per new token:
# the *slot mapping*.
#
# A batch packs the new tokens of several sequences one after another. For sequence `i`,
# `seq_lens[i]` counts **all** its tokens (the new ones included) and `query_lens[i]` the new ones,
# so its first new token sits at position `seq_lens[i] − query_lens[i]`.
#
# Write `slot_mapping(block_table, query_lens, seq_lens, block_size)` returning the slot of every new
# token, sequence after sequence, as a list of ints. Example: block size 4, one sequence with table
# `[7, 3]`, 5 tokens of which 1 is new → position 4 → block `3`, offset 0 → slot **12**.

# %% tags=["stub"]
def slot_mapping(
    block_table: list[list[int]], query_lens: list[int], seq_lens: list[int], block_size: int
) -> list[int]:
    """Slot (``block_id * block_size + offset``) of every new token of the batch, in order."""
    raise NotImplementedError("write slot_mapping")


# %% [markdown]
# <details><summary>Hint 1 — positions</summary>
#
# For sequence `i` the new tokens are at positions `range(seq_lens[i] - query_lens[i], seq_lens[i])`.
# A sequence with `query_lens[i] == 0` contributes nothing.
# </details>
#
# <details><summary>Hint 2 — position to slot</summary>
#
# Position `p` is in the sequence's block number `p // block_size` (an index into its block table
# row) at offset `p % block_size`.
# </details>

# %% tags=["check"]
from kvlab.exercises import check_slot_mapping

check_slot_mapping(slot_mapping)

# %% [markdown]
# ## Think about it
#
# 1. Why does a decode step (one new token per sequence) need a slot mapping at all, when the
#    kernel could append to "the end" of the sequence?
# 2. vLLM marks padding tokens with slot `-1`. What must the cache-write kernel do with them?
# 3. Two sequences share their first three blocks through prefix caching. Can their slot mappings
#    ever contain the same slot in one step?
