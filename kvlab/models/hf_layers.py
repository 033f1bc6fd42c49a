"""Which layer of a ``config.json`` is what: attention kind, state kind, or neither (MLP-only).

Read, in this order (the first that the config has wins):

* ``layer_types`` (``full_attention``, ``sliding_attention``, ``chunked_attention``,
  ``linear_attention`` = gated DeltaNet, ``mamba`` = Mamba-2);
* ``hybrid_override_pattern`` (Nemotron-H: ``M`` Mamba-2, ``*`` attention, ``-`` / ``E`` MLP only);
* ``full_attention_interval`` (Qwen3-Next: every n-th layer full, the others gated DeltaNet);
* ``attn_layer_period`` / ``attn_layer_offset`` (Jamba: attention where ``i % period == offset``,
  Mamba-1 elsewhere);
* ``model_type == "falcon_h1"`` (every layer has attention *and* Mamba-2 side by side);
* ``sliding_window_pattern`` (every n-th layer full), ``sliding_window`` on every layer (unless
  ``use_sliding_window`` is false), else full attention everywhere.
"""

from __future__ import annotations

from typing import Any

_ATTENTION = {
    "full_attention": "full",
    "attention": "full",
    "global": "full",
    "sliding_attention": "sliding_window",
    "sliding_window": "sliding_window",
    "local": "sliding_window",
    "chunked_attention": "chunked_local",
}
_STATE = {"linear_attention": "gated_delta_net", "mamba": "mamba2", "mamba2": "mamba2"}
_PATTERN = {"M": (None, "mamba2"), "*": ("full", None), "-": (None, None), "E": (None, None)}

#: ``(attention kind or None, state kind or None)`` for one layer.
LayerPlan = tuple[str | None, str | None]


def layer_plan(cfg: dict[str, Any], num_layers: int, where: str) -> list[LayerPlan]:
    """What each of the ``num_layers`` layers caches.

    Raises:
        ValueError: an unknown layer type or pattern letter, or a list of the wrong length.
    """
    layer_types = cfg.get("layer_types")
    if layer_types is not None:
        if len(layer_types) != num_layers:
            raise ValueError(
                f"{where}: layer_types lists {len(layer_types)} layers, num_hidden_layers is {num_layers}"
            )
        unknown = sorted({t for t in layer_types if t not in _ATTENTION and t not in _STATE})
        if unknown:
            raise ValueError(
                f"{where}: layer_types has unsupported values {unknown}; "
                f"supported: {sorted(_ATTENTION) + sorted(_STATE)}"
            )
        return [(_ATTENTION.get(t), _STATE.get(t)) for t in layer_types]
    pattern = cfg.get("hybrid_override_pattern")
    if pattern is not None:
        if len(pattern) != num_layers:
            raise ValueError(
                f"{where}: hybrid_override_pattern has {len(pattern)} letters, "
                f"num_hidden_layers is {num_layers}"
            )
        unknown = sorted(set(pattern) - set(_PATTERN))
        if unknown:
            raise ValueError(
                f"{where}: hybrid_override_pattern has unsupported letters {unknown}; supported: M * - E"
            )
        return [_PATTERN[c] for c in pattern]
    interval = cfg.get("full_attention_interval")
    if interval:
        return [("full", None) if (i + 1) % int(interval) == 0 else (None, "gated_delta_net")
                for i in range(num_layers)]
    period = cfg.get("attn_layer_period")
    if period:
        offset = int(cfg.get("attn_layer_offset") or 0)
        return [("full", None) if i % int(period) == offset else (None, "mamba1") for i in range(num_layers)]
    if cfg.get("model_type") == "falcon_h1":
        return [("full", "mamba2")] * num_layers
    window = cfg.get("sliding_window")
    every = cfg.get("sliding_window_pattern")
    if every:
        return [("full" if (i + 1) % int(every) == 0 else "sliding_window", None) for i in range(num_layers)]
    if window is not None and cfg.get("use_sliding_window", True):
        return [("sliding_window", None)] * num_layers
    return [("full", None)] * num_layers
