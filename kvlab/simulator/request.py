"""A request inside the simulator: progress, status and block hashes that follow its tokens."""

from __future__ import annotations

from functools import lru_cache

from kvlab.allocator.hashing import hash_block_tokens
from kvlab.simulator.workload import RequestSpec, content_id

#: The chained hash of a block, remembered: runs of one workload under other settings (two admission
#: policies side by side, an explorer revisiting a setting) hash the same prompts again. A key is a
#: parent hash and a few (content, start, end) runs, so 65,536 entries stay within a few MB.
_block_hash = lru_cache(maxsize=65_536)(hash_block_tokens)

WAITING, RUNNING, PREEMPTED, FINISHED, REJECTED = "waiting", "running", "preempted", "finished", "rejected"


class SimRequest:
    """One request being served (see :class:`~kvlab.allocator.KVRequest` for what the allocator reads).

    Args:
        spec: the workload entry.
        hash_block_size: tokens per hashed block.
    """

    def __init__(self, spec: RequestSpec, hash_block_size: int) -> None:
        self.spec = spec
        self.request_id = spec.request_id
        self.status = WAITING
        self.num_computed_tokens = 0
        self.num_output_tokens = 0
        self.num_preemptions = 0
        self.last_scheduled_tokens = 0  # tokens scheduled in the previous step (in flight under async)
        self.segments: list[list[int]] = [list(s) for s in spec.prompt]
        self.num_tokens = spec.prompt_tokens  # prompt plus generated tokens
        self._hash_block_size = hash_block_size
        self._hashes: list[bytes] = []
        self._cursor = (0, 0)  # (segment index, offset) of the first unhashed token

    @property
    def block_hashes(self) -> list[bytes]:
        """Chained hashes of every full block of the known tokens."""
        b = self._hash_block_size
        while (len(self._hashes) + 1) * b <= self.num_tokens:
            seg, off = self._cursor
            runs, left = [], b
            while left:
                content, length = self.segments[seg]
                if off == length:
                    seg, off = seg + 1, 0
                    continue
                take = min(left, length - off)
                runs.append((content, off, off + take))
                left -= take
                off += take
            self._cursor = (seg, off)
            parent = self._hashes[-1] if self._hashes else None
            self._hashes.append(_block_hash(parent, tuple(runs)))
        return self._hashes

    def append_output_token(self) -> None:
        """Record one generated token."""
        if self.num_output_tokens == 0:
            self.segments.append([content_id(f"output:{self.request_id}"), 0])
        self.segments[-1][1] += 1
        self.num_output_tokens += 1
        self.num_tokens += 1

    def __repr__(self) -> str:
        return (
            f"SimRequest({self.request_id}, {self.status}, computed={self.num_computed_tokens}, "
            f"tokens={self.num_tokens})"
        )
