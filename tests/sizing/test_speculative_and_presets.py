"""Speculative decoding in sizing and admission; the family presets through the CLI."""

from __future__ import annotations

import json

import pytest

from kvlab.cli.main import main
from kvlab.models import get_model
from kvlab.models.speculative import SpeculativeConfig
from kvlab.serving import EngineConfig, admission_need, capacity, simulate
from kvlab.serving.breakdown import request_bytes
from kvlab.simulator import synthetic_workload


def test_eagle_adds_one_target_shaped_layer_to_the_group():
    base = EngineConfig("llama-3.1-8b", "16GiB", max_model_len=8192)
    spec = base.replace(speculative_config={"method": "eagle", "num_speculative_tokens": 3})
    # 33 layers of 16 x 8 x 256 x 2 B = 65,536 B pages instead of 32
    assert capacity(spec).bytes_per_block == 33 * 65536 and capacity(base).bytes_per_block == 32 * 65536
    assert capacity(spec).num_blocks == 16 * 2**30 // (33 * 65536)
    split = request_bytes(spec)
    assert (split.attention, split.draft) == (512 * 32 * 65536, 512 * 65536)


def test_mtp_uses_the_models_own_modules_and_refuses_models_without():
    cfg = EngineConfig("deepseek-v3", "20GiB", tensor_parallel_size=8, block_size=64, max_model_len=32768,
                       speculative_config='{"method": "mtp", "num_speculative_tokens": 1}')
    specs = cfg.layer_specs()
    assert "draft.mtp.0" in specs and specs["draft.mtp.0"] == specs["layers.60"]
    assert capacity(cfg).bytes_per_block == 62 * 64 * 576 * 2
    with pytest.raises(ValueError, match="ships no MTP modules"):
        EngineConfig("kimi-k2",
                     speculative_config={"method": "mtp", "num_speculative_tokens": 1}).layer_specs()


def test_draft_model_adds_all_its_layers():
    cfg = EngineConfig("llama-3.1-70b", "40GiB", tensor_parallel_size=4, max_model_len=8192,
                       speculative_config={"method": "draft_model", "model": "llama-3.1-8b",
                                           "num_speculative_tokens": 4})
    specs = cfg.layer_specs()
    assert sum(name.startswith("draft.") for name in specs) == 32
    # target and draft share the shape (8 KV heads / 4 x 128) so they form one group of 112 layers
    assert capacity(cfg).bytes_per_block == 112 * 16 * 2 * 256 * 2


def test_lookahead_slots_raise_the_first_step_need():
    cfg = EngineConfig("llama-3.1-8b", "16GiB", max_model_len=8192,
                       speculative_config={"method": "ngram", "num_speculative_tokens": 4})
    need = admission_need(cfg, 1600)  # 100 full blocks; +4 slots spill into a 101st
    assert need.total == 100 and need.total_with_lookahead == 101 and need.lookahead_tokens == 4
    assert admission_need(cfg.replace(speculative_config=None), 1600).total_with_lookahead == 100


def test_simulator_allocates_lookahead_slots():
    # 17 blocks of 16 tokens; one 250-token request + 3 lookahead slots per step
    wl = synthetic_workload(1, prompt_tokens=(250, 250), output_tokens=5, seed=3)
    plain = EngineConfig("llama-3.1-8b", num_gpu_blocks_override=40, max_model_len=512)
    spec = plain.replace(speculative_config={"method": "ngram", "num_speculative_tokens": 3})
    peak = [max(s.pool_size - s.free_blocks for s in simulate(c, wl).timeline) for c in (plain, spec)]
    # 250 tokens + 3 slots = 253 -> 16 blocks either way at first; by 254 + 3 = 257 tokens a 17th block
    assert peak == [16, 17]


def test_speculative_config_errors_are_clear():
    with pytest.raises(ValueError, match="unknown keys \\['k'\\]"):
        SpeculativeConfig.parse({"method": "mtp", "k": 2})
    with pytest.raises(ValueError, match="must be JSON"):
        SpeculativeConfig.parse("{method: mtp}")
    with pytest.raises(ValueError, match="speculative method must be one of"):
        SpeculativeConfig.parse({"method": "medusa2", "num_speculative_tokens": 2})


def test_state_pages_grow_with_speculative_tokens():
    base = EngineConfig("qwen3-next-80b-a3b", "20GiB", tensor_parallel_size=4, max_model_len=65536)
    mtp = base.replace(speculative_config={"method": "mtp", "num_speculative_tokens": 2})
    mamba = [g for g in capacity(mtp).config.groups if g.kind == "mamba"]
    assert {g.spec.num_speculative_blocks for g in mamba} == {2}
    # each of the 3 state groups holds 1 + 2 pages per request
    assert capacity(mtp).blocks_per_request.count(3) == 3
    assert admission_need(mtp, 1000).per_group[-1].blocks == 3


@pytest.mark.parametrize(
    "name",
    ["deepseek-v3", "kimi-k2", "qwen3-next-80b-a3b", "qwen3.5-35b-a3b", "nemotron-nano-9b-v2",
     "granite-4.0-h-small", "gemma-3n-e4b", "gemma-4-e4b", "gemma-4-26b-a4b", "gpt-oss-120b"],
)
def test_every_family_preset_runs_through_capacity(name, capsys):
    tp = "8" if name in ("deepseek-v3", "kimi-k2") else "1"
    assert main(["capacity", "--model", name, "-tp", tp, "--kv-cache-memory", "30GiB",
                 "--max-model-len", "32768", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_blocks"] > 0 and out["max_concurrency"] > 1
    assert out["request_bytes"]["attention"] > 0
    assert (out["request_bytes"]["state"] > 0) == bool(get_model(name).state_layers)


def test_kv_sharing_preset_holds_only_the_unshared_layers():
    # Gemma 4 E4B: 42 layers, 18 shared -> 24 cached (20 sliding 2 x 256, 4 full 2 x 512)
    specs = EngineConfig("gemma-4-e4b").layer_specs()
    assert len(specs) == 24
    assert sorted({(s.num_kv_heads, s.head_size) for s in specs.values()}) == [(2, 256), (2, 512)]


def test_fp8_ds_mla_only_for_mla_models():
    assert EngineConfig("deepseek-v3", kv_cache_dtype="fp8_ds_mla", block_size=64).layer_specs()[
        "layers.0"
    ].page_size_bytes == 64 * 656
    with pytest.raises(ValueError):
        EngineConfig("llama-3.1-8b", kv_cache_dtype="fp8_ds_mla")


def test_mtp_on_sliding_layers_retains_the_proposed_tokens_in_the_new_manager():
    # Gemma 4 31B ships no MTP module in its config: give the draft's layer count explicitly.
    # W = 1024, T = 2 x 8,192 (async, vllm-0.33), k = 2: cdiv(1,023 + 2 + 16,384, 16) + 1 = 1,090 blocks
    # per sliding group instead of cdiv(1,023 + 16,384, 16) + 1 = 1,089
    base = EngineConfig("gemma-4-31b", "40GiB", tensor_parallel_size=2, max_model_len=65536)
    mtp = base.replace(speculative_config={"method": "mtp", "num_speculative_tokens": 2,
                                           "num_draft_layers": 1})
    sliding = [r for g, r in zip(capacity(mtp).config.groups, capacity(mtp).blocks_per_request, strict=True)
               if g.kind == "sliding_window"]
    plain = [r for g, r in zip(capacity(base).config.groups, capacity(base).blocks_per_request, strict=True)
             if g.kind == "sliding_window"]
    assert set(sliding) == {1090} and set(plain) == {1089}
    old = mtp.replace(profile="vllm-0.21")  # the classic manager keeps only the window
    assert mtp.extra_retained_tokens == 2 and old.extra_retained_tokens == 0
