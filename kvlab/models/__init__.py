"""Models as the KV cache sees them: attention layers, their heads, head sizes and windows.

* :class:`ModelKV` / :class:`LayerKV`: the facts, and :meth:`ModelKV.layer_specs` for one GPU of a
  tensor-parallel group (KV heads split as ``max(1, heads // tp)``);
* :func:`model_from_hf_config`: any Hugging Face ``config.json`` (dict or path);
* :func:`get_model`: a preset (:data:`PRESET_NAMES`) or a path.
"""

from kvlab.models.hf_config import model_from_hf_config, read_config_json
from kvlab.models.model import LAYER_KINDS, LayerKV, ModelKV
from kvlab.models.presets import PRESET_CONFIGS, PRESET_NAMES, get_model

__all__ = [
    "LAYER_KINDS",
    "PRESET_CONFIGS",
    "PRESET_NAMES",
    "LayerKV",
    "ModelKV",
    "get_model",
    "model_from_hf_config",
    "read_config_json",
]
