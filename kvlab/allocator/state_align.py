"""State prefix caching in ``"align"`` mode: a state group whose pages are cached at block boundaries.

Followed: ``MambaManager`` in vLLM's ``vllm/v1/core/single_type_kv_cache_manager.py`` (align mode) and
the scheduler's block-aligned split of prefill chunks.

A state layer keeps one state per request, not one entry per token. In ``"align"`` mode the request's
table in the state group is as long as an attention table (``cdiv(tokens, B)`` entries), but only the
*running* state is a real page, at the last position; everything before it is the null block. When a
step ends exactly on a block boundary, the page at that position holds the state after
``(j + 1) × B`` tokens; once the block is full it is hashed like any full block, so a later request
with the same first ``(j + 1) × B`` tokens can start from that state. The next step puts the running
state in a fresh page at the new last position (the state is copied forward) and the old page is
freed one step later, keeping its hash while it sits in the free queue. A request therefore holds at
most two pages (``2`` in :class:`~kvlab.sizing.state_spec.MambaSpec`'s sizing).

Prefix hits are searched right to left: the *last* cached state at or before the hit length is all a
state group needs, returned as ``[null] × i + [page]``. A state cached during the current step is not
used before the next one (vLLM defers such a request by a step), because its contents are written
by the step that is being scheduled.

Hand-worked example (block 16, prompt 100 tokens, budget 8192): the prompt is split at the last
block boundary, 96 tokens then 4. Step 1: the table is ``[null] × 5 + [p]``; after it, ``p`` holds
the state at 96 tokens and is cached under block 5's hash. Step 2 (tokens 96-99): the table grows to
``[null] × 6 + [q]``; ``p`` is released once step 2 has run. A second request with the same 100-token
prompt hits 96 tokens in full attention (6 blocks) and in the state group (``p``).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvlab.allocator.block_pool import BlockPool
from kvlab.allocator.free_queue import KVCacheBlock
from kvlab.allocator.managers import SingleTypeManager
from kvlab.sizing.specs import GroupSpec, cdiv


class AlignedStateManager(SingleTypeManager):
    """A state group with prefix caching of states at block boundaries (``mamba_cache_mode="align"``).

    Raises:
        ValueError: speculative pages (``num_speculative_blocks > 0``), which kvlab does not simulate
            in this mode.
    """

    kind = "mamba"

    def __init__(self, spec: GroupSpec, pool: BlockPool, group_id: int, enable_caching: bool = True) -> None:
        if spec.num_speculative_blocks:
            raise ValueError(
                "the simulator does not model speculative decoding with mamba_cache_mode='align' "
                "(capacity sizes it)"
            )
        super().__init__(spec, pool, group_id, enable_caching)
        self.last_state_index: dict[str, int] = {}
        self.cached_this_step: set[object] = set()

    def num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Only the state after the last computed token is needed."""
        return max(num_computed_tokens - 1, 0)

    def new_step_starts(self) -> None:
        """Forget which pages were cached during the previous step."""
        self.cached_this_step.clear()

    def hit_cached_this_step(self, new_computed_blocks: Sequence[KVCacheBlock]) -> bool:
        """True when the hit's state was cached in the step being scheduled (not written yet)."""
        return bool(new_computed_blocks) and new_computed_blocks[-1].block_hash in self.cached_this_step

    def get_num_blocks_to_allocate(
        self,
        request_id: str,
        num_tokens: int,
        new_computed_blocks: Sequence[KVCacheBlock],
        total_computed_tokens: int,
        required_blocks: int | None = None,
    ) -> int:
        """One fresh page when the table must grow (the running state), plus hit pages to revive."""
        table = self.req_to_blocks.get(request_id, ())
        grows = cdiv(num_tokens, self.block_size) > len(new_computed_blocks) + len(table)
        evictable = sum(1 for b in new_computed_blocks if b.ref_cnt == 0 and not b.is_null)
        return int(grows) + evictable

    def allocate_new_blocks(self, request_id: str, num_tokens: int) -> list[KVCacheBlock]:
        """Move the running state to a fresh page at the table's new last position."""
        table = self.req_to_blocks.setdefault(request_id, [])
        self.num_cached_block.setdefault(request_id, 0)
        required = cdiv(num_tokens, self.block_size)
        if required <= len(table):
            return []
        if table:  # the page holding the state so far (running, or adopted from a prefix hit)
            self.last_state_index[request_id] = len(table) - 1
        table.extend([self.null_block] * (required - 1 - len(table)))
        blocks = self.pool.get_new_blocks(1)
        self.num_blocks_in_use += 1
        table.extend(blocks)
        return blocks

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> None:
        """Free pages before the running one, including the previous state page (the table may hold
        nulls between them, which the tail-first rule would stop at)."""
        super().remove_skipped_blocks(request_id, num_computed_tokens)
        last = self.last_state_index.get(request_id)
        table = self.req_to_blocks.get(request_id)
        if last is None or not table or last >= cdiv(num_computed_tokens, self.block_size) - 1:
            return
        if not table[last].is_null:
            self.num_blocks_in_use -= self.pool.free_blocks([table[last]])
            table[last] = self.null_block

    def cache_blocks(self, request_id: str, block_hashes: Sequence, num_tokens: int) -> None:
        """Hash full blocks as any group does, remembering the pages cached in this step."""
        before = self.num_cached_block.get(request_id, 0)
        super().cache_blocks(request_id, block_hashes, num_tokens)
        table = self.req_to_blocks.get(request_id, ())
        for block in table[before:self.num_cached_block.get(request_id, 0)]:
            if not block.is_null and block.block_hash is not None:
                self.cached_this_step.add(block.block_hash)

    def free(self, request_id: str) -> None:
        self.last_state_index.pop(request_id, None)
        super().free(request_id)

    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, group_ids, pool, spec):
        """The last cached state at or before ``max_length`` tokens, as ``[null] × i + [page]``."""
        for i in range(min(max_length // spec.block_size, len(block_hashes)) - 1, -1, -1):
            cached = pool.get_cached_block(block_hashes[i], group_ids)
            if cached is not None:
                return [[pool.null_block] * i + [block] for block in cached]
        return [[] for _ in group_ids]
