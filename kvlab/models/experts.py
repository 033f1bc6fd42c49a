"""Routed-expert weights of a mixture-of-experts checkpoint stored in its own format.

Some checkpoints keep the routed experts in a low-bit format and every other weight in bf16:
gpt-oss's ``quantization_config`` is ``{"quant_method": "mxfp4"}`` with attention, router,
embeddings and LM head left unconverted. Weight memory then has to be counted per part, which needs
the experts' shapes from ``config.json``. Each expert is a gated MLP: gate and up projections
(``hidden × intermediate`` each) and a down projection (``intermediate × hidden``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvlab.validation import require_positive_int

#: ``quantization_config.quant_method`` values whose routed experts kvlab counts apart, and the
#: weight format kvlab calls them by.
EXPERT_QUANT_METHODS: dict[str, str] = {"mxfp4": "mxfp4"}


@dataclass(frozen=True)
class ExpertWeights:
    """The routed experts of every MoE layer.

    Attributes:
        num_layers: layers with routed experts.
        num_experts: routed experts per layer.
        hidden_size: the residual width (elements).
        intermediate_size: one expert's MLP width (elements).
        dtype: the format the checkpoint stores them in (``"mxfp4"``).
    """

    num_layers: int
    num_experts: int
    hidden_size: int
    intermediate_size: int
    dtype: str

    def __post_init__(self) -> None:
        for field in ("num_layers", "num_experts", "hidden_size", "intermediate_size"):
            require_positive_int(getattr(self, field), f"experts.{field}")

    @property
    def num_parameters(self) -> int:
        """Weights in all routed experts: ``layers × experts × 3 × hidden × intermediate``."""
        return self.num_layers * self.num_experts * 3 * self.hidden_size * self.intermediate_size


def expert_weights_from_config(
    cfg: dict[str, Any], outer: dict[str, Any], num_layers: int
) -> ExpertWeights | None:
    """The experts of a config whose ``quantization_config`` stores them apart, else ``None``.

    Reads ``num_local_experts`` (or ``num_experts``), ``intermediate_size`` (or
    ``moe_intermediate_size``) and ``hidden_size``; every layer is taken to be an MoE layer (true of
    gpt-oss, the one family this applies to today).
    """
    quant = cfg.get("quantization_config") or outer.get("quantization_config") or {}
    method = str(quant.get("quant_method") or "") if isinstance(quant, dict) else ""
    if method not in EXPERT_QUANT_METHODS:
        return None
    experts = cfg.get("num_local_experts") or cfg.get("num_experts")
    width = cfg.get("moe_intermediate_size") or cfg.get("intermediate_size")
    hidden = cfg.get("hidden_size")
    missing = [
        name
        for name, v in (("num_local_experts", experts), ("intermediate_size", width), ("hidden_size", hidden))
        if not v
    ]
    if missing:
        raise ValueError(
            f"quantization_config.quant_method {method!r} stores the routed experts apart, so kvlab "
            f"needs {', '.join(missing)} to count their bytes"
        )
    return ExpertWeights(num_layers, int(experts), int(hidden), int(width), EXPERT_QUANT_METHODS[method])
