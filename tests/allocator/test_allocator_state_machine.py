"""A hypothesis state machine over the pool and the managers, checking the invariants of spec §1.5
after every step: admit (with prefix hits and the gate), grow (chunks, decode, lookahead, sliding-window
skipping), free, preempt. Each profile's run is required to take at least 10,000 steps (counted, not
estimated: hypothesis may end an example before its step budget)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from kvlab.allocator import KVCacheManager, TokenRequest
from kvlab.sizing import FullAttentionSpec, KVCacheConfig, KVCacheGroup, KVCachePool, SlidingWindowSpec, cdiv

MAX_MODEL_LEN = 96
#: Steps taken by every machine in this process (an invariant counts them: invariants run after each).
STEPS = {"taken": 0}
MIN_STEPS = 10_000
PREFIXES = [[p * 1000 + i for i in range(64)] for p in range(3)]


def hybrid_config(num_blocks: int) -> KVCacheConfig:
    full = FullAttentionSpec(block_size=4, num_kv_heads=1, head_size=8)
    swa = SlidingWindowSpec(block_size=4, num_kv_heads=1, head_size=8, sliding_window=6)
    swa8 = SlidingWindowSpec(block_size=8, num_kv_heads=1, head_size=4, sliding_window=9)
    groups = (KVCacheGroup(("f",), full), KVCacheGroup(("s",), swa), KVCacheGroup(("s8",), swa8))
    return KVCacheConfig(groups, (KVCachePool(num_blocks, (0, 1, 2), full.page_size_bytes),))


class AllocatorMachine(RuleBasedStateMachine):
    prepend_unhashed = False
    skip_on = "scheduled"

    @initialize(
        num_blocks=st.integers(20, 60),
        seed=st.integers(0, 2**16),
        policy=st.sampled_from(["uncapped", "vllm", "exact", "window_plus_chunk"]),
    )
    def setup(self, num_blocks, seed, policy):
        self.manager = KVCacheManager(
            hybrid_config(num_blocks),
            MAX_MODEL_LEN,
            max_num_batched_tokens=16,
            policy=policy,
            prepend_unhashed=self.prepend_unhashed,
            skip_on=self.skip_on,
            async_scheduling=True,
        )
        self.rng = random.Random(seed)
        self.running: dict[str, TokenRequest] = {}
        self.slots: dict[str, int] = {}
        self.in_flight: dict[str, int] = {}
        # tokens the last grow step counted as processed when it removed skipped blocks
        self.processed: dict[str, int] = {}
        self.tables: dict[str, list[list]] = {}
        self.counter = 0

    # -- actions ---------------------------------------------------------------------------------------
    @rule(
        prefix=st.integers(0, 2),
        shared=st.integers(0, 64),
        tail=st.integers(1, 30),
        chunk=st.integers(1, 40),
        gate=st.booleans(),
    )
    def admit(self, prefix, shared, tail, chunk, gate):
        rid = f"r{self.counter}"
        self.counter += 1
        tokens = PREFIXES[prefix][:shared] + [self.rng.randrange(10**6, 10**7) for _ in range(tail)]
        req = TokenRequest(rid, tokens[: MAX_MODEL_LEN - 1], hash_block_size=4)
        hits, n_hit = self.manager.get_computed_blocks(req)
        assert n_hit <= req.num_tokens - 1 and n_hit % 8 == 0
        n = min(chunk, req.num_tokens - n_hit)
        new = self.manager.allocate_slots(req, n, n_hit, hits, full_sequence_must_fit=gate)
        if new is None:
            assert rid not in self.manager.coordinator.managers[0].req_to_blocks or not any(
                self.manager.get_blocks(rid)
            )
            return
        req.num_computed_tokens = n_hit + n
        self.running[rid] = req
        self.slots[rid] = n_hit + n
        self.in_flight[rid] = n
        self.processed[rid] = 0

    @precondition(lambda self: self.running)
    @rule(data=st.data(), chunk=st.integers(1, 24), lookahead=st.integers(0, 3))
    def grow(self, data, chunk, lookahead):
        rid = data.draw(st.sampled_from(sorted(self.running)))
        req = self.running[rid]
        if req.num_computed_tokens >= req.num_tokens:
            if req.num_tokens >= MAX_MODEL_LEN - 1:
                return self._release(rid)
            req.append_tokens([self.rng.randrange(10**6, 10**7)])
        n = min(chunk, req.num_tokens - req.num_computed_tokens)
        lag = self.in_flight[rid] if self.skip_on == "processed" else 0
        processed = req.num_computed_tokens - lag
        new = self.manager.allocate_slots(
            req, n, num_lookahead_tokens=lookahead, num_in_flight_tokens=self.in_flight[rid]
        )
        if new is None:  # preempt by recompute, as the scheduler does
            return self._release(rid)
        self.slots[rid] = max(self.slots[rid], min(req.num_computed_tokens + n + lookahead, MAX_MODEL_LEN))
        req.num_computed_tokens += n
        self.in_flight[rid] = n
        self.processed[rid] = processed

    @precondition(lambda self: self.running)
    @rule(data=st.data())
    def free(self, data):
        self._release(data.draw(st.sampled_from(sorted(self.running))))

    def _release(self, rid):
        self.manager.free(rid)
        del self.running[rid], self.slots[rid], self.in_flight[rid], self.processed[rid]
        self.tables.pop(rid, None)

    # -- §1.5 invariants ------------------------------------------------------------------------------------
    @invariant()
    def count_step(self):
        STEPS["taken"] += 1

    @invariant()
    def blocks_are_free_or_referenced(self):
        if not hasattr(self, "manager"):
            return
        pool = self.manager.block_pool
        holders: dict[int, int] = {}
        for m in self.manager.coordinator.managers:
            for table in m.req_to_blocks.values():
                for b in table:
                    if not b.is_null:
                        holders[b.block_id] = holders.get(b.block_id, 0) + 1
        free_ids = pool.free_queue.block_ids()
        assert len(free_ids) == len(set(free_ids)) == pool.get_num_free_blocks()
        assert 0 not in free_ids
        free_set = set(free_ids)
        for b in pool.blocks[1:]:
            if b.block_id in free_set:
                assert b.ref_cnt == 0 and b.block_id not in holders
            else:
                assert b.ref_cnt == holders.get(b.block_id, 0) >= 1
        assert len(free_set) + len(holders) == pool.num_blocks - 1
        in_use = self.manager.blocks_in_use_per_group()
        assert sum(in_use) == len(holders)

    @invariant()
    def hashes_match_the_cache_map(self):
        if not hasattr(self, "manager"):
            return
        pool = self.manager.block_pool
        for b in pool.blocks:
            if b.block_hash is not None:
                assert not b.is_null
                entry = pool.cached[b.block_hash]
                assert entry is b or (isinstance(entry, dict) and entry[b.block_id] is b)
        cached_blocks = sum(1 if not isinstance(e, dict) else len(e) for e in pool.cached.values())
        assert cached_blocks == sum(1 for b in pool.blocks if b.block_hash is not None)

    @invariant()
    def tables_have_the_right_length_and_null_prefixes(self):
        if not hasattr(self, "manager"):
            return
        for rid in self.running:
            tables = self.manager.get_blocks(rid)
            for m, table in zip(self.manager.coordinator.managers, tables, strict=True):
                assert len(table) == cdiv(self.slots[rid], m.block_size)
                nulls = [b.is_null for b in table]
                if m.kind == "full":
                    assert not any(nulls)
                else:
                    first_real = nulls.index(False) if False in nulls else len(nulls)
                    assert not any(nulls[first_real:])
                    # every block wholly before the window (as of the processed tokens of the last
                    # step) was freed: W = 6, B = 4, 13 processed -> 13 - 6 + 1 = 8 skipped -> 2 nulls
                    skipped = max(0, self.processed[rid] - m.spec.sliding_window + 1)
                    assert first_real >= skipped // m.block_size, (rid, first_real, skipped)
            previous = self.tables.get(rid)
            if previous is not None:
                for old, new in zip(previous, tables, strict=True):
                    assert len(new) >= len(old)
                    assert all(o is n or n.is_null for o, n in zip(old, new, strict=False))
            self.tables[rid] = tables


SETTINGS = settings(
    max_examples=300,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


class ClassicMachine(AllocatorMachine):
    prepend_unhashed = False
    skip_on = "scheduled"


class NewMachine(AllocatorMachine):
    prepend_unhashed = True
    skip_on = "processed"


@pytest.mark.parametrize("machine", [ClassicMachine, NewMachine], ids=["classic", "new"])
def test_invariants_hold_over_at_least_10000_steps(machine):
    before = STEPS["taken"]
    run_state_machine_as_test(machine, settings=SETTINGS)
    taken = STEPS["taken"] - before
    assert taken >= MIN_STEPS, f"only {taken} steps ran; raise max_examples or stateful_step_count"
