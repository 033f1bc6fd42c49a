"""The shared check machinery: reports name the case and the learner's line, never a traceback;
seeds replay the same cases; results render in a notebook."""

from __future__ import annotations

import torch

from kvlab.exercises import CheckResult, check_slot_mapping
from kvlab.exercises.compare import close_tensor, same_int, same_list, same_tensor
from kvlab.exercises.report import describe
from kvlab.exercises.runner import Case, function_trial, random_cases, run_check


def _double(x: int) -> int:
    return 2 * x


def test_pass_message_counts_random_and_edge_cases():
    cases = [Case("zero", {"x": 0}, edge=True)] + [Case(f"random case {i}", {"x": i}) for i in range(1, 4)]
    result = run_check("f", cases, function_trial(_double, _double, lambda e, g: same_int(e, g, "f(x)")),
                       verified="doubles")
    assert result.passed
    assert result.message == "✓ f: 3 random cases + 1 edge case passed — doubles"


def test_failure_names_the_case_inputs_expected_and_got():
    def wrong(x):
        return 2 * x + (x == 7)

    cases = [Case(f"random case {i}", {"x": i}) for i in range(5, 10)]
    result = run_check("wrong", cases, function_trial(wrong, _double, lambda e, g: same_int(e, g, "f(x)")),
                       verified="doubles", seed=123, replay="check(wrong, seed=123)")
    assert not result.passed
    lines = result.message.splitlines()
    assert lines[0] == "✗ wrong failed on case “random case 7” (3 of 5)"
    assert "x = 7" in result.message
    assert "f(x): expected 14, got 15 (off by +1)" in result.message
    assert "seed 123: check(wrong, seed=123) replays the same cases" in result.message


def test_learner_exception_is_reported_with_its_line_not_a_traceback():
    def crashes(x):
        values = [1, 2]
        return values[x]

    result = run_check("crashes", [Case("big index", {"x": 5}, edge=True)],
                       function_trial(crashes, _double, lambda e, g: same_int(e, g, "f(x)")), verified="-")
    assert not result.passed
    assert "your code raised IndexError: list index out of range" in result.message
    assert "in crashes: return values[x]" in result.message
    assert "Traceback" not in result.message


def test_not_implemented_and_not_callable():
    def stub(x):
        raise NotImplementedError

    result = run_check("stub", [Case("one", {"x": 1})],
                       function_trial(stub, _double, lambda e, g: same_int(e, g, "f(x)")), verified="-")
    assert not result.passed and "is not written yet" in result.message
    assert not check_slot_mapping(None).passed
    assert "expected a function, got NoneType" in check_slot_mapping(None).message


def test_same_seed_same_cases_and_fresh_seeds_differ():
    draw = lambda gen: {"x": torch.randn(3, generator=gen)}
    a, b, c = random_cases(4, 11, draw), random_cases(4, 11, draw), random_cases(4, 12, draw)
    assert all(torch.equal(p.args["x"], q.args["x"]) for p, q in zip(a, b, strict=True))
    assert not all(torch.equal(p.args["x"], q.args["x"]) for p, q in zip(a, c, strict=True))


def test_a_seed_replays_the_failing_random_case(seed):
    def wrong_for_block_size_32(block_table, query_lens, seq_lens, block_size):
        rows = zip(block_table, query_lens, seq_lens, strict=True)
        b = block_size
        slots = [row[p // b] * b + p % b for row, q, n in rows for p in range(n - q, n)]
        return [s + 1 for s in slots] if block_size == 32 else slots

    first = check_slot_mapping(wrong_for_block_size_32, seed=seed)
    assert not first.passed and "failed on case “random case" in first.message
    assert check_slot_mapping(wrong_for_block_size_32, seed=seed).message == first.message


def test_comparisons_find_the_first_difference():
    e = torch.tensor([[1.0, 2.0], [3.0, float("nan")]])
    assert same_tensor(e, e.clone(), "t") is None
    g = e.clone()
    g[1, 0] = 4.0
    assert same_tensor(e, g, "t") == "t[1, 0]: expected 3, got 4 (1 of 4 elements differ)"
    assert same_tensor(e, g.double(), "t") == "t must be a torch.float32 tensor, got torch.float64"
    assert "must have shape (2, 2)" in same_tensor(e, g[0], "t")
    assert close_tensor(torch.tensor([1.0]), torch.tensor([1.00001]), "s", rtol=1e-4, atol=0) is None
    assert close_tensor(torch.tensor([1.0]), torch.tensor([float("nan")]), "s", rtol=1e-4, atol=0) is not None
    assert same_list([1, 2, 3], (1, 2, 3), "slots") is None
    assert same_list([1, 2, 3], torch.tensor([1, 5, 3]), "slots").startswith("slots[1]: expected 2, got 5")
    assert same_int(4096, 4096.0, "bytes") is None
    assert "not a whole number" in same_int(4096, 4096.5, "bytes")


def test_descriptions_stay_short():
    assert describe(torch.arange(4)) == "int64 tensor (4,) [0, 1, 2, 3]"
    big = describe(torch.randn(64, 8, 128))
    assert big.startswith("float32 tensor of shape (64, 8, 128), values in [") and len(big) < 100
    assert describe(list(range(100))).endswith("(100 items)")


def test_result_renders_in_a_notebook():
    ok, bad = CheckResult("f", True, "✓ f: fine"), CheckResult("g", False, "✗ g <failed>")
    assert repr(ok) == "✓ f: fine" and str(bad) == "✗ g <failed>"
    assert "#2e7d32" in ok._repr_html_() and "#c62828" in bad._repr_html_()
    assert "&lt;failed&gt;" in bad._repr_html_()
