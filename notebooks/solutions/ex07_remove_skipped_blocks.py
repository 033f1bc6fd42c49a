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
# # Solution — Exercise 7, freeing the blocks that left the window

# %% tags=["solution"]
def remove_skipped_blocks(block_table: list[int], num_computed_tokens: int, sliding_window: int,
                          block_size: int) -> tuple[list[int], list[int]]:
    """Null (0) and free the blocks no future token of a sliding-window layer will read."""
    table = list(block_table)
    skipped_tokens = max(0, num_computed_tokens - sliding_window + 1)
    k = min(skipped_tokens // block_size, len(table))
    freed = []
    for i in range(k - 1, -1, -1):
        if table[i] == 0:  # everything before it was nulled by an earlier call
            break
        freed.append(table[i])
        table[i] = 0
    return table, freed


# %% [markdown]
# ## Answers
#
# 1. Token number 11 sits at position 10 and attends to positions 7, 8, 9 and 10 (`p − j < W`). Once 11
#    tokens are computed, the *next* token (position 11) reads 8, 9, 10 and itself: positions 0–7 —
#    `11 − 4 + 1 = 8` tokens — are never read again.
# 2. The window covers `W − 1` earlier tokens plus the new one, `W` tokens in all. If the window starts
#    in the middle of a block, that block stays, so a decode holds up to `cdiv(W − 1, B) + 1` blocks
#    (write the first skipped position as `qB + r`: the request holds `cdiv(r + W, B)` blocks, largest
#    for `r = B − 1`). The "+ 1" of the cap is that partly skipped block at the left edge of the
#    window; `T` replaces the one new token by all the tokens one step may schedule.
# 3. A block table maps position `p` to block `p // block_size`. Deleting entries would shift every
#    later block to the wrong positions; the null block keeps the positions in place at no cost
#    (it is one shared placeholder).

# %%
if __name__ == "__main__":  # run as a notebook or a script: verify the solution
    from kvlab.exercises import check_remove_skipped_blocks

    print(check_remove_skipped_blocks(remove_skipped_blocks))
