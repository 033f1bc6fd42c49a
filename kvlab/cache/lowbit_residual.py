"""Which blocks of a KIVI cache are still in the bf16 residual, and which leave it.

A KIVI cache keeps the newest tokens of a sequence in bf16: the block being filled plus
``residual_blocks - 1`` full blocks before it. Those blocks own a *residual page* (a bf16 block
from a small pool); ``residual_page[block]`` names it, ``-1`` once the block is quantized. This
module holds that bookkeeping, on the host: which page a block writes to, how full each block is,
and which blocks must be quantized after a write.

Rule, for one sequence of ``n`` tokens in blocks of ``B``: the first
``max(0, n // B - (residual_blocks - 1))`` logical blocks are quantized, the rest are residual.
Without the sequence structure (a write given only slots) the rule needs ``residual_blocks == 1``:
then a block is quantized as soon as its ``B`` slots are written.
"""

from __future__ import annotations

import torch

from kvlab.cache.batch import AttentionBatch


def quantized_block_count(num_tokens: int, block_size: int, residual_blocks: int) -> int:
    """Logical blocks of a sequence of ``num_tokens`` tokens that have left the residual."""
    return max(0, num_tokens // block_size - (residual_blocks - 1))


class ResidualPool:
    """Host-side map from cache blocks to bf16 residual pages, with the fill count of each block."""

    def __init__(self, num_blocks: int, num_pages: int) -> None:
        self.page_of = torch.full((num_blocks,), -1, dtype=torch.int32)
        self.filled = torch.zeros(num_blocks, dtype=torch.int32)
        self.quantized = torch.zeros(num_blocks, dtype=torch.bool)
        self._free = list(range(num_pages - 1, -1, -1))

    @property
    def num_free(self) -> int:
        """Residual pages not in use."""
        return len(self._free)

    def pages_for(self, blocks: torch.Tensor) -> torch.Tensor:
        """Residual page of each written block, taking free pages for blocks that have none.

        Raises:
            ValueError: a block is already quantized, or the pool has no free page left.
        """
        uniq = torch.unique(blocks)
        done = uniq[self.quantized[uniq]]
        if done.numel():
            raise ValueError(f"block {int(done[0])} is already quantized (it left the residual); "
                             "its slots cannot be written again until it is freed")
        new = uniq[self.page_of[uniq] < 0].tolist()
        if len(new) > len(self._free):
            raise ValueError("the residual pool is full: allocate the cache with more residual_pages "
                             "(at least running sequences × residual_blocks + blocks per step)")
        if new:
            self.page_of[new] = torch.tensor([self._free.pop() for _ in new], dtype=torch.int32)
        return self.page_of[blocks]

    def add_tokens(self, blocks: torch.Tensor) -> None:
        """Count newly written slots of each block."""
        self.filled.index_add_(0, blocks, torch.ones_like(blocks, dtype=torch.int32))

    def leaving(self, block_size: int, residual_blocks: int, batch: AttentionBatch | None) -> list[int]:
        """Blocks that must be quantized now: residual blocks past the residual of their sequence."""
        if batch is None:
            if residual_blocks != 1:
                raise ValueError(
                    f"a residual of {residual_blocks} blocks follows sequences: pass batch= (the step's "
                    "AttentionBatch, seq_lens including the new tokens) to the write"
                )
            full = (self.page_of >= 0) & (self.filled >= block_size)
            return torch.nonzero(full).flatten().tolist()
        table = batch.block_table.cpu().long()
        counts = torch.tensor([quantized_block_count(n, block_size, residual_blocks)
                               for n in batch.seq_lens_list], dtype=torch.long)
        width = min(int(counts.max()) if counts.numel() else 0, table.shape[1])
        cols = torch.arange(width)
        candidates = table[:, :width][cols[None, :] < counts[:, None]]
        return torch.unique(candidates[self.page_of[candidates] >= 0]).tolist()

    def release(self, block: int) -> None:
        """Mark ``block`` quantized and give its page back."""
        self._free.append(int(self.page_of[block]))
        self.page_of[block] = -1
        self.quantized[block] = True

    def free_block(self, block: int) -> None:
        """Forget ``block`` (the allocator freed it): it may be written again from scratch."""
        if self.page_of[block] >= 0:
            self._free.append(int(self.page_of[block]))
        self.page_of[block] = -1
        self.filled[block] = 0
        self.quantized[block] = False
