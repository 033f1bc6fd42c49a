import pytest

from kvlab import kv_bytes_per_token, page_size_bytes, token_footprint


def test_vllm_page_sizes_for_8_heads_head_128_block_16():
    assert page_size_bytes("bfloat16", 16, 8, 128) == 65_536
    assert page_size_bytes("auto", 16, 8, 128) == 65_536
    assert page_size_bytes("fp8", 16, 8, 128) == 32_768
    assert page_size_bytes("fp8_e5m2", 16, 8, 128) == 32_768
    assert page_size_bytes("int8_per_token_head", 16, 8, 128) == 33_792
    assert page_size_bytes("fp8_per_token_head", 16, 8, 128) == 33_792


@pytest.mark.parametrize("heads,dk,dv", [(1, 64, 64), (4, 256, 256), (16, 256, 512), (2, 512, 128)])
def test_footprint_is_elements_times_bytes_plus_two_fp32_scales_per_head(heads, dk, dv):
    for scheme, elem, scales in (("float16", 2, 0), ("fp8", 1, 0), ("int8_per_token_head", 1, 2 * heads * 4)):
        fp = token_footprint(scheme, heads, dk, dv)
        assert fp.data_bytes == heads * (dk + dv) * elem
        assert fp.scale_bytes == scales
        assert kv_bytes_per_token(scheme, heads, dk, dv) == fp.total_bytes


@pytest.mark.parametrize("kwargs,match", [
    ({"block_size": 0}, "block_size must be >= 1"),
    ({"num_kv_heads": -2}, "num_kv_heads must be >= 1"),
    ({"head_size": 12.5}, "head_size must be an integer"),
])
def test_bad_sizes_are_named(kwargs, match):
    args = {"scheme": "bfloat16", "block_size": 16, "num_kv_heads": 8, "head_size": 128} | kwargs
    with pytest.raises(ValueError, match=match):
        page_size_bytes(**args)
