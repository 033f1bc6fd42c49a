"""Latency and throughput of a timed run, with the definitions of ``vllm bench serve``.

Per request (seconds): queueing = first scheduled − arrival; TTFT = first token − arrival;
TPOT = (finish − first token) / (output tokens − 1); end-to-end = finish − arrival; inter-token
latencies are the gaps between consecutive tokens. Per run: wall time = the clock when the last
request finished; throughputs divide the finished requests' tokens by it; percentiles are
``numpy.percentile`` (linear), as vLLM's benchmark computes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RequestMetrics:
    """One finished request (times in seconds).

    Attributes:
        request_id: the request.
        arrival_s / first_scheduled_s / first_token_s / finish_s: clock times.
        prompt_tokens / output_tokens: its tokens.
        cached_tokens: prompt tokens served from the prefix cache at its (last) admission.
    """

    request_id: str
    arrival_s: float
    first_scheduled_s: float
    first_token_s: float
    finish_s: float
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int

    @property
    def queueing_s(self) -> float:
        return self.first_scheduled_s - self.arrival_s

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> float | None:
        """Mean time per output token after the first; ``None`` for a one-token output."""
        if self.output_tokens < 2:
            return None
        return (self.finish_s - self.first_token_s) / (self.output_tokens - 1)

    @property
    def e2e_s(self) -> float:
        return self.finish_s - self.arrival_s


@dataclass(frozen=True)
class Distribution:
    """Mean and percentiles of a latency (seconds); all ``nan`` when there is no sample."""

    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values: Sequence[float] | np.ndarray) -> Distribution:
        a = np.asarray(values, dtype=np.float64)
        if a.size == 0:
            return cls(float("nan"), float("nan"), float("nan"), float("nan"))
        p50, p90, p99 = np.percentile(a, [50, 90, 99])
        return cls(float(a.mean()), float(p50), float(p90), float(p99))


@dataclass(frozen=True)
class RunMetrics:
    """A timed run's totals.

    Attributes:
        wall_time_s: clock when the last request finished (seconds).
        finished: requests finished.
        prompt_tokens / output_tokens: tokens of the finished requests.
        output_tokens_per_s / prompt_tokens_per_s / requests_per_s: throughputs over the wall time.
        ttft / tpot / itl / e2e / queueing: latency distributions (seconds).
        prefix_cache_hit_rate: prompt tokens served from the prefix cache / prompt tokens queried at
            admissions (vLLM's ``Prefix cache hit rate``).
        requests: per-request metrics, in finishing order.
    """

    wall_time_s: float
    finished: int
    prompt_tokens: int
    output_tokens: int
    output_tokens_per_s: float
    prompt_tokens_per_s: float
    requests_per_s: float
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2e: Distribution
    queueing: Distribution
    prefix_cache_hit_rate: float
    requests: tuple[RequestMetrics, ...]


def run_metrics(
    requests: Sequence[RequestMetrics], itl_gaps: Sequence[float], wall_time_s: float, hits: int, queries: int
) -> RunMetrics:
    """Totals of finished requests over ``wall_time_s`` seconds (``hits``/``queries`` in tokens)."""
    prompt = sum(r.prompt_tokens for r in requests)
    output = sum(r.output_tokens for r in requests)
    wall = wall_time_s if wall_time_s > 0 else float("nan")
    return RunMetrics(
        wall_time_s=wall_time_s,
        finished=len(requests),
        prompt_tokens=prompt,
        output_tokens=output,
        output_tokens_per_s=output / wall,
        prompt_tokens_per_s=prompt / wall,
        requests_per_s=len(requests) / wall,
        ttft=Distribution.of([r.ttft_s for r in requests]),
        tpot=Distribution.of([t for r in requests if (t := r.tpot_s) is not None]),
        itl=Distribution.of(itl_gaps),
        e2e=Distribution.of([r.e2e_s for r in requests]),
        queueing=Distribution.of([r.queueing_s for r in requests]),
        prefix_cache_hit_rate=hits / queries if queries else 0.0,
        requests=tuple(requests),
    )
