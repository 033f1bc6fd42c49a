"""Presets for the model families beyond dense and sliding-window attention.

MLA (DeepSeek-V3, Kimi-K2), gated-DeltaNet hybrids (Qwen3-Next, Qwen3.5), Mamba-2 hybrids
(Nemotron-H, Granite 4.0-H), cross-layer KV sharing (Gemma 3n, Gemma 4 E4B) and Gemma 4 26B-A4B.
Each entry is the KV-relevant subset of the published ``config.json``; the comment names the model
and what was checked against public copies of its config ("not verified" marks the rest).
"""

from __future__ import annotations

_GDN = {"linear_conv_kernel_dim": 4, "linear_num_key_heads": 16, "linear_key_head_dim": 128,
        "linear_num_value_heads": 32, "linear_value_head_dim": 128}

FAMILY_PRESETS: dict[str, tuple[str, dict]] = {
    # deepseek-ai/DeepSeek-V3 (2024-12; R1 has the same attention): 61 MLA layers, 128 query heads,
    # kv_lora_rank 512 + qk_rope_head_dim 64 = 576 cached elements, one MTP module, 163,840 positions.
    "deepseek-v3": (
        "deepseek-ai/DeepSeek-V3",
        {"model_type": "deepseek_v3", "num_hidden_layers": 61, "hidden_size": 7168,
         "num_attention_heads": 128,
         "num_key_value_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
         "v_head_dim": 128, "num_nextn_predict_layers": 1, "max_position_embeddings": 163840,
         "torch_dtype": "bfloat16"},
    ),
    # deepseek-ai/DeepSeek-V3.2: V3's MLA plus the sparse-attention indexer keys (index_head_dim 128)
    # beside every layer. Indexer fields follow the model card; not verified against the file.
    "deepseek-v3.2": (
        "deepseek-ai/DeepSeek-V3.2",
        {"model_type": "deepseek_v32", "num_hidden_layers": 61, "hidden_size": 7168,
         "num_attention_heads": 128,
         "num_key_value_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
         "v_head_dim": 128, "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048,
         "num_nextn_predict_layers": 1, "max_position_embeddings": 163840, "torch_dtype": "bfloat16"},
    ),
    # moonshotai/Kimi-K2-Instruct (2025-07): DeepSeek-V3 attention with 64 query heads, no MTP,
    # 131,072 positions. Not verified against a stored copy.
    "kimi-k2": (
        "moonshotai/Kimi-K2-Instruct",
        {"model_type": "kimi_k2", "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 64,
         "num_key_value_heads": 64,
         "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
         "num_nextn_predict_layers": 0, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"},
    ),
    # Qwen/Qwen3-Next-80B-A3B-Instruct (2025-09): 48 layers, every 4th full attention (16 q / 2 KV
    # heads × 256), the others gated DeltaNet (16 key heads, 32 value heads, × 128, conv 4), one
    # MTP module, 262,144 positions. Checked against public copies of the config.
    "qwen3-next-80b-a3b": (
        "Qwen/Qwen3-Next-80B-A3B-Instruct",
        {"model_type": "qwen3_next", "num_hidden_layers": 48, "full_attention_interval": 4,
         "hidden_size": 2048,
         "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, **_GDN,
         "mtp_num_hidden_layers": 1, "max_position_embeddings": 262144, "torch_dtype": "bfloat16"},
    ),
    # Qwen/Qwen3.5-35B-A3B (2026; Qwen3.6-35B-A3B has the same text config): 40 layers as
    # 10 × (3 gated DeltaNet + 1 full), Qwen3-Next's head shapes, one MTP module, recurrent state in
    # float32 (mamba_ssm_dtype). Layer list, heads, dims and the state dtype checked against public
    # copies; the context length follows the model card.
    "qwen3.5-35b-a3b": (
        "Qwen/Qwen3.5-35B-A3B",
        {"model_type": "qwen3_5_moe",
         "text_config": {"model_type": "qwen3_5_moe_text", "num_hidden_layers": 40, "hidden_size": 2048,
                         "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 10,
                         "full_attention_interval": 4, "num_attention_heads": 16, "num_key_value_heads": 2,
                         "head_dim": 256, **_GDN, "mtp_num_hidden_layers": 1, "mamba_ssm_dtype": "float32",
                         "max_position_embeddings": 262144, "dtype": "bfloat16"}},
    ),
    # nvidia/NVIDIA-Nemotron-Nano-9B-v2 (2025-08): 56 layers, 4 attention (40 q / 8 KV × 128),
    # 27 Mamba-2 (128 heads × 80, state 128, 8 groups, conv 4), the rest MLP. Pattern and shapes
    # checked against public copies; context not verified.
    "nemotron-nano-9b-v2": (
        "nvidia/NVIDIA-Nemotron-Nano-9B-v2",
        {"model_type": "nemotron_h", "num_hidden_layers": 56,
         "hybrid_override_pattern": "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-",
         "hidden_size": 4480, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
         "mamba_num_heads": 128, "mamba_head_dim": 80, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
         "max_position_embeddings": 131072, "torch_dtype": "bfloat16"},
    ),
    # ibm-granite/granite-4.0-h-small (2025-10): 40 layers, 36 Mamba-2 + 4 attention (32 q / 8 KV,
    # head 128), Mamba 128 heads × 64, state 128, 1 group, conv 4, chunk 256. Counts, heads and
    # state checked against public copies; the attention positions (every 10th from 5) are not.
    "granite-4.0-h-small": (
        "ibm-granite/granite-4.0-h-small",
        {"model_type": "granitemoehybrid", "num_hidden_layers": 40,
         "layer_types": (["mamba"] * 5 + ["attention"] + ["mamba"] * 4) * 4,
         "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "mamba_n_heads": 128,
         "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2,
         "mamba_chunk_size": 256, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"},
    ),
    # google/gemma-3n-E4B-it (2025-06): 35 layers as 7 × (4 sliding 512 + 1 full), 8 q / 2 KV × 256,
    # the last 15 layers reuse earlier caches, 32,768 positions. Not verified against a stored copy.
    "gemma-3n-e4b": (
        "google/gemma-3n-E4B-it",
        {"model_type": "gemma3n",
         "text_config": {"model_type": "gemma3n_text", "num_hidden_layers": 35,
                         "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7,
                         "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
                         "sliding_window": 512, "num_kv_shared_layers": 15, "max_position_embeddings": 32768,
                         "torch_dtype": "bfloat16"}},
    ),
    # google/gemma-4-E4B-it (2026): 42 layers as 7 × (5 sliding 512 + 1 full), 8 q / 2 KV heads,
    # sliding head 256, full head 512 (global_head_dim), the last 18 layers reuse earlier caches,
    # 131,072 positions. Checked against public copies of the config.
    "gemma-4-e4b": (
        "google/gemma-4-E4B-it",
        {"model_type": "gemma4",
         "text_config": {"model_type": "gemma4_text", "num_hidden_layers": 42,
                         "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 7,
                         "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
                         "global_head_dim": 512, "attention_k_eq_v": False, "sliding_window": 512,
                         "num_kv_shared_layers": 18, "max_position_embeddings": 131072, "dtype": "bfloat16"}},
    ),
    # google/gemma-4-26B-A4B-it (2026): 30 layers as 5 × (5 sliding 1024 + 1 full), 16 q heads,
    # sliding 8 KV × 256, full 2 KV × 512 (attention_k_eq_v: K and V both cached), 262,144 positions.
    # Heads and dims checked against public copies; the context follows the 31B's.
    "gemma-4-26b-a4b": (
        "google/gemma-4-26B-A4B-it",
        {"model_type": "gemma4",
         "text_config": {"model_type": "gemma4_text", "num_hidden_layers": 30,
                         "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5,
                         "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
                         "global_head_dim": 512, "num_global_key_value_heads": 2, "attention_k_eq_v": True,
                         "sliding_window": 1024, "max_position_embeddings": 262144, "dtype": "bfloat16"}},
    ),
}
