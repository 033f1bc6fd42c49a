"""Model loading (presets and any config.json), tensor parallelism, memory parsing, profiles."""

from __future__ import annotations

import json

import pytest

from kvlab.models import get_model, model_from_hf_config
from kvlab.serving import EngineConfig, capacity
from kvlab.sizing import parse_memory


def test_gemma4_layers_and_tp_split():
    model = get_model("gemma-4-31b")
    assert model.count("full") == 10 and model.count("sliding_window") == 50
    specs = model.layer_specs(16, "auto", tensor_parallel_size=2)
    sliding, full = specs["layers.0"], specs["layers.5"]
    assert (sliding.num_kv_heads, sliding.head_size, sliding.sliding_window) == (8, 256, 1024)
    assert (full.num_kv_heads, full.head_size, full.head_size_v) == (2, 512, 512)  # K and V both cached
    assert model.layer_specs(16, tensor_parallel_size=8)["layers.5"].num_kv_heads == 1  # replicated


def test_gemma4_grouping_unifies_pages_by_doubling_the_full_block():
    plan = capacity(
        EngineConfig(
            "gemma-4-31b", "16GiB", tensor_parallel_size=2, max_model_len=131072, profile="vllm-0.21"
        )
    )
    assert [g.block_size for g in plan.config.groups] == [16] * 5 + [32]
    assert {g.page_size_bytes for g in plan.config.groups} == {16 * 8 * 512 * 2}
    assert plan.bytes_per_block == 10 * 16 * 8 * 512 * 2


def test_loader_reads_nested_text_config_patterns_and_head_dim_fallback(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "text_config": {
                    "num_hidden_layers": 6,
                    "hidden_size": 512,
                    "num_attention_heads": 8,
                    "num_key_value_heads": 2,
                    "sliding_window": 64,
                    "sliding_window_pattern": 3,
                },
                "max_position_embeddings": 2048,
            }
        )
    )
    model = model_from_hf_config(path)
    assert [layer.kind for layer in model.layers] == ["sliding_window", "sliding_window", "full"] * 2
    assert {layer.head_size for layer in model.layers} == {64} and model.max_position_embeddings == 2048


def test_loader_errors_name_the_missing_field(tmp_path):
    with pytest.raises(ValueError, match="missing 'num_hidden_layers'"):
        model_from_hf_config({"hidden_size": 8})
    with pytest.raises(ValueError, match="missing 'hidden_size'"):
        model_from_hf_config({"num_hidden_layers": 2, "num_attention_heads": 2, "max_position_embeddings": 8})
    with pytest.raises(ValueError, match="missing 'sliding_window'"):
        model_from_hf_config(
            {
                "num_hidden_layers": 2,
                "head_dim": 8,
                "num_key_value_heads": 1,
                "layer_types": ["sliding_attention", "full_attention"],
                "max_position_embeddings": 8,
            }
        )
    bad = tmp_path / "c.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="must hold a JSON object"):
        model_from_hf_config(bad)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16GiB", 16 * 2**30),
        ("11.54GiB", int(11.54 * 2**30)),
        ("12e9", 12 * 10**9),
        ("16GB", 16 * 10**9),
        ("512 MiB", 512 * 2**20),
        (1024, 1024),
    ],
)
def test_parse_memory(text, expected):
    assert parse_memory(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "-1GiB", "0", "16 parsecs", "nan"])
def test_parse_memory_rejects_nonsense(text):
    with pytest.raises(ValueError, match="kv_cache_memory"):
        parse_memory(text)


def test_engine_config_rejects_bad_values():
    with pytest.raises(ValueError, match="profile must be one of"):
        EngineConfig("llama-3.1-8b", profile="vllm-9")
    with pytest.raises(ValueError, match="policy must be one of"):
        EngineConfig("llama-3.1-8b", policy="greedy")
    with pytest.raises(ValueError, match="unknown kv_cache_dtype"):
        EngineConfig("llama-3.1-8b", kv_cache_dtype="int4")


def test_auto_fit_finds_the_longest_fitting_length():
    config = EngineConfig("llama-3.1-8b", kv_cache_memory="1GiB", max_model_len=-1, profile="vllm-0.21")
    plan = capacity(config)
    per_token = 32 * 8 * 128 * 2 * 2
    assert plan.max_model_len == (2**30 // (per_token * 16)) * 16
    with pytest.raises(ValueError, match="estimated maximum model length"):
        capacity(config.replace(max_model_len=plan.max_model_len + 1))


def test_new_profile_holds_back_the_null_block_in_the_fit_check():
    per_block = 32 * 16 * 8 * 128 * 2 * 2
    memory = per_block * 64  # exactly 64 blocks: a 1024-token request fits only without the reservation
    classic = capacity(
        EngineConfig("llama-3.1-8b", kv_cache_memory=memory, max_model_len=1024, profile="vllm-0.21")
    )
    assert classic.num_blocks == 64
    with pytest.raises(ValueError, match="estimated maximum model length is 1008"):
        capacity(
            EngineConfig("llama-3.1-8b", kv_cache_memory=memory, max_model_len=1024, profile="vllm-0.33")
        )
