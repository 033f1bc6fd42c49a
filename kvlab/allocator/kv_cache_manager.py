"""The scheduler-facing KV-cache manager: prefix lookup, ``allocate_slots`` with the admission gate,
and free (spec §3.5, §3.6)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from kvlab.admission.policies import AdmissionPolicy, GroupBudget, get_policy
from kvlab.allocator.coordinator import KVCacheCoordinator
from kvlab.allocator.free_queue import KVCacheBlock
from kvlab.allocator.request import KVRequest
from kvlab.sizing.capacity import KVCacheConfig
from kvlab.sizing.profiles import SKIP_ON
from kvlab.validation import require_choice, require_positive_int


@dataclass(frozen=True)
class GateCheck:
    """One evaluation of the admission gate.

    Attributes:
        request_id: the request asking to be admitted.
        policy: the policy's name.
        per_group: blocks each group still has to take for the full sequence.
        per_pool_need: ``per_group`` summed by pool.
        per_pool_free: free blocks of each pool at the time.
        admitted: True if every pool had room.
    """

    request_id: str
    policy: str
    per_group: tuple[int, ...]
    per_pool_need: tuple[int, ...]
    per_pool_free: tuple[int, ...]
    admitted: bool

    @property
    def need(self) -> int:
        """Blocks the gate asks for over all groups."""
        return sum(self.per_group)

    @property
    def free(self) -> int:
        """Free blocks over all pools."""
        return sum(self.per_pool_free)


class BlockState(NamedTuple):
    """One block of a pool at one moment (for block maps).

    A named tuple, not a dataclass: a recorded run (``record_blocks=True``) builds one per block per
    step, and a tuple is built several times faster (the block map's pool-size change: 314 → 93 ms).

    Attributes:
        pool: pool index (0 for vLLM's single pool).
        block_id: block id within the pool.
        ref_cnt: references held by request tables.
        is_null: the null block.
        is_free: in the free queue.
        is_cached: carries a prefix-cache hash.
        group: the group holding it, or ``None`` when free or null.
        owners: request ids whose tables hold it (several when shared through a prefix hit).
    """

    pool: int
    block_id: int
    ref_cnt: int
    is_null: bool
    is_free: bool
    is_cached: bool
    group: int | None
    owners: tuple[str, ...]

    @property
    def is_shared(self) -> bool:
        """Held by more than one request."""
        return len(self.owners) > 1


class KVCacheManager:
    """vLLM's ``KVCacheManager`` over one :class:`KVCacheConfig`.

    Args:
        config: groups and pools.
        max_model_len: L (tokens).
        max_num_batched_tokens: per-step token budget (tokens), for the admission policies.
        in_flight_tokens: T (tokens) of the profile, for the ``vllm`` policy.
        policy: admission policy (name or object).
        enable_caching: prefix caching.
        prepend_unhashed: [new] free-queue placement.
        skip_on: ``"scheduled"`` or ``"processed"`` tokens for ``remove_skipped_blocks``.
        async_scheduling: a step is in flight while the next is scheduled (frees of skipped blocks
            lag one step under ``skip_on="processed"``).
    """

    def __init__(
        self,
        config: KVCacheConfig,
        max_model_len: int,
        *,
        max_num_batched_tokens: int = 8192,
        in_flight_tokens: int | None = None,
        policy: str | AdmissionPolicy = "uncapped",
        enable_caching: bool = True,
        prepend_unhashed: bool = False,
        skip_on: str = "scheduled",
        async_scheduling: bool = False,
    ) -> None:
        self.max_model_len = require_positive_int(max_model_len, "max_model_len")
        self.max_num_batched_tokens = require_positive_int(max_num_batched_tokens, "max_num_batched_tokens")
        require_choice(skip_on, SKIP_ON, "skip_on")
        self.in_flight_tokens = require_positive_int(
            max_num_batched_tokens if in_flight_tokens is None else in_flight_tokens, "in_flight_tokens"
        )
        self.policy = get_policy(policy)
        self.enable_caching = enable_caching
        self.skip_on = skip_on
        self.async_scheduling = async_scheduling
        self.coordinator = KVCacheCoordinator(config, enable_caching, prepend_unhashed)
        lagged = skip_on == "processed" and async_scheduling
        self.budgets = [
            GroupBudget(g.spec, max_model_len, max_num_batched_tokens, self.in_flight_tokens, lagged)
            for g in config.groups
        ]
        self.last_gate: GateCheck | None = None

    # -- views --------------------------------------------------------------------------------------
    @property
    def config(self) -> KVCacheConfig:
        return self.coordinator.config

    @property
    def pools(self):
        """The block pools (one for vLLM)."""
        return self.coordinator.pools

    @property
    def block_pool(self):
        """The first (for vLLM: the only) pool."""
        return self.coordinator.pools[0]

    @property
    def num_usable_blocks(self) -> int:
        """Usable blocks over all pools (null blocks excluded)."""
        return sum(p.num_usable_blocks for p in self.pools)

    def num_free_blocks(self) -> int:
        """Free blocks over all pools."""
        return sum(p.get_num_free_blocks() for p in self.pools)

    def usage(self) -> float:
        """Fraction of usable blocks in use."""
        return 1.0 - self.num_free_blocks() / self.num_usable_blocks

    def get_blocks(self, request_id: str) -> list[list[KVCacheBlock]]:
        """The request's table in each group (nulls included)."""
        return self.coordinator.get_blocks(request_id)

    def get_block_ids(self, request_id: str) -> list[list[int]]:
        """Block ids of the request's table in each group (0 = null)."""
        return [[b.block_id for b in table] for table in self.get_blocks(request_id)]

    def blocks_in_use_per_group(self) -> list[int]:
        """Distinct non-null blocks held by each group."""
        return [m.num_blocks_in_use for m in self.coordinator.managers]

    # -- the scheduler's calls ----------------------------------------------------------------------
    def get_computed_blocks(self, request: KVRequest) -> tuple[list[list[KVCacheBlock]], int]:
        """Prefix-hit blocks per group and the hit length (tokens); at most ``num_tokens - 1`` tokens."""
        if not self.enable_caching or request.num_tokens <= 1:
            return [[] for _ in self.coordinator.managers], 0
        return self.coordinator.find_longest_cache_hit(request.block_hashes, request.num_tokens - 1)

    def admission_need(
        self,
        request: KVRequest,
        new_computed_blocks: Sequence[Sequence[KVCacheBlock]] | None = None,
        num_new_computed_tokens: int = 0,
    ) -> list[int]:
        """Blocks per group the admission gate asks of ``request`` under the policy."""
        hits = new_computed_blocks or [[] for _ in self.coordinator.managers]
        total = min(request.num_computed_tokens + num_new_computed_tokens, self.max_model_len)
        full = min(request.num_tokens, self.max_model_len)
        required = [self.policy.required_blocks(b, full) for b in self.budgets]
        return self.coordinator.get_num_blocks_to_allocate(request.request_id, full, hits, total, required)

    def has_room(
        self,
        request: KVRequest,
        num_new_tokens: int,
        num_lookahead_tokens: int = 0,
        num_in_flight_tokens: int = 0,
    ) -> bool:
        """True if ``allocate_slots(request, num_new_tokens, num_lookahead_tokens=…,
        num_in_flight_tokens=…)`` for this running request would change nothing and return no block
        (see :meth:`~kvlab.allocator.coordinator.KVCacheCoordinator.holds_room_for`)."""
        if not self.coordinator.attention_only:
            return False
        limit = self.max_model_len
        total = request.num_computed_tokens
        total = total if total < limit else limit
        end = total + num_new_tokens
        need = end + num_lookahead_tokens
        tokens = request.num_tokens
        processed = total - (num_in_flight_tokens if self.skip_on == "processed" else 0)
        return self.coordinator.holds_room_for(
            request.request_id, need if need < limit else limit, end if end < tokens else tokens, processed
        )

    def allocate_slots(
        self,
        request: KVRequest,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: Sequence[Sequence[KVCacheBlock]] | None = None,
        num_lookahead_tokens: int = 0,
        full_sequence_must_fit: bool = False,
        num_in_flight_tokens: int = 0,
    ) -> list[list[KVCacheBlock]] | None:
        """Make room for ``num_new_tokens`` more tokens (plus lookahead slots), or return ``None``.

        Args:
            request: the request (its ``num_computed_tokens`` is not changed here).
            num_new_tokens: tokens to compute this step.
            num_new_computed_tokens: prefix-hit tokens adopted now (new requests only).
            new_computed_blocks: the hit blocks per group from :meth:`get_computed_blocks`.
            num_lookahead_tokens: speculative slots allocated but never cached.
            full_sequence_must_fit: apply the admission gate (waiting requests).
            num_in_flight_tokens: computed tokens still being processed (async steps); under
                ``skip_on="processed"`` they are not counted by ``remove_skipped_blocks``.

        Returns:
            The newly allocated blocks per group, or ``None`` if the gate or the pool refused.
        """
        if num_new_tokens == 0 and num_new_computed_tokens == 0:
            raise ValueError("allocate_slots needs num_new_tokens > 0 or prefix-hit tokens to adopt")
        managers = self.coordinator.managers
        rid = request.request_id
        total = min(request.num_computed_tokens + num_new_computed_tokens, self.max_model_len)
        need_tokens = min(total + num_new_tokens + num_lookahead_tokens, self.max_model_len)
        if (
            not full_sequence_must_fit
            and not num_new_computed_tokens
            and not (new_computed_blocks and any(new_computed_blocks))
            and self.has_room(request, num_new_tokens, num_lookahead_tokens, num_in_flight_tokens)
        ):
            return [[] for _ in managers]  # the same result as the general path below, much faster
        hits = new_computed_blocks or [[] for _ in managers]

        if full_sequence_must_fit:
            per_group = self.admission_need(request, hits, num_new_computed_tokens)
            needs = self.coordinator.pool_needs(per_group)
            free = [p.get_num_free_blocks() for p in self.pools]
            ok = all(n <= f for n, f in zip(needs, free, strict=True))
            ok = ok and not self.coordinator.hit_cached_this_step(hits)
            self.last_gate = GateCheck(rid, self.policy.name, tuple(per_group), tuple(needs), tuple(free), ok)
            if not ok:
                return None

        processed = total - (num_in_flight_tokens if self.skip_on == "processed" else 0)
        self.coordinator.remove_skipped_blocks(rid, processed)
        per_group = self.coordinator.get_num_blocks_to_allocate(rid, need_tokens, hits, total)
        if not self.coordinator.fits(per_group):
            return None
        if num_new_computed_tokens or any(hits) or rid not in managers[0].num_cached_block:
            self.coordinator.save_new_computed_blocks(rid, hits, total)
        new_blocks = self.coordinator.allocate_new_blocks(rid, need_tokens)
        if self.enable_caching:
            self.coordinator.cache_blocks(
                rid, request.block_hashes, min(total + num_new_tokens, request.num_tokens)
            )
        return new_blocks

    def new_step_starts(self) -> None:
        """Call at the start of every scheduling step."""
        self.coordinator.new_step_starts()

    def free(self, request: KVRequest | str) -> None:
        """Release every block of the request (finished or preempted)."""
        self.coordinator.free(request if isinstance(request, str) else request.request_id)

    def reset_prefix_cache(self) -> bool:
        """Forget all hashes; False (nothing done) unless every usable block is free."""
        if any(p.get_num_free_blocks() != p.num_usable_blocks for p in self.pools):
            return False
        return all(p.reset_prefix_cache() for p in self.pools)

    def close(self) -> None:
        """The manager will not be used again: its pools' blocks are freed with it rather than by the
        cycle collector (:meth:`BlockPool.close`)."""
        for pool in self.pools:
            pool.close()

    # -- block map ----------------------------------------------------------------------------------
    def block_states(self) -> list[BlockState]:
        """Every block of every pool with its owner requests and group (for block-map pictures)."""
        owners: dict[tuple[int, int], tuple[int, list[str]]] = {}
        for gid, m in enumerate(self.coordinator.managers):
            pool_idx = self.coordinator.group_pool[gid]
            for rid, table in m.req_to_blocks.items():
                for b in table:
                    if not b.is_null:
                        owners.setdefault((pool_idx, b.block_id), (gid, []))[1].append(rid)
        states = []
        no_owner = (None, ())
        for pool_idx, pool in enumerate(self.pools):
            for b in pool.blocks:
                gid, rids = owners.get((pool_idx, b.block_id), no_owner)
                states.append(BlockState(pool_idx, b.block_id, b.ref_cnt, b.is_null, b.prev_free is not None,
                                         b.block_hash is not None, gid, tuple(rids)))
        return states
