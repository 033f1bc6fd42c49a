"""Tensor parallelism: how KV heads split or replicate, and the splits vLLM refuses."""

from __future__ import annotations

import pytest

from kvlab.cli.main import main
from kvlab.models import get_model, model_from_hf_config
from kvlab.models.parallel import kv_heads_per_gpu
from kvlab.serving import EngineConfig, capacity


@pytest.mark.parametrize(
    ("kv_heads", "tp", "expected"),
    [(8, 1, 8), (8, 2, 4), (8, 8, 1), (8, 16, 1), (4, 8, 1), (2, 4, 1), (16, 4, 4)],
)
def test_kv_heads_split_or_replicate(kv_heads, tp, expected):
    # heads / tp when tp divides them; 1 head (replicated tp / heads times) when tp is a multiple
    assert kv_heads_per_gpu(kv_heads, tp) == expected


@pytest.mark.parametrize(("kv_heads", "tp"), [(8, 3), (8, 12), (8, 6), (4, 6), (7, 2)])
def test_kv_heads_that_split_unevenly_are_refused(kv_heads, tp):
    with pytest.raises(ValueError, match="KV heads cannot be"):
        kv_heads_per_gpu(kv_heads, tp)


def test_tp3_on_llama_8b_is_refused_with_vllms_reason():
    # 32 query heads do not split over 3 GPUs: vLLM's verify_with_parallel_config refuses first
    with pytest.raises(ValueError,
                       match=r"attention heads \(32\) must be divisible by the tensor parallel size \(3\)"):
        capacity(EngineConfig("llama-3.1-8b", "16GiB", tensor_parallel_size=3, max_model_len=8192))


def test_tp_cli_refusal_is_one_line(capsys):
    code = main(["capacity", "--model", "llama-3.1-8b", "-tp", "3", "--max-model-len", "8192"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "divisible by the tensor parallel size (3)" in err


def test_query_heads_split_but_kv_heads_do_not():
    # 48 query heads split over 3 GPUs, 8 KV heads do not (and 3 is no multiple of 8)
    model = model_from_hf_config(
        {"num_hidden_layers": 2, "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128,
         "max_position_embeddings": 4096}
    )
    assert model.layer_specs(16, "auto", 1)["layers.0"].num_kv_heads == 8
    with pytest.raises(ValueError, match="8 KV heads cannot be split evenly over tensor_parallel_size=3"):
        model.layer_specs(16, "auto", 3)


def test_replicated_heads_give_each_gpu_one_head_page():
    # TP 16 on 8 KV heads: one head per GPU, page 16 tokens x 1 head x (128 + 128) x 2 B = 8,192 B
    specs = get_model("llama-3.1-70b").layer_specs(16, "auto", 16)
    assert {s.num_kv_heads for s in specs.values()} == {1}
    assert {s.page_size_bytes for s in specs.values()} == {8192}


def test_query_heads_not_a_multiple_of_kv_heads_is_refused():
    with pytest.raises(ValueError, match="32 query heads are not a multiple of 7 KV heads"):
        model_from_hf_config(
            {"num_hidden_layers": 2, "num_attention_heads": 32, "num_key_value_heads": 7, "hidden_size": 4096,
             "max_position_embeddings": 4096}
        )
