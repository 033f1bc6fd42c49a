"""Workloads in seconds: Poisson arrivals and multi-turn sessions that share a growing prefix."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

from kvlab.simulator.workload import RequestSpec, Segment, content_id
from kvlab.validation import require_positive_int


def with_poisson_arrivals(
    workload: Sequence[RequestSpec], request_rate: float, seed: int = 0
) -> list[RequestSpec]:
    """The same requests arriving as a Poisson process of ``request_rate`` requests per second
    (exponential gaps, the first at 0 s), like ``vllm bench serve --request-rate``."""
    if (
        isinstance(request_rate, bool)
        or not isinstance(request_rate, (int, float))
        or not 0 < request_rate < float("inf")
    ):
        raise ValueError(f"request_rate must be a number of requests per second > 0, got {request_rate!r}")
    rng = random.Random(seed)
    t, out = 0.0, []
    for i, r in enumerate(workload):
        if i:
            t += rng.expovariate(request_rate)
        out.append(dataclasses.replace(r, arrival_step=0, arrival_time_s=t))
    return out


def session_workload(
    num_sessions: int,
    turns: int,
    session_context: int,
    question_tokens: int = 128,
    output_tokens: int = 256,
    think_time_s: float = 0.0,
    session_gap_s: float = 0.0,
) -> list[RequestSpec]:
    """Multi-turn sessions over a long document (SCBench style).

    Session ``s`` starts at ``s × session_gap_s`` with its own ``session_context``-token document
    and a question; each next turn arrives ``think_time_s`` after the previous one finished and
    sends the whole history (document, earlier questions and answers) plus a new question, so it
    can hit the prefix cache for everything before its question.

    Example: 4 sessions × 5 turns over 65,000 tokens, 128-token questions and 256-token answers send
    ``4 × Σ_{t=0..4} (65,000 + 128 (t+1) + 256 t) = 4 × 329,480 = 1,317,920`` prompt tokens.
    """
    require_positive_int(num_sessions, "num_sessions (--sessions)")
    require_positive_int(turns, "turns (--turns)")
    require_positive_int(session_context, "session_context (--session-context, tokens)")
    require_positive_int(question_tokens, "question_tokens")
    require_positive_int(output_tokens, "output_tokens")
    out = []
    for s in range(num_sessions):
        history: list[Segment] = [(content_id(f"document:s{s}"), session_context)]
        previous = None
        for t in range(turns):
            rid = f"s{s}t{t}"
            history.append((content_id(f"question:{rid}"), question_tokens))
            out.append(
                RequestSpec(
                    rid,
                    0,
                    tuple(history),
                    output_tokens,
                    arrival_time_s=s * session_gap_s if previous is None else None,
                    after=previous,
                    think_time_s=think_time_s if previous is not None else 0.0,
                )
            )
            history.append((content_id(f"output:{rid}"), output_tokens))
            previous = rid
    return out


def steps_to_seconds(workload: Sequence[RequestSpec], seconds_per_step: float) -> list[RequestSpec]:
    """The same requests with ``arrival_time_s = arrival_step × seconds_per_step``: a workload
    written in steps, for a run with a step-time model."""
    if (
        isinstance(seconds_per_step, bool)
        or not isinstance(seconds_per_step, (int, float))
        or not (0 <= seconds_per_step < float("inf"))
    ):
        raise ValueError(f"seconds_per_step must be a finite number >= 0, got {seconds_per_step!r}")
    return [dataclasses.replace(r, arrival_time_s=r.arrival_step * seconds_per_step) for r in workload]
