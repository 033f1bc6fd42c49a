"""Reading tests/data/vllm_startup_logs.json: entries, their verbatim lines, their kvlab configuration."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kvlab.models import model_from_hf_config
from kvlab.serving import EngineConfig

DATA = Path(__file__).resolve().parents[1] / "data" / "vllm_startup_logs.json"


def load_entries() -> list[dict]:
    return json.loads(DATA.read_text(encoding="utf-8"))["entries"]


def engine_config(entry: dict) -> EngineConfig:
    """The kvlab configuration an entry names (its memory is a placeholder: the log gives it)."""
    kw = {k: v for k, v in entry["kvlab"].items() if v is not None}
    config = kw.pop("model_config", None)
    model = model_from_hf_config(config, name=entry["id"]) if config else kw.pop("model")
    return EngineConfig(model, kv_cache_memory="1GiB", **kw)


def number(line: str, pattern: str) -> float:
    """The first group of ``pattern`` in ``line`` as a number (thousands separators removed)."""
    m = re.search(pattern, line)
    if m is None:
        raise AssertionError(f"{pattern!r} not found in {line!r}")
    return float(m.group(1).replace(",", ""))


def logged(entry: dict) -> dict:
    """The values in an entry's verbatim lines: memory (GiB), tokens, concurrency text, blocks…"""
    lines, out = entry["lines"], {}
    if "available" in lines:
        out["available_gib"] = number(lines["available"], r"([\d.]+) ?GiB")
    if "size" in lines:
        out["tokens"] = int(number(lines["size"], r"([\d,]+) tokens"))
    if "concurrency" in lines:
        out["concurrency"] = re.search(r"([\d.]+)x", lines["concurrency"]).group(1)
        if "tokens per request" in lines["concurrency"]:  # vLLM's line; a quoted table may lack it
            out["max_model_len"] = int(number(lines["concurrency"], r"for ([\d,]+) tokens"))
    if "blocks" in lines:
        out["blocks"] = int(number(lines["blocks"], r"GPU blocks: (\d+)"))
    if "block_size" in lines:
        out["block_size"] = int(number(lines["block_size"], r"\(?(\d+) tokens"))
    if "error" in lines:
        err = lines["error"]
        out["error_len"] = int(number(err, r"max seq len \((\d+)\)"))
        if "KV cache is needed" in err:
            out["needed_gib"] = number(err, r"\(([\d.]+) GiB KV cache is needed")
            out["error_available_gib"] = number(err, r"available KV cache memory \(([\d.]+) GiB\)")
        if "estimated maximum model length is" in err:
            out["estimate"] = int(number(err, r"estimated maximum model length is (\d+)"))
        if "stored in KV cache (" in err:
            out["v0_tokens"] = int(number(err, r"stored in KV cache \((\d+)\)"))
    return out
