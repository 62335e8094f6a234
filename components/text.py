"""Pure: a run record -> HTML of the output, each token coloured by its provenance."""

from __future__ import annotations

import html
from typing import Callable

from spectr_gbv.records import RunRecord

# One palette for the whole app: accepted draft token, correction token, bonus token, AR sample.
KIND_COLOURS = {"accepted": "#c7f0d2", "correction": "#ffd6a5", "bonus": "#bdd7ff", "target": "#e6e6e6"}


def provenance_html(run: RunRecord, token_text: Callable[[list[int]], list[str]]) -> str:
    spans = []
    for it in run.iterations:
        for token, kind in zip(token_text(it.emitted), it.token_kinds):
            spans.append(
                f'<span class="tok tok-{kind}" title="iteration {it.index}: {kind}" '
                f'style="background:{KIND_COLOURS[kind]};padding:1px 3px;margin:1px;border-radius:3px">'
                f"{html.escape(token)}</span>"
            )
    legend = " ".join(
        f'<span style="background:{colour};padding:1px 5px;border-radius:3px">{kind}</span>'
        for kind, colour in KIND_COLOURS.items()
    )
    return f'<div class="provenance">{" ".join(spans)}</div><div style="margin-top:8px;font-size:90%">{legend}</div>'
