"""Sizes and lengths on the command line are read the way vLLM and Hugging Face write them, and the
first command a user types succeeds with the defaults.

Hand-worked numbers: Llama 3.1 8B stores 32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 bytes
= 131,072 B per token, so a 16-token block of all layers is 2 MiB. 16 GiB holds 8,192 blocks; block 0
is the null block, which leaves 8,191 blocks = 131,056 tokens for one request (not the full 131,072).
"""

from __future__ import annotations

import json

import pytest

from kvlab.cli.main import main
from kvlab.sizing.memory_units import format_gib, parse_memory, parse_token_count


def run(capsys, argv):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_capacity_with_only_a_model_succeeds_and_says_what_it_shortened(capsys):
    code, out, err = run(capsys, ["capacity", "--model", "llama-3.1-8b", "--json"])
    assert code == 0, err
    plan = json.loads(out)
    assert plan["max_model_len"] == 131_056  # 8,191 usable blocks x 16 tokens (docstring)
    assert plan["num_blocks"] == 8_192
    assert "131,072" in err and "131,056" in err and "--max-model-len" in err


def test_capacity_default_keeps_the_full_context_when_it_fits(capsys):
    argv = ["capacity", "--model", "llama-3.1-8b", "--kv-cache-memory", "17GiB", "--json"]
    code, out, err = run(capsys, argv)
    assert code == 0, err
    assert json.loads(out)["max_model_len"] == 131_072
    assert err == ""


@pytest.mark.parametrize(
    ("flag", "tokens"),
    [("32k", 32_000), ("32K", 32_768), ("25.6k", 25_600), ("1M", 1_048_576), ("8192", 8_192)],
)
def test_max_model_len_reads_vllm_suffixes(capsys, flag, tokens):
    argv = ["capacity", "--model", "llama-3.1-8b", "--kv-cache-memory", "200GiB", "--max-model-len", flag]
    code, out, err = run(capsys, [*argv, "--json"])
    assert code == 0, err
    assert json.loads(out)["max_model_len"] == tokens
    # 2 MiB per 16-token block (docstring): the request's blocks, rounded up
    assert json.loads(out)["blocks_per_request"] == -(-tokens // 16)


@pytest.mark.parametrize("flag", ["1.5K", "32x", "k", "3.2.1k"])
def test_bad_lengths_are_refused_with_the_accepted_forms(capsys, flag):
    with pytest.raises(SystemExit) as stop:
        main(["capacity", "--model", "llama-3.1-8b", "--max-model-len", flag])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "32k" in err and "32K" in err and flag in err


@pytest.mark.parametrize("flag", ["20", "1000", "1048575"])
def test_a_bare_memory_number_below_one_mib_is_refused_with_the_units(capsys, flag):
    code, _, err = run(capsys, ["capacity", "--model", "llama-3.1-8b", "--kv-cache-memory", flag])
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert f"{flag} bytes" in err and "GiB" in err and "MiB" in err


def test_one_byte_of_memory_reports_sizes_that_are_not_negative(capsys):
    code, _, err = run(capsys, ["capacity", "--model", "llama-3.1-8b", "--kv-cache-memory", "1B"])
    assert code == 2
    assert "-0.00" not in err
    assert "1 B of KV-cache memory" in err and "2.00 MiB" in err  # one block of 2 MiB (docstring)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("16G", 16 * 2**30),
        ("16g", 16 * 10**9),
        ("512M", 512 * 2**20),
        ("1048576", 2**20),
        ("1B", 1),
        ("20GiB", 20 * 2**30),
    ],
)
def test_parse_memory_reads_vllm_letters_and_explicit_units(text, expected):
    assert parse_memory(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"), [("32k", 32_000), ("32K", 32_768), ("1M", 2**20), ("1m", 10**6), ("-1", -1)]
)
def test_parse_token_count(text, expected):
    assert parse_token_count(text) == expected


@pytest.mark.parametrize(
    ("num_bytes", "text"),
    [(1, "1 B"), (-5, "0 B"), (3 * 2**10, "3.00 KiB"), (2 * 2**20, "2.00 MiB"), (16 * 2**30, "16.00 GiB")],
)
def test_format_gib_never_prints_a_negative_or_zero_gib_for_a_small_size(num_bytes, text):
    assert format_gib(num_bytes) == text


def test_budget_prompt_tokens_accept_suffixes(capsys):
    argv = ["budget", "--model", "llama-3.1-8b", "--max-model-len", "64K", "--prompt-tokens", "64K"]
    code, out, err = run(capsys, [*argv, "--policy", "uncapped", "--json"])
    assert code == 0, err
    body = json.loads(out)
    assert body["prompt_tokens"] == 65_536
    assert body["policies"]["uncapped"]["total"] >= 65_536 // 16
