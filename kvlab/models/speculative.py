"""Speculative decoding as the KV cache sees it (vLLM's ``--speculative-config``).

Speculative decoding changes the cache in three ways:

1. **The draft's own KV.** The draft's attention layers get their own specs in the same pool:
   ``mtp`` adds the model's own multi-token-prediction modules (``num_nextn_predict_layers`` /
   ``mtp_num_hidden_layers``), each shaped like the target's attention layers (MLA for DeepSeek);
   ``eagle`` / ``eagle3`` add one decoder layer shaped like the target's (unless a draft config is
   given); ``draft_model`` adds every layer of the draft model; ``ngram`` / ``suffix`` add none.
2. **Lookahead slots.** Each step allocates ``num_speculative_tokens`` slots beyond the verified
   tokens (``num_lookahead_tokens`` of ``allocate_slots``): they are never cached, but the first
   step of a request and every decode step must find room for them.
3. **State layers** keep one more state page per speculative token
   (``MambaSpec.num_speculative_blocks``), and a gated-DeltaNet / Mamba-2 conv window keeps that
   many more rows.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from kvlab.models.model import LayerKV, ModelKV
from kvlab.validation import require_choice, require_positive_int

SPECULATIVE_METHODS = ("mtp", "eagle", "eagle3", "draft_model", "ngram", "suffix")


@dataclass(frozen=True)
class SpeculativeConfig:
    """What ``--speculative-config`` says, as far as the cache is concerned.

    Attributes:
        method: ``"mtp"``, ``"eagle"``, ``"eagle3"``, ``"draft_model"``, ``"ngram"`` or ``"suffix"``.
        num_speculative_tokens: tokens proposed per step (k).
        draft_model: the draft's KV facts (required for ``draft_model``; optional for EAGLE).
        num_draft_layers: MTP modules used (default: all the model ships).
    """

    method: str
    num_speculative_tokens: int
    draft_model: ModelKV | None = None
    num_draft_layers: int | None = None

    def __post_init__(self) -> None:
        require_choice(self.method, SPECULATIVE_METHODS, "speculative method")
        require_positive_int(self.num_speculative_tokens, "num_speculative_tokens")
        if self.num_draft_layers is not None:
            require_positive_int(self.num_draft_layers, "num_draft_layers")
        if self.method == "draft_model" and self.draft_model is None:
            raise ValueError("speculative method 'draft_model' needs the draft model "
                             "(a preset or config.json)")

    @classmethod
    def parse(cls, value: SpeculativeConfig | dict[str, Any] | str) -> SpeculativeConfig:
        """From a config object, a dict or a JSON string
        (``'{"method": "mtp", "num_speculative_tokens": 2}'``).

        The draft ``model`` may be a preset name or a ``config.json`` path.
        """
        if isinstance(value, SpeculativeConfig):
            return value
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"speculative config must be JSON, e.g. "
                                 f"'{{\"method\": \"mtp\", \"num_speculative_tokens\": 2}}': {exc}") from None
        if not isinstance(value, dict):
            raise ValueError(f"speculative config must be a JSON object, got {type(value).__name__}")
        known = {"method", "num_speculative_tokens", "model", "draft_model", "num_draft_layers"}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"speculative config has unknown keys {unknown}; known: {sorted(known)}")
        draft = value.get("draft_model") or value.get("model")
        if draft is not None and not isinstance(draft, ModelKV):
            from kvlab.models.presets import get_model

            draft = get_model(draft)
        method = value.get("method") or ("draft_model" if draft is not None else None)
        if method is None or "num_speculative_tokens" not in value:
            raise ValueError("speculative config needs 'method' and 'num_speculative_tokens'")
        return cls(method, value["num_speculative_tokens"], draft, value.get("num_draft_layers"))

    def draft_layers(self, target: ModelKV) -> tuple[LayerKV, ...]:
        """The attention layers the draft adds to the pool (names prefixed ``draft.``)."""
        if self.method in ("ngram", "suffix"):
            return ()
        if self.draft_model is not None:
            return tuple(
                dataclasses.replace(
                    layer,
                    name=f"draft.{layer.name}",
                    kv_shared_with=f"draft.{layer.kv_shared_with}" if layer.kv_shared_with else None,
                )
                for layer in self.draft_model.layers
            )
        template = _last_full_layer(target)
        if self.method == "mtp":
            count = self.num_draft_layers or target.mtp_layers
            if not count:
                raise ValueError(
                    f"model {target.name!r} ships no MTP modules (num_nextn_predict_layers / "
                    "mtp_num_hidden_layers is 0); use eagle, draft_model or ngram"
                )
            return tuple(dataclasses.replace(template, name=f"draft.mtp.{i}") for i in range(count))
        return (dataclasses.replace(template, name="draft.eagle.0"),)


def _last_full_layer(model: ModelKV) -> LayerKV:
    for layer in reversed(model.layers):
        if (layer.kind in ("full", "mla") and layer.kv_shared_with is None
                and not layer.name.endswith(".indexer")):
            return dataclasses.replace(layer, kv_shared_with=None)
    raise ValueError(f"model {model.name!r} has no full-attention layer to shape the draft's KV on")
