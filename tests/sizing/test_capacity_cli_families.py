"""``kvlab capacity`` flags for the new families: speculative JSON, state prefix caching, DCP, fp8_ds_mla."""

from __future__ import annotations

import json

from kvlab.cli.main import main


def run_json(capsys, argv):
    assert main(["capacity", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_speculative_config_flag_adds_the_mtp_layer(capsys):
    base = ["--model", "deepseek-v3", "-tp", "8", "--block-size", "64", "--kv-cache-memory", "20GiB",
            "--max-model-len", "32768"]
    plain = run_json(capsys, base)
    mtp = run_json(capsys, [*base, "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 1}'])
    assert plain["bytes_per_block"] == 61 * 64 * 1152 and mtp["bytes_per_block"] == 62 * 64 * 1152
    assert mtp["request_bytes"]["draft"] == 512 * 64 * 1152  # 32,768 / 64 blocks of the MTP layer


def test_fp8_ds_mla_and_dcp_flags(capsys):
    out = run_json(capsys, ["--model", "deepseek-v3", "-tp", "8", "-dcp", "8", "--block-size", "64",
                            "--kv-cache-dtype", "fp8_ds_mla", "--kv-cache-memory", "20GiB",
                            "--max-model-len", "131072"])
    assert out["bytes_per_block"] == 61 * 64 * 656
    assert out["blocks_per_request"] == 131072 // 8 // 64


def test_mamba_cache_mode_flag_and_hybrid_log_lines(capsys):
    base = ["--model", "qwen3-next-80b-a3b", "-tp", "4", "--kv-cache-memory", "20GiB",
            "--max-model-len", "65536"]
    none = run_json(capsys, base)
    align = run_json(capsys, [*base, "--mamba-cache-mode", "align"])
    # 3 state groups: one page per request without state prefix caching, two with it
    assert align["blocks_per_request"] - none["blocks_per_request"] == 3
    assert none["log_lines"][0] == (
        "Setting attention block size to 272 tokens to ensure that attention page size is >= mamba page size."
    )


def test_bad_speculative_json_is_one_line(capsys):
    assert main(["capacity", "--model", "llama-3.1-8b", "--speculative-config", "{mtp}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "must be JSON" in err
