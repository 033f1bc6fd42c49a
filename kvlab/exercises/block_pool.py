"""Check for exercise 6: a small block pool with a null block, a free queue and reference counts.

The learner writes a class; the check replays sequences of operations on it and on kvlab's
:class:`kvlab.allocator.BlockPool` (prefix caching off, freed blocks appended to the tail), and
compares after every step: the blocks handed out, every reference count and the free queue from
head to tail.

The class the learner writes::

    pool = TinyBlockPool(num_blocks)      # block 0 is the null block, never handed out
    pool.get_new_blocks(n) -> list[int]   # n ids from the head of the free queue; ValueError if too few
    pool.touch(block_ids)                 # one more reference each (a free block leaves the queue)
    pool.free_blocks(block_ids)           # one reference less each; at 0 → tail of the queue, in order
    pool.ref_count(block_id) -> int
    pool.free_block_ids() -> list[int]    # the free queue, head (reused next) to tail
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kvlab.allocator import BlockPool
from kvlab.exercises.compare import as_python
from kvlab.exercises.result import CheckResult
from kvlab.exercises.runner import (
    Case,
    LearnerError,
    call_learner,
    fresh_seed,
    learner_name,
    not_callable,
    randint,
    random_cases,
    run_check,
)

OPERATIONS = ("get_new_blocks", "touch", "free_blocks")


@dataclass(frozen=True)
class Operation:
    """One call on the pool: ``get_new_blocks(n)``, ``touch(ids)`` or ``free_blocks(ids)``."""

    method: str
    argument: Any

    def __repr__(self) -> str:
        return f"{self.method}({self.argument!r})"


class _ReferencePool:
    """kvlab's :class:`~kvlab.allocator.BlockPool` seen through block ids."""

    def __init__(self, num_blocks: int) -> None:
        self.pool = BlockPool(num_blocks, enable_caching=False)

    def apply(self, op: Operation) -> list[int] | None:
        if op.method == "get_new_blocks":
            return [b.block_id for b in self.pool.get_new_blocks(op.argument)]
        blocks = [self.pool.blocks[i] for i in op.argument]
        if op.method == "touch":
            self.pool.touch(blocks)
        else:
            self.pool.free_blocks(blocks)
        return None

    def num_free(self) -> int:
        return self.pool.get_num_free_blocks()

    def ref_counts(self) -> dict[int, int]:
        return {b.block_id: b.ref_cnt for b in self.pool.blocks[1:]}

    def free_ids(self) -> list[int]:
        return self.pool.free_queue.block_ids()


def _random_operations(gen: torch.Generator) -> dict[str, Any]:
    """A realistic history: requests allocate, share prefixes, revive freed blocks and finish."""
    num_blocks = randint(gen, 2, 12)
    ref = _ReferencePool(num_blocks)
    running: list[list[int]] = []
    finished: list[list[int]] = []
    ops: list[Operation] = []
    for _ in range(randint(gen, 4, 18)):
        kind = randint(gen, 0, 9)
        if kind <= 3 or not (running or finished):
            free = ref.num_free()
            n = randint(gen, 1, free + 1) if randint(gen, 0, 7) == 0 or free == 0 else randint(gen, 1, free)
            op = Operation("get_new_blocks", n)
            if n > free:
                ops.append(op)  # must raise ValueError, state unchanged
                continue
            running.append(ref.apply(op))
        elif kind <= 5 and running:
            owner = running[randint(gen, 0, len(running) - 1)]
            shared = owner[: randint(gen, 1, len(owner))]
            op = Operation("touch", shared)
            ref.apply(op)
            running.append(list(shared))
        elif kind == 6 and finished:
            blocks = finished[randint(gen, 0, len(finished) - 1)]
            still_free = [b for b in blocks if ref.pool.blocks[b].ref_cnt == 0]
            if not still_free:
                continue
            op = Operation("touch", still_free[: randint(gen, 1, len(still_free))])
            ref.apply(op)
            running.append(list(op.argument))
        elif running:
            table = running.pop(randint(gen, 0, len(running) - 1))
            op = Operation("free_blocks", list(reversed(table)))
            ref.apply(op)
            finished.append(table)
        else:
            continue
        ops.append(op)
    return {"num_blocks": num_blocks, "operations": ops}


def _edge_cases() -> list[Case]:
    def case(label: str, num_blocks: int, *ops: tuple[str, Any]) -> Case:
        operations = [Operation(method, argument) for method, argument in ops]
        return Case(label, {"num_blocks": num_blocks, "operations": operations}, edge=True)

    return [
        case("the first blocks handed out", 5, ("get_new_blocks", 2)),
        case("every usable block, then one more", 4, ("get_new_blocks", 3), ("get_new_blocks", 1)),
        case("a pool with only the null block", 1, ("get_new_blocks", 1)),
        case("freed blocks go to the tail, in the order given", 6,
             ("get_new_blocks", 3), ("free_blocks", [3, 2, 1]), ("get_new_blocks", 2)),
        case("a block shared by two requests", 5,
             ("get_new_blocks", 2), ("touch", [1, 2]), ("free_blocks", [2, 1]), ("free_blocks", [2, 1])),
        case("touching a free block takes it out of the queue", 6,
             ("get_new_blocks", 3), ("free_blocks", [3, 2, 1]), ("touch", [2, 1]), ("get_new_blocks", 2)),
        case("asking for zero blocks", 3, ("get_new_blocks", 0), ("get_new_blocks", 2)),
    ]


def _call(pool: Any, method: str, *args: Any) -> Any:
    """``pool.method(*args)``; a missing method or an exception counts against the learner."""
    try:
        bound = getattr(pool, method)
    except AttributeError as error:
        raise LearnerError(AttributeError(f"the class has no method {method}()"), None, method) from error
    return call_learner(bound, *args)


def _state_problem(ref: _ReferencePool, pool: Any, last: Operation | None = None) -> tuple[str, str] | None:
    """``(what differs, hint)`` between the reference and the learner's pool, or None."""
    want_free = ref.free_ids()
    got_free = as_python(_call(pool, "free_block_ids"))
    if got_free != want_free:
        hint = ""
        if isinstance(got_free, list) and 0 in got_free:
            hint = "block 0 is the null block: it is never in the free queue"
        elif isinstance(got_free, list) and sorted(got_free) == sorted(want_free):
            hint = "same blocks, different order: freed blocks join the tail, in the order they are given"
        elif isinstance(got_free, list):
            held = [b for b in got_free if ref.ref_counts().get(b, 0) > 0]
            if held and last is not None and last.method == "touch":
                hint = "a touched block is in use: if it was free (ref count 0) it leaves the free queue"
            elif held:
                count = ref.ref_counts()[held[0]]
                hint = (f"block {held[0]} is still held (ref count {count}): a block returns to the queue "
                        "only when its count reaches 0")
        return f"free_block_ids() (head → tail): expected {want_free}, got {got_free}", hint
    for block_id, want in ref.ref_counts().items():
        got = as_python(_call(pool, "ref_count", block_id))
        if got != want:
            return (f"ref_count({block_id}): expected {want}, got {got}",
                    "touch adds one reference per block, free_blocks removes one")
    return None


def check_block_pool(pool_class: Any, *, seed: int | None = None, num_random: int = 100) -> CheckResult:
    """Check a block-pool class against :class:`kvlab.allocator.BlockPool` (see the module docstring).

    Each case builds ``pool_class(num_blocks)`` and applies a sequence of operations; after every
    step the blocks handed out, the reference count of every usable block and the free queue must
    match. ``get_new_blocks`` asking for more blocks than are free must raise ``ValueError`` and leave
    the pool unchanged.
    """
    name = learner_name(pool_class, "TinyBlockPool")
    if (bad := not_callable(pool_class, name, "a class")) is not None:
        return bad
    seed = fresh_seed() if seed is None else seed
    cases = _edge_cases() + random_cases(num_random, seed, _random_operations)

    def trial(case: Case) -> str | None:
        num_blocks, ops = case.args["num_blocks"], case.args["operations"]
        ref = _ReferencePool(num_blocks)
        pool = call_learner(pool_class, num_blocks)
        problem = _state_problem(ref, pool)
        if problem:
            what, hint = problem
            return f"right after {name}({num_blocks}): {what}" + (f"\nhint: {hint}" if hint else "")
        for step, op in enumerate(ops, 1):
            at = f"step {step} of {len(ops)}, {op!r}"
            if op.method == "get_new_blocks" and op.argument > ref.num_free():
                try:
                    got = _call(pool, "get_new_blocks", op.argument)
                except LearnerError as err:
                    if not isinstance(err.error, ValueError):
                        raise
                    got = ValueError
                    got = ValueError
                if got is not ValueError:
                    return (f"{at}: expected ValueError (only {ref.num_free()} blocks are free), "
                            f"got {as_python(got)}")
            else:
                want = ref.apply(op)
                argument = op.argument if op.method == "get_new_blocks" else list(op.argument)
                got = _call(pool, op.method, argument)
                if op.method == "get_new_blocks" and as_python(got) != want:
                    hint = ("\nhint: block 0 is the null block: it is never handed out"
                            if isinstance(as_python(got), list) and 0 in as_python(got) else "")
                    return f"{at}: expected blocks {want}, got {as_python(got)}{hint}"
            problem = _state_problem(ref, pool, op)
            if problem:
                what, hint = problem
                return f"after {at}: {what}" + (f"\nhint: {hint}" if hint else "")
        return None

    return run_check(
        name, cases, trial,
        verified="blocks handed out, ref counts and free-queue order match BlockPool at every step",
        seed=seed, replay=f"check_block_pool({name}, seed={seed})",
    )
