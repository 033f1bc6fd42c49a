"""Batch metadata of paged attention: which query tokens belong to which sequence, how long each
sequence is and where its blocks are.

A batch packs the *new* tokens of several sequences one after another, vLLM style, so one step can
mix prefill chunks (many new tokens) and decodes (one new token)::

    query             [num_tokens, num_q_heads, head_size]
    query_start_loc   [num_seqs + 1]   sequence i owns query rows query_start_loc[i] : query_start_loc[i+1]
    seq_lens          [num_seqs]       tokens in the cache for sequence i *including* its new ones
    block_table       [num_seqs, max_blocks]   block ids, in token order

For sequence ``i`` with ``q_i`` new tokens and ``seq_lens[i] = n_i``, the first ``n_i - q_i`` tokens
are context already cached and new token ``t`` sits at absolute position ``n_i - q_i + t``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from kvlab.validation import require_int_tensor


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers."""
    return -(-a // b)


@dataclass(eq=False)
class AttentionBatch:
    """Sequences of one attention call.

    Attributes:
        query_start_loc: ``[num_seqs + 1]`` int32 offsets of each sequence's query rows (starts at 0).
        seq_lens: ``[num_seqs]`` int32 total tokens per sequence, new ones included.
        block_table: ``[num_seqs, max_blocks]`` int32 block ids.
    """

    query_start_loc: torch.Tensor
    seq_lens: torch.Tensor
    block_table: torch.Tensor
    _query_lens: list[int] = field(init=False, repr=False)
    _seq_lens: list[int] = field(init=False, repr=False)
    #: a host copy of ``block_table`` when the batch was built from host data (checks need no GPU sync)
    _host_table: torch.Tensor | None = field(init=False, repr=False, default=None)
    #: cache shapes this batch already passed :meth:`check_against` for (a model's layers share one)
    _checked: set = field(init=False, repr=False, default_factory=set)

    def __post_init__(self) -> None:
        require_int_tensor(self.query_start_loc, "query_start_loc", 1, "[num_seqs + 1]")
        require_int_tensor(self.seq_lens, "seq_lens", 1, "[num_seqs]")
        require_int_tensor(self.block_table, "block_table", 2, "[num_seqs, max_blocks]")
        n = self.seq_lens.shape[0]
        if self.query_start_loc.shape[0] != n + 1:
            raise ValueError(
                f"query_start_loc must have num_seqs + 1 = {n + 1} entries, "
                f"got {self.query_start_loc.shape[0]}"
            )
        if self.block_table.shape[0] != n:
            raise ValueError(
                f"block_table must have one row per sequence ({n}), got {self.block_table.shape[0]}"
            )
        starts = self.query_start_loc.tolist()
        lens = self.seq_lens.tolist()
        if starts[0] != 0:
            raise ValueError(f"query_start_loc must start at 0, got {starts[0]}")
        qlens = [b - a for a, b in zip(starts[:-1], starts[1:], strict=True)]
        for i, (q, s) in enumerate(zip(qlens, lens, strict=True)):
            if q < 0:
                raise ValueError(
                    f"query_start_loc must not decrease (sequence {i}: {starts[i]} -> {starts[i + 1]})"
                )
            if s < q:
                raise ValueError(
                    f"seq_lens[{i}] = {s} is smaller than its {q} new query tokens; seq_lens counts every "
                    "token of the sequence, new ones included"
                )
        self._query_lens, self._seq_lens = qlens, lens
        for t in (self.query_start_loc, self.seq_lens, self.block_table):
            if t.device != self.block_table.device:
                raise ValueError("query_start_loc, seq_lens and block_table must be on one device")

    @classmethod
    def from_lengths(
        cls,
        query_lens: Sequence[int],
        seq_lens: Sequence[int],
        block_table: torch.Tensor | Sequence[Sequence[int]],
        device: str | torch.device | None = None,
    ) -> AttentionBatch:
        """Build a batch from per-sequence new-token counts, total lengths and block ids.

        Rows of ``block_table`` given as lists may have different lengths; they are padded with 0.
        """
        if len(query_lens) != len(seq_lens):
            raise ValueError(
                f"query_lens ({len(query_lens)}) and seq_lens ({len(seq_lens)}) "
                "must have one entry per sequence"
            )
        if any(int(q) < 0 for q in query_lens) or any(int(s) < 0 for s in seq_lens):
            raise ValueError("query_lens and seq_lens must be >= 0")
        if not isinstance(block_table, torch.Tensor):
            rows = [[int(b) for b in r] for r in block_table]
            width = max((len(r) for r in rows), default=0) or 1
            table = torch.zeros((len(rows), width), dtype=torch.int32)
            for i, r in enumerate(rows):
                table[i, : len(r)] = torch.tensor(r, dtype=torch.int32)
            block_table = table
        if device is None:
            device = block_table.device
        starts = [0]
        for q in query_lens:
            starts.append(starts[-1] + int(q))
        # built and checked on the host, then copied: no device round trip per batch
        host = cls(
            query_start_loc=torch.tensor(starts, dtype=torch.int32),
            seq_lens=torch.tensor([int(s) for s in seq_lens], dtype=torch.int32),
            block_table=block_table.to(dtype=torch.int32, device="cpu"),
        )
        if torch.device(device).type == "cpu":
            host._host_table = host.block_table
            return host
        out = copy.copy(host)
        out.query_start_loc, out.seq_lens, out.block_table = (
            t.to(device, non_blocking=True) for t in (host.query_start_loc, host.seq_lens, host.block_table))
        out._host_table, out._checked = host.block_table, set()
        return out

    # -- sizes (host-side copies, computed once) -----------------------------------------------------

    @property
    def num_seqs(self) -> int:
        """Sequences in the batch."""
        return len(self._seq_lens)

    @property
    def num_tokens(self) -> int:
        """New (query) tokens in the batch."""
        return sum(self._query_lens)

    @property
    def query_lens(self) -> list[int]:
        """New tokens per sequence."""
        return list(self._query_lens)

    @property
    def seq_lens_list(self) -> list[int]:
        """Total tokens per sequence (new ones included)."""
        return list(self._seq_lens)

    @property
    def context_lens(self) -> list[int]:
        """Tokens already cached before this step, per sequence."""
        return [s - q for s, q in zip(self._seq_lens, self._query_lens, strict=True)]

    @property
    def max_query_len(self) -> int:
        """Largest number of new tokens of one sequence (1 for a pure decode batch)."""
        return max(self._query_lens, default=0)

    @property
    def max_seq_len(self) -> int:
        """Longest sequence."""
        return max(self._seq_lens, default=0)

    @property
    def device(self) -> torch.device:
        """Device of the metadata tensors."""
        return self.block_table.device

    def check_against(self, num_blocks: int, block_size: int) -> None:
        """Raise unless every sequence's blocks exist in a cache of ``num_blocks`` × ``block_size``.

        A batch is not changed after it is built, so a shape it passed once is not checked again.
        """
        if (num_blocks, block_size) in self._checked:
            return
        width = self.block_table.shape[1]
        need = [cdiv(s, block_size) for s in self._seq_lens]
        for i, n in enumerate(need):
            if n > width:
                raise ValueError(
                    f"sequence {i} has {self._seq_lens[i]} tokens and needs {n} blocks of {block_size}, "
                    f"but block_table has only {width} columns"
                )
        if not need or max(need) == 0:
            self._checked.add((num_blocks, block_size))
            return
        table = self._host_table if self._host_table is not None else self.block_table
        cols = torch.arange(width, device=table.device)
        used = cols[None, :] < torch.tensor(need, device=table.device)[:, None]
        lo, hi = (int(x) for x in torch.stack(torch.aminmax(table[used])).tolist())  # one sync at most
        if lo >= 0 and hi < num_blocks:
            self._checked.add((num_blocks, block_size))
            return
        for i, n in enumerate(need):  # name the first bad row
            row = table[i, :n]
            if n and (int(row.min()) < 0 or int(row.max()) >= num_blocks):
                bad = int(row.min()) if int(row.min()) < 0 else int(row.max())
                raise ValueError(
                    f"block_table row {i} uses block id {bad}; valid ids are 0..{num_blocks - 1}"
                )

    def positions(self, device: str | torch.device | None = None) -> torch.Tensor:
        """Absolute position of every query token, ``[num_tokens]`` int64 (on the batch's device,
        or on ``device``)."""
        parts = [
            torch.arange(s - q, s, dtype=torch.int64)
            for q, s in zip(self._query_lens, self._seq_lens, strict=True)
        ]
        out = torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64)
        return out.to(self.device if device is None else device)

    def slot_mapping(self, block_size: int) -> torch.Tensor:
        """Slot of every query token: ``block_table[seq, pos // block_size] * block_size + pos % block_size``.

        Returns:
            ``[num_tokens]`` int64 slots, in query order.
        """
        seq_of_token = torch.repeat_interleave(torch.arange(self.num_seqs), torch.tensor(self._query_lens,
                                                                                       dtype=torch.long))
        pos = self.positions("cpu")
        if self._host_table is not None:  # computed on the host, copied once
            blocks = self._host_table.long()[seq_of_token, pos // block_size]
            return (blocks * block_size + pos % block_size).to(self.device, non_blocking=True)
        seq_of_token, pos = seq_of_token.to(self.device), pos.to(self.device)
        blocks = self.block_table.long()[seq_of_token, pos // block_size]
        return blocks * block_size + pos % block_size
