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
# # Exercise 7 — Freeing the blocks that left the window
#
# *Follows lesson `05_sliding_windows_and_admission`. About 20 minutes.*
#
# In a sliding-window layer with window `W`, the next token attends to itself and the last `W − 1`
# tokens. After `n` computed tokens, the first `max(0, n − W + 1)` tokens are never read again:
# they are *skipped*. vLLM's `remove_skipped_blocks` gives back every block made only of skipped
# tokens:
#
# 1. `k = min(skipped_tokens // block_size, len(block_table))` blocks are wholly skipped;
# 2. walk `i = k − 1, k − 2, …, 0`; **stop** at the first entry that is already the null block
#    (earlier calls nulled everything before it); otherwise remember the block and put the null
#    block (id `0`) in its place;
# 3. free the remembered blocks **in the order you met them** (last block first).
#
# Write `remove_skipped_blocks(block_table, num_computed_tokens, sliding_window, block_size)` returning
# `(new_block_table, freed)`: the table after the call (same length, `0` for null) and the freed ids
# in order. Do not modify the list you are given.
#
# Example (W = 4, block size 2, 11 computed tokens): 8 tokens are skipped, so 4 blocks. With the
# table `[0, 0, 1002, 1003, 1004, …]`, the walk visits 1003 then 1002 and stops at the null at
# index 1: the result starts `[0, 0, 0, 0, 1004, …]` and `freed == [1003, 1002]`.

# %% tags=["stub"]
def remove_skipped_blocks(block_table: list[int], num_computed_tokens: int, sliding_window: int,
                          block_size: int) -> tuple[list[int], list[int]]:
    """Null (0) and free the blocks no future token of a sliding-window layer will read."""
    raise NotImplementedError("write remove_skipped_blocks")


# %% [markdown]
# <details><summary>Hint 1 — how many blocks</summary>
#
# `skipped = max(0, num_computed_tokens - sliding_window + 1)`; only whole blocks go:
# `skipped // block_size`, and never more than the table has.
# </details>
#
# <details><summary>Hint 2 — the walk</summary>
#
# `for i in range(k - 1, -1, -1):` — `break` on a `0`, otherwise append `table[i]` to `freed` and set
# `table[i] = 0`. Work on a copy: `table = list(block_table)`.
# </details>

# %% tags=["check"]
from kvlab.exercises import check_remove_skipped_blocks

check_remove_skipped_blocks(remove_skipped_blocks)

# %% [markdown]
# ## Think about it
#
# 1. Why "− 1" in `n − W + 1`? Take W = 4: which tokens does token number 11 (position 10) attend to?
# 2. A block is only freed once *all* of its tokens are skipped. At most how many blocks does a
#    sliding-window request hold after `remove_skipped_blocks`, for a decode step? What does the
#    "+ 1" of vLLM's admission cap `cdiv(W − 1 + T, B) + 1` cover?
# 3. Why is the table not shortened (blocks deleted) instead of nulled?
