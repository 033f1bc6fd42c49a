"""MLA, state (Mamba / gated DeltaNet) layers and cross-layer KV sharing, against hand-worked bytes."""

from __future__ import annotations

import pytest

from kvlab.models import model_from_hf_config
from kvlab.sizing import plan_kv_cache
from kvlab.sizing.mla_spec import MLAAttentionSpec
from kvlab.sizing.state_spec import MambaSpec
from kvlab.sizing.state_unification import hybrid_block_size

MLA = {"num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 16, "kv_lora_rank": 512,
       "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "max_position_embeddings": 8192}


@pytest.mark.parametrize(("dtype", "per_token"), [("auto", 1152), ("fp8", 576), ("fp8_ds_mla", 656)])
def test_mla_page_is_one_latent_head_k_only(dtype, per_token):
    # 512 + 64 = 576 elements, no V: bf16 1,152 B; fp8 576 B; fp8_ds_mla 512 + 16 + 128 = 656 B
    spec = model_from_hf_config(MLA).layer_specs(64, dtype, 1)["layers.0"]
    assert isinstance(spec, MLAAttentionSpec)
    assert spec.page_size_bytes == 64 * per_token


def test_mla_is_not_split_by_tensor_parallelism():
    model = model_from_hf_config(MLA)
    one, eight = model.layer_specs(64, "auto", 1), model.layer_specs(64, "auto", 8)
    assert one == eight and {s.num_kv_heads for s in eight.values()} == {1}


def test_mla_refuses_per_token_head_dtypes():
    with pytest.raises(ValueError, match="kv_cache_dtype of an MLA layer"):
        model_from_hf_config(MLA).layer_specs(64, "int8_per_token_head", 1)


def test_mla_indexer_keys_form_a_uniform_type_group():
    # V3.2: indexer keys of 128 fp8 values + 4 B of scale = 132 B per token beside each MLA layer
    model = model_from_hf_config({**MLA, "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048})
    specs = model.layer_specs(64, "fp8_ds_mla", 1)
    assert specs["layers.0.indexer"].page_size_bytes == 64 * 132
    plan = plan_kv_cache(specs, 4 * 2**30, max_model_len=8192, in_flight_tokens=8192, profile="vllm-0.21")
    assert len(plan.config.groups) == 1 and plan.grouping.layout == "uniform_type"
    assert plan.bytes_per_block == 4 * 64 * (656 + 132)


GDN = {"num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
       "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_num_key_heads": 16,
       "linear_key_head_dim": 128, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
       "max_position_embeddings": 262144}


def test_gated_deltanet_state_bytes_by_hand():
    model = model_from_hf_config(GDN)
    assert [s.name for s in model.state_layers] == [f"layers.{i}.state" for i in (0, 1, 2, 4, 5, 6)]
    state = model.state_layers[0]
    # conv: (2*16*128 + 32*128) = 8,192 channels x 3 rows x 2 B; recurrent 32 x 128 x 128 x 2 B
    assert state.state_bytes(1) == 8192 * 3 * 2 + 32 * 128 * 128 * 2 == 1_097_728
    assert state.state_bytes(4) == 2048 * 3 * 2 + 8 * 128 * 128 * 2 == 274_432
    # two speculative tokens keep two more conv rows
    assert state.state_bytes(1, num_speculative_tokens=2) == 8192 * 5 * 2 + 32 * 128 * 128 * 2


def test_hybrid_block_size_raises_the_attention_block_and_pads_the_state():
    # TP 1: attention 2 heads x 256 x (K+V) x 2 B = 2,048 B per token; 16 x cdiv(1,097,728, 32,768) = 544
    choice = hybrid_block_size(2048, 1_097_728, 16)
    assert choice.block_size == 544 and choice.page_size_bytes == 544 * 2048
    assert choice.log_lines[0].startswith("Setting attention block size to 544 tokens")
    assert f"{choice.padding_percent:.2f}" == f"{100 * (1_114_112 - 1_097_728) / 1_097_728:.2f}" == "1.49"
    assert hybrid_block_size(2048, 1_097_728, 1024).block_size == 1024  # a larger user block is kept
    # align mode rounds to lcm(chunk, 16): cdiv(1,097,728, 2,048) = 536 tokens -> 3 x 256 = 768
    assert hybrid_block_size(2048, 1_097_728, 16, mamba_cache_mode="align", chunk_size=256).block_size == 768


def test_hybrid_plan_groups_states_with_attention_and_counts_one_page_per_request():
    model = model_from_hf_config(GDN)
    specs = model.layer_specs(16, "auto", 1)
    assert {s.page_size_bytes for s in specs.values()} == {544 * 2048}
    plan = plan_kv_cache(specs, 8 * 2**30, max_model_len=65536, in_flight_tokens=8192, profile="vllm-0.21")
    kinds = sorted(g.kind for g in plan.config.groups)
    # 2 attention vs 6 state layers: group size 2 -> 1 attention group + 3 state groups of 2 layers
    assert kinds == ["full", "mamba", "mamba", "mamba"]
    page = 544 * 2048
    assert plan.bytes_per_block == 2 * page
    assert plan.num_blocks == 8 * 2**30 // (2 * page)
    # blocks per request: cdiv(65,536, 544) = 121 attention blocks + 1 state page per state group
    assert plan.blocks_per_max_request == 121 + 3
    assert plan.max_concurrency == pytest.approx(plan.num_blocks / 124)


def test_state_pages_per_request_by_mode():
    spec = MambaSpec(block_size=544, state_bytes=1000, num_speculative_blocks=2)
    assert spec.max_blocks_per_request(65536, 8192) == 3
    assert MambaSpec(544, 1000, mamba_cache_mode="align").max_blocks_per_request(65536, 8192) == 2
    assert MambaSpec(544, 1000, mamba_cache_mode="all").max_blocks_per_request(65536, 8192) == 121


def test_nemotron_pattern_and_mamba2_state():
    cfg = {"model_type": "nemotron_h", "num_hidden_layers": 6, "hybrid_override_pattern": "M-M*-E",
           "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "mamba_num_heads": 128,
           "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
           "max_position_embeddings": 8192}
    model = model_from_hf_config(cfg)
    assert [layer.name for layer in model.layers] == ["layers.3"]
    assert len(model.state_layers) == 2
    # conv (128*64 + 2*8*128) = 10,240 x 3 x 2 B; SSM 128 x 64 x 128 x 2 B (bf16, the model dtype)
    assert model.state_layers[0].state_bytes(1) == 10240 * 3 * 2 + 128 * 64 * 128 * 2
    fp32 = model_from_hf_config({**cfg, "mamba_ssm_dtype": "float32"}).state_layers[0]
    assert fp32.state_bytes(1) == 10240 * 3 * 2 + 128 * 64 * 128 * 4
    # TP 16: 8 groups padded to 16 -> conv (8,192 + 2*16*128) / 16 = 768 channels
    assert model.state_layers[0].state_shapes(16)[0] == (768, 3)


def test_kv_shared_layers_cost_nothing():
    # 6 layers, the last 2 reuse the last earlier layer of their kind (Gemma 3n / Gemma 4 E-models)
    cfg = {"num_hidden_layers": 6, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
           "sliding_window": 512,
           "layer_types": ["sliding_attention", "sliding_attention", "full_attention"] * 2,
           "num_kv_shared_layers": 2, "max_position_embeddings": 32768}
    model = model_from_hf_config(cfg)
    shared = {layer.name: layer.kv_shared_with for layer in model.layers if layer.kv_shared_with}
    assert shared == {"layers.4": "layers.3", "layers.5": "layers.2"}
    assert sorted(model.layer_specs(16)) == ["layers.0", "layers.1", "layers.2", "layers.3"]


def test_decode_context_parallelism_spreads_a_requests_tokens():
    from kvlab.serving import EngineConfig, capacity

    # DeepSeek-V3 at TP 8, DCP 8, block 64: one 163,840-token request holds cdiv(cdiv(163,840, 8), 64)
    # = 320 blocks on each GPU instead of 2,560
    base = EngineConfig("deepseek-v3", "20GiB", tensor_parallel_size=8, block_size=64, max_model_len=163840)
    dcp = base.replace(decode_context_parallel_size=8)
    assert capacity(base).blocks_per_max_request == 2560 and capacity(dcp).blocks_per_max_request == 320
    assert capacity(dcp).num_blocks == capacity(base).num_blocks  # the pool itself is unchanged
    with pytest.raises(ValueError, match="must divide tensor_parallel_size"):
        base.replace(decode_context_parallel_size=3).plan()
    with pytest.raises(ValueError, match="does not support decode context parallelism with sliding"):
        EngineConfig("gemma-4-31b", tensor_parallel_size=2, decode_context_parallel_size=2).plan()


def test_what_is_not_simulated_is_refused_clearly():
    from kvlab.serving import EngineConfig, admission_need

    with pytest.raises(ValueError, match="do not model decode context parallelism"):
        EngineConfig("deepseek-v3", tensor_parallel_size=8, decode_context_parallel_size=8,
                     block_size=64).build_kv_cache_manager()
    with pytest.raises(ValueError, match="admission_need does not model decode context parallelism"):
        admission_need(EngineConfig("deepseek-v3", "20GiB", tensor_parallel_size=8,
                                    decode_context_parallel_size=8, block_size=64, max_model_len=8192),
                       1000)
