"""``kvlab capacity --gpu … --gpu-memory-utilization …``: KV memory estimated from the GPU."""

from __future__ import annotations

import json

from kvlab.cli.main import main


def run_json(capsys, argv):
    assert main(["capacity", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_llama_8b_on_an_h100_by_hand(capsys):
    # 0.9 x 80e9 B = 72e9; weights 8.03e9 x 2 B = 16.06e9; activations 8192 x 4096 x 36 B + 1 GiB
    # = 2,281,701,376 B; KV = 72e9 - 16.06e9 - 2,281,701,376 = 53,658,298,624 B
    out = run_json(capsys, ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpu-memory-utilization", "0.9",
                            "--max-model-len", "8192"])
    assert out["kv_cache_memory_bytes"] == 53_658_298_624
    assert out["kv_cache_memory_source"] == "estimate" and "(estimate)" in out["kv_cache_memory_estimate"]
    assert out["num_blocks"] == 53_658_298_624 // (32 * 65536)


def test_given_memory_stays_exact(capsys):
    out = run_json(capsys, ["--model", "llama-3.1-8b", "--kv-cache-memory", "11.54GiB",
                            "--max-model-len", "8192"])
    assert out["kv_cache_memory_source"] == "given" and out["kv_cache_memory_estimate"] is None
    assert out["kv_cache_memory_bytes"] == int(11.54 * 2**30)


def test_gpu_flags_come_together(capsys):
    assert main(["capacity", "--model", "llama-3.1-8b", "--gpu-memory-utilization", "0.9"]) == 2
    assert "needs --gpu" in capsys.readouterr().err
    assert main(["capacity", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"]) == 2
    assert "needs --gpu-memory-utilization" in capsys.readouterr().err


def test_tensor_parallelism_splits_the_weights(capsys):
    one = run_json(capsys, ["--model", "llama-3.1-70b", "--gpu", "h100-sxm",
                            "--gpu-memory-utilization", "0.9", "-tp", "4", "--max-model-len", "8192"])
    # weights 70.6e9 x 2 / 4 = 35.3e9; activations 8192 x 8192 x 36 / 4 + 1 GiB = 1,677,721,600 B
    assert one["kv_cache_memory_bytes"] == int(72e9) - int(70.6e9 * 2 / 4) - 1_677_721_600


def test_mla_activation_estimate_uses_the_residual_width(capsys):
    # DeepSeek-V3 at TP 8 on H200s (141e9 B): 0.9 x 141e9 = 126.9e9; weights 671e9 x 1 B (fp8) / 8
    # = 83.875e9; activations 8192 x 7,168 (hidden_size, not 128 heads x 576) x 36 / 8 + 1 GiB
    # = 264,241,152 + 1,073,741,824 B
    out = run_json(capsys, ["--model", "deepseek-v3", "-tp", "8", "--block-size", "64", "--gpu", "h200",
                            "--gpu-memory-utilization", "0.9", "--weight-dtype", "fp8",
                            "--max-model-len", "32768"])
    assert out["kv_cache_memory_bytes"] == int(126.9e9) - int(671e9 / 8) - 264_241_152 - 1_073_741_824
