"""Each bad input to the real-model tools gives one clear message (exit code 2 from the CLI)."""

import pytest

from kvlab.cli.main import main
from kvlab.lm import CacheVariant, generate_greedy, parse_variants


def _cli_error(capsys, *argv):
    assert main(["quality", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    return err


def test_unknown_scheme_lists_the_allowed(capsys):
    err = _cli_error(capsys, "--kv-cache-dtype", "int3")
    assert "unknown kv_cache_dtype 'int3'" in err and "int8_per_token_head" in err and "fp8_e5m2" in err
    with pytest.raises(ValueError, match="valid names are"):
        CacheVariant("int3")
    with pytest.raises(ValueError, match="valid names are"):
        parse_variants(["bfloat16", "nope"])


def test_empty_and_non_utf8_and_missing_text_files(capsys, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    assert "is empty" in _cli_error(capsys, "--text-file", str(empty))
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    assert "is not valid UTF-8" in _cli_error(capsys, "--text-file", str(latin))
    assert "does not exist" in _cli_error(capsys, "--text-file", str(tmp_path / "none.txt"))


def test_window_below_one_and_too_few_tokens(capsys):
    assert "window must be an integer >= 1" in _cli_error(capsys, "--window", "0")
    assert "max_tokens must be >= 2" in _cli_error(capsys, "--max-tokens", "1")


def test_text_and_prompt_longer_than_the_context(model, capsys, tmp_path):
    long = tmp_path / "long.txt"
    long.write_text("word " * 9000, encoding="utf-8")  # one token per word: 9,000 > 8,192
    err = _cli_error(capsys, "--text-file", str(long), "--new-tokens", "0")
    assert "longer than the model's context of 8192 tokens" in err
    assert "longer than the model's context" in _cli_error(capsys, "--max-tokens", "9000")
    with pytest.raises(ValueError, match=r"prompt 0 plus 4 new tokens is 90\d\d tokens long"):
        generate_greedy(model, ["word " * 9000], CacheVariant("auto"), max_new_tokens=4)
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        generate_greedy(model, ["Hello", ""], CacheVariant("auto"), max_new_tokens=4)
    with pytest.raises(ValueError, match="window must be an integer >= 1"):
        generate_greedy(model, ["Hello"], CacheVariant("auto"), sliding_window=0)
