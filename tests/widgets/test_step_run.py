"""The explorers' run in steps taken from the timed run is exactly what ``simulate`` returns in steps,
and only workloads that arrive at once take that route."""

from __future__ import annotations

import dataclasses
import random

import pytest

from kvlab.kvdata import workload
from kvlab.serving import simulate
from kvlab.simulator import steps_to_seconds, synthetic_workload
from kvlab.widgets.admission_explorer import MAX_STEPS, admission_config
from kvlab.widgets.timed_runs import SECONDS_PER_STEP, arrives_at_once, step_run, without_clock


def _config(policy: str, window: int = 1024, max_model_len: int = 32768, kv_memory_gib: float = 8.0):
    return admission_config("gemma-3-27b", window, kv_memory_gib=kv_memory_gib, kv_cache_dtype="auto",
                            block_size=16, max_model_len=max_model_len, max_num_batched_tokens=2048,
                            profile="vllm-0.20", policy=policy)


@pytest.mark.parametrize("policy,window,max_model_len", [
    ("uncapped", 1024, 32768),  # stalls: the stall must come at the same step, with the same report
    ("vllm", 1024, 32768), ("exact", 512, 16384), ("window_plus_chunk", 4096, 8192),
])
def test_long_prompts_in_steps_equal_a_run_in_steps(policy, window, max_model_len):
    cfg = _config(policy, window, max_model_len)
    direct = simulate(cfg, workload("long prompts", max_model_len), max_steps=MAX_STEPS)
    assert step_run(cfg, "long prompts", MAX_STEPS, "h100-sxm") == direct
    if policy == "uncapped":
        assert direct.summary.stalled is not None  # the case is the one it is meant to be


def test_random_workloads_arriving_at_once_with_rejections(seed):
    rng = random.Random(seed)
    max_model_len = 8192
    requests = synthetic_workload(rng.randint(3, 9), prompt_tokens=(500, 7_000), output_tokens=(1, 64),
                                  seed=rng.randrange(10**6))
    too_long = synthetic_workload(1, prompt_tokens=rng.randint(9_000, 12_000), output_tokens=8)[0]
    requests.insert(rng.randrange(len(requests)), dataclasses.replace(too_long, request_id="too-long"))
    cfg = _config(rng.choice(["uncapped", "vllm", "exact"]), window=rng.choice([512, 1024, 2048]),
                  max_model_len=max_model_len, kv_memory_gib=rng.choice([3.0, 4.0, 8.0]))
    direct = simulate(cfg, requests, max_steps=MAX_STEPS)
    timed = simulate(cfg, steps_to_seconds(requests, SECONDS_PER_STEP), max_steps=MAX_STEPS, gpu="h100-sxm")
    assert arrives_at_once(requests)
    assert [r.request_id for r in direct.rejections] == ["too-long"]
    assert without_clock(timed) == direct


def test_workloads_that_arrive_over_time_are_simulated_in_steps():
    cfg = _config("vllm")
    for name in ("chat burst", "multi-turn"):
        requests = workload(name, cfg.max_model_len)
        assert not arrives_at_once(requests)
        assert step_run(cfg, name, MAX_STEPS, "h100-sxm") == simulate(cfg, requests, max_steps=MAX_STEPS)
    # why the route is closed to them: in seconds, a chat burst is scheduled differently
    burst = workload("chat burst", cfg.max_model_len)
    timed = simulate(cfg, steps_to_seconds(burst, SECONDS_PER_STEP), max_steps=MAX_STEPS, gpu="h100-sxm")
    assert without_clock(timed) != simulate(cfg, burst, max_steps=MAX_STEPS)
