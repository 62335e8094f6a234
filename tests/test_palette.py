"""The visual language: method colours fixed by name, token kinds apart without colour, under
deuteranopia and at readable contrast; the charts use the map whatever the selection order."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from components.render import figures, palette
from components.render.band_figures import efficiency_band_figure, sweep_band_figures
from components.render.palette import KINDS, METHOD_COLOURS, UNREACHED
from components.wiring.runs import point_stats
from components.render.text import side_by_side_html
from spectr_gbv import METHODS

pytestmark = pytest.mark.unit

# Machado, Oliveira and Fernandes (2009), deuteranopia at severity 1, on linear RGB.
DEUTERANOPIA = ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881))


def linear_rgb(colour: str) -> list[float]:
    channels = [int(colour.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    return [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]


def relative_luminance(rgb: list[float]) -> float:
    return 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]


def contrast(foreground: str, background: str) -> float:
    """WCAG 2 contrast ratio."""
    lighter, darker = sorted((relative_luminance(linear_rgb(foreground)), relative_luminance(linear_rgb(background))),
                             reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def lab(rgb: list[float]) -> tuple[float, float, float]:
    """CIELAB (D65) of linear RGB."""
    x = (0.4124 * rgb[0] + 0.3576 * rgb[1] + 0.1805 * rgb[2]) / 0.95047
    y = 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]
    z = (0.0193 * rgb[0] + 0.1192 * rgb[1] + 0.9505 * rgb[2]) / 1.08883
    f = [t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def seen_by_deuteranope(colour: str) -> tuple[float, float, float]:
    rgb = linear_rgb(colour)
    return lab([min(max(sum(m * c for m, c in zip(row, rgb)), 0.0), 1.0) for row in DEUTERANOPIA])


def distance(a: tuple, b: tuple) -> float:  # CIE76 delta E
    return sum((p - q) ** 2 for p, q in zip(a, b)) ** 0.5


def test_the_simulation_merges_what_a_deuteranope_cannot_tell_apart():
    # Red and green of equal lightness collapse; blue against yellow stays apart.
    assert distance(seen_by_deuteranope("#c0392b"), seen_by_deuteranope("#6b8e23")) < 15 < \
        distance(lab(linear_rgb("#c0392b")), lab(linear_rgb("#6b8e23")))
    assert distance(seen_by_deuteranope("#0072B2"), seen_by_deuteranope("#F0E442")) > 50


def test_every_method_has_its_own_colour_and_symbol_also_under_deuteranopia():
    assert set(METHODS) | {"ar"} == set(METHOD_COLOURS) == set(palette.METHOD_SYMBOLS)
    assert len(set(METHOD_COLOURS.values())) == len(METHOD_COLOURS)
    assert len(set(palette.METHOD_SYMBOLS.values())) == len(METHOD_COLOURS)
    for a, b in itertools.combinations(METHOD_COLOURS, 2):
        assert distance(seen_by_deuteranope(METHOD_COLOURS[a]), seen_by_deuteranope(METHOD_COLOURS[b])) > 10, (a, b)


def test_red_means_lossy_and_only_the_lossy_rule_is_dashed_and_hatched():
    lossy = [m for m in METHODS if not METHODS[m].exact]
    assert [m for m, c in METHOD_COLOURS.items() if c == palette.LOSSY_RED] == lossy == ["spectr_gbv_released"]
    assert [m for m in METHOD_COLOURS if palette.line_style(m)["line"]["dash"] == "dash"] == lossy
    marker = palette.bar_marker(list(METHOD_COLOURS))
    assert [m for m, shape in zip(METHOD_COLOURS, marker["pattern"]["shape"]) if shape] == lossy


def test_token_kinds_are_apart_without_colour_and_under_deuteranopia():
    styles = {**KINDS, "unreached": UNREACHED}
    cues = [(s.border.split()[1], s.glyph) for s in styles.values()]  # border style and glyph: no colour involved
    assert len(set(cues)) == len(cues)
    # The kinds of one output (accepted, correction, bonus) and of AR apart by colour alone as well.
    for a, b in itertools.combinations(("accepted", "correction", "bonus", "target"), 2):
        assert distance(seen_by_deuteranope(KINDS[a].background), seen_by_deuteranope(KINDS[b].background)) > 12, (a, b)


def test_text_colours_have_at_least_aa_contrast():
    for style in [*KINDS.values(), UNREACHED]:
        assert contrast(style.text, style.background) >= 4.5, style.name
    css = (Path(__file__).parents[1] / "assets" / "app.css").read_text()
    hint = re.search(r"--block-info-text-color:\s*(#[0-9a-fA-F]{6})", css).group(1)
    assert contrast(hint, "#ffffff") >= 4.5 and contrast("#9ca3af", "#ffffff") < 4.5  # the theme's own grey fails
    sizes = [int(px) for px in re.findall(r"(?:font-size|--text-[a-z]+):\s*(\d+)px", css)]
    assert sizes and min(sizes) >= 14


def summary(method: str, efficiency: float) -> dict:
    return {"method": method, "block_efficiency": efficiency, "mean_acceptance_length": efficiency + 0.1,
            "accepted_length_histogram": [1, 2, 3], "per_position_acceptance": [0.9, 0.5]}


@pytest.mark.parametrize("figure", [figures.histogram_figure, figures.per_position_figure])
def test_a_method_keeps_its_colour_whatever_else_is_selected(figure):
    one = figure([summary("spectr", 2.0), summary("sd", 1.5)])
    other = figure([summary("rrs", 1.2), summary("gbv", 1.7), summary("spectr", 2.0)])

    def colours(fig):
        out = {}
        for trace in fig.data:
            colour = trace.marker.color if trace.type == "bar" else trace.line.color
            out[trace.name] = colour[0] if isinstance(colour, (list, tuple)) else colour
        return out

    assert colours(one)["SpecTr"] == colours(other)["SpecTr"] == METHOD_COLOURS["spectr"]
    assert colours(other)["RRS"] == METHOD_COLOURS["rrs"]


def test_bar_charts_colour_each_bar_by_its_method():
    methods = ["spectr_gbv_released", "sd", "spectr"]
    fig = efficiency_band_figure({m: point_stats([1.5], [None], [10]) for m in methods}, coupled=False)
    assert list(fig.data[0].marker.color) == [METHOD_COLOURS[m] for m in methods]
    assert list(fig.data[0].marker.pattern.shape) == ["/", "", ""]
    assert list(figures.calls_per_token_figure([summary(m, 2.0) for m in reversed(methods)]).data[0].marker.color) == \
        [METHOD_COLOURS[m] for m in reversed(methods)]
    rows = [{"axis": "K", "value": k, "method": m, "speedup_vs_ar": 1.0} | point_stats([1.5], [None], [10])
            for m in ("gbv", "as_bv") for k in (1, 2)]
    efficiency, _ = sweep_band_figures(rows, timed=False)
    assert [t.line.color for t in efficiency.data] == [METHOD_COLOURS["gbv"], METHOD_COLOURS["as_bv"]]
    side = side_by_side_html({"as_bv": "x", "sd": "y"}, {"as_bv": "", "sd": ""})
    assert side.index(METHOD_COLOURS["as_bv"]) < side.index(METHOD_COLOURS["sd"])


def test_the_residual_bar_is_the_correction_colour():
    from spectr_gbv.records import TopToken

    top = [TopToken(1, 0.7, 0.5, 0.2), TopToken(2, 0.3, 0.5, 0.8)]
    correction = figures.distribution_figure(top, ["a", "b"], "correction", 1)
    assert correction.data[-1].marker.color == KINDS["correction"].strong
    assert figures.distribution_figure(top, ["a", "b"], "bonus", 1).data[-1].marker.color == KINDS["bonus"].strong
    assert KINDS["correction"].strong not in {t.marker.color for t in correction.data[:-1]}  # q, p: neutral
    # Only SD's residual is norm((q - p)+) of the plotted bars: the others say so.
    assert "not norm" not in correction.layout.title.subtitle.text
    spectr = figures.distribution_figure(top, ["a", "b"], "correction", 1, method="spectr")
    assert "its residual is not norm" in spectr.layout.title.subtitle.text  # the subtitle stays short: two lines at most
    assert "not norm" not in figures.distribution_figure(top, ["a", "b"], "correction", 1, method="sd").layout.title.subtitle.text
