"""Compare's results so far and the outputs they make, for a streaming handler (app.compare).

The texts, metric lines and speedups come from independent runs (the first seed's); the
charts from the coupled runs when there are any (all seeds, or the seeds whose coupled run
finished before a budget stop), else from the independent runs; the outputs say which.
"""

from __future__ import annotations

from spectr_gbv.ceiling import run_ceiling
from spectr_gbv.coupled import CoupledRun
from spectr_gbv.records import RunRecord

from . import figures
from .band_figures import efficiency_band_figure
from .runs import Stop, header_html, header_line, point_from_summaries, titled
from .text import metrics_line, provenance_html, side_by_side_html


class CompareView:
    """Compare's results so far and the outputs they make (texts: independent runs; charts: coupled ones when there)."""

    def __init__(self, pair, prompt_ids, methods, base, coupled, seeds, timed):
        self.pair, self.prompt_ids, self.methods, self.base = pair, prompt_ids, methods, base
        self.coupled, self.seeds, self.timed = coupled, seeds, timed
        self.ar: list[RunRecord] = []
        self.runs: dict[str, list[RunRecord]] = {}
        self.coupled_runs: list[CoupledRun] = []
        self.stop: Stop | None = None

    def planned(self) -> int:
        return 1 + self.timed + len(self.methods) * len(self.seeds) + self.coupled * len(self.seeds)

    def finished(self) -> int:
        return len(self.ar) + sum(map(len, self.runs.values())) + len(self.coupled_runs)

    def outputs(self, pair_key, final: bool = False) -> tuple:
        pair, done = self.pair, [m for m in self.methods if len(self.runs.get(m, [])) == len(self.seeds)]
        first = {m: self.runs[m][0] for m in done}
        use_coupled = bool(self.coupled_runs)  # all seeds, or (stopped) the seeds whose coupled run finished
        if use_coupled:
            repeats = {m: [run.summary(m) for run in self.coupled_runs] for m in done}
            theory = {m: (self.coupled_runs[0].accepted(m), self.coupled_runs[0].expected(m)) for m in done}
        else:
            repeats = {m: [run.summary() for run in self.runs[m]] for m in done}
            theory = {m: ([it.num_accepted for it in first[m].iterations],
                          None if first[m].mean_expected_accepted is None
                          else [it.expected_accepted for it in first[m].iterations]) for m in done}
        shown_summaries = [repeats[m][0] | ({} if use_coupled else
                                            {"accepted_length_histogram": first[m].accepted_length_histogram}) for m in done]
        ceiling = None
        if final and done:
            ceiling = run_ceiling(
                pair.info.key, self.prompt_ids,
                [s.emitted for s in self.coupled_runs[0].steps] if use_coupled else [it.emitted for it in first[done[0]].iterations],
                self.base.config(done[0]))
        ar_rate = None
        if self.ar:
            rates = [run.tokens_per_second for run in self.ar]
            ar_rate = len(rates) / sum(1 / rate for rate in rates)
        speedups = {m: first[m].tokens_per_second / ar_rate for m in done} if ar_rate else {}
        phases = ({"ar": self.ar[0].phase_ms_per_token} if self.ar else {}) | {m: first[m].phase_ms_per_token for m in done}
        points = {m: point_from_summaries(repeats[m]) for m in done}
        extra = [f"{len(self.seeds)} seeds ({self.seeds[0]} to {self.seeds[-1]})" if len(self.seeds) > 1 else "",
                 f"{self.base.max_new_tokens} tokens"]
        header = header_line(pair.info.key, self.methods, self.base.num_drafts, self.base.draft_length,
                             self.base.temperature, self.base.seed, [e for e in extra if e], self.stop)
        if not final:
            header += f"running: {len(done)} of {len(self.methods)} methods done"
        device = str(getattr(pair.target, "device", "cpu"))
        data = {
            "pair": pair.info.key, "methods": self.methods, "coupled": self.coupled, "device": device,
            "seeds": self.seeds, "stopped": self.stop.text() if self.stop else None, "finished_methods": done,
            "ar": self.ar[0].summary() if self.ar else None,
            "independent": [first[m].summary() | {"accepted_length_histogram": first[m].accepted_length_histogram}
                            for m in done],
            "speedup_vs_ar": speedups if self.timed else None,
            "ms_per_token_by_phase": phases if self.timed else None,
            "coupled_runs": [self.coupled_runs[0].summary(m) for m in done] if use_coupled else None,
            "coupled_seeds": [run.config.seed for run in self.coupled_runs] if use_coupled else None,
            "leader": self.coupled_runs[0].config.method if use_coupled else None,
            "block_efficiency_over_seeds": points,
            "ceiling_expected_accepted": ceiling,  # best any exact rule can do (teaching pairs only)
        }
        texts = {m: provenance_html(first[m], pair.token_text, legend=False) for m in done}
        source = ("Texts and speedups: independent runs (first seed). Charts: "
                  + ("coupled runs, the same drafts and random draws for every method." if use_coupled
                     else "independent runs."))
        return (
            header_html(header) + f'<div class="compare-sources">{source}</div>'
            + side_by_side_html(texts, {m: metrics_line(first[m]) for m in done}),
            efficiency_band_figure(points, coupled=use_coupled, ceiling=ceiling),
            titled(figures.histogram_figure(shown_summaries), use_coupled),
            titled(figures.per_position_figure(shown_summaries), use_coupled),
            titled(figures.calls_per_token_figure(shown_summaries), use_coupled),
            figures.speedup_figure(speedups, device, phases, timed=self.timed),
            titled(figures.theory_figure(theory), use_coupled),
            data,
        )
