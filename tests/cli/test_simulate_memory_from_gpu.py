"""``kvlab simulate --gpu … --gpu-memory-utilization …`` sizes the pool from the same estimate as
``kvlab capacity``: pipeline stages split the weights and ``--moe-kernel`` picks gpt-oss's padding.

Hand values (see tests/sizing/test_capacity_from_gpu.py for the parts): an H100 reports
85,018,877,624 B to CUDA; 0.9 of it is 76,516,989,861 B.
"""

from __future__ import annotations

import json

from kvlab.cli.main import main


def simulate_json(capsys, argv):
    assert main(["simulate", "--num-requests", "2", "--prompt-tokens", "64", "--output-tokens", "4",
                 "--gpu", "h100-sxm", "--gpu-memory-utilization", "0.9", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_pipeline_stages_split_the_weights(capsys):
    # llama-3.1-8b, 2 stages: weights 8.03e9 x 2 B / 2 = 8.03e9 B; activations 8192 x 4096 x 36 B
    # + 1 GiB = 2,281,701,376 B -> 76,516,989,861 - 8,030,000,000 - 2,281,701,376
    out = simulate_json(capsys, ["--model", "llama-3.1-8b", "-pp", "2", "--max-model-len", "8192"])
    assert out["kv_cache_memory_estimate_bytes"] == 66_205_288_485


def test_the_triton_moe_kernel_reaches_simulate(capsys):
    # gpt-oss-120b with Hopper-swizzled MXFP4 experts: weights 68,767,784,960 B, activations
    # 8192 x 2880 x 36 + 1 GiB = 1,923,088,384 B
    out = simulate_json(capsys, ["--model", "gpt-oss-120b", "--moe-kernel", "triton",
                                 "--max-model-len", "32768"])
    assert out["kv_cache_memory_estimate_bytes"] == 76_516_989_861 - 68_767_784_960 - 1_923_088_384


def test_an_unknown_moe_kernel_is_refused_with_the_choices(capsys):
    try:
        main(["simulate", "--model", "gpt-oss-120b", "--moe-kernel", "cutlass"])
    except SystemExit as stop:
        assert stop.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'cutlass'" in err and "'marlin'" in err and "'triton'" in err
