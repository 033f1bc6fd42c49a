"""Whole runs against values recorded from the simulator before its hot path was made cheaper.

The allocator's hot path was made cheaper (a running request whose tables need no change skips the
general path, with sliding-window groups too); the block accounting must not change. Each case below
serves a seeded, named workload and compares every output of the run with values recorded
beforehand: the summary, the latency metrics, and a SHA-256 of the full record (every step's queues,
scheduled tokens, admission attempts, blocks in use, free blocks and clock; the rejections; the
finish order; with ``record_blocks`` every block's owner, ref count and hash state after the chosen
steps).

Recorded by running every case of :data:`CASES` and printing its :func:`fingerprint`
(``import test_recorded_runs as t; print(t.fingerprint(t.run_case(name)))`` with ``tests/simulator``
on the path) on the code of commit bdfa8d4, before the change.

The timed cases read the kernel efficiencies in force when they were recorded
(``data/recorded_kernel_efficiency.csv``, a copy of ``kvlab/timing/kernel_efficiency.csv`` at bdfa8d4),
not the shipped table: these runs check the simulator, and the shipped table is refitted whenever the
kernels get faster.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from kvlab.analysis import with_sliding_window
from kvlab.kvdata import workload
from kvlab.models import get_model
from kvlab.serving import EngineConfig, simulate
from kvlab.simulator import steps_to_seconds, synthetic_workload
from kvlab.timing import Efficiencies

GIB = 1024**3
RECORDED_EFFICIENCIES = Path(__file__).with_name("data") / "recorded_kernel_efficiency.csv"


@dataclass(frozen=True)
class Case:
    """One recorded run: ``workload`` is a named workload or ``"seeded synthetic"``."""

    model: str
    window: int | None  # tokens (replaces the model's sliding window), None = the model's own
    kv_memory_gib: float
    policy: str
    workload: str
    timed: bool = False
    record_blocks: bool | tuple[int, ...] = False
    caching: bool = True
    profile: str = "vllm-0.20"
    async_scheduling: bool = False


CASES: dict[str, Case] = {
    "gemma3 long prompts, vllm gate, timed": Case(
        "gemma-3-27b", 1024, 8.0, "vllm", "long prompts", timed=True
    ),
    "gemma3 long prompts, uncapped, timed": Case(
        "gemma-3-27b", 1024, 8.0, "uncapped", "long prompts", timed=True
    ),
    "gemma3 chat burst, exact": Case("gemma-3-27b", 512, 4.0, "exact", "chat burst"),
    "gemma3 shared prompt, blocks": Case(
        "gemma-3-27b", 2048, 2.6, "vllm", "shared system prompt", record_blocks=(5, 40, 120, 200)
    ),
    "gemma3 long prompts, stalled": Case("gemma-3-27b", 4096, 3.5, "uncapped", "long prompts"),
    "llama seeded chat, timed": Case("llama-3.1-8b", None, 4.5, "vllm", "seeded synthetic", timed=True),
    "llama seeded synthetic, preempting": Case("llama-3.1-8b", None, 1.05, "uncapped", "seeded synthetic"),
    "gemma3 multi-turn, no caching": Case(
        "gemma-3-27b", 1024, 3.0, "window_plus_chunk", "multi-turn", caching=False
    ),
    "gemma3 chat burst, async, skip on processed": Case(
        "gemma-3-27b", 512, 3.0, "vllm", "chat burst", profile="vllm-0.33", async_scheduling=True
    ),
}


def run_case(name: str):
    """Run one case of :data:`CASES`."""
    case = CASES[name]
    spec = get_model(case.model)
    if case.window is not None:
        spec = with_sliding_window(spec, case.window)
    config = EngineConfig(
        spec,
        kv_cache_memory=case.kv_memory_gib * GIB,
        block_size=16,
        max_model_len=8192,
        max_num_batched_tokens=2048,
        profile=case.profile,
        policy=case.policy,
        enable_prefix_caching=case.caching,
        async_scheduling=case.async_scheduling,
    )
    if case.workload == "seeded synthetic":
        requests = synthetic_workload(
            40, (256, 3000), (16, 200), arrival_rate=0.5, shared_prefix_tokens=200, seed=7
        )
    else:
        requests = workload(case.workload, 8192)
    if case.timed:
        requests = steps_to_seconds(requests, 0.05)
        return simulate(config, requests, max_steps=3000, gpu="h100-sxm", record_blocks=case.record_blocks,
                        efficiencies=Efficiencies.from_table(RECORDED_EFFICIENCIES))
    return simulate(config, requests, max_steps=3000, record_blocks=case.record_blocks)


def fingerprint(result) -> tuple:
    """(summary, wall time in s, SHA-256 of the metrics, SHA-256 of the full record) of a run."""
    record = repr(
        (result.timeline, result.rejections, result.finished_ids, result.policy, result.group_kinds)
    )
    digest = hashlib.sha256(record.encode()).hexdigest()
    s = result.summary
    summary = (
        s.steps,
        s.finished,
        s.rejected,
        s.unfinished,
        s.preemptions,
        s.peak_running,
        s.peak_blocks_in_use,
        s.step_cap_reached,
        repr(s.stalled),
    )
    metrics = result.metrics
    wall = None if metrics is None else metrics.wall_time_s
    return summary, wall, hashlib.sha256(repr(metrics).encode()).hexdigest(), digest


#: name → (summary, wall time s, SHA-256 of the metrics, SHA-256 of the full record), recorded on bdfa8d4.
RECORDED: dict[str, tuple] = {
    "gemma3 long prompts, vllm gate, timed": (
        (44, 6, 0, 0, 0, 6, 4647, False, "None"),
        3.291907506386237,
        "93480c76910c593d6d09232f1ff1940ff26bef660f5168e81a223bd912e5deab",
        "9112ea3c2307240c3ff8de601c8c0a511b8613e29a9f547a4f086a6cdfa9f0a8",
    ),
    "gemma3 long prompts, uncapped, timed": (
        (44, 6, 0, 0, 0, 6, 4647, False, "None"),
        3.291907506386237,
        "93480c76910c593d6d09232f1ff1940ff26bef660f5168e81a223bd912e5deab",
        "56398cc2d3a65236a9a8f4f663cb25ed950251f25e9ac2559c00f06f49276642",
    ),
    "gemma3 chat burst, exact": (
        (187, 16, 0, 0, 0, 8, 3260, False, "None"),
        None,
        "dc937b59892604f5a86ac96936cd7ff09e25f18ae6b758e8014a24c7fa039e91",
        "1c4055fe5802423fbd34a3f49889089ec0c1ef5ab83d46fa9d53d0f39c570b9f",
    ),
    "gemma3 shared prompt, blocks": (
        (240, 10, 0, 0, 0, 3, 2051, False, "None"),
        None,
        "dc937b59892604f5a86ac96936cd7ff09e25f18ae6b758e8014a24c7fa039e91",
        "8cc8631fe79fb293d78b6634f4eeae229cfdf9545fbda4937eb91fe5daf8076a",
    ),
    "gemma3 long prompts, stalled": (
        (
            2,
            0,
            0,
            6,
            0,
            1,
            1372,
            False,
            "StallReport(step=1, request_id='r1', need=2933, pool_size=2866, reason='admission gate asks "
            "2,933 blocks of the pool, which has 2,866 usable blocks')",
        ),
        None,
        "dc937b59892604f5a86ac96936cd7ff09e25f18ae6b758e8014a24c7fa039e91",
        "f90de97d85c0b4c57419455e5c730296e4dcb92e73307c826a8f3235e564b8f4",
    ),
    "llama seeded chat, timed": (
        (383, 40, 0, 0, 0, 19, 1437, False, "None"),
        5.34095275666641,
        "be3682ef324f232b08af703a9aa57616825d9018d8459e039124fc160f7961e1",
        "73ba6529c9350cb83efa880db8e9b604b691676091a710c0f2c85db8487edf8c",
    ),
    "llama seeded synthetic, preempting": (
        (822, 40, 0, 0, 1, 10, 536, False, "None"),
        None,
        "dc937b59892604f5a86ac96936cd7ff09e25f18ae6b758e8014a24c7fa039e91",
        "24bac3c6a36386725105e6ac96a42c3a34926c0dead76e8e24ffcb960820ee6b",
    ),
    "gemma3 multi-turn, no caching": (
        (618, 6, 0, 0, 0, 4, 2191, False, "None"),
        None,
        "dc937b59892604f5a86ac96936cd7ff09e25f18ae6b758e8014a24c7fa039e91",
        "1bd49c80a03e7255d08ed30518cc349928e1ce7705109a918a1df1231ed28d9b",
    ),
    "gemma3 chat burst, async, skip on processed": (
        (313, 16, 0, 0, 0, 5, 2446, False, "None"),
        None,
        "dc937b59892604f5a86ac96936cd7ff09e25f18ae6b758e8014a24c7fa039e91",
        "1efb19f7ab17830d8cbdc74b43de2270cd6af75340344288fc9959cd8220a9bd",
    ),
}


def test_every_case_has_a_recording():
    assert set(RECORDED) == set(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_run_matches_the_recording(name):
    summary, wall, metrics_digest, record_digest = fingerprint(run_case(name))
    want_summary, want_wall, want_metrics, want_record = RECORDED[name]
    assert summary == want_summary
    assert wall == want_wall  # bit for bit: the same steps timed in the same order
    assert metrics_digest == want_metrics
    assert record_digest == want_record
