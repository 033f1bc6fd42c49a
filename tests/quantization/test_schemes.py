import pytest
import torch

from kvlab import SCHEME_NAMES, QuantMode, get_scheme
from kvlab.quantization import VLLM_SCHEME_NAMES


def test_every_vllm_name_resolves_with_the_expected_storage():
    expected = {
        "auto": (torch.bfloat16, QuantMode.NONE),
        "bfloat16": (torch.bfloat16, QuantMode.NONE),
        "float16": (torch.float16, QuantMode.NONE),
        "fp8": (torch.float8_e4m3fn, QuantMode.FP8_PER_TENSOR),
        "fp8_e4m3": (torch.float8_e4m3fn, QuantMode.FP8_PER_TENSOR),
        "fp8_e5m2": (torch.float8_e5m2, QuantMode.FP8_PER_TENSOR),
        "int8_per_token_head": (torch.int8, QuantMode.INT8_PER_TOKEN_HEAD),
        "fp8_per_token_head": (torch.float8_e4m3fn, QuantMode.FP8_PER_TOKEN_HEAD),
    }
    assert set(VLLM_SCHEME_NAMES) == set(expected)
    for name, (dtype, mode) in expected.items():
        sch = get_scheme(name)
        assert (sch.storage_dtype, sch.mode, sch.name) == (dtype, mode, name)


def test_quant_modes_carry_vllms_numbers_and_per_token_head_flag():
    assert [int(m) for m in QuantMode][:4] == [0, 1, 2, 3]
    assert [m.is_per_token_head for m in QuantMode] == [False, False, True, True, False, False]
    assert [m.is_low_bit for m in QuantMode] == [False] * 4 + [True, True]


def test_code_ranges():
    assert (get_scheme("int8_per_token_head").qmax, get_scheme("int8_per_token_head").qmin) == (127.0, -128.0)
    assert get_scheme("fp8_per_token_head").qmax == 448.0
    assert get_scheme("fp8_e5m2").qmax == 57344.0
    assert get_scheme("bfloat16").qmax is None


def test_auto_follows_the_model_dtype():
    assert get_scheme("auto", torch.float16).storage_dtype == torch.float16
    assert get_scheme("auto", torch.float32).storage_dtype == torch.float32


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError) as err:
        get_scheme("int3_per_token_head")
    msg = str(err.value)
    assert "int3_per_token_head" in msg
    assert all(name in msg for name in SCHEME_NAMES)


@pytest.mark.parametrize("bad", [None, 8, torch.int8])
def test_non_string_names_are_refused(bad):
    with pytest.raises(ValueError, match="kv_cache_dtype must be a string"):
        get_scheme(bad)


def test_auto_needs_a_float_model_dtype():
    with pytest.raises(ValueError, match="model_dtype"):
        get_scheme("auto", torch.int8)
