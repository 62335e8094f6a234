"""The app's one visual language: a fixed colour per method, and a look per token kind.

Method colours are keyed by method name, never by position in a selection, so ticking a
method in Compare or Sweep never recolours another; each is set in the method's registry entry
(spectr_gbv.methods). They come from the Okabe-Ito palette
(safe under the common colour-vision deficiencies) plus three of Paul Tol's colours
for the ninth to eleventh; line charts add a marker symbol per method as a second cue.
Vermillion (red) has one meaning in the whole app: lossy, the released SpecTr-GBV rule,
which is also dashed in line charts and hatched in bar charts.

Token kinds (accepted / correction / bonus / plain target sample / rejected / skipped)
are light backgrounds with a second, non-colour cue each: a border style and a glyph,
so they stay apart under deuteranopia and in greyscale (tests/test_palette.py checks both).
Every text colour here has contrast >= 4.5:1 on its background (WCAG AA).
"""

from __future__ import annotations

from dataclasses import dataclass

from spectr_gbv import AUTOREGRESSIVE, METHODS
from spectr_gbv.methods import LOSSY_RED  # noqa: F401 - the palette's one red, re-exported for the views

# Each method's colour and symbol live with its registry entry (spectr_gbv.methods); AR, the
# baseline every chart compares against, is black.
METHOD_COLOURS = {AUTOREGRESSIVE: "#000000"} | {name: spec.colour for name, spec in METHODS.items()}
METHOD_SYMBOLS = {AUTOREGRESSIVE: "circle-open"} | {name: spec.symbol for name, spec in METHODS.items()}
UNKNOWN_METHOD_COLOUR = "#666666"


def is_lossy(method: str) -> bool:
    return method in METHODS and not METHODS[method].exact


def method_colour(method: str) -> str:
    if method in METHODS:  # read when drawn: a method registered later has its colour too
        return METHODS[method].colour
    return METHOD_COLOURS.get(method, UNKNOWN_METHOD_COLOUR)


def method_symbol(method: str) -> str:
    return METHODS[method].symbol if method in METHODS else METHOD_SYMBOLS.get(method, "circle")


def line_style(method: str) -> dict:
    """Plotly scatter keywords: the method's colour and symbol; the lossy rule dashed."""
    return dict(line=dict(color=method_colour(method), dash="dash" if is_lossy(method) else "solid"),
                marker=dict(color=method_colour(method), symbol=method_symbol(method), size=9))


def bar_marker(methods: list[str], opacity: float = 1.0) -> dict:
    """Plotly bar `marker`: one colour per bar from its method; the lossy rule hatched."""
    return dict(color=[method_colour(m) for m in methods], opacity=opacity,
                pattern=dict(shape=["/" if is_lossy(m) else "" for m in methods], fgcolor="#ffffff", solidity=0.35))


# Distributions in the explorer and Fidelity: q and p are neutral greys (no method, no kind),
# and the bar a token was drawn from takes the colour of that token's kind.
TARGET_Q = "#3d3d3d"
DRAFT_P = "#a6a6a6"
PHASE_COLOURS = {"draft": DRAFT_P, "target": TARGET_Q, "verify": "#7a7a7a", "other": "#d9d9d9"}


@dataclass(frozen=True)
class KindStyle:
    name: str  # what the legend says
    background: str
    text: str  # text colour on that background (contrast >= 4.5:1)
    strong: str  # the saturated colour of the kind (chart bars, borders)
    border: str  # the non-colour cue: a CSS border style
    glyph: str  # the second non-colour cue, shown before the legend entry and in grid cells

    def css(self) -> str:
        return f"background:{self.background};color:{self.text};border-bottom:{self.border}"


KINDS = {
    "accepted": KindStyle("accepted draft token", "#a6dbc2", "#1a1a1a", "#009E73", "2px solid #00694d", "✓"),
    "correction": KindStyle("correction (from the residual)", "#fbe3b4", "#1a1a1a", "#E69F00", "3px double #8a5a00", "↻"),
    "bonus": KindStyle("bonus (all L accepted)", "#cfe3f5", "#1a1a1a", "#56B4E9", "2px dashed #005a8c", "+"),
    "target": KindStyle("plain target sample (AR)", "#f2f2f2", "#1a1a1a", "#8c8c8c", "2px solid transparent", "·"),
    "rejected": KindStyle("rejected: a failed sub-block test ends here", "#ffffff", "#4a4a4a", "#4a4a4a", "3px dotted #4a4a4a", "✗"),
    "skipped": KindStyle("test skipped (h not needed: the coin's bound already failed)", "#ffffff", "#595959",
                         "#8c8c8c", "1px dashed #8c8c8c", "–"),
}
# Drafted tokens no test reached, and the part of a row after the final token.
UNREACHED = KindStyle("drafted, not reached", "#f4f4f4", "#595959", "#bdbdbd", "2px solid transparent", "")
