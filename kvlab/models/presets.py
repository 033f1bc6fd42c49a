"""Model presets: the KV-relevant fields of published ``config.json`` files.

Each preset is the subset of the model's ``config.json`` that the KV cache depends on, read by the
same loader as any user file (:func:`kvlab.models.model_from_hf_config`). The comment above each
entry names the model id and where the numbers were checked; "not verified" marks what could not be
checked against a copy of the published file.
"""

from __future__ import annotations

from pathlib import Path

from kvlab.models.hf_config import model_from_hf_config
from kvlab.models.model import ModelKV
from kvlab.models.parameters import preset_parameter_fields
from kvlab.models.presets_families import FAMILY_PRESETS

PRESET_CONFIGS: dict[str, tuple[str, dict]] = {
    # google/gemma-4-31B-it (text_config, 2026). Checked against copies of the published config.json
    # quoted in public repositories: 60 layers as 10 × (5 sliding + 1 full), num_key_value_heads 16,
    # head_dim 256, sliding_window 1024, global_head_dim 512, num_global_key_value_heads 4,
    # attention_k_eq_v true, max_position_embeddings 262144, bfloat16. With k_eq_v only the weights
    # are shared: K and V are both cached.
    "gemma-4-31b": (
        "google/gemma-4-31B-it",
        {
            "text_config": {
                "num_hidden_layers": 60,
                "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 10,
                "num_attention_heads": 32,
                "num_key_value_heads": 16,
                "head_dim": 256,
                "sliding_window": 1024,
                "global_head_dim": 512,
                "num_global_key_value_heads": 4,
                "attention_k_eq_v": True,
                "max_position_embeddings": 262144,
                "dtype": "bfloat16",
            },
        },
    ),
    # google/gemma-3-27b-it (text_config, 2025-03): 62 layers, every 6th full (sliding_window_pattern 6),
    # 16 KV heads × head_dim 128, sliding_window 1024, max_position_embeddings 131072. Layer count,
    # heads, head_dim and window checked against public copies; the pattern and the 131072 context
    # follow the model card and were not checked against the file itself.
    "gemma-3-27b": (
        "google/gemma-3-27b-it",
        {
            "text_config": {
                "num_hidden_layers": 62,
                "sliding_window_pattern": 6,
                "num_attention_heads": 32,
                "num_key_value_heads": 16,
                "head_dim": 128,
                "sliding_window": 1024,
                "max_position_embeddings": 131072,
                "torch_dtype": "bfloat16",
            },
        },
    ),
    # meta-llama/Llama-3.1-8B-Instruct (2024-07): 32 layers, hidden 4096, 32 heads, 8 KV heads
    # (head_dim = 4096 / 32 = 128), max_position_embeddings 131072. Widely reproduced; not verified
    # against a stored copy here.
    "llama-3.1-8b": (
        "meta-llama/Llama-3.1-8B-Instruct",
        {
            "num_hidden_layers": 32,
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "max_position_embeddings": 131072,
            "torch_dtype": "bfloat16",
        },
    ),
    # meta-llama/Llama-3.1-70B-Instruct (2024-07): 80 layers, hidden 8192, 64 heads, 8 KV heads
    # (head_dim 128), max_position_embeddings 131072. Not verified against a stored copy here.
    "llama-3.1-70b": (
        "meta-llama/Llama-3.1-70B-Instruct",
        {
            "num_hidden_layers": 80,
            "hidden_size": 8192,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "max_position_embeddings": 131072,
            "torch_dtype": "bfloat16",
        },
    ),
    # mistralai/Mistral-7B-v0.1 (2023-09): 32 layers, hidden 4096, 32 heads, 8 KV heads, sliding_window
    # 4096 on every layer, max_position_embeddings 32768. Not verified against a stored copy here.
    "mistral-7b-v0.1": (
        "mistralai/Mistral-7B-v0.1",
        {
            "num_hidden_layers": 32,
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "sliding_window": 4096,
            "max_position_embeddings": 32768,
            "torch_dtype": "bfloat16",
        },
    ),
    # openai/gpt-oss-20b (2025-08): 24 layers alternating sliding (128) / full, 64 heads, 8 KV heads,
    # head_dim 64, max_position_embeddings 131072; hidden 2880, 32 routed experts of width 2880 in
    # MXFP4 (quantization_config), the rest bf16. Checked against public copies of the config.
    "gpt-oss-20b": (
        "openai/gpt-oss-20b",
        {
            "num_hidden_layers": 24,
            "layer_types": ["sliding_attention", "full_attention"] * 12,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "head_dim": 64,
            "sliding_window": 128,
            "max_position_embeddings": 131072,
            "torch_dtype": "bfloat16",
            "hidden_size": 2880,
            "num_local_experts": 32,
            "intermediate_size": 2880,
            "quantization_config": {"quant_method": "mxfp4"},
        },
    ),
    # openai/gpt-oss-120b (2025-08): 36 layers as 18 × [sliding 128, full], 64 heads, 8 KV heads,
    # head_dim 64, max_position_embeddings 131072; hidden 2880, 128 routed experts of width 2880 in
    # MXFP4 (quantization_config), the rest bf16. Checked against a public copy of the config.
    "gpt-oss-120b": (
        "openai/gpt-oss-120b",
        {
            "num_hidden_layers": 36,
            "layer_types": ["sliding_attention", "full_attention"] * 18,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "head_dim": 64,
            "sliding_window": 128,
            "max_position_embeddings": 131072,
            "torch_dtype": "bfloat16",
            "hidden_size": 2880,
            "num_local_experts": 128,
            "intermediate_size": 2880,
            "quantization_config": {"quant_method": "mxfp4"},
        },
    ),
    # Qwen/Qwen3-8B (2025-04): 36 layers, 32 heads, 8 KV heads, head_dim 128, max_position_embeddings
    # 40960, use_sliding_window false. Checked against public copies of the config.
    "qwen3-8b": (
        "Qwen/Qwen3-8B",
        {
            "num_hidden_layers": 36,
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "sliding_window": None,
            "use_sliding_window": False,
            "max_position_embeddings": 40960,
            "torch_dtype": "bfloat16",
        },
    ),
}

PRESET_CONFIGS.update(FAMILY_PRESETS)

#: Preset names accepted by :func:`get_model` and ``--model``.
PRESET_NAMES: tuple[str, ...] = tuple(PRESET_CONFIGS)


def get_model(model: str | Path | ModelKV) -> ModelKV:
    """A preset by name (or its Hugging Face id, case-insensitive), or a ``config.json`` path.

    Raises:
        ValueError: neither a preset nor a readable JSON config; the message lists the presets.
    """
    if isinstance(model, ModelKV):
        return model
    if not isinstance(model, (str, Path)):
        raise ValueError(
            f"model must be a preset name, a config.json path or a ModelKV, got {type(model).__name__}"
        )
    key = str(model).strip().lower()
    for name, (model_id, config) in PRESET_CONFIGS.items():
        if key in (name, model_id.lower()):
            with_params = {**config, **preset_parameter_fields(name)}
            return model_from_hf_config(with_params, name=name, source=model_id)
    path = Path(model)
    if not path.exists():
        raise ValueError(
            f"model {str(model)!r} is neither a preset ({', '.join(PRESET_NAMES)}) "
            "nor an existing config.json path"
        )
    return model_from_hf_config(path)
