"""Inputs that once made kvlab build one Python object per layer or per block until memory ran out.

Each case runs in a child process whose address space is capped (``RLIMIT_AS``), so a regression
ends in a ``MemoryError`` in the child (and a failed test) instead of eating the machine. 1 GiB is
about four times what importing kvlab and refusing the input takes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is enforced on Linux")

ROOT = Path(__file__).resolve().parents[2]
CAP_BYTES = 2**30

_CHILD = textwrap.dedent(
    """
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
    from kvlab.models import model_from_hf_config
    try:
        model_from_hf_config(json.loads(sys.argv[1]))
    except ValueError as exc:
        print("ValueError:", exc)
    else:
        print("loaded")
    """
)


def _load_capped(config: dict) -> subprocess.CompletedProcess:
    code = _CHILD.format(cap=CAP_BYTES)
    return subprocess.run(
        [sys.executable, "-c", code, json.dumps(config)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


# The example hypothesis drew in test_config_loader_returns_a_model_or_a_value_error: a float layer count.
# ``int(4.1230297509721864e16)`` layers made ``[("sliding_window", None)] * num_layers``; smaller floats
# tried while shrinking grew lists of ~1e9 entries (GBs) before failing.
FOUND = {"num_hidden_layers": 4.1230297509721864e16, "num_key_value_heads": 2, "head_dim": 64,
         "hidden_size": 512, "max_position_embeddings": 4096, "text_config": False, "sliding_window": []}
BASE = {"num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64, "hidden_size": 512,
        "max_position_embeddings": 4096, "model_type": "llama"}


@pytest.mark.parametrize(
    ("config", "shown"),
    [
        (FOUND, "4.1230297509721864e+16"),
        # a whole number of layers, but a billion: a per-layer list of 1e9 tuples needs > 8 GB
        (BASE | {"num_hidden_layers": 10**9, "sliding_window_pattern": 2, "sliding_window": 512},
         "1000000000"),
        (BASE | {"num_hidden_layers": 4, "num_nextn_predict_layers": 10**12}, "1000000000000"),
    ],
    ids=["float-4e16-layers", "billion-layers", "trillion-mtp-layers"],
)
def test_a_huge_layer_count_is_refused_within_a_memory_cap(config, shown):
    done = _load_capped(config)
    assert "MemoryError" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]
    line = done.stdout.strip()
    assert line.startswith("ValueError: config.json: "), line
    assert "must be an integer from" in line and "10,000" in line and shown in line, line


def test_a_realistic_layer_count_still_loads():
    """126 layers (Llama 3.1 405B), 8 KV heads x 128: loads, each layer with 8 heads."""
    from kvlab.models import model_from_hf_config

    model = model_from_hf_config(BASE | {"num_hidden_layers": 126, "head_dim": 128, "num_key_value_heads": 8})
    assert len(model.layers) == 126
    assert {layer.num_kv_heads for layer in model.layers} == {8}


def test_a_float_layer_count_is_refused_in_one_line():
    from kvlab.models import model_from_hf_config

    expected = r"num_hidden_layers must be an integer from 1 to 10,000 \(layers\), got 32\.0"
    with pytest.raises(ValueError, match=expected):
        model_from_hf_config(BASE | {"num_hidden_layers": 32.0})
