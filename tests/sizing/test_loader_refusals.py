"""The config loader sizes what it understands and refuses, naming the field, what it does not."""

from __future__ import annotations

import pytest

from kvlab.models import model_from_hf_config

BASE = {"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
        "max_position_embeddings": 4096}


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"cross_attention_layers": [1, 3]}, "cross_attention_layers"),
        ({"is_encoder_decoder": True}, "is_encoder_decoder"),
        ({"compress_ratios": [0, 4, 128, 4]}, "compress_ratios"),
        ({"linear_attn_config": {"kda_layers": [1]}}, "linear_attn_config"),
        ({"attn_type_list": [0, 1, 0, 1]}, "attn_type_list"),
        ({"shared_attention_layers": [0]}, "shared_attention_layers"),
    ],
)
def test_fields_that_change_the_cache_are_refused_by_name(extra, field):
    with pytest.raises(ValueError, match=f"field '{field}'"):
        model_from_hf_config({**BASE, **extra})


def test_harmless_false_values_are_not_refused():
    model = model_from_hf_config({**BASE, "is_encoder_decoder": False})
    assert len(model.layers) == 4


@pytest.mark.parametrize("model_type", ["deepseek_v4", "kimi_linear", "zamba2", "mllama"])
def test_unsupported_model_types_are_refused(model_type):
    with pytest.raises(ValueError, match=f"model_type '{model_type}' is not supported"):
        model_from_hf_config({**BASE, "model_type": model_type})


def test_unknown_architecture_names_the_fields_kvlab_needs():
    with pytest.raises(ValueError,
                       match="unknown architecture.*num_key_value_heads.*max_position_embeddings"):
        model_from_hf_config({"model_type": "gpt2", "n_layer": 12, "n_head": 12, "n_embd": 768})


def test_unknown_layer_type_and_pattern_letter_are_refused():
    with pytest.raises(ValueError, match="unsupported values \\['conv'\\]"):
        model_from_hf_config({**BASE, "layer_types": ["full_attention", "conv", "full_attention", "conv"]})
    with pytest.raises(ValueError, match="unsupported letters \\['Q'\\]"):
        model_from_hf_config({**BASE, "hybrid_override_pattern": "M*QM", "mamba_num_heads": 8})


def test_missing_state_field_is_named():
    cfg = {**BASE,
           "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
           "linear_conv_kernel_dim": 4, "linear_num_key_heads": 4, "linear_key_head_dim": 64,
           "linear_num_value_heads": 8}
    with pytest.raises(ValueError, match="missing 'linear_value_head_dim'"):
        model_from_hf_config(cfg)
