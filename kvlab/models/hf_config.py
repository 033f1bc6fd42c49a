"""Read the KV-relevant facts from a Hugging Face ``config.json`` (JSON only; nothing is downloaded).

Handled: a nested ``text_config`` (multimodal wrappers); the layer layout of
:mod:`kvlab.models.hf_layers` (full, sliding, chunked, gated DeltaNet, Mamba-1/2 layers);
``head_dim`` absent or null → ``hidden_size // num_attention_heads``; ``head_dim`` /
``num_key_value_heads`` given as per-layer lists; full-attention layers with ``global_head_dim`` and,
when ``attention_k_eq_v`` is true, ``num_global_key_value_heads`` (Gemma 4: K and V are both cached,
as ``vllm/model_executor/models/gemma4.py`` does: the flag ties weights, not storage);
MLA (``kv_lora_rank`` + ``qk_rope_head_dim``, one latent head, not split by TP) with DeepSeek V3.2's
indexer keys (``index_head_dim``); ``num_kv_shared_layers`` (the last layers reuse the cache of the
last earlier layer of the same kind); MTP modules (``num_nextn_predict_layers`` /
``mtp_num_hidden_layers``); state layers (:mod:`kvlab.models.hf_state`). Fields that change the cache
in ways kvlab does not model are refused (:mod:`kvlab.models.config_fields`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from kvlab.models.config_fields import DENSE_FIELDS, refuse_unsupported
from kvlab.models.experts import expert_weights_from_config
from kvlab.models.hf_layers import layer_plan
from kvlab.models.hf_state import state_layer
from kvlab.models.model import LayerKV, ModelKV
from kvlab.models.parallel import check_query_heads

_DTYPES = {
    "bfloat16": "bfloat16",
    "float16": "float16",
    "half": "float16",
    "float32": "float32",
    "float": "float32",
}

#: Most layers a config may declare. Published models have at most a few hundred; the bound keeps a
#: typo (or a float such as 4.1e16) from building one Python object per layer until memory runs out.
MAX_LAYERS = 10_000


def _field(cfg: dict[str, Any], key: str, why: str, source: str) -> Any:
    value = cfg.get(key)
    if value is None:
        raise ValueError(f"{source} is missing {key!r} (needed for {why})")
    return value


def _per_layer(value: Any, num_layers: int, key: str, source: str) -> list:
    if isinstance(value, list):
        if len(value) != num_layers:
            raise ValueError(f"{source}: {key!r} lists {len(value)} values for {num_layers} layers")
        return value
    return [value] * num_layers


def _layer_count(value: Any, key: str, where: str, minimum: int) -> int:
    """A count of layers: a JSON integer from ``minimum`` to :data:`MAX_LAYERS`, else one clear error."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_LAYERS:
        raise ValueError(
            f"{where}: {key} must be an integer from {minimum} to {MAX_LAYERS:,} (layers), got {value!r}"
        )
    return value


def _mtp_layers(cfg: dict[str, Any], where: str) -> int:
    """MTP modules shipped with the model (0 when neither field is set)."""
    key = "num_nextn_predict_layers" if cfg.get("num_nextn_predict_layers") else "mtp_num_hidden_layers"
    return _layer_count(cfg.get(key) or 0, key, where, minimum=0)


def read_config_json(path: str | Path) -> dict[str, Any]:
    """Load a ``config.json`` (or the one inside a folder) as a dict, with clear errors."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise ValueError(f"model config {str(path)!r} is not a preset name or an existing config.json file")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"model config {str(p)!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"model config {str(p)!r} must hold a JSON object, got {type(data).__name__}")
    return data


def model_from_hf_config(
    config: dict[str, Any] | str | Path, name: str | None = None, source: str = ""
) -> ModelKV:
    """The :class:`ModelKV` described by a Hugging Face config (a dict or a path to the JSON).

    Raises:
        ValueError: naming the missing or inconsistent field.
    """
    where = "config.json"
    if not isinstance(config, dict):
        where = str(config)
        config = read_config_json(config)
    try:
        return _model_from_dict(config, name, source, where)
    except (TypeError, KeyError, AttributeError, IndexError, ZeroDivisionError, OverflowError) as exc:
        # a field of the wrong type or shape that no specific check above caught: still one clear line
        raise ValueError(
            f"{where} has a field kvlab cannot read ({type(exc).__name__}: {exc}); sizes and head counts "
            "must be integers, layer_types a list of strings, text_config an object"
        ) from None


def _model_from_dict(config: dict[str, Any], name: str | None, source: str, where: str) -> ModelKV:
    outer = config
    cfg = dict(config.get("text_config") or {}) or dict(config)
    if "text_config" in config:
        for key in ("max_position_embeddings", "torch_dtype", "dtype"):
            cfg.setdefault(key, outer.get(key))
    refuse_unsupported(cfg, where)
    if cfg.get("num_hidden_layers") is None:
        raise ValueError(
            f"{where} is missing 'num_hidden_layers': unknown architecture "
            f"(model_type {cfg.get('model_type')!r}); kvlab needs {', '.join(DENSE_FIELDS)}"
        )
    num_layers = _layer_count(cfg["num_hidden_layers"], "num_hidden_layers", where, minimum=1)
    plan = layer_plan(cfg, num_layers, where)
    attention_layers = _attention_layers(cfg, plan, where)
    states = tuple(
        state_layer(cfg, kind, f"layers.{i}.state", where) for i, (_, kind) in enumerate(plan) if kind
    )
    max_len = _field(cfg, "max_position_embeddings", "the default max_model_len", where)
    dtype = _DTYPES.get(str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"), "bfloat16")
    return ModelKV(
        name=name or str(outer.get("_name_or_path") or cfg.get("model_type") or where),
        layers=tuple(attention_layers),
        max_position_embeddings=int(max_len),
        dtype=dtype,
        source=source or where,
        num_attention_heads=_optional_int(cfg, "num_attention_heads", where),
        num_parameters=_optional_int(outer, "num_parameters", where),
        num_active_parameters=_optional_int(outer, "num_active_parameters", where),
        state_layers=states,
        mtp_layers=_mtp_layers(cfg, where),
        mamba_chunk_size=int(cfg["mamba_chunk_size"]) if cfg.get("mamba_chunk_size") else None,
        hidden_size=_optional_int(cfg, "hidden_size", where),
        num_hidden_layers=num_layers,
        experts=expert_weights_from_config(cfg, outer, num_layers),
    )


def _attention_layers(cfg: dict[str, Any], plan: list, where: str) -> list[LayerKV]:
    kinds = {i: kind for i, (kind, _) in enumerate(plan) if kind}
    if not kinds:
        return []
    if cfg.get("kv_lora_rank"):
        return _mla_layers(cfg, sorted(kinds), where)
    num_layers = len(plan)
    head_dim = cfg.get("head_dim")
    if head_dim is None:
        hidden = _field(
            cfg, "hidden_size", "head_dim, which is absent (head_dim = hidden_size // heads)", where
        )
        heads = _field(cfg, "num_attention_heads", "head_dim, which is absent", where)
        head_dim = int(hidden) // int(heads)
    kv_heads = cfg.get("num_key_value_heads")
    if kv_heads is None:
        kv_heads = _field(cfg, "num_attention_heads", "the KV heads (num_key_value_heads is absent)", where)
    head_dims = _per_layer(head_dim, num_layers, "head_dim", where)
    kv_heads_list = _per_layer(kv_heads, num_layers, "num_key_value_heads", where)
    q_heads = cfg.get("num_attention_heads")
    window = cfg.get("sliding_window")
    chunk = cfg.get("attention_chunk_size")
    if "sliding_window" in kinds.values() and window is None:
        raise ValueError(f"{where} is missing 'sliding_window' (needed for the sliding-window layers)")
    if "chunked_local" in kinds.values() and chunk is None:
        raise ValueError(
            f"{where} is missing 'attention_chunk_size' (needed for the chunked-attention layers)"
        )
    global_head_dim = cfg.get("global_head_dim")
    global_kv_heads = cfg.get("num_global_key_value_heads") if cfg.get("attention_k_eq_v") else None
    layers = []
    for i, kind in sorted(kinds.items()):
        heads, dim = int(kv_heads_list[i]), int(head_dims[i])
        if kind == "full":
            dim = int(global_head_dim) if global_head_dim else dim
            heads = int(global_kv_heads) if global_kv_heads else heads
        if q_heads:
            check_query_heads(int(q_heads), heads, f"{where} layer {i}")
        layers.append(
            LayerKV(
                name=f"layers.{i}",
                kind=kind,
                num_kv_heads=heads,
                head_size=dim,
                sliding_window=int(window) if kind == "sliding_window" else None,
                attention_chunk_size=int(chunk) if kind == "chunked_local" else None,
            )
        )
    return _share_kv(layers, int(cfg.get("num_kv_shared_layers") or 0), len(plan), where)


def _mla_layers(cfg: dict[str, Any], indices: list[int], where: str) -> list[LayerKV]:
    """One latent head of ``kv_lora_rank + qk_rope_head_dim`` per MLA layer; V3.2 adds indexer keys
    of ``index_head_dim`` fp8 values + one fp32 scale per 128 values (vLLM's indexer cache)."""
    rope = _field(cfg, "qk_rope_head_dim", "the MLA latent size", where)
    latent = int(cfg["kv_lora_rank"]) + int(rope)
    index_dim = cfg.get("index_head_dim")
    layers = []
    for i in indices:
        layers.append(LayerKV(name=f"layers.{i}", kind="mla", num_kv_heads=1, head_size=latent))
        if index_dim:
            layers.append(
                LayerKV(
                    name=f"layers.{i}.indexer",
                    kind="mla",
                    num_kv_heads=1,
                    head_size=int(index_dim) + int(index_dim) // 128 * 4,
                    element_bytes=1,
                )
            )
    return layers


def _share_kv(layers: list[LayerKV], shared: int, num_layers: int, where: str) -> list[LayerKV]:
    """Mark the last ``shared`` layers as reusing the last earlier non-shared layer of their kind."""
    if not shared:
        return layers
    first_shared = num_layers - shared
    if shared < 0 or first_shared <= 0:
        raise ValueError(f"{where}: num_kv_shared_layers ({shared}) must be in [0, {num_layers})")
    index = {layer.name: int(layer.name.split(".")[1]) for layer in layers}
    out = []
    for layer in layers:
        if index[layer.name] < first_shared:
            out.append(layer)
            continue
        targets = [t for t in layers if index[t.name] < first_shared and t.kind == layer.kind]
        if not targets:
            raise ValueError(f"{where}: shared layer {layer.name!r} has no earlier {layer.kind} layer "
                             "to reuse")
        out.append(dataclasses.replace(layer, kv_shared_with=targets[-1].name))
    return out


def _optional_int(cfg: dict[str, Any], key: str, source: str) -> int | None:
    """``cfg[key]`` as an int, ``None`` when absent (``num_parameters`` and ``num_active_parameters``
    are kvlab's own keys: a ``config.json`` may add them for the step-time model)."""
    value = cfg.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value <= 0:
        raise ValueError(f"{source}: {key!r} must be a positive integer, got {value!r}")
    return int(value)
