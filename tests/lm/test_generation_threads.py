"""Greedy generation on a CPU runs its small decode operations on one thread, and gives the setting back."""

import pytest
import torch

from kvlab.lm.generation import one_cpu_thread


def test_one_cpu_thread_inside_and_restored_after():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with one_cpu_thread(torch.device("cpu")):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError), one_cpu_thread(torch.device("cpu")):
            raise RuntimeError("a failing step")
        assert torch.get_num_threads() == 2  # restored on errors too
    finally:
        torch.set_num_threads(before)
