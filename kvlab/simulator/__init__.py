"""A step-level serving simulator over kvlab's allocator.

* workloads (:mod:`~kvlab.simulator.workload`): :func:`synthetic_workload`, :func:`multi_turn_workload`,
  :func:`load_trace` (JSON, schema in that module), :func:`make_request`;
* :class:`Scheduler` (FCFS, token budget, ``max_num_seqs``, chunked prefill, recompute preemption of
  the last running request, strict head-of-line blocking, optional async free lag);
* :func:`run_simulation` → :class:`SimulationResult`: a per-step timeline of :class:`StepRecord`
  (queues, events, gate need vs free blocks per admission attempt, blocks per group, optional
  block map) and a :class:`SimulationSummary` with a :class:`StallReport` when the head of the queue
  can never be admitted;
* with a step-time model (``step_time=``, e.g. :class:`kvlab.timing.StepTimeModel`) a clock
  (:class:`SimClock`): arrivals in seconds, Poisson (:func:`with_poisson_arrivals`), closed loop
  (``max_concurrency``), multi-turn sessions (:func:`session_workload`), and :class:`RunMetrics`
  (TTFT, TPOT, ITL, end-to-end, queueing, throughputs, prefix-cache hit rate).

Most users call :func:`kvlab.serving.simulate` with an :class:`~kvlab.serving.EngineConfig` instead.
"""

from kvlab.simulator.arrivals import ArrivalQueue
from kvlab.simulator.clock import SimClock, StepTimer
from kvlab.simulator.engine import DEFAULT_MAX_STEPS, run_simulation
from kvlab.simulator.metrics import Distribution, RequestMetrics, RunMetrics
from kvlab.simulator.request import SimRequest
from kvlab.simulator.scheduler import Scheduler, SchedulerConfig
from kvlab.simulator.sessions import session_workload, steps_to_seconds, with_poisson_arrivals
from kvlab.simulator.timeline import (
    AdmissionAttempt,
    Rejection,
    SimulationResult,
    SimulationSummary,
    StallReport,
    StepRecord,
)
from kvlab.simulator.workload import (
    RequestSpec,
    content_id,
    load_trace,
    make_request,
    multi_turn_workload,
    synthetic_workload,
)

__all__ = [
    "DEFAULT_MAX_STEPS",
    "AdmissionAttempt",
    "ArrivalQueue",
    "Distribution",
    "RequestMetrics",
    "RunMetrics",
    "SimClock",
    "StepTimer",
    "session_workload",
    "steps_to_seconds",
    "with_poisson_arrivals",
    "Rejection",
    "RequestSpec",
    "Scheduler",
    "SchedulerConfig",
    "SimRequest",
    "SimulationResult",
    "SimulationSummary",
    "StallReport",
    "StepRecord",
    "content_id",
    "load_trace",
    "make_request",
    "multi_turn_workload",
    "run_simulation",
    "synthetic_workload",
]
