"""A step-level serving simulator over kvlab's allocator.

* workloads (:mod:`~kvlab.simulator.workload`): :func:`synthetic_workload`, :func:`multi_turn_workload`,
  :func:`load_trace` (JSON, schema in that module), :func:`make_request`;
* :class:`Scheduler` (FCFS, token budget, ``max_num_seqs``, chunked prefill, recompute preemption of
  the last running request, strict head-of-line blocking, optional async free lag);
* :func:`run_simulation` → :class:`SimulationResult`: a per-step timeline of :class:`StepRecord`
  (queues, events, gate need vs free blocks per admission attempt, blocks per group, optional
  block map) and a :class:`SimulationSummary` with a :class:`StallReport` when the head of the queue
  can never be admitted.

Most users call :func:`kvlab.serving.simulate` with an :class:`~kvlab.serving.EngineConfig` instead.
"""

from kvlab.simulator.engine import DEFAULT_MAX_STEPS, run_simulation
from kvlab.simulator.request import SimRequest
from kvlab.simulator.scheduler import Scheduler, SchedulerConfig
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
