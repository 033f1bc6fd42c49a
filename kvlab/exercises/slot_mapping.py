"""Check for exercise 5: the slot of every new token, read through the block table.

kvlab's :meth:`kvlab.AttentionBatch.slot_mapping` is the answer key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kvlab.cache import AttentionBatch, cdiv
from kvlab.exercises.compare import same_list
from kvlab.exercises.learner_check import check_learner
from kvlab.exercises.result import CheckResult
from kvlab.exercises.runner import (
    Case,
    choice,
    function_trial,
    randint,
    random_cases,
)


def expected_slot_mapping(
    block_table: list[list[int]], query_lens: list[int], seq_lens: list[int], block_size: int
) -> list[int]:
    """kvlab's slots for the new tokens of a batch (``[num_tokens]`` ints, in query order)."""
    batch = AttentionBatch.from_lengths(query_lens, seq_lens, block_table)
    return batch.slot_mapping(block_size).tolist()


def _random_batch(gen: torch.Generator) -> dict[str, Any]:
    block_size = choice(gen, (1, 2, 4, 8, 16, 32))
    num_seqs = randint(gen, 1, 5)
    seq_lens, query_lens = [], []
    for _ in range(num_seqs):
        n = randint(gen, 1, 8 * block_size + 3)
        kind = choice(gen, ("decode", "prefill", "chunk"))
        q = 1 if kind == "decode" else n if kind == "prefill" else randint(gen, 0, n)
        seq_lens.append(n)
        query_lens.append(q)
    needed = [cdiv(n, block_size) for n in seq_lens]
    pool = torch.randperm(sum(needed) + randint(gen, 0, 6), generator=gen).tolist()
    table, cursor = [], 0
    for k in needed:
        table.append(pool[cursor : cursor + k])
        cursor += k
    return {"block_table": table, "query_lens": query_lens, "seq_lens": seq_lens, "block_size": block_size}


def _edge_cases() -> list[Case]:
    def case(label: str, table: list[list[int]], q: list[int], s: list[int], b: int) -> Case:
        return Case(label, {"block_table": table, "query_lens": q, "seq_lens": s, "block_size": b}, edge=True)

    return [
        case("decode of the first token of a new block", [[7, 3]], [1], [5], 4),
        case("decode of the last slot of a block", [[7, 3]], [1], [8], 4),
        case("prefill of a whole sequence", [[9, 2, 5]], [10], [10], 4),
        case("prefill chunk starting in the middle of a block", [[4, 0, 6]], [5], [11], 4),
        case("no new tokens between two decodes", [[1], [5, 2], [3]], [1, 0, 1], [3, 6, 2], 4),
        case("block size 1", [[6, 2, 9, 4]], [2], [4], 1),
        case("mixed batch: decode, prefill, decode", [[10, 11], [3, 4, 5], [0]], [1, 9, 1], [16, 9, 3], 8),
    ]


def _diagnose(case: Case, expected: list[int], got: Any) -> str | None:
    args = case.args
    b = args["block_size"]
    if isinstance(got, list) and len(got) == len(expected) and all(isinstance(g, int) for g in got):
        shifts = {g - e for g, e in zip(got, expected, strict=True)}
        if shifts in ({b}, {1}):
            return "off by one position: the first new token of a sequence is at position seq_len − query_len"
        lengths = zip(args["query_lens"], args["seq_lens"], strict=True)
        positions = [p for q, s in lengths for p in range(s - q, s)]
        if got == positions:
            return "these are positions, not slots: look the block up in the block table"
        rows = zip(args["block_table"], args["query_lens"], strict=True)
        from_zero = [row[t // b] * b + t % b if t // b < len(row) else None
                     for row, q in rows for t in range(q)]
        if got == from_zero:
            return "use each token's absolute position in its sequence, not its row in the batch"
    return None


def _compare(want: list[int], got: Any) -> str | None:
    return same_list(want, got, "slots")


def check_slot_mapping(
    slot_mapping: Callable[[list[list[int]], list[int], list[int], int], list[int]],
    *,
    seed: int | None = None,
    num_random: int = 200,
) -> CheckResult:
    """Check ``slot_mapping(block_table, query_lens, seq_lens, block_size) -> list[int]``.

    For new token ``t`` of sequence ``i`` (position ``p = seq_lens[i] − query_lens[i] + t``) the slot is
    ``block_table[i][p // block_size] * block_size + p % block_size``; slots are listed in query order.
    Compared exactly with :meth:`kvlab.AttentionBatch.slot_mapping`.
    """
    return check_learner(
        slot_mapping, "slot_mapping", "check_slot_mapping", seed=seed,
        cases=lambda s: _edge_cases() + random_cases(num_random, s, _random_batch),
        trial=lambda fn: function_trial(fn, expected_slot_mapping, _compare, _diagnose),
        verified="every slot equals AttentionBatch.slot_mapping",
    )
