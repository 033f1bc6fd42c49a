"""``kvlab capacity``, ``budget`` and ``simulate`` through the real entry points."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvlab.cli.main import main
from kvlab.serving import EngineConfig, admission_need, capacity

GEMMA = ["--model", "gemma-4-31b", "-tp", "2", "--kv-cache-memory", "16GiB", "--max-model-len", "131072"]


def run_json(capsys, argv):
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_capacity_json_matches_the_api(capsys):
    out = run_json(capsys, ["capacity", *GEMMA, "--profile", "vllm-0.21"])
    plan = capacity(
        EngineConfig(
            "gemma-4-31b", "16GiB", tensor_parallel_size=2, max_model_len=131072, profile="vllm-0.21"
        )
    )
    assert out["num_blocks"] == plan.num_blocks
    assert out["num_groups"] == len(out["groups"]) == 6
    assert out["kv_cache_tokens"] == plan.kv_cache_tokens_concurrency
    assert out["blocks_per_request"] == plan.blocks_per_max_request
    assert out["max_concurrency"] == pytest.approx(plan.max_concurrency, abs=1e-4)
    assert [g["kind"] for g in out["groups"]] == ["sliding_window"] * 5 + ["full"]


def test_capacity_log_formula_follows_the_profile(capsys):
    old = run_json(capsys, ["capacity", *GEMMA, "--profile", "vllm-0.20"])
    new = run_json(capsys, ["capacity", *GEMMA, "--profile", "vllm-0.21"])
    assert old["num_blocks"] == new["num_blocks"]
    assert old["kv_cache_tokens"] == (old["num_blocks"] // 6) * 16
    assert new["kv_cache_tokens"] == int(new["num_blocks"] / new["blocks_per_request"] * 131072)


def test_budget_json_lists_every_policy(capsys):
    out = run_json(capsys, ["budget", *GEMMA, "--prompt-tokens", "65536", "--profile", "vllm-0.21"])
    assert set(out["policies"]) == {"uncapped", "window_plus_chunk", "vllm", "trtllm", "exact"}
    config = EngineConfig(
        "gemma-4-31b", "16GiB", tensor_parallel_size=2, max_model_len=131072, profile="vllm-0.21"
    )
    for name, entry in out["policies"].items():
        need = admission_need(config, 65536, name)
        assert entry["per_group"] == [g.blocks for g in need.per_group]
        assert entry["total"] == sum(entry["per_group"]) == need.total
    assert out["policies"]["uncapped"]["total"] > out["policies"]["vllm"]["total"]


def test_simulate_json(capsys):
    out = run_json(
        capsys,
        [
            "simulate",
            "--model",
            "llama-3.1-8b",
            "--kv-cache-memory",
            "4GiB",
            "--max-model-len",
            "8192",
            "--num-requests",
            "6",
            "--prompt-tokens",
            "500:1500",
            "--output-tokens",
            "16",
        ],
    )
    assert out["finished"] == 6 and out["stalled"] is None
    assert out["steps"] > 0 and out["peak_running"] >= 1 and out["preemptions"] >= 0


def test_simulate_reports_a_stall(capsys):
    out = run_json(
        capsys,
        [
            "simulate",
            *GEMMA,
            "--profile",
            "vllm-0.20",
            "--num-requests",
            "1",
            "--prompt-tokens",
            "120000",
            "--output-tokens",
            "4",
        ],
    )
    assert out["stalled"]["request_id"] == "r0"
    assert out["stalled"]["need"] > out["stalled"]["pool_size"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["capacity", "--model", "gemma-4-31b", "--kv-cache-memory", "lots"], "kv_cache_memory must be"),
        (["capacity", "--model", "no-such-model"], "neither a preset"),
        (
            ["capacity", "--model", "llama-3.1-8b", "--kv-cache-memory", "1GiB", "--max-model-len", "128K"],
            "estimated maximum model length",
        ),
        (["budget", "--model", "llama-3.1-8b", "--prompt-tokens", "0"], "prompt_tokens must be"),
        (["capacity", "--model", "llama-3.1-8b", "--block-size", "0"], "block_size must be"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and err.startswith(f"kvlab {argv[0]}: error:")


def test_console_script_human_output():
    proc = subprocess.run(
        [sys.executable, "-m", "kvlab", "capacity", *GEMMA, "--profile", "vllm-0.21"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "GPU KV cache size:" in proc.stdout and "Maximum concurrency for 131,072 tokens" in proc.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "kvlab", "budget", "--model", "gemma-4-31b", "--prompt-tokens", "x"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "invalid int value" in bad.stderr
