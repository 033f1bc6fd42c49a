"""Block tables of a state group (Mamba / linear attention): a fixed number of pages per request.

vLLM's ``MambaManager`` gives a request its state pages once, when it is first scheduled (one page,
plus one per speculative token; two in ``"align"`` mode), whatever its length, and frees them when it
finishes. Without state prefix caching (``"none"``) a state group never reports a prefix hit, so a
hybrid model's requests are recomputed from the start (the hit length is the minimum over groups);
``"align"`` mode caches states at block boundaries (:mod:`kvlab.allocator.state_align`).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvlab.allocator.block_pool import BlockPool
from kvlab.allocator.free_queue import KVCacheBlock
from kvlab.allocator.managers import SingleTypeManager
from kvlab.sizing.specs import GroupSpec


class StateManager(SingleTypeManager):
    """A state group's tables: ``pages`` blocks per request, allocated once."""

    kind = "mamba"

    def __init__(self, spec: GroupSpec, pool: BlockPool, group_id: int, enable_caching: bool = True) -> None:
        if spec.mamba_cache_mode != "none":
            raise ValueError(
                f"StateManager serves mamba_cache_mode='none'; got {spec.mamba_cache_mode!r} (use "
                "state_manager_class)"
            )
        super().__init__(spec, pool, group_id, enable_caching)
        self.pages = spec.max_blocks_per_request(0, 0)

    def num_skipped_tokens(self, num_computed_tokens: int) -> int:
        return 0

    def blocks_required(self, num_tokens: int, required_blocks: int | None = None) -> int:
        """``pages``, whatever the length (an admission policy's token-based need does not apply to a
        state)."""
        return self.pages

    def save_new_computed_blocks(
        self, request_id: str, new_computed_blocks: Sequence[KVCacheBlock], total_computed_tokens: int
    ) -> None:
        if new_computed_blocks:
            raise ValueError("a state group has no prefix hits to adopt")
        self.req_to_blocks.setdefault(request_id, [])
        self.num_cached_block.setdefault(request_id, 0)

    def cache_blocks(self, request_id: str, block_hashes: Sequence, num_tokens: int) -> None:
        return None

    def remove_skipped_blocks(self, request_id: str, num_computed_tokens: int) -> None:
        return None

    @classmethod
    def find_longest_cache_hit(cls, block_hashes, max_length, group_ids, pool, spec):
        return [[] for _ in group_ids]


def state_manager_class(spec: GroupSpec) -> type[SingleTypeManager]:
    """The manager of a state group for its ``mamba_cache_mode``.

    Raises:
        ValueError: ``"all"`` (a state page per block), which the simulator does not model.
    """
    if spec.mamba_cache_mode == "all":
        raise ValueError("the simulator does not model mamba_cache_mode='all' (a state page per block)")
    if spec.mamba_cache_mode == "align":
        from kvlab.allocator.state_align import AlignedStateManager

        return AlignedStateManager
    return StateManager
