"""Readable tokens, numbers and charts (issue 24): pure renderers checked on hand-made inputs.

Whitespace tokens must show as glyphs wherever a token stands alone (grid cells, chart ticks,
Fidelity's outcomes) and in the output when the token is whitespace alone; JSON outputs carry
no float noise; the ceiling line is named as an expectation, away from the bars.
"""

from __future__ import annotations

import gradio as gr
import pytest

from components.render.band_figures import efficiency_band_figure
from components.wiring.outputs import NamedOutputs, rounded
from components.wiring.runs import point_stats
from components.render.text import output_token_html, visible_token
from components.render import figures

pytestmark = pytest.mark.unit


def test_whitespace_tokens_show_as_glyphs():
    assert [visible_token(t) for t in (" ", "\n", "\t", "  x", "x\n", "a b", "word")] == [
        "␣", "⏎", "⇥", "␣␣x", "x⏎", "a b", "word"]
    assert "⏎" in output_token_html("\n") and "<br>" in output_token_html("\n")
    assert output_token_html(" the") == " the"  # a word keeps its leading space in the running text
    ticks = figures.distribution_figure([], [], "target", 0).layout.xaxis.ticktext  # builds with no tokens
    assert ticks is None or all(t for t in ticks)


def test_json_outputs_are_rounded_for_display():
    import dataclasses

    @dataclasses.dataclass
    class Out(NamedOutputs):
        data: object = None
        html: object = None

    components = {"data": gr.JSON(), "html": gr.HTML()}
    keyed = Out({"x": 3.9999999999999996, "rows": [{"y": 0.1 + 0.2}]}, 0.1 + 0.2).keyed(components)
    assert keyed[components["data"]] == {"x": 4.0, "rows": [{"y": 0.3}]}
    assert keyed[components["html"]] == 0.1 + 0.2  # only JSON outputs are rounded
    assert rounded(2.123456789012345) == 2.123456789  # ten significant digits: no measured digit lost


def test_the_ceiling_is_named_as_an_expectation_off_the_bars():
    fig = efficiency_band_figure({"sd": point_stats([2.4], [None], [10])}, coupled=True, ceiling=1.22)
    assert not fig.layout.annotations and not any(trace.text for trace in fig.data)  # nothing written over the bars
    (line,) = fig.layout.shapes  # named in the legend, beside a swatch of the same dashed line
    assert line.showlegend and line.name == "best any exact rule, on average (LP): 2.22" and fig.layout.showlegend
