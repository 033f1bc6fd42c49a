"""Simulator invariants: blocks are conserved every step; every request finishes, is rejected with a
reason, or the run is reported stalled; the uncapped gate stalls where the capped one does not."""

from __future__ import annotations

import json

import pytest

from kvlab.serving import EngineConfig, admission_need, simulate
from kvlab.simulator import load_trace, make_request, multi_turn_workload, synthetic_workload

GEMMA4 = dict(model="gemma-4-31b", kv_cache_memory="16GiB", tensor_parallel_size=2, max_model_len=131072)


def _check_conservation(config, result):
    pool = result.timeline[0].pool_size
    for rec in result.timeline:
        assert rec.pool_size == pool
        assert 0 <= rec.free_blocks <= pool
        # every usable block is either free (possibly still cached) or held by a table: §1.5 invariant 1
        assert sum(rec.blocks_in_use) == pool - rec.free_blocks
        assert rec.num_running <= config.max_num_seqs
        assert rec.num_scheduled_tokens <= config.max_num_batched_tokens


def _check_outcomes(workload, result):
    s = result.summary
    ids = {r.request_id for r in workload}
    assert set(result.finished_ids) | {r.request_id for r in result.rejections} <= ids
    assert all(r.reason for r in result.rejections)
    if s.stalled is None and not s.step_cap_reached:
        assert s.finished + s.rejected == len(workload)
    else:
        assert s.unfinished > 0


@pytest.mark.parametrize("profile", ["vllm-0.20", "vllm-0.21", "vllm-0.33"])
@pytest.mark.parametrize("policy", ["uncapped", "window_plus_chunk", "vllm", "exact"])
def test_synthetic_run_conserves_blocks_and_finishes(profile, policy):
    config = EngineConfig(**GEMMA4, profile=profile, policy=policy)
    workload = synthetic_workload(
        12, prompt_tokens=(500, 6000), output_tokens=(8, 64), arrival_rate=0.5, seed=3
    )
    result = simulate(config, workload)
    _check_conservation(config, result)
    _check_outcomes(workload, result)
    assert result.summary.stalled is None and result.summary.finished == 12
    # after the run every block is free again (the prefix cache keeps hashes, not references)
    assert result.timeline[-1].free_blocks == result.timeline[-1].pool_size


def test_uncapped_gate_stalls_where_the_cap_admits():
    """Gemma 4 31B, TP 2, 16 GiB: 13,107 blocks, 13,106 usable (block 0 is the null block); groups are
    5 sliding (B = 16) + 1 full (B = 32). The uncapped gate of vLLM 0.20 charges a 120,000-token prompt
    5 x 120,000 / 16 + 120,000 / 32 = 37,500 + 3,750 = 41,250 blocks: more than the whole pool, forever."""
    base = EngineConfig(**GEMMA4, profile="vllm-0.20")
    prompt = 120_000
    need = admission_need(base, prompt)
    assert need.total == 41_250 and need.pool_blocks == 13_106
    workload = [make_request("long", prompt, 4)]
    stalled = simulate(base, workload)
    report = stalled.summary.stalled
    assert report is not None and report.request_id == "long"
    assert report.need == 41_250 and report.pool_size == 13_106
    assert "41,250 blocks" in report.reason and "13,106 usable" in report.reason
    capped = simulate(base.replace(policy="vllm"), workload)
    assert capped.summary.stalled is None and capped.summary.finished == 1


def test_gate_need_vs_free_is_recorded_per_attempt():
    """Six 2,000-token prompts, 4 outputs each, at most 4 running. A fresh prompt is charged
    cdiv(2000, 16) = 125 blocks in each sliding group (below vLLM's cap of 577) and cdiv(2000, 32) = 63 in
    the full group: 688 blocks. Step 0 admits r0-r3, each taking its 688 blocks from 13,106, 12,418,
    11,042 ... free; they generate at steps 0-3 and free everything, so step 4 admits r4 and r5 from a
    pool that is whole again."""
    config = EngineConfig(**GEMMA4, profile="vllm-0.21", max_num_seqs=4)
    result = simulate(config, synthetic_workload(6, prompt_tokens=2000, output_tokens=4, seed=0))
    attempts = [(rec.step, a) for rec in result.timeline for a in rec.attempts]
    assert [(step, a.request_id, a.free) for step, a in attempts] == [
        (0, "r0", 13_106), (0, "r1", 12_418), (0, "r2", 11_730), (0, "r3", 11_042),
        (4, "r4", 13_106), (4, "r5", 12_418),
    ]
    assert all(a.per_group == (125,) * 5 + (63,) and a.need == 688 for _, a in attempts)
    assert all(a.gate_passed and a.admitted for _, a in attempts)


def test_prompts_longer_than_max_model_len_are_rejected_with_a_reason():
    config = EngineConfig("llama-3.1-8b", kv_cache_memory="8GiB", max_model_len=4096)
    workload = [make_request("ok", 1000, 8), make_request("too-long", 5000, 8)]
    result = simulate(config, workload)
    assert [r.request_id for r in result.rejections] == ["too-long"]
    assert "max_model_len" in result.rejections[0].reason
    assert result.finished_ids == ["ok"]


def test_preemption_recomputes_and_everything_finishes():
    config = EngineConfig(
        "llama-3.1-8b", kv_cache_memory="2GiB", max_model_len=8192, policy="vllm", max_num_batched_tokens=2048
    )
    workload = synthetic_workload(20, prompt_tokens=(1000, 3000), output_tokens=(200, 600), seed=5)
    result = simulate(config, workload)
    _check_conservation(config, result)
    assert result.summary.preemptions > 0
    assert result.summary.finished == 20
    for rec in result.timeline:
        if rec.preempted:
            assert not rec.admitted  # no admission in a step with a preemption


def test_request_that_cannot_fit_alone_stalls_instead_of_looping():
    config = EngineConfig(
        "llama-3.1-8b", kv_cache_memory="8GiB", max_model_len=8192, num_gpu_blocks_override=40
    )
    result = simulate(config, [make_request("big", 700, 400)], max_steps=10_000)
    report = result.summary.stalled
    assert report is not None and report.request_id == "big" and report.pool_size == 39
    assert result.summary.steps < 10_000


def test_a_starved_window_pool_is_named_in_the_stall_report():
    """TensorRT-LLM sizes each window's pool by ``bytes/token × window``: for Gemma 4 the 1024-token
    window pool cannot hold one 4096-token chunk, and the report must say which pool starves."""
    config = EngineConfig(**GEMMA4, policy="trtllm")
    workload = [make_request("r0", prompt_tokens=4096, output_tokens=8)]
    result = simulate(config, workload)
    report = result.summary.stalled
    assert report is not None and report.request_id == "r0"
    kv = config.kv_cache_config()
    window_pool = next(p for p in kv.pools if any(kv.groups[g].kind == "sliding_window" for g in p.group_ids))
    assert report.pool_size == window_pool.num_blocks - 1
    assert report.need > report.pool_size
    assert "window-1024 pool" in report.reason and "passes the admission gate" in report.reason


@pytest.mark.parametrize("prompt,outputs,expected_outputs", [(4096, 4, 1), (4095, 4, 1), (4000, 4, 4)])
def test_a_request_stops_when_it_reaches_max_model_len_not_before(prompt, outputs, expected_outputs):
    config = EngineConfig("qwen3-8b", kv_cache_memory="64GiB", max_model_len=4096,
                          max_num_batched_tokens=1024)
    result = simulate(config, [make_request("r0", prompt_tokens=prompt, output_tokens=outputs)])
    assert result.summary.finished == 1 and result.summary.stalled is None
    scheduled = sum(rec.scheduled.get("r0", 0) for rec in result.timeline)
    # the whole prompt is computed, then one step per generated token (the last one is not fed back)
    assert scheduled == prompt + expected_outputs - 1
    finish_steps = [rec.step for rec in result.timeline if "r0" in rec.finished]
    last_scheduled = max(rec.step for rec in result.timeline if rec.scheduled.get("r0"))
    assert finish_steps == [last_scheduled]


def test_step_cap_is_reported():
    config = EngineConfig("llama-3.1-8b", kv_cache_memory="8GiB", max_model_len=8192)
    result = simulate(config, [make_request("slow", 100, 500)], max_steps=20)
    assert result.summary.step_cap_reached and result.summary.steps == 20 and result.summary.unfinished == 1


def test_multi_turn_sessions_hit_the_prefix_cache():
    config = EngineConfig(**GEMMA4, profile="vllm-0.33")
    workload = multi_turn_workload(3, 3, system_prompt_tokens=2048, turn_gap_steps=400, seed=2)
    result = simulate(config, workload, record_blocks=False)
    assert result.summary.finished == 9
    with_cache = sum(rec.num_scheduled_tokens for rec in result.timeline)
    no_cache = simulate(config.replace(enable_prefix_caching=False), workload)
    assert with_cache < sum(rec.num_scheduled_tokens for rec in no_cache.timeline)


def test_block_map_snapshot_shows_owners_nulls_and_sharing():
    config = EngineConfig("gpt-oss-20b", kv_cache_memory="1GiB", max_model_len=4096, profile="vllm-0.33")
    workload = synthetic_workload(
        3, prompt_tokens=600, output_tokens=20, shared_prefix_tokens=512, seed=0, arrival_rate=0.2
    )
    result = simulate(config, workload, record_blocks=True)
    states = [s for rec in result.timeline for s in rec.block_states]
    assert any(s.is_null and s.block_id == 0 for s in states)
    assert any(s.is_shared and s.ref_cnt == len(s.owners) for s in states)
    for rec in result.timeline:
        used = [s for s in rec.block_states if not s.is_free and not s.is_null]
        assert len(used) == sum(rec.blocks_in_use)
        assert all(s.group is not None and s.owners for s in used)


def test_trace_loading_and_errors(tmp_path):
    good = tmp_path / "trace.json"
    good.write_text(
        json.dumps(
            {
                "requests": [
                    {
                        "id": "a",
                        "prompt_tokens": 100,
                        "output_tokens": 4,
                        "shared_prefix": "sys",
                        "shared_prefix_tokens": 64,
                    },
                    {
                        "id": "b",
                        "arrival_step": 3,
                        "prompt_tokens": 80,
                        "output_tokens": 2,
                        "shared_prefix": "sys",
                        "shared_prefix_tokens": 64,
                    },
                ]
            }
        )
    )
    reqs = load_trace(good)
    assert [r.request_id for r in reqs] == ["a", "b"] and reqs[0].prompt[0] == reqs[1].prompt[0]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"prompt_tokens": 10}]))
    with pytest.raises(ValueError, match="trace entry 0 is missing 'output_tokens'"):
        load_trace(bad)
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_trace(bad)
