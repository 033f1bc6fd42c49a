"""The one colour palette of kvlab's figures, safe for the common forms of colour blindness.

Categorical colours are Okabe & Ito's eight (distinguishable under protanopia, deuteranopia and
tritanopia); continuous data uses Cividis (designed for colour-vision deficiency, monotone in
lightness). Every figure takes its colours from here, so one scheme or one request state has the
same colour everywhere.
"""

from __future__ import annotations

#: Okabe & Ito's palette by name.
OKABE_ITO: dict[str, str] = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}

#: Order for categorical series (black last: it is kept for rules and references).
CATEGORICAL: tuple[str, ...] = (
    OKABE_ITO["blue"],
    OKABE_ITO["orange"],
    OKABE_ITO["bluish_green"],
    OKABE_ITO["vermillion"],
    OKABE_ITO["reddish_purple"],
    OKABE_ITO["sky_blue"],
    OKABE_ITO["yellow"],
    OKABE_ITO["black"],
)

#: Paul Tol's "muted" qualitative scheme (nine colours, colour-blind safe, none black or grey): for
#: many items shown at once, e.g. the requests of a block map.
MUTED: tuple[str, ...] = (
    "#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#CC6677", "#882255", "#AA4499",
)

#: Continuous colour scale (heatmaps).
SEQUENTIAL: str = "Cividis"

#: Neutral greys for free space, grid lines and "nothing here".
GREY_LIGHT = "#E5E5E5"
GREY = "#999999"
GREY_DARK = "#555555"
#: Background of code-like panes (log lines).
PANE_BACKGROUND = "#F5F5F5"

#: Fixed colours per KV-cache scheme, so a scheme looks the same in every figure.
SCHEME_COLORS: dict[str, str] = {
    "auto": OKABE_ITO["black"],
    "bfloat16": OKABE_ITO["black"],
    "float16": GREY_DARK,
    "fp8": OKABE_ITO["orange"],
    "fp8_e4m3": OKABE_ITO["orange"],
    "fp8_e5m2": OKABE_ITO["vermillion"],
    "int8_per_token_head": OKABE_ITO["blue"],
    "fp8_per_token_head": OKABE_ITO["bluish_green"],
}

#: Request states of the admission timeline.
STATE_COLORS: dict[str, str] = {
    "waiting": GREY_LIGHT,
    "prefill": OKABE_ITO["sky_blue"],
    "decode": OKABE_ITO["blue"],
    "preempted": OKABE_ITO["vermillion"],
    "finished": GREY,
}

#: Layer kinds / KV-cache groups: sliding layers light, full layers dark.
KIND_COLORS: dict[str, str] = {
    "full": OKABE_ITO["blue"],
    "sliding_window": OKABE_ITO["sky_blue"],
    "chunked_local": OKABE_ITO["bluish_green"],
}

#: K and V in every figure that shows both.
KV_COLORS: dict[str, str] = {"k": OKABE_ITO["blue"], "v": OKABE_ITO["orange"]}

#: Marker shapes for KV-cache groups (shape, not colour, tells groups apart in the block map).
GROUP_SYMBOLS: tuple[str, ...] = ("square", "diamond", "circle", "triangle-up", "hexagon", "star")


def categorical(i: int) -> str:
    """The ``i``-th categorical colour, cycling."""
    return CATEGORICAL[i % len(CATEGORICAL)]


def request_color(i: int) -> str:
    """Colour of the ``i``-th request of a run (cycling through :data:`MUTED`)."""
    return MUTED[i % len(MUTED)]


def scheme_color(scheme: str) -> str:
    """Colour of a scheme (a categorical colour for names kvlab does not list)."""
    return SCHEME_COLORS.get(scheme, categorical(abs(hash(scheme)) % 7))


def group_symbol(group: int) -> str:
    """Marker symbol of KV-cache group ``group``."""
    return GROUP_SYMBOLS[group % len(GROUP_SYMBOLS)]
