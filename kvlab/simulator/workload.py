"""Workloads for the simulator: synthetic, multi-turn sessions, and JSON traces.

A request's tokens are described by *segments* ``(content, length)``: token ``o`` of a segment is
identified by ``(content, o)``, so two requests share a prefix exactly when their leading segments
(and offsets) agree. No token ids are stored.

Trace schema (JSON)::

    {"requests": [
        {"id": "r0",                 # optional string, default "r<index>"
         "arrival_step": 0,          # optional int >= 0, default 0
         "arrival_time_s": 0.5,      # optional seconds >= 0 (runs with a step-time model)
         "prompt_tokens": 8192,      # int >= 1
         "output_tokens": 256,       # int >= 1
         "shared_prefix": "system",  # optional: requests with the same key share ...
         "shared_prefix_tokens": 2048}  # ... this many leading prompt tokens (<= prompt_tokens)
    ]}

A bare list of request objects is accepted too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path

from kvlab.validation import require_positive_int

Segment = tuple[int, int]  # (content id, number of tokens)


def content_id(name: str) -> int:
    """A stable 48-bit id for a named token content."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=6).digest(), "big")


@dataclass(frozen=True)
class RequestSpec:
    """One request of a workload.

    Attributes:
        request_id: unique name.
        arrival_step: first step at which it can be scheduled.
        prompt: segments of the prompt.
        output_tokens: tokens to generate (the request then finishes).
        arrival_time_s: arrival in seconds, for runs with a step-time model (``None`` = at 0 s).
        after: a request that must finish before this one arrives (the previous turn of a session).
        think_time_s: seconds between ``after`` finishing and this request arriving (timed runs).
    """

    request_id: str
    arrival_step: int
    prompt: tuple[Segment, ...]
    output_tokens: int
    arrival_time_s: float | None = None
    after: str | None = None
    think_time_s: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.request_id, str) or not self.request_id:
            raise ValueError(f"request_id must be a non-empty string, got {self.request_id!r}")
        require_positive_int(self.arrival_step, f"arrival_step of {self.request_id}", minimum=0)
        require_positive_int(self.output_tokens, f"output_tokens of {self.request_id}")
        for name in ("arrival_time_s", "think_time_s"):
            value = getattr(self, name)
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if value is not None and (not number or not 0 <= value < float("inf")):
                raise ValueError(
                    f"{name} of {self.request_id} must be a finite number of seconds >= 0, got {value!r}"
                )
        if not self.prompt or any(n <= 0 for _, n in self.prompt):
            raise ValueError(f"prompt of {self.request_id} must be non-empty segments of >= 1 token")

    @property
    def prompt_tokens(self) -> int:
        """Prompt length (tokens)."""
        return sum(n for _, n in self.prompt)


def make_request(
    request_id: str,
    prompt_tokens: int,
    output_tokens: int,
    arrival_step: int = 0,
    shared_prefix: str | None = None,
    shared_prefix_tokens: int = 0,
) -> RequestSpec:
    """A request whose prompt is unique except for an optional shared prefix."""
    require_positive_int(prompt_tokens, f"prompt_tokens of {request_id}")
    require_positive_int(shared_prefix_tokens, f"shared_prefix_tokens of {request_id}", minimum=0)
    if shared_prefix_tokens > prompt_tokens:
        raise ValueError(
            f"shared_prefix_tokens of {request_id} ({shared_prefix_tokens}) "
            f"exceeds prompt_tokens ({prompt_tokens})"
        )
    segments: list[Segment] = []
    if shared_prefix is not None and shared_prefix_tokens:
        segments.append((content_id(f"prefix:{shared_prefix}"), shared_prefix_tokens))
    if prompt_tokens > shared_prefix_tokens:
        segments.append((content_id(f"prompt:{request_id}"), prompt_tokens - shared_prefix_tokens))
    return RequestSpec(request_id, arrival_step, tuple(segments), output_tokens)


def _draw(rng: random.Random, value: int | tuple[int, int], name: str) -> int:
    if isinstance(value, tuple):
        lo, hi = value
        require_positive_int(lo, f"{name} low")
        if hi < lo:
            raise ValueError(f"{name} range must be (low, high) with low <= high, got {value}")
        return rng.randint(lo, hi)
    return require_positive_int(value, name)


def synthetic_workload(
    num_requests: int,
    prompt_tokens: int | tuple[int, int] = 1024,
    output_tokens: int | tuple[int, int] = 128,
    arrival_rate: float | None = None,
    shared_prefix_tokens: int = 0,
    seed: int = 0,
) -> list[RequestSpec]:
    """Independent requests.

    Args:
        num_requests: how many.
        prompt_tokens: a length, or an inclusive ``(low, high)`` range drawn uniformly (tokens).
        output_tokens: same, for the generated tokens.
        arrival_rate: mean arrivals per step (Poisson process); ``None`` = all arrive at step 0.
        shared_prefix_tokens: leading tokens every prompt shares (a system prompt), ≤ the shortest prompt.
        seed: seeds the draws.
    """
    require_positive_int(num_requests, "num_requests")
    if arrival_rate is not None and not arrival_rate > 0:
        raise ValueError(f"arrival_rate must be > 0 requests per step (or None), got {arrival_rate}")
    rng = random.Random(seed)
    t = 0.0
    out = []
    for i in range(num_requests):
        prompt = _draw(rng, prompt_tokens, "prompt_tokens")
        output = _draw(rng, output_tokens, "output_tokens")
        if arrival_rate is not None and i:
            t += rng.expovariate(arrival_rate)
        out.append(
            make_request(
                f"r{i}",
                prompt,
                output,
                int(t),
                "system" if shared_prefix_tokens else None,
                min(shared_prefix_tokens, prompt),
            )
        )
    return out


def multi_turn_workload(
    num_sessions: int,
    turns: int,
    system_prompt_tokens: int = 2048,
    user_tokens: int | tuple[int, int] = 256,
    output_tokens: int | tuple[int, int] = 256,
    turn_gap_steps: int = 300,
    session_gap_steps: int = 10,
    seed: int = 0,
) -> list[RequestSpec]:
    """Chat sessions: every turn's prompt is the shared system prompt, the whole history (earlier user
    messages and replies) and a new user message, so turns share long prefixes.

    Turn ``t`` of session ``s`` arrives at ``s × session_gap_steps + t × turn_gap_steps``.
    """
    require_positive_int(num_sessions, "num_sessions")
    require_positive_int(turns, "turns")
    require_positive_int(system_prompt_tokens, "system_prompt_tokens", minimum=0)
    require_positive_int(turn_gap_steps, "turn_gap_steps", minimum=0)
    require_positive_int(session_gap_steps, "session_gap_steps", minimum=0)
    rng = random.Random(seed)
    out = []
    for s in range(num_sessions):
        history: list[Segment] = (
            [(content_id("prefix:system"), system_prompt_tokens)] if system_prompt_tokens else []
        )
        for t in range(turns):
            rid = f"s{s}t{t}"
            history.append((content_id(f"user:{rid}"), _draw(rng, user_tokens, "user_tokens")))
            output = _draw(rng, output_tokens, "output_tokens")
            out.append(RequestSpec(rid, s * session_gap_steps + t * turn_gap_steps, tuple(history), output))
            history.append((content_id(f"output:{rid}"), output))
    out.sort(key=lambda r: r.arrival_step)
    return out


def load_trace(path: str | Path) -> list[RequestSpec]:
    """Requests from a JSON trace (schema in the module docstring), with errors naming the entry."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"trace {str(path)!r} is not a file")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"trace {str(path)!r} is not valid JSON: {exc}") from None
    entries = data.get("requests") if isinstance(data, dict) else data
    if not isinstance(entries, list) or not entries:
        raise ValueError(
            f'trace {str(path)!r} must hold a non-empty list of requests (or {{"requests": [...]}})'
        )
    out, seen = [], set()
    for i, entry in enumerate(entries):
        where = f"trace entry {i}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be an object, got {type(entry).__name__}")
        unknown = set(entry) - {
            "id",
            "arrival_step",
            "arrival_time_s",
            "prompt_tokens",
            "output_tokens",
            "shared_prefix",
            "shared_prefix_tokens",
        }
        if unknown:
            raise ValueError(f"{where} has unknown fields {sorted(unknown)}")
        for key in ("prompt_tokens", "output_tokens"):
            if key not in entry:
                raise ValueError(f"{where} is missing {key!r}")
        rid = entry.get("id", f"r{i}")
        if not isinstance(rid, str) or rid in seen:
            raise ValueError(f"{where}: id must be a unique string, got {rid!r}")
        seen.add(rid)
        try:
            spec = make_request(
                rid,
                entry["prompt_tokens"],
                entry["output_tokens"],
                entry.get("arrival_step", 0),
                entry.get("shared_prefix"),
                entry.get("shared_prefix_tokens", 0),
            )
            if "arrival_time_s" in entry:
                spec = dataclasses.replace(spec, arrival_time_s=entry["arrival_time_s"])
            out.append(spec)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    out.sort(key=lambda r: (r.arrival_step, r.arrival_time_s or 0.0))
    return out
