"""Pipeline parallelism: layers split over stages as vLLM splits them, per-stage block cost and fit.

Every expected number below is worked by hand in the comment beside it.
"""

from __future__ import annotations

import json

import pytest

from kvlab.cli.main import main
from kvlab.models import ModelKV, model_from_hf_config
from kvlab.models.model import LayerKV
from kvlab.serving import EngineConfig, admission_need, capacity
from kvlab.sizing.pipeline import pipeline_partition, stage_layer_names

GIB = 2**30
LLAMA_PAGE = 16 * 8 * 128 * 2 * 2  # block 16 × 8 KV heads × 128 × (K, V) × 2 B = 65,536 B


@pytest.mark.parametrize(
    ("layers", "pp", "expected"),
    [
        (32, 3, (11, 11, 10)),  # 32 // 3 = 10, 2 left over → stages -2 and -3 get one each
        (61, 4, (15, 15, 16, 15)),  # 61 // 4 = 15, 1 left over → stage -2
        (7, 4, (2, 2, 2, 1)),  # 7 // 4 = 1, 3 left over → every stage but the last
        (48, 2, (24, 24)),
        (80, 1, (80,)),
    ],
)
def test_layers_split_as_get_pp_indices_splits_them(layers, pp, expected):
    assert pipeline_partition(layers, pp) == expected


def test_draft_layers_go_to_the_last_stage():
    names = ["layers.0", "layers.1.state", "layers.2", "layers.3", "draft.eagle.0"]
    assert stage_layer_names(names, (2, 2)) == (("layers.0", "layers.1.state"),
                                               ("layers.2", "layers.3", "draft.eagle.0"))


def test_llama_8b_pp3_hand_worked():
    # stages of 11, 11, 10 layers; a block id costs 11 × 65,536 = 720,896 B on the two 11-layer
    # stages; 16 GiB = 17,179,869,184 B holds 17,179,869,184 // 720,896 = 23,831 blocks (the
    # 10-layer stage alone would hold 17,179,869,184 // 655,360 = 26,214). L = 131,072 needs
    # 131,072 / 16 = 8,192 blocks: 23,831 / 8,192 = 2.909 → "2.91x"; int(2.909… × 131,072) = 381,296.
    plan = capacity(EngineConfig("llama-3.1-8b", "16GiB", max_model_len=131072,
                                 pipeline_parallel_size=3, profile="vllm-0.21"))
    assert [len(s.layer_names) for s in plan.stages] == [11, 11, 10]
    assert [s.bytes_per_block for s in plan.stages] == [720_896, 720_896, 655_360]
    assert [s.blocks_fit for s in plan.stages] == [23_831, 23_831, 26_214]
    assert plan.bytes_per_block == 11 * LLAMA_PAGE
    assert plan.num_blocks == 23_831
    assert plan.blocks_per_max_request == 8_192
    assert plan.log_lines == ("GPU KV cache size: 381,296 tokens",
                              "Maximum concurrency for 131,072 tokens per request: 2.91x")


def test_fit_check_is_per_stage():
    # Whole model at L = 131,072: 8,192 blocks × 32 × 65,536 B = 16 GiB: refused in 6 GiB. With PP 3 the
    # tightest stage needs 8,192 × 720,896 B = 5.5 GiB, which fits.
    with pytest.raises(ValueError, match="estimated maximum model length"):
        capacity(EngineConfig("llama-3.1-8b", "6GiB", max_model_len=131072, profile="vllm-0.21"))
    plan = capacity(EngineConfig("llama-3.1-8b", "6GiB", max_model_len=131072, pipeline_parallel_size=3,
                                 profile="vllm-0.21"))
    assert plan.num_blocks == 6 * GIB // 720_896  # 8,936


def test_hand_partition_reports_the_stage_need():
    # Qwen3-Coder-30B-A3B shape (48 layers, 4 KV heads × 128), VLLM_PP_LAYER_PARTITION=16,32: page
    # 16 × 4 × 128 × 2 × 2 = 32,768 B; the 32-layer stage pays 32 × 32,768 = 1 MiB per block, so
    # L = 262,144 needs 16,384 blocks = 16.0 GiB there (vLLM 0.15, before the per-stage check,
    # quoted the whole model's 24.0 GiB). 3.18 GiB holds int(3.18 × 2^30) // 2^20 = 3,256 blocks:
    # the longest request is 3,256 × 16 = 52,096 tokens.
    model = model_from_hf_config({"num_hidden_layers": 48, "num_attention_heads": 32,
                                  "num_key_value_heads": 4, "head_dim": 128,
                                  "max_position_embeddings": 262144}, name="qwen3-coder-shape")
    cfg = EngineConfig(model, int(3.18 * GIB), max_model_len=262144, pipeline_parallel_size=2,
                       pipeline_layer_partition="16,32", profile="vllm-0.21")
    with pytest.raises(ValueError, match=r"needs 16\.0+ GiB.*estimated maximum model length is 52096"):
        capacity(cfg)


def _alternating_model() -> ModelKV:
    """Layers 0 and 3 full, 1, 2, 4, 5 sliding (window 128); one KV head of 64 (page 4,096 B)."""
    kinds = ["full", "sliding_window", "sliding_window"] * 2
    layers = tuple(
        LayerKV(f"layers.{i}", k, 1, 64, sliding_window=128 if k == "sliding_window" else None)
        for i, k in enumerate(kinds)
    )
    return ModelKV("alternating-6", layers, max_position_embeddings=4096)


def test_hybrid_groups_interleave_so_each_stage_has_one_layer_per_group():
    # vLLM PR #23974's example: 2 full + 4 sliding layers → group size 2 (4 ≥ 1.5 × 2), groups
    # (0, 3), (1, 4), (2, 5) since sliding group i takes layers[i::2]. Stage 0 holds layers 0-2: one
    # layer of each group, so a block id costs it one page, 4,096 B (not 2 × 4,096 as on one GPU):
    # 4 MiB holds 1,024 blocks instead of 512.
    one = capacity(EngineConfig(_alternating_model(), 4 * 2**20, max_model_len=1024))
    two = capacity(EngineConfig(_alternating_model(), 4 * 2**20, max_model_len=1024,
                                pipeline_parallel_size=2))
    assert [g.layer_names for g in two.config.groups] == [("layers.0", "layers.3"),
                                                          ("layers.1", "layers.4"),
                                                          ("layers.2", "layers.5")]
    assert one.bytes_per_block == 8_192 and one.num_blocks == 512
    assert [s.bytes_per_block for s in two.stages] == [4_096, 4_096]
    assert two.num_blocks == 1_024
    assert two.blocks_per_request == one.blocks_per_request  # the block table does not change


def test_hybrid_state_model_stage_cost():
    # Qwen3-Next-80B-A3B: 48 layers, every 4th full attention → groups of 12 (1 full, 3 state). PP 2:
    # each stage holds 6 layers of every group, so a block id costs 6 pages there, not 12.
    plan = capacity(EngineConfig("qwen3-next-80b-a3b", "20GiB", tensor_parallel_size=2, max_model_len=32768,
                                 pipeline_parallel_size=2))
    page = plan.config.groups[0].page_size_bytes
    assert [len(g.layer_names) for g in plan.config.groups] == [12, 12, 12, 12]
    assert [s.bytes_per_block for s in plan.stages] == [6 * page, 6 * page]
    assert plan.num_blocks == 20 * GIB // (6 * page)


def test_speculative_draft_sits_on_the_last_stage():
    # Llama 3.1 8B + one EAGLE layer (same page), PP 2: stage 1 has 16 + 1 layers: 17 × 65,536 =
    # 1,114,112 B per block; 16 GiB // 1,114,112 = 15,420 blocks.
    plan = capacity(EngineConfig("llama-3.1-8b", "16GiB", max_model_len=8192, pipeline_parallel_size=2,
                                 speculative_config={"method": "eagle", "num_speculative_tokens": 3}))
    assert [len(s.layer_names) for s in plan.stages] == [16, 17]
    assert plan.stages[1].layer_names[-1].startswith("draft.")
    assert plan.bytes_per_block == 17 * LLAMA_PAGE
    assert plan.num_blocks == 15_420


def test_admission_need_uses_the_stage_block_cost():
    # 8,192 tokens = 512 blocks; on the tightest of 3 stages a block costs 720,896 B
    need = admission_need(EngineConfig("llama-3.1-8b", "16GiB", max_model_len=131072,
                                       pipeline_parallel_size=3, profile="vllm-0.21"), 8192)
    assert need.total == 512 and need.total_bytes == 512 * 720_896


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"pipeline_parallel_size": 0}, "pipeline_parallel_size must be >= 1"),
        ({"pipeline_parallel_size": 2, "pipeline_layer_partition": "16,17"},
         "adds up to 33 layers but the model has num_hidden_layers=32"),
        ({"pipeline_parallel_size": 3, "pipeline_layer_partition": "16,16"},
         "names 2 stages but pipeline_parallel_size is 3"),
        ({"pipeline_parallel_size": 2, "pipeline_layer_partition": "a,b"}, "layer counts per stage"),
        ({"pipeline_parallel_size": 64}, "pipeline stage 0 holds no layer"),
        ({"pipeline_parallel_size": 2, "policy": "trtllm"}, "not modelled with pipeline parallelism"),
    ],
)
def test_bad_pipeline_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EngineConfig("llama-3.1-8b", "16GiB", max_model_len=8192, **kwargs).kv_cache_config()


def test_cli_pp_flag(capsys):
    assert main(["capacity", "--model", "llama-3.1-8b", "-pp", "3", "--max-model-len", "128K",
                 "--profile", "vllm-0.21", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [s["num_layers"] for s in out["pipeline_stages"]] == [11, 11, 10]
    assert out["num_blocks"] == 23_831 and out["bytes_per_block"] == 720_896


def test_cli_bad_partition_is_one_line(capsys):
    code = main(["capacity", "--model", "llama-3.1-8b", "-pp", "2", "--pp-layer-partition", "16,17"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "num_hidden_layers=32" in err


def _coder_shape():
    return model_from_hf_config({"num_hidden_layers": 48, "num_attention_heads": 32,
                                 "num_key_value_heads": 4, "head_dim": 128,
                                 "max_position_embeddings": 262144}, name="qwen3-coder-shape")


@pytest.mark.parametrize(("memory", "blocks", "tightest"), [
    # stage 0: 16 layers x 32,768 B = 512 KiB per block; stage 1: 32 layers = 1 MiB per block
    (("4GiB", "6GiB"), (8_192, 6_144), 1),   # 4 GiB / 512 KiB = 8,192; 6 GiB / 1 MiB = 6,144
    (("2GiB", "6GiB"), (4_096, 6_144), 0),   # the small GPU on the short stage binds
])
def test_each_stage_has_its_own_memory(memory, blocks, tightest):
    plan = capacity(EngineConfig(_coder_shape(), max_model_len=32768, pipeline_parallel_size=2,
                                 pipeline_layer_partition="16,32", pipeline_stage_memory=",".join(memory),
                                 profile="vllm-0.21"))
    assert [s.blocks_fit for s in plan.stages] == list(blocks)
    assert plan.num_blocks == min(blocks)
    assert plan.bytes_per_block == plan.stages[tightest].bytes_per_block


def test_the_stage_that_does_not_fit_is_named():
    # L = 262,144 needs 16,384 blocks; stage 0 (2 GiB, 512 KiB blocks) holds 4,096: 8.0 GiB needed there
    cfg = EngineConfig(_coder_shape(), max_model_len=262144, pipeline_parallel_size=2,
                       pipeline_layer_partition="16,32", pipeline_stage_memory="2GiB,24GiB",
                       profile="vllm-0.21")
    with pytest.raises(ValueError, match=r"needs 8\.0+ GiB of KV cache on pipeline stage 0 .*is 65536"):
        capacity(cfg)


def test_stage_memory_needs_one_entry_per_stage(capsys):
    assert main(["capacity", "--model", "llama-3.1-8b", "-pp", "2", "--pp-stage-memory", "4GiB"]) == 2
    assert "1 pipeline stage memories given but pipeline_parallel_size is 2" in capsys.readouterr().err


def test_glm_pp8_fits_once_each_stage_checks_its_own_layers():
    # GLM-4.7 shape (92 layers, 8 KV heads x 128): stages of 11, 11, 11, 12, 12, 12, 12, 11 layers; a block
    # costs 12 x 65,536 = 786,432 B on the 12-layer stages; L = 202,752 needs 12,672 blocks = 9.28125 GiB,
    # well inside the 28.57 GiB that vLLM's whole-model check of the time compared 71.16 GiB with
    model = model_from_hf_config({"num_hidden_layers": 92, "num_attention_heads": 96,
                                  "num_key_value_heads": 8, "head_dim": 128,
                                  "max_position_embeddings": 202752}, name="glm-shape")
    plan = capacity(EngineConfig(model, int(28.57 * GIB), max_model_len=202752, pipeline_parallel_size=8,
                                 profile="vllm-0.20"))
    assert [len(s.layer_names) for s in plan.stages] == [11, 11, 11, 12, 12, 12, 12, 11]
    assert plan.bytes_per_block == 786_432 and plan.blocks_per_max_request == 12_672
    assert plan.bytes_per_block * plan.blocks_per_max_request == int(9.28125 * GIB)
