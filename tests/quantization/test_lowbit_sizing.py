"""Sizing, capacity and the CLI read the low-bit schemes' bytes from the registry, like vLLM's dtypes."""

from __future__ import annotations

import json

import pytest

from kvlab.cli.main import main
from kvlab.serving import EngineConfig, capacity
from kvlab.sizing.specs import AttentionSpec


def test_attention_spec_uses_the_packed_page():
    """kivi2, 8 KV heads, head 128, block 16: 16 tokens x 8 heads x 112 B = 14,336 B per page."""
    assert AttentionSpec(16, 8, 128, kv_cache_dtype="kivi2").page_size_bytes == 14336
    assert AttentionSpec(32, 8, 128, kv_cache_dtype="kivi2").page_size_bytes == 32 * 8 * 96


def test_capacity_with_kivi2_worked_by_hand():
    """Llama-3.1-8B: 32 layers x 14,336 B = 458,752 B per block; 16 GiB // that = 37,449 blocks
    (bf16: 32 x 65,536 = 2,097,152 B per block, 8,192 blocks)."""
    plan = capacity(EngineConfig("llama-3.1-8b", kv_cache_memory="16GiB", kv_cache_dtype="kivi2",
                                 max_model_len=8192))
    assert plan.bytes_per_block == 458752
    assert plan.num_blocks == 16 * 2**30 // 458752
    bf16 = capacity(EngineConfig("llama-3.1-8b", kv_cache_memory="16GiB", max_model_len=8192))
    assert bf16.bytes_per_block == 2097152


def test_sizing_refuses_a_group_that_does_not_divide():
    with pytest.raises(ValueError, match="G=64 does not divide the V head size 96"):
        AttentionSpec(16, 8, 96, kv_cache_dtype="kivi2_g64").page_size_bytes  # noqa: B018 (access raises)
    with pytest.raises(ValueError, match="power of two"):
        capacity(EngineConfig(  # noqa: B018 (the access raises)
            "llama-3.1-8b", kv_cache_memory="16GiB", kv_cache_dtype="kivi2",
            max_model_len=8192, block_size=24)).num_blocks


def test_cli_capacity_says_kvlab_scheme(capsys):
    args = ["capacity", "--model", "gemma-4-31b", "-tp", "2", "--kv-cache-memory", "16GiB",
            "--max-model-len", "131072", "--kv-cache-dtype", "kivi2"]
    assert main(args) == 0
    assert "kvlab scheme, not a vLLM --kv-cache-dtype" in capsys.readouterr().err
    assert main(args + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kv_cache_dtype_note"] == "kvlab scheme, not a vLLM --kv-cache-dtype"
    assert main(args[:-1] + ["auto", "--json"]) == 0
    bf16 = json.loads(capsys.readouterr().out)
    assert bf16["kv_cache_dtype_note"] == ""
    assert data["max_concurrency"] > 4 * bf16["max_concurrency"]
    for command in (["budget", "--prompt-tokens", "4096"], ["simulate", "--num-requests", "2"]):
        assert main([command[0], *args[1:], *command[1:]]) == 0
        assert "kivi2 is a kvlab scheme, not a vLLM --kv-cache-dtype" in capsys.readouterr().err
