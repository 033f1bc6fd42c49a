"""Check for exercise 7: ``remove_skipped_blocks`` of a sliding-window group.

A sliding-window layer with window ``W`` only ever attends to the last ``W - 1`` computed tokens
(plus the new one), so after ``n`` computed tokens the first ``max(0, n - W + 1)`` are *skipped*.
Whole blocks of skipped tokens are replaced by the null block (id 0) and freed, walking from the
last such block backwards and stopping at the first entry that is already null.

The answer key is :meth:`kvlab.allocator.SlidingWindowManager.remove_skipped_blocks` on a real
:class:`kvlab.allocator.BlockPool`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kvlab.allocator import BlockPool, SlidingWindowManager
from kvlab.exercises.compare import as_python, same_list
from kvlab.exercises.learner_check import check_learner
from kvlab.exercises.result import CheckResult
from kvlab.exercises.runner import (
    Case,
    choice,
    function_trial,
    randint,
    random_cases,
)
from kvlab.sizing import SlidingWindowSpec

NULL_BLOCK = 0


def _spec(sliding_window: int, block_size: int) -> SlidingWindowSpec:
    return SlidingWindowSpec(block_size=block_size, num_kv_heads=1, head_size=8,
                             sliding_window=sliding_window)


def expected_remove_skipped_blocks(
    block_table: list[int], num_computed_tokens: int, sliding_window: int, block_size: int
) -> tuple[list[int], list[int]]:
    """kvlab's answer: the table after the call (0 = null block) and the ids freed, in freeing order."""
    top = max(block_table, default=0)
    pool = BlockPool(top + 1, enable_caching=False)
    pool.get_new_blocks(top)  # every real block in use; the free queue is empty
    manager = SlidingWindowManager(_spec(sliding_window, block_size), pool, group_id=0, enable_caching=False)
    table = [pool.null_block if b == NULL_BLOCK else pool.blocks[b] for b in block_table]
    manager.req_to_blocks["request"] = table
    manager.remove_skipped_blocks("request", num_computed_tokens)
    return [b.block_id for b in manager.req_to_blocks["request"]], pool.free_queue.block_ids()


def _skipped_blocks(num_computed_tokens: int, sliding_window: int, block_size: int) -> int:
    return _spec(sliding_window, block_size).num_skipped_tokens(num_computed_tokens) // block_size


def _random_table(gen: torch.Generator) -> dict[str, Any]:
    block_size = choice(gen, (1, 2, 4, 8, 16))
    window = randint(gen, 1, 6 * block_size + 3)
    length = randint(gen, 0, 12)
    tokens = randint(gen, 0, length * block_size)
    ids = (torch.randperm(60, generator=gen)[:length] + 1).tolist()
    # a previous call may already have nulled a prefix (never more than is skipped now)
    nulls = randint(gen, 0, min(length, _skipped_blocks(tokens, window, block_size)))
    table = [NULL_BLOCK] * nulls + ids[nulls:]
    return {"block_table": table, "num_computed_tokens": tokens, "sliding_window": window,
            "block_size": block_size}


def _edge_cases() -> list[Case]:
    def case(label: str, table: list[int], n: int, w: int, b: int) -> Case:
        args = {"block_table": table, "num_computed_tokens": n, "sliding_window": w, "block_size": b}
        return Case(label, args, edge=True)

    spec_table = list(range(1000, 1011))
    return [
        case("fewer tokens than the window: nothing is skipped", [5, 9, 2], 3, 4, 2),
        case("the window starts inside a block: that block stays", [5, 9, 2, 7], 6, 4, 2),
        case("W=4, B=2 after 11 tokens, 2 blocks already null", [0, 0] + spec_table[2:], 11, 4, 2),
        case("more skipped blocks than the table holds", [8, 3], 40, 4, 4),
        case("every skipped block is already null", [0, 0, 6, 4], 7, 4, 2),
        case("a window of 1 token", [3, 1, 4, 2], 6, 1, 2),
        case("block size 1", [7, 6, 5, 4, 3], 5, 3, 1),
        case("an empty table", [], 10, 4, 2),
    ]


def _compare(expected: tuple[list[int], list[int]], got: Any) -> str | None:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return f"return a tuple (block_table, freed); got {type(got).__name__}"
    return same_list(expected[0], got[0], "block_table") or same_list(expected[1], got[1], "freed")


def _diagnose(case: Case, expected: tuple[list[int], list[int]], got: Any) -> str | None:
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return None
    table, freed = as_python(got[0]), as_python(got[1])
    want_table, want_freed = expected
    args = case.args
    if isinstance(table, list) and len(table) < len(want_table):
        return "keep the table's length: replace a skipped block by the null block 0 instead of deleting it"
    reversed_order = isinstance(freed, list) and len(freed) > 1 and freed == list(reversed(want_freed))
    if table == want_table and reversed_order:
        return "free the blocks tail-first: walk from the last skipped block back to the first"
    if isinstance(freed, list) and NULL_BLOCK in freed:
        return "the null block is never freed: stop at the first entry that is already null"
    for shift, text in ((-1, "n − W"), (1, "n − W + 2")):
        moved = expected_remove_skipped_blocks(args["block_table"], args["num_computed_tokens"] + shift,
                                               args["sliding_window"], args["block_size"])
        if moved != expected and table == moved[0]:
            return (f"skipped tokens are max(0, n − W + 1); your table matches {text}: the next token still "
                    "attends to the last W − 1 computed tokens")
    return None


def check_remove_skipped_blocks(
    remove_skipped_blocks: Callable[[list[int], int, int, int], tuple[list[int], list[int]]],
    *,
    seed: int | None = None,
    num_random: int = 200,
) -> CheckResult:
    """Check ``remove_skipped_blocks(block_table, num_computed_tokens, sliding_window, block_size)
    -> (block_table, freed)`` against :class:`kvlab.allocator.SlidingWindowManager`.

    ``block_table`` lists block ids (0 = null block); the learner returns the table after the call
    (same length) and the ids it freed, in the order they are freed.
    """
    return check_learner(
        remove_skipped_blocks, "remove_skipped_blocks", "check_remove_skipped_blocks", seed=seed,
        cases=lambda s: _edge_cases() + random_cases(num_random, s, _random_table),
        trial=lambda fn: function_trial(fn, expected_remove_skipped_blocks, _compare, _diagnose),
        verified="block tables and freeing order match SlidingWindowManager",
    )
