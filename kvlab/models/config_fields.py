"""Fields of a ``config.json`` that change the KV cache, and which of them kvlab can model.

The loader must never ignore a field that changes the cache size. Fields listed in
:data:`UNSUPPORTED_FIELDS` name architectures kvlab does not size; a config that sets one (to a value
that matters) is refused with one message naming the field and what it does.
"""

from __future__ import annotations

from typing import Any

#: field → what it changes (kvlab refuses configs that set them).
UNSUPPORTED_FIELDS: dict[str, str] = {
    "cross_attention_layers": "cross-attention layers caching encoder states (encoder-decoder vision models)",
    "is_encoder_decoder": "an encoder-decoder model (cross-attention caches sized by the encoder length)",
    "compress_ratios": "DeepSeek V4's compressed-attention caches (several compressed KV groups)",
    "linear_attn_config": "Kimi-Linear's KDA state layers beside MLA layers",
    "attn_type_list": "MiniMax lightning-attention state layers",
    "layers_block_type": "a per-layer block list (Zamba-style shared attention) kvlab does not read",
    "shared_attention_layers": "attention blocks shared across layers (Zamba)",
    "kv_sharing_pattern": "a cross-layer KV sharing scheme other than Gemma's num_kv_shared_layers",
    "cla_share_factor": "cross-layer attention (CLA) sharing",
    "kv_lora_rank_per_layer": "per-layer MLA ranks",
}

#: ``model_type`` values kvlab refuses outright, with the reason.
UNSUPPORTED_MODEL_TYPES: dict[str, str] = {
    "deepseek_v4": "DeepSeek V4 keeps compressed and sliding caches in five groups kvlab does not model",
    "kimi_linear": "Kimi-Linear mixes KDA state layers with MLA",
    "zamba2": "Zamba2 shares attention blocks across layers",
    "minimax_m1": "MiniMax-M1 uses lightning-attention state layers",
    "mllama": "Llama 3.2 Vision caches encoder states in cross-attention layers",
    "whisper": "Whisper is an encoder-decoder model",
    "t5": "T5 is an encoder-decoder model",
}

#: The fields kvlab reads for a plain decoder (named in the refusal of an unknown architecture).
DENSE_FIELDS = (
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim (or hidden_size)",
    "max_position_embeddings",
    "sliding_window / layer_types (for windowed layers)",
)


def _set(value: Any) -> bool:
    return value not in (None, False, 0, [], {}, "")


def refuse_unsupported(cfg: dict[str, Any], where: str) -> None:
    """Raise ``ValueError`` naming the first field (or model type) that changes the KV cache in a way
    kvlab does not model."""
    model_type = str(cfg.get("model_type") or "")
    if model_type in UNSUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"{where}: model_type {model_type!r} is not supported: {UNSUPPORTED_MODEL_TYPES[model_type]}. "
            f"kvlab sizes models described by {', '.join(DENSE_FIELDS)}, MLA (kv_lora_rank), Mamba / "
            "gated-DeltaNet state layers and num_kv_shared_layers"
        )
    for field, meaning in UNSUPPORTED_FIELDS.items():
        if _set(cfg.get(field)):
            raise ValueError(
                f"{where}: field {field!r} ({meaning}) changes the KV cache in a way kvlab does not model; "
                "refusing rather than printing a wrong capacity"
            )
