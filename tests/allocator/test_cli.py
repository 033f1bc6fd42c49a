"""``kvlab capacity``, ``budget`` and ``simulate`` through the real entry points."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvlab.cli.main import main

GEMMA = ["--model", "gemma-4-31b", "-tp", "2", "--kv-cache-memory", "16GiB", "--max-model-len", "131072"]


def run_json(capsys, argv):
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_capacity_json_gives_the_hand_computed_plan(capsys):
    """Gemma 4 31B, TP 2, 16 GiB, L = 131,072, vllm-0.21 (T = max_num_batched_tokens = 8,192).

    Per GPU: 50 sliding layers with 16 / 2 = 8 KV heads of 256 -> page 16 x 8 x 512 x 2 B = 131,072 B;
    10 full layers with 4 / 2 = 2 KV heads of 512 -> 16 x 2 x 1024 x 2 B = 65,536 B, unified to block
    size 32 (page 131,072 B). group_size = min(50, 10) = 10 -> 5 sliding groups + 1 full = 6 groups;
    bytes per block 10 x 131,072 = 1,310,720; num_blocks = floor(16 GiB / 1,310,720) = 13,107.
    Blocks per request: sliding cdiv(min(1023 + 8192, L), 16) + 1 = 577 each, full cdiv(L, 32) = 4,096;
    total 5 x 577 + 4,096 = 6,981. Concurrency 13,107 / 6,981 = 1.8775; tokens int(1.87752 x L) = 246,090.
    """
    out = run_json(capsys, ["capacity", *GEMMA, "--profile", "vllm-0.21"])
    assert out["bytes_per_block"] == 1_310_720
    assert out["num_blocks"] == 13_107
    assert out["num_groups"] == len(out["groups"]) == 6
    assert [g["blocks_per_request"] for g in out["groups"]] == [577] * 5 + [4096]
    assert [g["block_size"] for g in out["groups"]] == [16] * 5 + [32]
    assert out["blocks_per_request"] == 6_981
    assert out["max_concurrency"] == pytest.approx(1.8775, abs=1e-4)
    assert out["kv_cache_tokens"] == 246_090
    assert [g["kind"] for g in out["groups"]] == ["sliding_window"] * 5 + ["full"]


def test_capacity_log_formula_follows_the_profile(capsys):
    old = run_json(capsys, ["capacity", *GEMMA, "--profile", "vllm-0.20"])
    new = run_json(capsys, ["capacity", *GEMMA, "--profile", "vllm-0.21"])
    assert old["num_blocks"] == new["num_blocks"]
    assert old["kv_cache_tokens"] == (old["num_blocks"] // 6) * 16
    assert new["kv_cache_tokens"] == int(new["num_blocks"] / new["blocks_per_request"] * 131072)


def test_budget_json_gives_the_hand_computed_need_of_every_policy(capsys):
    """The same engine, a 65,536-token prompt; groups = 5 sliding (W = 1024, B = 16) + 1 full (B = 32).

    uncapped: 65,536 / 16 = 4,096 per sliding group, 65,536 / 32 = 2,048 full -> 22,528.
    window_plus_chunk: cdiv(1024 + 8192, 16) = 576 per sliding group -> 5 x 576 + 2,048 = 4,928.
    vllm: min(4,096, 577) = 577 -> 4,933.
    exact: chunks of 8,192 start at c = 8,192k; before chunk k >= 1, c - 1023 = 16(512k - 64) + 1 tokens are
    skipped, i.e. 512k - 64 whole blocks, and the group holds (c + 8192) / 16 - (512k - 64) = 576 -> 4,928.
    trtllm: one pool per window with unpadded pages (B = 16): full 4,096, window cdiv(1024, 16) = 64.
    """
    out = run_json(capsys, ["budget", *GEMMA, "--prompt-tokens", "65536", "--profile", "vllm-0.21"])
    got = {name: (entry["per_group"], entry["total"]) for name, entry in out["policies"].items()}
    assert got == {
        "uncapped": ([4096] * 5 + [2048], 22_528),
        "window_plus_chunk": ([576] * 5 + [2048], 4_928),
        "vllm": ([577] * 5 + [2048], 4_933),
        "trtllm": ([4096, 64], 4_160),
        "exact": ([576] * 5 + [2048], 4_928),
    }


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
    # Llama 3.1 8B: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B per token, so 4 GiB holds
    # 32,768 tokens = 2,048 blocks of 16 (2,047 usable). Six requests of at most 1,500 + 16 tokens need at
    # most 6 x cdiv(1516, 16) = 570 blocks: nothing is ever preempted and all six finish.
    assert out["finished"] == 6 and out["stalled"] is None
    assert out["preemptions"] == 0
    assert out["steps"] >= 16  # 16 outputs need at least 16 steps (one token per step)


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
