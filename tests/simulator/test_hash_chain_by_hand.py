"""Block hashes shared by every run of one request, by hand.

Prompt: segments of 3 and 2 tokens (contents 11 and 22), blocks of 4 tokens; generated tokens come from
the content ``output:<id>``. Block 0 = 11[0:3] + 22[0:1]; block 1 = 22[1:2] + output[0:3]; block 2 =
output[3:7]. Each hash chains its parent's. A second run of the same request (same prompt, id and block
size) must read these hashes without hashing a block again, and each run sees only the blocks its own
known tokens fill.
"""

from __future__ import annotations

import uuid

import kvlab.simulator.request as request_module
from kvlab.allocator.hashing import hash_block_tokens
from kvlab.simulator.request import SimRequest
from kvlab.simulator.workload import RequestSpec, content_id


def _counting_hash(monkeypatch) -> list:
    calls = []

    def counted(parent, runs, extra=None):
        calls.append(runs)
        return hash_block_tokens(parent, runs, extra)

    monkeypatch.setattr(request_module, "_block_hash", counted)
    return calls


def _generate(r: SimRequest, n: int) -> None:
    for _ in range(n):
        r.append_output_token()


def test_a_second_run_of_a_request_hashes_nothing(monkeypatch):
    calls = _counting_hash(monkeypatch)
    rid = f"q-{uuid.uuid4().hex}"  # a request no other test has hashed
    spec = RequestSpec(rid, 0, ((11, 3), (22, 2)), 8)
    out = content_id(f"output:{rid}")
    h0 = hash_block_tokens(None, ((11, 0, 3), (22, 0, 1)))
    h1 = hash_block_tokens(h0, ((22, 1, 2), (out, 0, 3)))
    h2 = hash_block_tokens(h1, ((out, 3, 7),))

    first = SimRequest(spec, 4)
    _generate(first, 7)  # 12 tokens: three full blocks
    assert first.block_hashes == [h0, h1, h2]
    assert len(calls) == 3

    second = SimRequest(spec, 4)  # the same request in another run: 5 tokens, one full block
    assert second.block_hashes == [h0]
    _generate(second, 3)  # 8 tokens
    assert second.block_hashes == [h0, h1]
    _generate(second, 4)  # 12 tokens
    assert second.block_hashes == [h0, h1, h2]
    assert len(calls) == 3  # every hash came from the first run


def test_another_block_size_or_request_id_hashes_its_own_blocks(monkeypatch):
    calls = _counting_hash(monkeypatch)
    rid = f"q-{uuid.uuid4().hex}"
    prompt = ((11, 3), (22, 2))
    assert SimRequest(RequestSpec(rid, 0, prompt, 8), 4).block_hashes == [
        hash_block_tokens(None, ((11, 0, 3), (22, 0, 1)))
    ]
    # blocks of 2 tokens: 11[0:2], then 11[2:3] + 22[0:1]; the last prompt token fills no block
    b0 = hash_block_tokens(None, ((11, 0, 2),))
    assert SimRequest(RequestSpec(rid, 0, prompt, 8), 2).block_hashes == [
        b0, hash_block_tokens(b0, ((11, 2, 3), (22, 0, 1)))
    ]
    # another id: the same prompt hashes the same, its generated tokens do not
    other = f"r-{uuid.uuid4().hex}"
    r = SimRequest(RequestSpec(other, 0, prompt, 8), 4)
    _generate(r, 3)
    g0 = hash_block_tokens(None, ((11, 0, 3), (22, 0, 1)))
    assert r.block_hashes == [g0, hash_block_tokens(g0, ((22, 1, 2), (content_id(f"output:{other}"), 0, 3)))]
    assert len(calls) == 1 + 2 + 2


def test_a_prompt_given_as_lists_shares_the_chain_of_the_same_tuples(monkeypatch):
    calls = _counting_hash(monkeypatch)
    rid = f"q-{uuid.uuid4().hex}"
    as_tuples = SimRequest(RequestSpec(rid, 0, ((11, 3), (22, 2)), 8), 4).block_hashes
    as_lists = SimRequest(RequestSpec(rid, 0, [[11, 3], [22, 2]], 8), 4).block_hashes
    assert as_lists == as_tuples == [hash_block_tokens(None, ((11, 0, 3), (22, 0, 1)))]
    assert len(calls) == 1
