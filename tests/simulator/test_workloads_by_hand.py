"""Workload builders checked against small cases worked out by hand, and their refusals word for word.

Prompt lengths are sums of segment lengths; a segment's content id is ``content_id(name)`` of the
name the module docstring gives it (``prefix:system``, ``document:s0``, ...), so sharing is checked
against the names, not against a second run of the builder.
"""

from __future__ import annotations

import json
import math
import random

import pytest

from kvlab.simulator.metrics import Distribution
from kvlab.simulator.sessions import session_workload, steps_to_seconds, with_poisson_arrivals
from kvlab.simulator.workload import (
    RequestSpec,
    content_id,
    load_trace,
    make_request,
    multi_turn_workload,
    synthetic_workload,
)


def _lengths(spec):
    return [n for _, n in spec.prompt]


def _refused(make, message):
    with pytest.raises(ValueError) as err:
        make()
    assert str(err.value) == message


def test_sessions_over_a_document():
    """2 sessions x 3 turns, a 100-token document, 10-token questions, 20-token answers, 1.5 s think
    time, sessions 4 s apart. Turn t sends document + t (question + answer) + question:
    t0: [100, 10] = 110 tokens; t1: [100, 10, 20, 10] = 140; t2: [100, 10, 20, 10, 20, 10] = 170.
    Only a session's first turn has an arrival time (0 s, 4 s); later turns wait for the one before."""
    w = session_workload(2, 3, 100, question_tokens=10, output_tokens=20, think_time_s=1.5, session_gap_s=4.0)
    assert [r.request_id for r in w] == ["s0t0", "s0t1", "s0t2", "s1t0", "s1t1", "s1t2"]
    assert [_lengths(r) for r in w[:3]] == [[100, 10], [100, 10, 20, 10], [100, 10, 20, 10, 20, 10]]
    assert [r.prompt_tokens for r in w] == [110, 140, 170] * 2
    assert [r.output_tokens for r in w] == [20] * 6
    assert [r.arrival_time_s for r in w] == [0.0, None, None, 4.0, None, None]
    assert [r.after for r in w] == [None, "s0t0", "s0t1", None, "s1t0", "s1t1"]
    assert [r.think_time_s for r in w] == [0.0, 1.5, 1.5, 0.0, 1.5, 1.5]
    assert [r.arrival_step for r in w] == [0] * 6
    assert w[0].prompt[0][0] == content_id("document:s0") and w[3].prompt[0][0] == content_id("document:s1")
    assert w[1].prompt[:2] == w[0].prompt  # turn 1 repeats turn 0's prompt first
    assert w[1].prompt[1:] == (
        (content_id("question:s0t0"), 10), (content_id("output:s0t0"), 20), (content_id("question:s0t1"), 10)
    )


def test_session_defaults_are_128_token_questions_and_256_token_answers():
    """One session, 2 turns over 1,000 tokens: t0 = 1,000 + 128; t1 = 1,000 + 128 + 256 + 128 = 1,512."""
    w = session_workload(1, 2, 1000)
    assert [r.prompt_tokens for r in w] == [1128, 1512]
    assert [r.output_tokens for r in w] == [256, 256]
    assert [r.think_time_s for r in w] == [0.0, 0.0] and w[0].arrival_time_s == 0.0


@pytest.mark.parametrize(
    "args, message",
    [
        ((0, 1, 10), "num_sessions (--sessions) must be >= 1, got 0"),
        ((1, 0, 10), "turns (--turns) must be >= 1, got 0"),
        ((1, 1, 0), "session_context (--session-context, tokens) must be >= 1, got 0"),
        ((1, 1, 10, 0), "question_tokens must be >= 1, got 0"),
        ((1, 1, 10, 5, 0), "output_tokens must be >= 1, got 0"),
    ],
)
def test_session_refusals(args, message):
    _refused(lambda: session_workload(*args), message)


def test_poisson_arrivals_start_at_zero_with_exponential_gaps():
    """Gaps are Python's expovariate(rate) draws from random.Random(seed), the first request at 0 s."""
    w = [make_request(f"r{i}", 4, 1, arrival_step=7) for i in range(4)]
    out = with_poisson_arrivals(w, 2.0, seed=3)
    rng = random.Random(3)
    expected, t = [0.0], 0.0
    for _ in range(3):
        t += rng.expovariate(2.0)
        expected.append(t)
    assert [r.arrival_time_s for r in out] == pytest.approx(expected, rel=0, abs=0)
    assert [r.arrival_step for r in out] == [0] * 4 and [r.request_id for r in out] == ["r0", "r1", "r2",
                                                                                        "r3"]
    assert with_poisson_arrivals(w, 2.0)[1].arrival_time_s == random.Random(0).expovariate(2.0)


@pytest.mark.parametrize("rate", [0, -1.0, math.inf, math.nan, True, "2"])
def test_poisson_rate_refusals(rate):
    _refused(lambda: with_poisson_arrivals([make_request("r", 4, 1)], rate),
             f"request_rate must be a number of requests per second > 0, got {rate!r}")


def test_steps_to_seconds():
    """Steps 0, 3 and 10 at 0.5 s a step arrive at 0, 1.5 and 5 s; 0 s a step is allowed."""
    w = [make_request("a", 4, 1, 0), make_request("b", 4, 1, 3), make_request("c", 4, 1, 10)]
    assert [r.arrival_time_s for r in steps_to_seconds(w, 0.5)] == [0.0, 1.5, 5.0]
    assert [r.arrival_time_s for r in steps_to_seconds(w, 0)] == [0, 0, 0]
    for bad in (-0.5, math.inf, True, "1"):
        _refused(lambda bad=bad: steps_to_seconds(w, bad),
                 f"seconds_per_step must be a finite number >= 0, got {bad!r}")


def test_distribution_of_four_values():
    """[1, 2, 3, 4]: mean 2.5; linear-interpolated percentiles at rank p/100 x 3 from the first value:
    p50 = 1 + 1.5 = 2.5, p90 = 1 + 2.7 = 3.7, p99 = 1 + 2.97 = 3.97."""
    d = Distribution.of([1.0, 2.0, 3.0, 4.0])
    assert (d.mean, d.p50, d.p90, d.p99) == pytest.approx((2.5, 2.5, 3.7, 3.97), abs=1e-12)
    one = Distribution.of([0.25])
    assert (one.mean, one.p50, one.p90, one.p99) == (0.25, 0.25, 0.25, 0.25)


def test_distribution_of_nothing_is_all_nan():
    d = Distribution.of([])
    assert all(isinstance(x, float) and math.isnan(x) for x in (d.mean, d.p50, d.p90, d.p99))


def test_multi_turn_sessions_share_the_system_prompt_and_their_history():
    """2 sessions x 2 turns, 100-token system prompt, 10-token user turns, 20-token replies, turns 300
    steps apart, sessions 10 apart: arrivals s0t0 0, s1t0 10, s0t1 300, s1t1 310 (sorted by step).
    t0 = [100, 10] = 110 tokens; t1 = [100, 10, 20, 10] = 140."""
    w = multi_turn_workload(2, 2, 100, 10, 20, 300, 10)
    assert [(r.request_id, r.arrival_step) for r in w] == [("s0t0", 0), ("s1t0", 10), ("s0t1", 300),
                                                          ("s1t1", 310)]
    assert [_lengths(r) for r in w] == [[100, 10], [100, 10], [100, 10, 20, 10], [100, 10, 20, 10]]
    assert {r.prompt[0][0] for r in w} == {content_id("prefix:system")}
    assert w[2].prompt[1:] == ((content_id("user:s0t0"), 10), (content_id("output:s0t0"), 20),
                               (content_id("user:s0t1"), 10))
    assert [r.output_tokens for r in w] == [20] * 4


def test_multi_turn_defaults():
    """Defaults: 2,048-token system prompt, 256-token user turns and replies, turns 300 steps apart,
    sessions 10 apart. Turn 1 of session 1: 2,048 + 256 + 256 + 256 = 2,816 tokens at step 310."""
    w = multi_turn_workload(2, 2)
    assert [(r.request_id, r.arrival_step, r.prompt_tokens) for r in w] == [
        ("s0t0", 0, 2304), ("s1t0", 10, 2304), ("s0t1", 300, 2816), ("s1t1", 310, 2816)]
    assert all(r.output_tokens == 256 for r in w)


def test_multi_turn_without_a_system_prompt_and_with_drawn_lengths():
    """No system prompt: the first segment is the user turn. Drawn lengths follow random.Random(seed):
    user then output for each turn, in order."""
    w = multi_turn_workload(1, 2, 0, (5, 9), (1, 3), 0, 0, seed=4)
    rng = random.Random(4)
    u0, o0, u1, o1 = rng.randint(5, 9), rng.randint(1, 3), rng.randint(5, 9), rng.randint(1, 3)
    assert [_lengths(r) for r in w] == [[u0], [u0, o0, u1]]
    assert [r.output_tokens for r in w] == [o0, o1] and [r.arrival_step for r in w] == [0, 0]
    assert multi_turn_workload(1, 1, 0, (5, 9), 1)[0].prompt_tokens == random.Random(0).randint(5, 9)


@pytest.mark.parametrize(
    "args, message",
    [
        ((0, 1), "num_sessions must be >= 1, got 0"),
        ((1, 0), "turns must be >= 1, got 0"),
        ((1, 1, -1), "system_prompt_tokens must be >= 0, got -1"),
        ((1, 1, 0, 0), "user_tokens must be >= 1, got 0"),
        ((1, 1, 0, 1, 0), "output_tokens must be >= 1, got 0"),
        ((1, 1, 0, 1, 1, -1), "turn_gap_steps must be >= 0, got -1"),
        ((1, 1, 0, 1, 1, 0, -1), "session_gap_steps must be >= 0, got -1"),
        ((1, 1, 0, (3, 2)), "user_tokens range must be (low, high) with low <= high, got (3, 2)"),
        ((1, 1, 0, 1, (0, 2)), "output_tokens low must be >= 1, got 0"),
    ],
)
def test_multi_turn_refusals(args, message):
    _refused(lambda: multi_turn_workload(*args), message)


def test_synthetic_defaults_and_a_shared_prefix():
    """Defaults: 1,024-token prompts, 128 outputs, all at step 0, nothing shared. With a 100-token
    shared prefix and 60-token prompts the shared part is capped at the prompt: one 60-token
    ``prefix:system`` segment and no own segment."""
    w = synthetic_workload(2)
    assert [(r.request_id, r.arrival_step, _lengths(r), r.output_tokens) for r in w] == [
        ("r0", 0, [1024], 128), ("r1", 0, [1024], 128)]
    assert w[0].prompt[0][0] == content_id("prompt:r0")
    shared = synthetic_workload(2, 60, 1, shared_prefix_tokens=100)
    assert [r.prompt for r in shared] == [((content_id("prefix:system"), 60),)] * 2
    part = synthetic_workload(1, 60, 1, shared_prefix_tokens=20)[0]
    assert part.prompt == ((content_id("prefix:system"), 20), (content_id("prompt:r0"), 40))


def test_synthetic_poisson_steps_accumulate():
    """Arrival steps are the running sum of expovariate gaps, truncated to whole steps; the draws
    interleave with the length draws (prompt, output, then the gap from the 2nd request on)."""
    w = synthetic_workload(3, (1, 50), 1, arrival_rate=0.5, seed=2)
    rng = random.Random(2)
    t, steps = 0.0, []
    for i in range(3):
        rng.randint(1, 50)
        if i:
            t += rng.expovariate(0.5)
        steps.append(int(t))
    assert [r.arrival_step for r in w] == steps
    assert steps[-1] > 0


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: synthetic_workload(0), "num_requests must be >= 1, got 0"),
        (lambda: synthetic_workload(1, arrival_rate=0),
         "arrival_rate must be > 0 requests per step (or None), got 0"),
        (lambda: synthetic_workload(1, 0), "prompt_tokens must be >= 1, got 0"),
        (lambda: synthetic_workload(1, 4, 0), "output_tokens must be >= 1, got 0"),
        (lambda: make_request("q", 0, 1), "prompt_tokens of q must be >= 1, got 0"),
        (lambda: make_request("q", 4, 1, 0, "p", -1), "shared_prefix_tokens of q must be >= 0, got -1"),
        (lambda: make_request("q", 4, 1, 0, "p", 5),
         "shared_prefix_tokens of q (5) exceeds prompt_tokens (4)"),
    ],
)
def test_synthetic_and_request_refusals(make, message):
    _refused(make, message)


def test_make_request_segments():
    """A prefix equal to the whole prompt leaves no own segment; a prefix length without a key or a
    key without a length shares nothing."""
    assert make_request("q", 4, 1, 0, "p", 4).prompt == ((content_id("prefix:p"), 4),)
    assert make_request("q", 4, 1, 0, None, 3).prompt == ((content_id("prompt:q"), 1),)
    assert make_request("q", 4, 1, 0, "p", 0).prompt == ((content_id("prompt:q"), 4),)


@pytest.mark.parametrize(
    "spec, message",
    [
        (lambda: RequestSpec("", 0, ((1, 4),), 2), "request_id must be a non-empty string, got ''"),
        (lambda: RequestSpec(7, 0, ((1, 4),), 2), "request_id must be a non-empty string, got 7"),
        (lambda: RequestSpec("r", -1, ((1, 4),), 2), "arrival_step of r must be >= 0, got -1"),
        (lambda: RequestSpec("r", 0, ((1, 4),), 0), "output_tokens of r must be >= 1, got 0"),
        (lambda: RequestSpec("r", 0, ((1, 4),), 2, arrival_time_s=math.inf),
         "arrival_time_s of r must be a finite number of seconds >= 0, got inf"),
        (lambda: RequestSpec("r", 0, ((1, 4),), 2, arrival_time_s=True),
         "arrival_time_s of r must be a finite number of seconds >= 0, got True"),
        (lambda: RequestSpec("r", 0, ((1, 4),), 2, think_time_s=-1.0),
         "think_time_s of r must be a finite number of seconds >= 0, got -1.0"),
        (lambda: RequestSpec("r", 0, (), 2), "prompt of r must be non-empty segments of >= 1 token"),
        (lambda: RequestSpec("r", 0, ((1, 0),), 2), "prompt of r must be non-empty segments of >= 1 token"),
    ],
)
def test_request_spec_refusals(spec, message):
    _refused(spec, message)


def test_request_spec_edges_are_accepted():
    """Step 0, time 0 s and a 1-token segment are all allowed."""
    r = RequestSpec("r", 0, ((1, 1),), 1, arrival_time_s=0.0, think_time_s=0)
    assert (r.prompt_tokens, r.arrival_time_s) == (1, 0.0)


def _trace(tmp_path, data, name="t.json"):
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return p


def test_trace_by_hand(tmp_path):
    """Three entries: default id r<index> and step 0, a shared prefix, an arrival time; sorted by
    (step, seconds): r0 (step 0, no time) before "late" (step 0, 2.5 s) before "b" (step 3)."""
    p = _trace(tmp_path, {"requests": [
        {"prompt_tokens": 8, "output_tokens": 2},
        {"id": "b", "arrival_step": 3, "prompt_tokens": 8, "output_tokens": 2,
         "shared_prefix": "sys", "shared_prefix_tokens": 5},
        {"id": "late", "arrival_time_s": 2.5, "prompt_tokens": 4, "output_tokens": 1},
    ]})
    w = load_trace(p)
    assert [(r.request_id, r.arrival_step, r.arrival_time_s) for r in w] == [
        ("r0", 0, None), ("late", 0, 2.5), ("b", 3, None)]
    assert w[2].prompt == ((content_id("prefix:sys"), 5), (content_id("prompt:b"), 3))
    assert w[0].prompt == ((content_id("prompt:r0"), 8),)
    assert load_trace(_trace(tmp_path, [{"id": "x", "prompt_tokens": 3, "output_tokens": 1}],
                             "list.json"))[0].request_id == "x"


def test_trace_with_non_ascii_ids_reads_as_utf8(tmp_path):
    p = tmp_path / "u.json"
    p.write_bytes(json.dumps([{"id": "ré", "prompt_tokens": 3, "output_tokens": 1}],
                             ensure_ascii=False).encode())
    assert load_trace(p)[0].request_id == "ré"


def test_trace_refusals(tmp_path):
    missing = tmp_path / "none.json"
    _refused(lambda: load_trace(missing), f"trace {str(missing)!r} is not a file")
    bad = _trace(tmp_path, "{", "bad.json")
    with pytest.raises(ValueError) as err:
        load_trace(bad)
    assert str(err.value).startswith(f"trace {str(bad)!r} is not valid JSON: ")
    empty = _trace(tmp_path, {"requests": []}, "empty.json")
    _refused(lambda: load_trace(empty),
             f'trace {str(empty)!r} must hold a non-empty list of requests (or {{"requests": [...]}})')
    cases = [
        ([3], "trace entry 0 must be an object, got int"),
        ([{"prompt_tokens": 1, "output_tokens": 1, "colour": 1, "arrival_steps": 2}],
         "trace entry 0 has unknown fields ['arrival_steps', 'colour']"),
        ([{"output_tokens": 1}], "trace entry 0 is missing 'prompt_tokens'"),
        ([{"prompt_tokens": 1, "output_tokens": 1}, {"id": "r0", "prompt_tokens": 1, "output_tokens": 1}],
         "trace entry 1: id must be a unique string, got 'r0'"),
        ([{"id": 5, "prompt_tokens": 1, "output_tokens": 1}],
         "trace entry 0: id must be a unique string, got 5"),
        ([{"prompt_tokens": 0, "output_tokens": 1}],
         "trace entry 0: prompt_tokens of r0 must be >= 1, got 0"),
        ([{"prompt_tokens": 2, "output_tokens": 1, "arrival_time_s": -1}],
         "trace entry 0: arrival_time_s of r0 must be a finite number of seconds >= 0, got -1"),
    ]
    for i, (data, message) in enumerate(cases):
        p = _trace(tmp_path, data, f"c{i}.json")
        _refused(lambda p=p: load_trace(p), message)
