"""The explorers' runs in steps and in seconds: a named workload timed on a GPU, and a table of what it
costs.

The named workloads (:data:`kvlab.kvdata.WORKLOAD_NAMES`) arrive by step; a timed run places them at
``arrival_step × SECONDS_PER_STEP`` and lets :class:`kvlab.timing.StepTimeModel` time every step.
When every request arrives at once, the run in steps is the timed run without its clock (the same
admissions, schedule and stalls step for step), so :func:`step_run` takes it from there instead of
simulating the workload a second time.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from functools import lru_cache

from kvlab.kvdata import workload
from kvlab.plots.tables import html_table
from kvlab.serving import EngineConfig, simulate
from kvlab.simulator import RequestSpec, SimulationResult, steps_to_seconds

#: Arrivals of the step-based workloads, in seconds per step, for the timed run.
SECONDS_PER_STEP = 0.05


@lru_cache(maxsize=32)
def timed_run(config: EngineConfig, workload_name: str, gpu: str, max_steps: int) -> SimulationResult:
    """``workload_name`` under ``config`` with every step timed on ``gpu`` (at most ``max_steps`` steps)."""
    requests = steps_to_seconds(workload(workload_name, config.max_model_len or 0), SECONDS_PER_STEP)
    return simulate(config, requests, max_steps=max_steps, gpu=gpu)


def arrives_at_once(requests: Sequence[RequestSpec]) -> bool:
    """True when every request arrives at step 0 (0 s in a timed run) and none waits for another."""
    return all(r.arrival_step == 0 and not r.arrival_time_s and r.after is None for r in requests)


def without_clock(timed: SimulationResult) -> SimulationResult:
    """``timed`` as a run in steps reports it: the same records with no times, and no metrics."""
    timeline = [dataclasses.replace(r, time_s=0.0, duration_s=0.0) for r in timed.timeline]
    return dataclasses.replace(timed, timeline=timeline, metrics=None)


@lru_cache(maxsize=32)
def step_run(config: EngineConfig, workload_name: str, max_steps: int, gpu: str) -> SimulationResult:
    """``workload_name`` under ``config`` in steps (at most ``max_steps``), exactly as
    ``simulate(config, workload(...), max_steps=max_steps)`` returns it.

    A workload that :func:`arrives_at_once` is taken from :func:`timed_run` on ``gpu`` (which the
    explorers draw as well), so the two views cost one simulation.
    """
    requests = workload(workload_name, config.max_model_len or 0)
    if arrives_at_once(requests):
        return without_clock(timed_run(config, workload_name, gpu, max_steps))
    return simulate(config, requests, max_steps=max_steps)


def _ms(seconds: float) -> str:
    return "–" if math.isnan(seconds) else f"{seconds * 1e3:,.0f} ms"


def _per_s(rate: float) -> str:
    return "–" if math.isnan(rate) else f"{rate:,.0f}"


def time_table(results: Mapping[str, SimulationResult], gpu: str) -> str:
    """HTML table, one column per run: wall time, token throughputs, TTFT and TPOT on ``gpu``.

    A run that stalled reports the time its last request finished, the clock of its last step (when
    it stalled) and how many finished; its throughputs count only those.
    """
    rows: list[list[str]] = [
        [f"wall time on {gpu} (model)"],
        ["requests finished"],
        ["prompt tokens/s"],
        ["output tokens/s"],
        ["mean / p99 TTFT"],
        ["mean TPOT"],
        ["prefix-cache hit rate"],
    ]
    for r in results.values():
        m, s = r.metrics, r.summary
        n = s.finished + s.rejected + s.unfinished
        # a stalled run keeps computing after its last finish: say when it stopped, as the plots show it
        stalled = f" (then stalled at {r.timeline[-1].time_s:,.2f} s)" if s.stalled is not None else ""
        cells = [
            f"{m.wall_time_s:,.2f} s{stalled}",
            f"{m.finished} of {n}",
            _per_s(m.prompt_tokens_per_s),
            _per_s(m.output_tokens_per_s),
            f"{_ms(m.ttft.mean)} / {_ms(m.ttft.p99)}",
            _ms(m.tpot.mean),
            f"{m.prefix_cache_hit_rate:.0%}",
        ]
        for row, cell in zip(rows, cells, strict=True):
            row.append(cell)
    return html_table(["", *results], rows)
