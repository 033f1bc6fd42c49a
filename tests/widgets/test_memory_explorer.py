"""The memory explorer shows the capacity of :func:`kvlab.serving.capacity` and ``kvlab capacity``."""

from __future__ import annotations

import datetime
import json

import pytest

from kvlab.analysis import as_full_attention
from kvlab.cli.main import main as kvlab_main
from kvlab.models import get_model
from kvlab.serving import EngineConfig, capacity
from kvlab.widgets.memory_explorer import build_memory_explorer
from tests.widgets.figure_checks import assert_well_formed

GIB = 2**30


@pytest.fixture
def explorer():
    return build_memory_explorer(model="gemma-3-27b", kv_memory_gib=20.0, max_model_len=32768, debounce_s=0)


def _trace(fig, name):
    return next(t for t in fig.data if t.name == name)


def _settings(explorer) -> dict:
    c = explorer.controls
    return dict(kv_cache_memory=c["kv_memory_gib"].value * GIB, kv_cache_dtype=c["kv_cache_dtype"].value,
                block_size=c["block_size"].value, max_model_len=c["max_model_len"].value,
                max_num_batched_tokens=c["max_num_batched_tokens"].value,
                tensor_parallel_size=c["tensor_parallel_size"].value, profile=c["profile"].value)


@pytest.mark.parametrize("changes", [
    {},
    {"model": "gemma-4-31b", "tensor_parallel_size": 2, "kv_cache_dtype": "int8_per_token_head",
     "max_model_len": 131072, "kv_memory_gib": 24.0},
    {"model": "mistral-7b-v0.1", "block_size": 32, "profile": "vllm-0.20", "max_num_batched_tokens": 2048},
])
def test_concurrency_equals_the_capacity_function_and_the_cli(explorer, changes, capsys):
    for name, value in changes.items():
        explorer.controls[name].value = value
    settings = _settings(explorer)
    model = explorer.controls["model"].value
    plan = capacity(EngineConfig(model, **settings))
    fig = explorer.figures["concurrency"]
    configured = _trace(fig, "as configured")
    shown = dict(zip(configured.x, configured.y, strict=True))[settings["max_model_len"]]
    assert shown == pytest.approx(plan.max_concurrency, rel=1e-12)

    args = ["capacity", "--model", model, "--kv-cache-memory", str(int(settings["kv_cache_memory"])),
            "--kv-cache-dtype", settings["kv_cache_dtype"], "--block-size", str(settings["block_size"]),
            "--max-model-len", str(settings["max_model_len"]),
            "--max-num-batched-tokens", str(settings["max_num_batched_tokens"]),
            "--tensor-parallel-size", str(settings["tensor_parallel_size"]), "--profile", settings["profile"],
            "--json"]
    assert kvlab_main(args) == 0
    cli = json.loads(capsys.readouterr().out)
    assert shown == pytest.approx(cli["max_concurrency"], abs=1e-4)
    assert f"{cli['num_blocks']:,}" in explorer.summary.value
    assert f"{cli['kv_cache_tokens']:,}" in explorer.summary.value


def test_request_memory_bars_add_up_to_the_blocks_of_one_request(explorer):
    settings = _settings(explorer)
    plan = capacity(EngineConfig("gemma-3-27b", **settings))
    full = capacity(EngineConfig(as_full_attention(get_model("gemma-3-27b")), **settings))
    bars = [t for t in explorer.figures["memory"].data if t.type == "bar"]
    held = {}
    for t in bars:
        held[t.y[0]] = held.get(t.y[0], 0.0) + t.x[0]
    assert held["as configured"] == pytest.approx(plan.blocks_per_max_request * plan.bytes_per_block / GIB)
    assert held["every layer full"] == pytest.approx(full.blocks_per_max_request * full.bytes_per_block / GIB)
    # the window is what lets gemma-3 hold more requests: the all-full request is bigger
    assert held["every layer full"] > held["as configured"]


def test_bytes_per_token_follow_the_heads_and_dtype(explorer):
    # gemma-3-27b: 16 KV heads × 128 channels, K and V, bf16 → 8,192 B per token per layer
    data = _trace(explorer.figures["bytes"], "K and V data")
    assert set(data.y) == {16 * 2 * 128 * 2}
    explorer.controls["kv_cache_dtype"].value = "int8_per_token_head"
    explorer.controls["tensor_parallel_size"].value = 2
    data = _trace(explorer.figures["bytes"], "K and V data")
    scales = _trace(explorer.figures["bytes"], "fp32 scales")
    assert set(data.y) == {8 * 2 * 128 * 1} and set(scales.y) == {2 * 8 * 4}


def test_too_little_memory_shows_vllms_startup_error(explorer):
    explorer.controls["kv_memory_gib"].value = 0.5
    assert explorer.status.level == "error"
    assert "would not start" in explorer.status.message
    assert "estimated maximum model length" in explorer.status.message
    # lengths that do not fit are marked, not drawn as capacity
    failed = _trace(explorer.figures["concurrency"], "as configured: does not start")
    assert explorer.controls["max_model_len"].value in failed.x
    explorer.controls["kv_memory_gib"].value = 40.0
    assert explorer.status.level == "ok" and explorer.last_error is None


def _upload(name: str, content: bytes) -> dict:
    """What FileUpload.value holds for one file."""
    return {"name": name, "type": "application/json", "size": len(content),
            "last_modified": datetime.datetime.now(datetime.timezone.utc), "content": memoryview(content)}


def test_uploaded_config_json_becomes_a_model(explorer):
    cfg = {"num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8, "num_key_value_heads": 2,
           "sliding_window": 256, "layer_types": ["sliding_attention", "full_attention"] * 2,
           "max_position_embeddings": 65536, "torch_dtype": "bfloat16"}
    upload = _upload("tiny.json", json.dumps(cfg).encode())
    explorer.controls["upload"].value = (upload,)
    assert explorer.controls["model"].value == "uploaded: tiny.json"
    assert explorer.last_error is None, explorer.status.message
    labels = list(_trace(explorer.figures["bytes"], "K and V data").x)
    assert any(label.startswith("sliding_window W=256 · 2 KV heads × 64") for label in labels)
    assert any(label.startswith("full · 2 KV heads × 64") for label in labels)


def test_a_broken_upload_is_reported_in_the_widget(explorer):
    before = explorer.controls["model"].value
    upload = _upload("broken.json", b'{"hidden_size": 512')
    explorer.controls["upload"].value = (upload,)
    assert explorer.status.level == "error" and "broken.json" in explorer.status.message
    assert explorer.controls["model"].value == before


def test_every_figure_is_labelled(explorer):
    for name, fig in explorer.figures.items():
        assert_well_formed(fig, name)
