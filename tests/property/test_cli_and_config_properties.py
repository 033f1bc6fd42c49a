"""Random flags and random config.json files end in a result or in one clear error, never a traceback.

A "clear error" is what the CLI promises (``kvlab.cli.main``): exit code 2 and one line
``kvlab <command>: error: ...`` — or argparse's own usage error (exit code 2) for a flag of the wrong
type. For the loader it is a ``ValueError`` whose message names the field. Any other exception type
(``TypeError``, ``KeyError``, ``ZeroDivisionError``, ...) escaping means a bad input reached deep code.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvlab.cli.main import main
from kvlab.models import ModelKV, model_from_hf_config

SETTINGS = settings(
    max_examples=60, deadline=None, derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

MODELS = ["llama-3.1-8b", "qwen3-8b", "gemma-4-31b", "gpt-oss-20b", "no-such-model", ""]
MEMORY = ["16GiB", "512MiB", "80GB", "1e15", "0", "-1", "1", "lots", "16 GiB", "nan", "inf", "1e400"]
LENGTHS = ["4096", "32k", "128K", "1M", "-1", "auto", "0", "x", "1.5", "99999999999"]
INTS = ["16", "0", "-3", "7", "24", "1", "x", "2.5", "100000000"]


def _flag(name: str, values: list[str]):
    return st.one_of(st.just([]), st.sampled_from(values).map(lambda v: [name, v]))


def _engine_flags():
    return st.tuples(
        st.sampled_from(MODELS).map(lambda m: ["--model", m]),
        _flag("--kv-cache-memory", MEMORY),
        _flag("--max-model-len", LENGTHS),
        _flag("--block-size", INTS),
        _flag("-tp", ["1", "2", "4", "8", "0", "-1"]),
        _flag("--max-num-batched-tokens", ["8192", "2048", "0", "-5", "16k", "x"]),
        _flag("--kv-cache-dtype", ["auto", "fp8", "int8_per_token_head", "bogus"]),
        _flag("--profile", ["vllm-0.20", "vllm-0.21", "vllm-0.33", "vllm-9"]),
        _flag("--num-gpu-blocks-override", INTS),
    ).map(lambda parts: [a for part in parts for a in part])


def _outcome(argv, capsys) -> None:
    """Run the CLI; assert it gave a result or exactly one clear error."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse: usage line + "error:" line, exit code 2
        assert exc.code == 2, argv
        assert "error:" in capsys.readouterr().err
        return
    out, err = capsys.readouterr()
    if code == 0:
        assert out.strip(), argv
    else:
        assert code == 2, (argv, code)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"kvlab {argv[0]}: error: "), (argv, err)


@SETTINGS
@given(flags=_engine_flags(), command=st.sampled_from(["capacity", "budget"]),
       prompt=st.sampled_from(["1000", "65536", "0", "-1", "32k", "x"]))
def test_capacity_and_budget_end_in_a_result_or_one_clear_error(capsys, flags, command, prompt):
    argv = [command, *flags] + (["--prompt-tokens", prompt] if command == "budget" else [])
    _outcome(argv + ["--json"], capsys)


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flags=_engine_flags(), requests=st.sampled_from(["1", "3", "0", "-2", "x"]),
       prompt=st.sampled_from(["100", "100:900", "900:100", "0", "5000000"]))
def test_simulate_ends_in_a_result_or_one_clear_error(capsys, flags, requests, prompt):
    argv = ["simulate", *flags, "--num-requests", requests, "--prompt-tokens", prompt,
            "--output-tokens", "4", "--max-steps", "3000", "--json"]
    _outcome(argv, capsys)


# -- config.json ------------------------------------------------------------------------------------------
_VALUES = st.one_of(
    st.integers(-4, 300), st.sampled_from([0, 1, 2, 7, 8, 32, 64, 128, 4096, 131072]), st.none(),
    st.booleans(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
    st.lists(st.integers(-1, 8), max_size=4), st.lists(st.sampled_from(["full_attention", "sliding_attention",
                                                                        "linear_attention", "mamba", "x"]),
                                                       max_size=6),
    st.dictionaries(st.sampled_from(["a", "rope_type"]), st.integers(0, 4), max_size=2),
)
_KEYS = [
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size",
    "max_position_embeddings", "sliding_window", "layer_types", "torch_dtype", "model_type",
    "attention_chunk_size", "global_head_dim", "num_global_key_value_heads", "attention_k_eq_v",
    "kv_lora_rank", "qk_rope_head_dim", "num_kv_shared_layers", "sliding_window_pattern",
    "text_config", "v_head_dim", "mamba_chunk_size", "num_nextn_predict_layers",
]
_BASE = {"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
         "hidden_size": 512, "max_position_embeddings": 4096, "model_type": "llama"}


@settings(max_examples=300, deadline=None)
@given(changes=st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=5),
       drop=st.lists(st.sampled_from(sorted(_BASE)), max_size=2))
def test_config_loader_returns_a_model_or_a_value_error(changes, drop):
    """Start from a valid small llama config, change or drop a few fields at random."""
    cfg = {k: v for k, v in _BASE.items() if k not in drop} | changes
    try:
        model = model_from_hf_config(cfg)
    except ValueError as exc:
        assert str(exc).strip() and "\n" not in str(exc).strip()
        return
    assert isinstance(model, ModelKV)
    assert model.layers or model.state_layers


@settings(max_examples=40, deadline=None)
@given(text=st.one_of(st.text(max_size=40), st.sampled_from(["[1, 2]", "{}", '{"num_hidden_layers": "x"}'])))
def test_a_config_file_of_random_text_gives_a_value_error(tmp_path_factory, text):
    """At most 40 characters cannot hold the fields a model needs: every one is refused clearly."""
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError):
        model_from_hf_config(path)


def test_a_valid_config_file_loads():
    """The base config by hand: 4 layers x 2 KV heads x 64 x 2 (K, V) x 2 B = 2,048 B per token."""
    model = model_from_hf_config(json.loads(json.dumps(_BASE)))
    assert len(model.layers) == 4
    assert all(layer.num_kv_heads == 2 and layer.head_size == 64 for layer in model.layers)


def test_a_page_size_the_profile_cannot_unify_is_one_clear_error(capsys):
    """Found by a random run: Gemma 4 31B at TP 8 with int8 per-token-head and 24-token blocks gives
    sliding pages of 24,768 B beside full pages of 24,960 B; vllm-0.21 cannot unify them (a newer
    profile pads), which used to escape the CLI as a NotImplementedError traceback."""
    argv = ["simulate", "--model", "gemma-4-31b", "--block-size", "24", "-tp", "8",
            "--kv-cache-dtype", "int8_per_token_head", "--profile", "vllm-0.21",
            "--num-requests", "1", "--prompt-tokens", "100", "--output-tokens", "4", "--json"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("kvlab simulate: error: layer 'layers.5' has a page of 24768 B that does not divide the "
                   "largest page (24960 B); this profile cannot unify the page sizes (a newer one pads them)")
