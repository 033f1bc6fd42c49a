"""Check for exercise 8: the blocks the full-sequence admission gate charges one group.

When a waiting request is admitted, vLLM asks whether its *whole* prompt would fit. Two policies:

* ``"uncapped"`` (vLLM ≤ 0.20): every group is charged ``cdiv(N, B)`` blocks;
* ``"vllm"`` (vLLM ≥ 0.21): a sliding-window group is capped at the most it can ever hold,
  ``cdiv(min(W − 1 + T, L), B) + 1``, with ``T = max_num_batched_tokens`` (in-flight tokens).

The answer key is :func:`kvlab.admission.get_policy` ``(policy).required_blocks``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kvlab.admission import GroupBudget, get_policy
from kvlab.exercises.compare import same_int
from kvlab.exercises.learner_check import check_learner
from kvlab.exercises.result import CheckResult
from kvlab.exercises.runner import (
    Case,
    choice,
    function_trial,
    randint,
    random_cases,
)
from kvlab.sizing import FullAttentionSpec, SlidingWindowSpec

#: The two policies of the exercise.
EXERCISE_POLICIES = ("uncapped", "vllm")


def expected_admission_need(
    policy: str, num_tokens: int, block_size: int, sliding_window: int | None,
    max_num_batched_tokens: int, max_model_len: int,
) -> int:
    """kvlab's answer: blocks the gate charges one group for a ``num_tokens``-token request."""
    shape = dict(block_size=block_size, num_kv_heads=1, head_size=8)
    spec = FullAttentionSpec(**shape) if sliding_window is None else SlidingWindowSpec(
        **shape, sliding_window=sliding_window)
    budget = GroupBudget(spec, max_model_len=max_model_len, max_num_batched_tokens=max_num_batched_tokens,
                         in_flight_tokens=max_num_batched_tokens)
    return get_policy(policy).required_blocks(budget, num_tokens)


def _random_request(gen: torch.Generator) -> dict[str, Any]:
    max_model_len = choice(gen, (2048, 4096, 8192, 32768, 131072))
    return {
        "policy": choice(gen, EXERCISE_POLICIES),
        "num_tokens": randint(gen, 1, max_model_len),
        "block_size": choice(gen, (16, 32, 64)),
        "sliding_window": choice(gen, (None, 128, 512, 1024, 4096, randint(gen, 2, 5000))),
        "max_num_batched_tokens": choice(gen, (256, 512, 2048, 8192)),
        "max_model_len": max_model_len,
    }


def _edge_cases() -> list[Case]:
    def case(label: str, policy: str, n: int, b: int, w: int | None, t: int, length: int) -> Case:
        args = {"policy": policy, "num_tokens": n, "block_size": b, "sliding_window": w,
                "max_num_batched_tokens": t, "max_model_len": length}
        return Case(label, args, edge=True)

    return [
        case("uncapped: a long prompt, sliding-window group", "uncapped", 100_000, 16, 1024, 2048, 131072),
        case("vllm: a long prompt, sliding-window group", "vllm", 100_000, 16, 1024, 2048, 131072),
        case("vllm: a full-attention group is never capped", "vllm", 100_000, 16, None, 2048, 131072),
        case("vllm: a prompt shorter than the cap", "vllm", 300, 16, 1024, 2048, 131072),
        case("vllm: W − 1 + T is a multiple of the block size", "vllm", 50_000, 16, 1025, 2048, 131072),
        case("vllm: max_model_len below W − 1 + T", "vllm", 3000, 16, 4096, 8192, 4096),
        case("a one-token request", "vllm", 1, 16, 128, 512, 4096),
    ]


def _diagnose(case: Case, expected: int, got: Any) -> str | None:
    args = dict(case.args)
    if not isinstance(got, int) or isinstance(got, bool):
        return None
    if args["policy"] == "uncapped" and args["sliding_window"] is not None:
        return "uncapped charges every group cdiv(N, B), sliding window or not"
    if args["sliding_window"] is None:
        return "a full-attention group keeps every token: cdiv(N, B) under both policies"
    w, t, b = args["sliding_window"], args["max_num_batched_tokens"], args["block_size"]
    length = args["max_model_len"]
    if got == expected - 1:
        return "the cap has a + 1: a window that starts inside a block touches one more block"
    if got == min(-(-args["num_tokens"] // b), -(-min(w + t, length) // b) + 1):
        return "the window part is W − 1 tokens (the new token is the W-th), not W"
    if got == -(-min(w - 1 + t, length) // b) + 1:
        return "the cap is an upper bound: a shorter prompt needs only cdiv(N, B); take the minimum"
    return None


def check_admission_need(
    admission_need: Callable[..., int], *, seed: int | None = None, num_random: int = 300
) -> CheckResult:
    """Check ``admission_need(policy, num_tokens, block_size, sliding_window, max_num_batched_tokens,
    max_model_len) -> int`` (blocks) for ``policy`` in ``("uncapped", "vllm")``; ``sliding_window``
    is ``None`` for a full-attention group. Compared exactly with :func:`expected_admission_need`.
    """
    return check_learner(
        admission_need, "admission_need", "check_admission_need", seed=seed,
        cases=lambda s: _edge_cases() + random_cases(num_random, s, _random_request),
        trial=lambda fn: function_trial(fn, expected_admission_need,
                                        lambda want, got: same_int(want, got, "blocks"), _diagnose),
        verified="blocks charged by both policies match kvlab.admission",
    )
