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
# # Solution — Exercise 6, a block pool with reference counts

# %% tags=["solution"]
class TinyBlockPool:
    """Block ids ``0 … num_blocks - 1``; block 0 is the null block."""

    def __init__(self, num_blocks: int) -> None:
        self.refs = [0] * num_blocks
        self.queue = list(range(1, num_blocks))  # block 0, the null block, is never free

    def get_new_blocks(self, n: int) -> list[int]:
        """Take ``n`` blocks from the head of the free queue (ref count 1 each)."""
        if n > len(self.queue):
            raise ValueError(f"cannot get {n} blocks: only {len(self.queue)} are free")
        taken, self.queue = self.queue[:n], self.queue[n:]
        for block in taken:
            self.refs[block] = 1
        return taken

    def touch(self, block_ids: list[int]) -> None:
        """One more reference on each block; a free block leaves the free queue."""
        for block in block_ids:
            if self.refs[block] == 0:
                self.queue.remove(block)
            self.refs[block] += 1

    def free_blocks(self, block_ids: list[int]) -> None:
        """One reference less on each block; at 0 it joins the tail of the free queue."""
        for block in block_ids:
            self.refs[block] -= 1
            if self.refs[block] == 0:
                self.queue.append(block)

    def ref_count(self, block_id: int) -> int:
        """Requests holding the block."""
        return self.refs[block_id]

    def free_block_ids(self) -> list[int]:
        """The free queue, head (reused next) to tail."""
        return list(self.queue)


# %% [markdown]
# ## Answers
#
# 1. The free queue is also the eviction order: the head is reused (and its cached contents lost)
#    first. Freeing last-first puts the *deepest* block of a prompt nearest the head, so eviction eats
#    a cached prefix from its end. The remaining leading blocks still form a valid prefix hit; losing
#    the first block instead would make every later block unreachable (hashes are chained).
# 2. A count is the number of block tables holding the block; a block in use cannot be handed to
#    someone else. A free block (count 0) keeps its contents until it is reused, so with prefix
#    caching a later request with the same prefix can revive it with `touch` and skip recomputing it.
# 3. The blocks already handed out would belong to a request that is then not scheduled: they would
#    leak (or have to be returned, reordering the free queue). Checking first keeps the pool unchanged
#    when the answer is "no", which is what lets the scheduler simply try again or preempt.

# %%
if __name__ == "__main__":  # run as a notebook or a script: verify the solution
    from kvlab.exercises import check_block_pool

    print(check_block_pool(TinyBlockPool))
