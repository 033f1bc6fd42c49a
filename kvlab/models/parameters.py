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
}


def preset_parameter_fields(name: str) -> dict[str, int]:
    """``{"num_parameters": ..., "num_active_parameters": ...}`` for a preset, ``{}`` if unknown."""
    if name not in PRESET_PARAMETERS:
        return {}
    total, active = PRESET_PARAMETERS[name]
    return {"num_parameters": total, "num_active_parameters": active}
