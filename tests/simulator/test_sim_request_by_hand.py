"""A simulated request's tokens and block hashes, by hand.

Prompt: segments of 3 and 2 tokens (contents 11 and 22), blocks of 4 tokens. After 3 generated tokens
the request holds 8 tokens: [11: 0-3][22: 0-2][output: 0-3]. Block 0 = 11[0:3] + 22[0:1], block 1 =
22[1:2] + output[0:3]. Each block's hash chains its parent's.
"""

from __future__ import annotations

from kvlab.allocator.hashing import hash_block_tokens
from kvlab.simulator.request import WAITING, SimRequest
from kvlab.simulator.workload import RequestSpec, content_id


def test_a_new_request():
    r = SimRequest(RequestSpec("q", 0, ((11, 3), (22, 2)), 4), 4)
    assert (r.request_id, r.status, r.num_computed_tokens, r.num_output_tokens,
            r.num_tokens) == ("q", WAITING, 0, 0, 5)
    assert (r.num_preemptions, r.last_scheduled_tokens) == (0, 0)
    assert r.segments == [[11, 3], [22, 2]]


def test_generated_tokens_and_block_hashes():
    r = SimRequest(RequestSpec("q", 0, ((11, 3), (22, 2)), 4), 4)
    h0 = hash_block_tokens(None, ((11, 0, 3), (22, 0, 1)))
    assert r.block_hashes == [h0]  # 5 tokens: one full block
    for _ in range(3):
        r.append_output_token()
    out = content_id("output:q")
    assert r.segments == [[11, 3], [22, 2], [out, 3]]
    assert (r.num_output_tokens, r.num_tokens) == (3, 8)
    assert r.block_hashes == [h0, hash_block_tokens(h0, ((22, 1, 2), (out, 0, 3)))]
