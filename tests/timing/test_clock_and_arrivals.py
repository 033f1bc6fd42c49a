"""The simulator's clock, arrivals and latency metrics, on runs small enough to follow by hand.

Most runs use a constant step time (10 ms a step whatever it runs), so every timestamp is a
multiple of 10 ms that can be counted from the schedule.
"""

from __future__ import annotations

import json
import random
import statistics

import pytest

from kvlab.serving import EngineConfig, simulate
from kvlab.simulator import (
    RequestSpec,
    load_trace,
    make_request,
    run_simulation,
    session_workload,
    synthetic_workload,
    with_poisson_arrivals,
)

LLAMA = EngineConfig("llama-3.1-8b", kv_cache_memory="8GiB", max_model_len=32768)
STEP = 0.01


def run(workload, config=LLAMA, **kw):
    return run_simulation(
        config.build_kv_cache_manager(),
        config.scheduler_config(),
        workload,
        step_time=lambda chunks: STEP,
        **kw,
    )


def test_one_request_latencies_count_steps():
    # step 0 prefills 100 tokens and emits token 1 at 10 ms; steps 1-4 emit tokens 2-5; done at 50 ms
    m = run([make_request("a", 100, 5)]).metrics
    (r,) = m.requests
    assert (r.ttft_s, r.tpot_s, r.e2e_s, r.queueing_s) == pytest.approx((0.01, 0.01, 0.05, 0.0))
    assert m.wall_time_s == pytest.approx(0.05)
    assert m.output_tokens_per_s == pytest.approx(5 / 0.05)
    assert m.prompt_tokens_per_s == pytest.approx(100 / 0.05)
    assert m.itl.mean == pytest.approx(0.01) and m.itl.p99 == pytest.approx(0.01)


def test_the_time_model_sees_each_chunk_with_its_context():
    seen = []

    def timer(chunks):
        seen.append(list(chunks))
        return STEP

    cfg = LLAMA
    run_simulation(
        cfg.build_kv_cache_manager(), cfg.scheduler_config(), [make_request("a", 20000, 3)], step_time=timer
    )
    # chunked prefill under the 8192-token budget, then decodes at the growing context
    assert seen == [[(8192, 0)], [(8192, 8192)], [(3616, 16384)], [(1, 20000)], [(1, 20001)]]


def test_closed_loop_sends_the_next_request_when_one_finishes():
    # max_concurrency 1: each request runs 3 steps (prefill + 2 decodes) = 30 ms, back to back
    work = [make_request(f"r{i}", 10, 3) for i in range(4)]
    m = run(work, max_concurrency=1).metrics
    arrivals = sorted(r.arrival_s for r in m.requests)
    assert arrivals == pytest.approx([0.0, 0.03, 0.06, 0.09])
    assert all(r.ttft_s == pytest.approx(0.01) for r in m.requests)
    assert m.wall_time_s == pytest.approx(0.12)
    # without the cap all four share every step: 3 steps in all
    assert run(work).metrics.wall_time_s == pytest.approx(0.03)


def test_the_clock_skips_idle_gaps_between_arrivals():
    late = RequestSpec("late", 0, make_request("late", 50, 2).prompt, 2, arrival_time_s=10.0)
    m = run([make_request("early", 50, 2), late]).metrics
    by_id = {r.request_id: r for r in m.requests}
    assert by_id["late"].arrival_s == pytest.approx(10.0)
    assert by_id["late"].ttft_s == pytest.approx(0.01)
    assert m.wall_time_s == pytest.approx(10.02)


def test_queueing_time_counts_steps_spent_waiting_for_a_sequence_slot():
    cfg = LLAMA.replace(max_num_seqs=1)
    m = run([make_request("a", 10, 4), make_request("b", 10, 4)], config=cfg).metrics
    by_id = {r.request_id: r for r in m.requests}
    assert by_id["b"].queueing_s == pytest.approx(0.04)  # a runs steps 0-3
    assert by_id["b"].ttft_s == pytest.approx(0.05)


def test_sessions_arrive_after_their_previous_turn_and_hit_the_prefix_cache():
    # one session, block 16: turn 0 = 160 document + 16 question, 16 answer tokens.
    # Turn 0 computed 176 + 15 tokens: 11 full blocks (176 tokens) cached.
    # Turn 1 = 176 + 16 answer + 16 question = 208 tokens, hits 176; it computes 208 + 15: 13 blocks.
    # Turn 2 = 240 tokens, hits 208.  Hit rate = (176 + 208) / (176 + 208 + 240) = 384 / 624.
    work = session_workload(1, 3, 160, question_tokens=16, output_tokens=16, think_time_s=2.0)
    m = run(work).metrics
    assert m.prefix_cache_hit_rate == pytest.approx(384 / 624)
    assert [r.cached_tokens for r in m.requests] == [0, 176, 208]
    r0, r1, r2 = m.requests
    assert r1.arrival_s == pytest.approx(r0.finish_s + 2.0)
    assert r2.arrival_s == pytest.approx(r1.finish_s + 2.0)
    off = run(work, config=LLAMA.replace(enable_prefix_caching=False)).metrics
    assert off.prefix_cache_hit_rate == 0


def test_session_workload_sends_the_documented_prompt_tokens():
    work = session_workload(4, 5, 65_000, question_tokens=128, output_tokens=256)
    assert sum(r.prompt_tokens for r in work) == 1_317_920
    assert [r.after for r in work[:3]] == [None, "s0t0", "s0t1"]


def test_poisson_arrivals_have_the_requested_mean_gap(seed):
    rate = random.Random(seed).uniform(0.5, 20)
    work = with_poisson_arrivals(synthetic_workload(4000, 10, 2), rate, seed=seed)
    gaps = [b.arrival_time_s - a.arrival_time_s for a, b in zip(work[:-1], work[1:], strict=True)]
    # mean of 3999 exponential gaps: standard error (1/rate)/sqrt(3999); 5 standard errors
    assert statistics.fmean(gaps) == pytest.approx(1 / rate, rel=5 / 3999**0.5)
    assert work[0].arrival_time_s == 0 and all(g >= 0 for g in gaps)


@pytest.mark.parametrize("rate", [0, -1, float("inf"), float("nan")])
def test_non_positive_rates_are_refused(rate):
    with pytest.raises(ValueError, match="request_rate must be a number of requests per second > 0"):
        with_poisson_arrivals([make_request("a", 1, 1)], rate)


def test_bad_session_and_dependency_inputs_are_refused():
    with pytest.raises(ValueError, match=r"session_context \(--session-context, tokens\) must be >= 1"):
        session_workload(1, 1, 0)
    with pytest.raises(ValueError, match="turns \\(--turns\\) must be >= 1"):
        session_workload(1, 0, 10)
    orphan = RequestSpec("x", 0, make_request("x", 5, 1).prompt, 1, after="nobody")
    with pytest.raises(ValueError, match="comes after 'nobody', which is not another request"):
        run([orphan])
    with pytest.raises(ValueError, match="arrival_time_s of y must be a finite number of seconds >= 0"):
        RequestSpec("y", 0, ((1, 5),), 1, arrival_time_s=-1.0)
    with pytest.raises(ValueError, match="needs arrival_time_s"):
        run([make_request("z", 5, 1, arrival_step=3)])


def test_traces_carry_arrival_times(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(
        json.dumps(
            [
                {"prompt_tokens": 40, "output_tokens": 2, "arrival_time_s": 1.5},
                {"prompt_tokens": 40, "output_tokens": 2},
            ]
        )
    )
    work = load_trace(path)
    m = run(work).metrics
    assert sorted(r.arrival_s for r in m.requests) == pytest.approx([0.0, 1.5])


def test_runs_without_a_time_model_are_unchanged_and_have_no_metrics():
    work = synthetic_workload(6, (100, 900), 8, seed=3)
    untimed = simulate(LLAMA, work)
    timed = simulate(LLAMA, work, gpu="h100")
    assert untimed.metrics is None
    assert [r.scheduled for r in untimed.timeline] == [r.scheduled for r in timed.timeline]
    assert timed.metrics.finished == 6
    # every step's duration is the time model's prediction for what it ran
    assert sum(r.duration_s for r in timed.timeline) == pytest.approx(timed.metrics.wall_time_s)


def test_time_views_follow_the_clock():
    from kvlab.analysis import latency_samples_ms, running_over_time, tokens_per_second
    from kvlab.simulator import steps_to_seconds

    late = steps_to_seconds([make_request("a", 10, 3), make_request("b", 10, 3, arrival_step=100)], 0.01)
    res = run(late)
    times, running = running_over_time(res, until_s=5.0)
    # a runs steps 0-2 (0-30 ms); nothing until b arrives at 1.0 s; b runs 1.00-1.03 s
    assert times[:4] == pytest.approx([0.0, 0.01, 0.02, 0.03]) and running[:4] == [0, 1, 1, 0]
    assert 1.0 in times and times[-1] == 5.0 and running[-1] == 0
    ends, rates = tokens_per_second(res, 0.5)
    assert sum(r * 0.5 for r in rates) == 2 * (10 + 2)  # every scheduled token counted once
    assert latency_samples_ms(res)["ttft"] == pytest.approx([10.0, 10.0])
    with pytest.raises(ValueError, match="needs a timed run"):
        running_over_time(simulate(LLAMA, [make_request("c", 10, 2)]))
