"""``kvlab gpus`` and ``kvlab simulate``'s time flags through the real entry point."""

from __future__ import annotations

import json
import re

import pytest

from kvlab.cli.main import main
from kvlab.models import get_model
from kvlab.serving import EngineConfig, simulate
from kvlab.simulator import synthetic_workload
from kvlab.timing import estimate_kv_cache_memory

BASE = [
    "simulate",
    "--model",
    "llama-3.1-8b",
    "--max-model-len",
    "8192",
    "--num-requests",
    "12",
    "--prompt-tokens",
    "700",
    "--output-tokens",
    "40",
]
KEYS = {
    "wall_time_s",
    "output_tokens_per_s",
    "prompt_tokens_per_s",
    "mean_ttft_ms",
    "mean_tpot_ms",
    "p99_tpot_ms",
    "prefix_cache_hit_rate",
}


def run_json(capsys, argv):
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_gpus_lists_every_profile_and_the_efficiencies(capsys):
    out = run_json(capsys, ["gpus"])
    names = {g["name"] for g in out["gpus"]}
    assert {"h100-sxm", "h200", "b200", "a100-80gb", "l40s", "l4", "rtx-4090", "rtx-3090", "mi300x"} <= names
    assert any(
        e["scheme"] == "int8_per_token_head" and e["part"] == "attention decode" for e in out["efficiencies"]
    )
    assert main(["gpus"]) == 0
    assert "h100-sxm" in capsys.readouterr().out


def test_simulate_with_a_gpu_reports_the_documented_keys_as_the_api_computes_them(capsys):
    out = run_json(capsys, [*BASE, "--gpu", "H100", "--kv-cache-memory", "20GiB"])
    assert set(out) >= KEYS
    api = simulate(
        EngineConfig("llama-3.1-8b", "20GiB", max_model_len=8192),
        synthetic_workload(12, 700, 40),
        gpu="h100-sxm",
    ).metrics
    assert out["wall_time_s"] == pytest.approx(api.wall_time_s, rel=1e-3)
    assert out["mean_tpot_ms"] == pytest.approx(api.tpot.mean * 1e3, rel=1e-3)
    assert out["output_tokens_per_s"] == pytest.approx(12 * 40 / api.wall_time_s, rel=1e-3)


def test_gpu_memory_utilization_derives_the_kv_memory(capsys):
    out = run_json(capsys, [*BASE, "--gpu", "h100", "--gpu-memory-utilization", "0.9"])
    est = estimate_kv_cache_memory("h100", get_model("llama-3.1-8b"), "bf16", 0.9, 1, 8192)
    assert out["kv_cache_memory_estimate_bytes"] == est.kv_cache_bytes
    assert main([*BASE, "--gpu", "h100", "--gpu-memory-utilization", "0.9"]) == 0
    assert "(estimate)" in capsys.readouterr().out


def test_sessions_and_closed_loop_from_the_command_line(capsys):
    out = run_json(
        capsys,
        [
            "simulate",
            "--model",
            "llama-3.1-8b",
            "--max-model-len",
            "32768",
            "--gpu",
            "h100",
            "--kv-cache-memory",
            "20GiB",
            "--sessions",
            "2",
            "--turns",
            "3",
            "--session-context",
            "4k",
            "--output-tokens",
            "32",
            "--max-concurrency",
            "1",
        ],
    )
    assert out["requests"] == 6 and out["finished"] == 6
    assert out["prefix_cache_hit_rate"] > 0.5  # turns 1 and 2 reuse the 4,000-token document
    assert out["peak_running"] == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--gpu", "h800"], "unknown GPU 'h800'; known GPUs: h100-sxm"),
        (
            ["--gpu", "h100", "--gpu-memory-utilization", "0"],
            r"gpu_memory_utilization must be a number in \(0, 1\]",
        ),
        (["--gpu", "h100", "--gpu-memory-utilization", "1.5"], r"in \(0, 1\]"),
        (
            ["--gpu", "h100", "--request-rate", "0"],
            "request_rate must be a number of requests per second > 0",
        ),
        (["--request-rate", "2"], "--request-rate needs --gpu"),
        (["--gpu-memory-utilization", "0.9"], "--gpu-memory-utilization needs --gpu"),
        (["--gpu", "h100", "--max-concurrency", "0"], "max_concurrency must be >= 1"),
        (["--gpu", "h100", "--sessions", "0"], r"num_sessions \(--sessions\) must be >= 1"),
        (["--gpu", "h100", "--sessions", "2", "--trace", "x.json"], "either --sessions or --trace"),
    ],
)
def test_bad_time_flags_get_one_clear_message(capsys, extra, message):
    assert main([*BASE, *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert re.search(message, err), err


def test_weights_larger_than_the_gpu_say_by_how_much(capsys):
    argv = ["simulate", "--model", "llama-3.1-70b", "--gpu", "rtx-4090", "--gpu-memory-utilization", "0.9"]
    assert main(argv) == 2
    assert "exceed gpu_memory_utilization × GPU memory" in capsys.readouterr().err


def test_a_scheme_without_measured_kernels_warns_in_the_output(capsys):
    # the low-bit benchmark times kivi4's decode, but gives no FLOP rate for its prefill and no write
    argv = [*BASE, "--gpu", "h100", "--kv-cache-dtype", "kivi4", "--block-size", "32"]
    out = run_json(capsys, argv)
    assert out["warnings"] == [
        f"no measured kvlab {kind} efficiency for kv-cache dtype 'kivi4': using the pure roofline "
        "(efficiency 1.0, no launch latency) for it"
        for kind in ("prefill", "write")
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "warning: no measured kvlab write efficiency for kv-cache dtype 'kivi4'" in printed
