"""The simulator's clock: each step lasts what a step-time model predicts; tokens get timestamps.

After every scheduled step the clock reads each scheduled request's ``(new tokens, context)``,
asks the step-time model for the step's duration, advances, and stamps the tokens generated in
the step with the new time. It also counts prefix-cache hits at admission (hit tokens against
the tokens the request held when admitted, as vLLM's hit rate does).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping, Sequence

from kvlab.simulator.metrics import RequestMetrics, RunMetrics, run_metrics
from kvlab.simulator.request import SimRequest
from kvlab.simulator.timeline import StepRecord

#: ``[(new_tokens, context_tokens), …]`` of one step → its duration (seconds).
StepTimer = Callable[[Sequence[tuple[int, int]]], float]


class SimClock:
    """Time and per-request timestamps of one run (seconds)."""

    def __init__(self, step_time: StepTimer) -> None:
        self.step_time = step_time
        self.now = 0.0
        self._arrival: dict[str, float] = {}
        self._first_scheduled: dict[str, float] = {}
        self._first_token: dict[str, float] = {}
        self._last_token: dict[str, float] = {}
        self._outputs: dict[str, int] = {}
        self._cached: dict[str, int] = {}
        self.itl_gaps = array("d")
        self.hits = self.queries = 0
        self.finished: list[RequestMetrics] = []

    def arrived(self, request_id: str) -> None:
        """A request entered the engine now."""
        self._arrival[request_id] = self.now

    def advance(self, record: StepRecord, live: Mapping[str, SimRequest]) -> None:
        """Time the step just scheduled, move the clock, stamp its tokens and finished requests."""
        chunks = []
        generated = []
        for rid, n in record.scheduled.items():
            req = live[rid]
            chunks.append((n, req.num_computed_tokens - n))
            if req.num_output_tokens != self._outputs.get(rid, 0):
                generated.append(rid)
        for rid in record.admitted:  # a request is first scheduled in the step that admits it
            self._first_scheduled.setdefault(rid, self.now)
            req = live[rid]
            cached = req.num_computed_tokens - record.scheduled[rid]
            self._cached[rid] = cached
            self.hits += cached
            self.queries += req.num_tokens - (1 if rid in generated else 0)
        record.time_s = self.now
        record.duration_s = self.step_time(chunks) if chunks else 0.0
        self.now += record.duration_s
        for rid in generated:
            self._outputs[rid] = live[rid].num_output_tokens
            last = self._last_token.get(rid)
            if last is None:
                self._first_token[rid] = self.now
            else:
                self.itl_gaps.append(self.now - last)
            self._last_token[rid] = self.now
        for rid in record.finished:
            req = live[rid]
            self.finished.append(
                RequestMetrics(
                    rid,
                    self._arrival.pop(rid),
                    self._first_scheduled.pop(rid),
                    self._first_token.pop(rid),
                    self.now,
                    req.spec.prompt_tokens,
                    req.num_output_tokens,
                    self._cached.pop(rid, 0),
                )
            )
            self._last_token.pop(rid)
            self._outputs.pop(rid)

    def metrics(self) -> RunMetrics:
        """Totals of the run so far (wall time = the clock when the last request finished)."""
        wall = max((r.finish_s for r in self.finished), default=0.0)
        return run_metrics(self.finished, self.itl_gaps, wall, self.hits, self.queries)
