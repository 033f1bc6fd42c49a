"""A timed simulation rearranged for pictures: requests running against seconds, output tokens per
second, and latency samples per request.

Everything is read from a :class:`kvlab.simulator.SimulationResult` of a run with a GPU (so each
step record carries ``time_s`` and ``duration_s``, and ``result.metrics`` is set).
"""

from __future__ import annotations

from kvlab.simulator import SimulationResult


def _require_timed(result: SimulationResult) -> None:
    if result.metrics is None:
        raise ValueError("this view needs a timed run: simulate(..., gpu=...) gives each step a duration")


def running_over_time(
    result: SimulationResult, until_s: float | None = None
) -> tuple[list[float], list[int]]:
    """``(times_s, running)``: requests running after each step, against the step's end (seconds).
    An idle gap (nothing to run until the next arrival) shows as a drop to 0; ``until_s`` extends a
    run that stopped early (a stall: nothing runs again) with 0 running up to that time."""
    _require_timed(result)
    times, running = [0.0], [0]
    for rec in result.timeline:
        if rec.time_s > times[-1]:
            times.append(rec.time_s)
            running.append(0)
        times.append(rec.time_s + rec.duration_s)
        running.append(rec.num_running)
    if until_s is not None and until_s > times[-1]:
        times += [times[-1], until_s]
        running += [0, 0]
    return times, running


def tokens_per_second(result: SimulationResult, window_s: float) -> tuple[list[float], list[float]]:
    """``(window ends, tokens/s)``: tokens scheduled (prefill and decode) per second, in windows of
    ``window_s`` seconds."""
    _require_timed(result)
    if not window_s > 0:
        raise ValueError(f"window_s must be > 0 seconds, got {window_s!r}")
    end = max((r.time_s + r.duration_s for r in result.timeline), default=0.0)
    bins = [0] * (int(end / window_s) + 1)
    for rec in result.timeline:
        bins[min(int(rec.time_s / window_s), len(bins) - 1)] += rec.num_scheduled_tokens
    return [window_s * (i + 1) for i in range(len(bins))], [n / window_s for n in bins]


def latency_samples_ms(result: SimulationResult) -> dict[str, list[float]]:
    """Per finished request, in ms: ``{"ttft": [...], "tpot": [...], "e2e": [...], "queueing": [...]}``."""
    _require_timed(result)
    reqs = result.metrics.requests
    return {
        "ttft": [r.ttft_s * 1e3 for r in reqs],
        "tpot": [t * 1e3 for r in reqs if (t := r.tpot_s) is not None],
        "e2e": [r.e2e_s * 1e3 for r in reqs],
        "queueing": [r.queueing_s * 1e3 for r in reqs],
    }
