"""A request inside the simulator: progress, status and block hashes that follow its tokens."""

from __future__ import annotations

from functools import lru_cache

from kvlab.allocator.hashing import hash_block_tokens
from kvlab.simulator.workload import RequestSpec, content_id

#: The chained hash of a block, remembered: runs of one workload under other settings (two admission
#: policies side by side, an explorer revisiting a setting) hash the same prompts again. A key is a
#: parent hash and a few (content, start, end) runs, so 65,536 entries stay within a few MB.
_block_hash = lru_cache(maxsize=65_536)(hash_block_tokens)


class HashChain:
    """The block hashes of one request's token stream, shared by every run of that request.

    A request's tokens are its prompt segments followed by its generated tokens, which all come
    from one content (``output:<request id>``), so block ``i``'s hash depends only on the prompt,
    the request id and the block size: never on the run, its settings or how far it got. The chain
    keeps the hashes computed so far; a :class:`SimRequest` copies those its known tokens cover, and
    a later run of the same request (another policy, another window) copies them instead of hashing.

    Args:
        prompt: the prompt's ``(content, length)`` segments.
        request_id: names the content of the generated tokens.
        block_size: tokens per hashed block.
    """

    __slots__ = ("hashes", "_segments", "_block_size", "_cursor")

    def __init__(self, prompt: tuple, request_id: str, block_size: int) -> None:
        self.hashes: list[bytes] = []
        # generated tokens: one segment as long as any run can make it
        self._segments = [*prompt, (content_id(f"output:{request_id}"), float("inf"))]
        self._block_size = block_size
        self._cursor = (0, 0)  # (segment index, offset) of the first unhashed token

    def extend_to(self, num_blocks: int) -> list[bytes]:
        """Hash blocks until the chain holds at least ``num_blocks``; returns :attr:`hashes`."""
        hashes, segments = self.hashes, self._segments
        while len(hashes) < num_blocks:
            seg, off = self._cursor
            runs, left = [], self._block_size
            while left:
                content, length = segments[seg]
                if off == length:
                    seg, off = seg + 1, 0
                    continue
                take = min(left, length - off)
                runs.append((content, off, off + take))
                left -= take
                off += take
            self._cursor = (seg, off)
            hashes.append(_block_hash(hashes[-1] if hashes else None, tuple(runs)))
        return hashes


#: One chain per (prompt, request id, block size), most recently used kept: an explorer's runs
#: replay the same few workloads (tens of requests) under many settings.
hash_chain = lru_cache(maxsize=1024)(HashChain)

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
        prompt = tuple((content, length) for content, length in spec.prompt)  # a list would not key a cache
        self._chain = hash_chain(prompt, spec.request_id, hash_block_size)

    @property
    def block_hashes(self) -> list[bytes]:
        """Chained hashes of every full block of the known tokens (copied from the request's
        :class:`HashChain`, which hashes a block once for every run of the request)."""
        hashes = self._hashes
        n = self.num_tokens // self._hash_block_size
        if len(hashes) < n:
            hashes.extend(self._chain.extend_to(n)[len(hashes):n])
        return hashes

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
