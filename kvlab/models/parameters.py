"""Parameter counts of the presets (what the step-time model reads weights and FLOPs from).

They are not part of ``config.json``; each comes from the model card, rounded as published.
``(total, active)``: active < total only for mixture-of-experts models.
"""

from __future__ import annotations

PRESET_PARAMETERS: dict[str, tuple[int, int]] = {
    # Gemma 4 31B: dense, 31B as named on its model card (nominal).
    "gemma-4-31b": (31_000_000_000, 31_000_000_000),
    # Gemma 3 27B: dense, 27B as named (the vision encoder, ~0.4B, is not run for text).
    "gemma-3-27b": (27_000_000_000, 27_000_000_000),
    # Llama 3.1 8B / 70B model cards: 8.03B and 70.6B.
    "llama-3.1-8b": (8_030_000_000, 8_030_000_000),
    "llama-3.1-70b": (70_600_000_000, 70_600_000_000),
    # Mistral 7B v0.1: 7.24B.
    "mistral-7b-v0.1": (7_240_000_000, 7_240_000_000),
    # gpt-oss model card: 20.9B total / 3.6B active, 116.8B total / 5.1B active (MoE).
    "gpt-oss-20b": (20_900_000_000, 3_600_000_000),
    "gpt-oss-120b": (116_800_000_000, 5_100_000_000),
    # Qwen3-8B model card: 8.2B.
    "qwen3-8b": (8_200_000_000, 8_200_000_000),
    # Model-card totals / activated parameters of the family presets, rounded as published:
    # DeepSeek-V3 671B / 37B (V3.2 the same); Kimi K2 1T / 32B; Qwen3-Next-80B-A3B 80B / 3B;
    # Qwen3.5-35B-A3B 35B / 3B; Nemotron Nano 9B v2 9B; Granite 4.0-H-Small 32B / 9B;
    # Gemma 3n E4B and Gemma 4 E4B 8B raw (per-layer embeddings included); Gemma 4 26B-A4B 26B / 4B.
    "deepseek-v3": (671_000_000_000, 37_000_000_000),
    "deepseek-v3.2": (671_000_000_000, 37_000_000_000),
    "kimi-k2": (1_000_000_000_000, 32_000_000_000),
    "qwen3-next-80b-a3b": (80_000_000_000, 3_000_000_000),
    "qwen3.5-35b-a3b": (35_000_000_000, 3_000_000_000),
    "nemotron-nano-9b-v2": (9_000_000_000, 9_000_000_000),
    "granite-4.0-h-small": (32_000_000_000, 9_000_000_000),
    "gemma-3n-e4b": (8_000_000_000, 8_000_000_000),
    "gemma-4-e4b": (8_000_000_000, 8_000_000_000),
    "gemma-4-26b-a4b": (26_000_000_000, 4_000_000_000),
}


def preset_parameter_fields(name: str) -> dict[str, int]:
    """``{"num_parameters": ..., "num_active_parameters": ...}`` for a preset, ``{}`` if unknown."""
    if name not in PRESET_PARAMETERS:
        return {}
    total, active = PRESET_PARAMETERS[name]
    return {"num_parameters": total, "num_active_parameters": active}
