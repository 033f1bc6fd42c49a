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
# # Solution — Exercise 5, from a block table to a slot mapping

# %% tags=["solution"]
def slot_mapping(
    block_table: list[list[int]], query_lens: list[int], seq_lens: list[int], block_size: int
) -> list[int]:
    """Slot (``block_id * block_size + offset``) of every new token of the batch, in order."""
    slots = []
    for row, num_new, num_tokens in zip(block_table, query_lens, seq_lens, strict=True):
        for position in range(num_tokens - num_new, num_tokens):
            slots.append(row[position // block_size] * block_size + position % block_size)
    return slots


# %% [markdown]
# ## Answers
#
# 1. The cache is a pool of blocks shared by all sequences, not one array per sequence: "the end"
#    of a sequence is somewhere inside one of its blocks, which can be anywhere in the pool. The
#    slot mapping turns (sequence, position) into the physical place, once per step, for all tokens.
# 2. Skip them: write nothing (kvlab's `PagedKVCache.write` and vLLM's kernels both do).
# 3. No. Shared blocks hold tokens both sequences have already computed; new tokens are always
#    written to blocks the sequence owns alone (a shared block is full, and a partial hit is copied
#    before it is written). Two writes to one slot in one step would be a bug — kvlab's cache
#    refuses them.

# %%
if __name__ == "__main__":  # run as a notebook or a script: verify the solution
    from kvlab.exercises import check_slot_mapping

    print(check_slot_mapping(slot_mapping))
