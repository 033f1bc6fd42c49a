"""When requests enter the engine: by step or second, after an earlier request, under a client cap.

* By clock: a request arrives at ``arrival_step`` (runs without a time model) or at
  ``arrival_time_s`` (runs with one).
* After another: a request with ``after`` arrives once that request finished (plus its
  ``think_time_s`` in a timed run; the next step otherwise) — the next turn of a session.
* Closed loop: with ``max_concurrency`` N, at most N requests are in the engine at once; the others
  wait at the client, like ``vllm bench serve --max-concurrency N``. A request's arrival (what its
  TTFT and queueing time are measured from) is when the client sends it.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from kvlab.simulator.workload import RequestSpec
from kvlab.validation import require_positive_int


class ArrivalQueue:
    """Releases a workload's requests as the clock advances.

    Args:
        workload: the requests.
        timed: the clock is in seconds (``arrival_time_s``) rather than steps (``arrival_step``).
        max_concurrency: most requests in the engine at once (``None`` = unlimited).

    Raises:
        ValueError: an ``after`` naming no request of the workload (or itself); a timed run given
            arrival steps without arrival times.
    """

    def __init__(
        self, workload: Sequence[RequestSpec], timed: bool, max_concurrency: int | None = None
    ) -> None:
        if max_concurrency is not None:
            require_positive_int(max_concurrency, "max_concurrency")
        self.timed = timed
        self.max_concurrency = max_concurrency
        ids = {r.request_id for r in workload}
        self._ready: list[tuple[float, int, RequestSpec]] = []  # (time, order, spec)
        self._dependents: dict[str, list[RequestSpec]] = {}
        self._order = 0
        self._remaining = len(workload)
        for r in workload:
            if r.after is not None:
                if r.after not in ids or r.after == r.request_id:
                    raise ValueError(
                        f"request {r.request_id} comes after {r.after!r}, which is not another request"
                    )
                self._dependents.setdefault(r.after, []).append(r)
            else:
                self._push(self._arrival(r), r)

    def _arrival(self, r: RequestSpec) -> float:
        if not self.timed:
            return float(r.arrival_step)
        if r.arrival_time_s is None and r.arrival_step:
            raise ValueError(
                f"request {r.request_id} arrives at step {r.arrival_step}, but a run with a step-time model "
                "needs arrival_time_s (seconds)"
            )
        return r.arrival_time_s or 0.0

    def _push(self, when: float, r: RequestSpec) -> None:
        heapq.heappush(self._ready, (when, self._order, r))
        self._order += 1

    def release(self, now: float, in_system: int) -> list[RequestSpec]:
        """Requests that arrive by ``now``, in order, while fewer than ``max_concurrency`` are in."""
        out = []
        cap = self.max_concurrency
        while self._ready and self._ready[0][0] <= now and (cap is None or in_system + len(out) < cap):
            out.append(heapq.heappop(self._ready)[2])
        self._remaining -= len(out)
        return out

    def finished(self, request_id: str, now: float) -> None:
        """``request_id`` finished at ``now``: its dependents become due (think time later, or next step)."""
        for r in self._dependents.pop(request_id, ()):
            self._push(now + r.think_time_s if self.timed else now + 1, r)

    def next_arrival(self) -> float | None:
        """The earliest time a request is due, or ``None`` when none is known yet."""
        return self._ready[0][0] if self._ready else None

    @property
    def exhausted(self) -> bool:
        """Every request has been released."""
        return self._remaining == 0
