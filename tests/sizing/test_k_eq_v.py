"""``attention_k_eq_v`` (Gemma 4's full-attention layers): one projection for K and V, two cached tensors.

vLLM's ``Gemma4Attention`` (``vllm/model_executor/models/gemma4.py``) loads the K weights into both
the K and V slots of an ordinary ``QKVParallelLinear`` and caches through a standard ``Attention``
layer, so the layer's spec is a plain full-attention spec with K *and* V. Storing one tensor would
not even be correct: K gets ``k_norm`` and RoPE, V only a weightless ``v_norm``, so the cached K and V
differ although they come from the same projection.
"""

from __future__ import annotations

from kvlab.models import get_model, model_from_hf_config


def test_gemma4_31b_full_layer_caches_k_and_v():
    # 4 global KV heads x 512, bf16, block 16: 16 x 4 x 512 x 2 B = 65,536 B for K, the same for V
    spec = get_model("gemma-4-31b").layer_specs(16)["layers.5"]
    assert spec.kind == "full" and spec.num_kv_heads == 4 and spec.head_size == 512
    assert spec.page_size_bytes == 2 * 65_536


def test_k_eq_v_switches_the_head_count_not_the_storage():
    # the flag selects num_global_key_value_heads (2) for full layers; without it they keep 8 heads
    base = {"num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"],
            "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256, "global_head_dim": 512,
            "num_global_key_value_heads": 2, "sliding_window": 1024, "max_position_embeddings": 4096}
    tied = model_from_hf_config({**base, "attention_k_eq_v": True}, name="tied")
    untied = model_from_hf_config({**base, "attention_k_eq_v": False}, name="untied")
    tied, untied = tied.layer_specs(16)["layers.1"], untied.layer_specs(16)["layers.1"]
    assert tied.page_size_bytes == 16 * 2 * 512 * 2 * 2  # 65,536 B: 2 heads, K and V
    assert untied.page_size_bytes == 16 * 8 * 512 * 2 * 2  # 262,144 B: 8 heads, K and V
