"""Read the KV-relevant facts from a Hugging Face ``config.json`` (JSON only; nothing is downloaded).

Handled: a nested ``text_config`` (multimodal wrappers); ``layer_types`` (``full_attention``,
``sliding_attention``, ``chunked_attention``); ``sliding_window_pattern`` (every ``pattern``-th
layer is full); ``sliding_window`` on every layer otherwise (unless ``use_sliding_window`` is false);
``head_dim`` absent or null → ``hidden_size // num_attention_heads``; ``head_dim`` /
``num_key_value_heads`` given as per-layer lists; full-attention layers with ``global_head_dim`` and,
when ``attention_k_eq_v`` is true, ``num_global_key_value_heads`` (Gemma 4: K and V are both cached).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvlab.models.model import LayerKV, ModelKV

_KIND_BY_LAYER_TYPE = {
    "full_attention": "full",
    "attention": "full",
    "global": "full",
    "sliding_attention": "sliding_window",
    "sliding_window": "sliding_window",
    "local": "sliding_window",
    "chunked_attention": "chunked_local",
}

_DTYPES = {
    "bfloat16": "bfloat16",
    "float16": "float16",
    "half": "float16",
    "float32": "float32",
    "float": "float32",
}


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
    outer = config
    cfg = dict(config.get("text_config") or {}) or dict(config)
    if "text_config" in config:
        for key in ("max_position_embeddings", "torch_dtype", "dtype"):
            cfg.setdefault(key, outer.get(key))
    num_layers = int(_field(cfg, "num_hidden_layers", "the number of layers", where))
    if num_layers <= 0:
        raise ValueError(f"{where}: num_hidden_layers must be positive, got {num_layers}")

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

    window = cfg.get("sliding_window")
    layer_types = cfg.get("layer_types")
    pattern = cfg.get("sliding_window_pattern")
    if layer_types is not None:
        if len(layer_types) != num_layers:
            raise ValueError(
                f"{where}: layer_types lists {len(layer_types)} layers, num_hidden_layers is {num_layers}"
            )
        unknown = sorted({t for t in layer_types if t not in _KIND_BY_LAYER_TYPE})
        if unknown:
            raise ValueError(
                f"{where}: layer_types has unsupported values {unknown}; "
                f"supported: {sorted(_KIND_BY_LAYER_TYPE)}"
            )
        kinds = [_KIND_BY_LAYER_TYPE[t] for t in layer_types]
    elif pattern:
        kinds = ["full" if (i + 1) % int(pattern) == 0 else "sliding_window" for i in range(num_layers)]
    elif window is not None and cfg.get("use_sliding_window", True):
        kinds = ["sliding_window"] * num_layers
    else:
        kinds = ["full"] * num_layers
    if "sliding_window" in kinds and window is None:
        raise ValueError(f"{where} is missing 'sliding_window' (needed for the sliding-window layers)")
    chunk = cfg.get("attention_chunk_size")
    if "chunked_local" in kinds and chunk is None:
        raise ValueError(
            f"{where} is missing 'attention_chunk_size' (needed for the chunked-attention layers)"
        )

    global_head_dim = cfg.get("global_head_dim")
    global_kv_heads = cfg.get("num_global_key_value_heads") if cfg.get("attention_k_eq_v") else None
    layers = []
    for i, kind in enumerate(kinds):
        heads, dim = int(kv_heads_list[i]), int(head_dims[i])
        if kind == "full":
            dim = int(global_head_dim) if global_head_dim else dim
            heads = int(global_kv_heads) if global_kv_heads else heads
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
    max_len = _field(cfg, "max_position_embeddings", "the default max_model_len", where)
    dtype = _DTYPES.get(str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"), "bfloat16")
    return ModelKV(
        name=name or str(outer.get("_name_or_path") or cfg.get("model_type") or where),
        layers=tuple(layers),
        max_position_embeddings=int(max_len),
        dtype=dtype,
        source=source or where,
        num_attention_heads=_optional_int(cfg, "num_attention_heads", where),
        num_parameters=_optional_int(outer, "num_parameters", where),
        num_active_parameters=_optional_int(outer, "num_active_parameters", where),
    )


def _optional_int(cfg: dict[str, Any], key: str, source: str) -> int | None:
    """``cfg[key]`` as an int, ``None`` when absent (``num_parameters`` and ``num_active_parameters``
    are kvlab's own keys: a ``config.json`` may add them for the step-time model)."""
    value = cfg.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or value <= 0:
        raise ValueError(f"{source}: {key!r} must be a positive integer, got {value!r}")
    return int(value)
