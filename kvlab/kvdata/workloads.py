"""Named request workloads for the admission and block-map lessons (built with :mod:`kvlab.simulator`).

Each preset is a function of ``max_model_len`` (tokens) so that prompts always fit a request:
prompt + output ≤ ``max_model_len``.
"""

from __future__ import annotations

from collections.abc import Callable

from kvlab.simulator import RequestSpec, multi_turn_workload, synthetic_workload
from kvlab.validation import require_choice


def _long_prompts(max_model_len: int) -> list[RequestSpec]:
    hi = max(64, min(24_000, max_model_len - 64))
    return synthetic_workload(6, prompt_tokens=(max(32, hi // 4), hi), output_tokens=32, seed=1)


def _chat_burst(max_model_len: int) -> list[RequestSpec]:
    hi = max(64, min(4_000, max_model_len - 128))
    return synthetic_workload(16, prompt_tokens=(max(32, hi // 4), hi), output_tokens=(32, 96),
                              arrival_rate=0.5, seed=2)


def _shared_system_prompt(max_model_len: int) -> list[RequestSpec]:
    hi = max(96, min(3_000, max_model_len - 128))
    return synthetic_workload(10, prompt_tokens=(max(64, hi // 2), hi), output_tokens=48,
                              arrival_rate=0.3, shared_prefix_tokens=max(32, hi // 3), seed=3)


def _multi_turn(max_model_len: int) -> list[RequestSpec]:
    turns = 3
    user = max(16, min(400, max_model_len // (4 * turns)))
    return multi_turn_workload(2, turns, system_prompt_tokens=max(16, min(1_024, max_model_len // 4)),
                               user_tokens=(user // 2, user), output_tokens=(user // 2, user),
                               turn_gap_steps=40, session_gap_steps=5, seed=4)


#: ``{name: (description, builder)}``.
WORKLOADS: dict[str, tuple[str, Callable[[int], list[RequestSpec]]]] = {
    "long prompts": ("6 requests of 6k–24k tokens arriving at once, 32 output tokens each", _long_prompts),
    "chat burst": ("16 requests of 1k–4k tokens, about one every 2 steps, 32–96 output tokens", _chat_burst),
    "shared system prompt": ("10 requests whose first third is one system prompt (prefix caching)",
                             _shared_system_prompt),
    "multi-turn": ("2 chat sessions of 3 turns; each turn repeats the whole history", _multi_turn),
}
WORKLOAD_NAMES: tuple[str, ...] = tuple(WORKLOADS)


def workload(name: str, max_model_len: int) -> list[RequestSpec]:
    """The named workload, with prompts sized to fit ``max_model_len`` (tokens)."""
    require_choice(name, WORKLOAD_NAMES, "workload")
    return WORKLOADS[name][1](max_model_len)
