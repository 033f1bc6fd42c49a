"""Named bundles of the version-dependent choices of vLLM's KV-cache manager.

Each choice changes an observable number, so kvlab lets you pick the vLLM version it imitates:

=============================  ===================  ===================  ======================
choice                         ``vllm-0.20``        ``vllm-0.21``        ``vllm-0.33``
=============================  ===================  ===================  ======================
"GPU KV cache size" log line   per-group formula    ``int(X * L)``       ``int(X * L)``, one line
default admission gate         uncapped             SWA cap, T = MNBT    SWA cap, T = 2 * MNBT
in-flight allowance T (async)  MNBT                 MNBT                 2 * MNBT (MNBT sync)
free-queue placement           append all           append all           prepend unhashed
non-divisible pages            NotImplementedError  NotImplementedError  pad to the largest
``remove_skipped_blocks`` on   scheduled tokens     scheduled tokens     processed tokens
null block in the fit check    no                   no                   yes (one block held back)
async scheduling default       off                  off                  on
=============================  ===================  ===================  ======================

MNBT = ``max_num_batched_tokens``; X = maximum concurrency; L = ``max_model_len``.
Sources: the spec's §2.1, §2.3–2.5, §3.4, §4.3 and its list of version pitfalls (v0.19.1–v0.22.1
are "classic", v0.33.0 is "new"; the cap arrived with PR #40946 in v0.21.0, the doubled in-flight
allowance around v0.26, prepend/padding/null reservation (PR #47272)/processed-token skipping after
v0.22.1).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvlab.validation import require_choice

LOG_FORMULAS = ("per_group", "concurrency")
FREE_PLACEMENTS = ("append", "prepend_unhashed")
SKIP_ON = ("scheduled", "processed")


@dataclass(frozen=True)
class Profile:
    """The version-dependent behaviour of one vLLM release line.

    Attributes:
        name: profile name, e.g. ``"vllm-0.33"``.
        description: one line naming what it imitates.
        log_formula: ``"per_group"`` (≤ 0.20: ``(num_blocks // num_groups) * min_block_size``) or
            ``"concurrency"`` (≥ 0.21: ``int(max_concurrency * max_model_len)``).
        combined_log_line: whether size and concurrency are printed on one line (0.33).
        default_policy: the admission policy vLLM itself uses (``"uncapped"`` or ``"vllm"``).
        async_in_flight_batches: batches in flight under async scheduling; T = this × MNBT
            (1 for classic, 2 for new).
        async_scheduling_default: whether async scheduling is on unless said otherwise.
        free_placement: ``"append"`` (all freed blocks to the tail) or ``"prepend_unhashed"``
            (blocks without a hash go to the head, hashed ones to the tail).
        pad_pages: pad non-divisible pages to the largest page instead of raising NotImplementedError.
        skip_on: tokens ``remove_skipped_blocks`` counts: ``"scheduled"`` (all computed) or
            ``"processed"`` (computed minus those still in flight).
        reserve_null_block_in_fit: subtract one block's bytes from the memory in the startup fit check
            and auto-fit (PR #47272).
    """

    name: str
    description: str
    log_formula: str
    combined_log_line: bool
    default_policy: str
    async_in_flight_batches: int
    async_scheduling_default: bool
    free_placement: str
    pad_pages: bool
    skip_on: str
    reserve_null_block_in_fit: bool

    def __post_init__(self) -> None:
        require_choice(self.log_formula, LOG_FORMULAS, "log_formula")
        require_choice(self.free_placement, FREE_PLACEMENTS, "free_placement")
        require_choice(self.skip_on, SKIP_ON, "skip_on")

    def in_flight_tokens(self, max_num_batched_tokens: int, async_scheduling: bool) -> int:
        """The in-flight token allowance T (tokens) used by the SWA footprint and the admission cap."""
        batches = self.async_in_flight_batches if async_scheduling else 1
        return batches * max_num_batched_tokens

    @property
    def prepend_unhashed(self) -> bool:
        """True when freed blocks without a hash go to the head of the free queue."""
        return self.free_placement == "prepend_unhashed"


# Each version is written as what changed since the one before it.
_CLASSIC = Profile(
    name="vllm-0.20",
    description="classic manager (v0.19-v0.20): uncapped full-sequence gate, per-group size log",
    log_formula="per_group",
    combined_log_line=False,
    default_policy="uncapped",
    async_in_flight_batches=1,
    async_scheduling_default=False,
    free_placement="append",
    pad_pages=False,
    skip_on="scheduled",
    reserve_null_block_in_fit=False,
)
_CAPPED = replace(
    _CLASSIC,
    name="vllm-0.21",
    description="classic manager with the SWA admission cap, T = MNBT (v0.21-v0.22)",
    log_formula="concurrency",
    default_policy="vllm",
)
_NEW = replace(
    _CAPPED,
    name="vllm-0.33",
    description="new manager (v0.33): T = 2 x max_num_batched_tokens under async, prepend, padding",
    combined_log_line=True,
    async_in_flight_batches=2,
    async_scheduling_default=True,
    free_placement="prepend_unhashed",
    pad_pages=True,
    skip_on="processed",
    reserve_null_block_in_fit=True,
)

PROFILES: dict[str, Profile] = {p.name: p for p in (_CLASSIC, _CAPPED, _NEW)}

#: Profile names, oldest first.
PROFILE_NAMES: tuple[str, ...] = tuple(PROFILES)


def get_profile(name: str | Profile) -> Profile:
    """Return the profile called ``name`` (a profile is returned unchanged)."""
    if isinstance(name, Profile):
        return name
    require_choice(name, PROFILE_NAMES, "profile")
    return PROFILES[name]
