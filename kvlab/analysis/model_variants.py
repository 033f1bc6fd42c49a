"""What-if variants of a model: the same layers with another window, or with every layer full attention.

These answer "what does the sliding window buy?" by comparing a model with itself: every layer keeps
its heads and head size; only how long it keeps tokens changes.
"""

from __future__ import annotations

import dataclasses

from kvlab.models import ModelKV
from kvlab.validation import require_positive_int


def as_full_attention(model: ModelKV) -> ModelKV:
    """``model`` with every sliding-window and chunked layer turned into a full-attention layer.

    The memory this model needs is what vLLM allocates with ``disable_hybrid_kv_cache_manager``
    (windowed layers promoted to full allocation), and it also exists for models with no full layer.
    """
    layers = tuple(
        dataclasses.replace(layer, kind="full", sliding_window=None, attention_chunk_size=None)
        for layer in model.layers
    )
    return dataclasses.replace(model, name=f"{model.name} (every layer full)", layers=layers)


def with_sliding_window(model: ModelKV, window: int) -> ModelKV:
    """``model`` with every sliding-window layer's window set to ``window`` tokens.

    Raises:
        ValueError: the model has no sliding-window layer, or ``window`` is not a positive integer.
    """
    require_positive_int(window, "sliding_window")
    if not model.count("sliding_window"):
        raise ValueError(f"{model.name} has no sliding-window layer; its window cannot be changed")
    layers = tuple(
        dataclasses.replace(layer, sliding_window=window) if layer.kind == "sliding_window" else layer
        for layer in model.layers
    )
    return dataclasses.replace(model, layers=layers)


def sliding_window_of(model: ModelKV) -> int | None:
    """The window of the model's sliding layers (tokens), or ``None`` when it has none.

    Raises:
        ValueError: the sliding layers disagree on their window.
    """
    windows = {layer.sliding_window for layer in model.layers if layer.kind == "sliding_window"}
    if len(windows) > 1:
        raise ValueError(f"{model.name} has several sliding windows: {sorted(windows)}")
    return next(iter(windows), None)
