"""The paper's experiments on the offline default pair: five task families, three ablations, the lossy rule's cost.

    python -m spectr_gbv.bench.paper [--quick] [--out assets/paper]

SpecTr-GBV (arXiv 2604.25925) reports block efficiency (BE) and speedup ratio (SR) for AR, SD,
SpecTr, GBV and SpecTr-GBV on HumanEval, GSM8K, MGSM, LM1B and Alpaca, at K = 3, L = 8,
T = 0.4, with ablations over K (1, 3, 5, 7), L (12, 16, 20, 24) and T (0.1, 0.4, 0.7)
(docs/algorithms.md §11). This runs the same design on the default pair with the project's
prompt suite (`assets/prompts/paper_suite.json`) and writes:

* `paper_results.json`: every run's numbers;
* `paper_results.md`: the main table in the paper's layout (BE and SR per method per family,
  mean and 95 % confidence interval over prompts), the ablations, the exact and released
  SpecTr-GBV side by side with the released rule's total-variation error estimated from
  fixed contexts, theory against measured (mean tau against the mean of E[tau | drafts],
  with a 95 % interval of their paired difference), and which of the paper's trends hold,
  each verdict with a 95 % interval of a paired difference over prompts (`bench.trends`:
  coupled block efficiency, one decode per prompt and setting judged by every rule);
* `ablation_K.html|png`, `ablation_L.html|png`, `ablation_T.html|png` (Plotly; PNG when the
  kaleido package can render).

SR is tokens/s over AR's tokens/s on the same prompt in the same run on this machine: it
depends on the hardware; BE does not. `--quick` (2 prompts per family, 16 tokens, one
ablation prompt, 50 fidelity runs) finishes within about 10 minutes on a 2-core CPU.

    python -m spectr_gbv.bench.paper --trends-only [--trend-prompts N] [--time-budget S] --out DIR

runs the trend checks alone (no timed runs, so no SR trend) and writes `paper_trends.md|json`:
the suite's prompts, families in turn, as many as fit in the time budget.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
import math
import platform
import sys
import time
from pathlib import Path

import torch

from ..prompt_sets import PAPER_SUITE
from .. import generate, load_pair
from ..config import DecodeConfig
from ..fidelity import fidelity
from ..intervals import t_interval
from ..models.hf import chat_prompt_ids
from ..pairs import DEFAULT_KEY
from . import trends as trend_lib
from .frontier import prompt_texts

SUITE = PAPER_SUITE
METHODS = ["sd", "spectr", "gbv", "spectr_gbv", "as_bv", "traversal", "spectr_gbv_released"]
DEFAULT_K, DEFAULT_L, DEFAULT_T = 3, 8, 0.4  # the paper's defaults (L in {8, 12})
ABLATIONS = {"K": [1, 3, 5, 7], "L": [12, 16, 20, 24], "T": [0.1, 0.4, 0.7]}
ABLATION_METHODS = {"K": ["spectr", "spectr_gbv"], "L": ["sd", "spectr", "gbv", "spectr_gbv"],
                    "T": ["sd", "spectr", "gbv", "spectr_gbv"]}


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % t-interval (NaN for a single value)."""
    mean, _, high = t_interval(values)
    return mean, high - mean


def timed_run(target, draft, prompt, method, K, L, T, tokens, seed, with_theory=True):
    """The run and its tokens/s. The engine's own timings (drafting, scoring, verification;
    synchronised on CUDA) exclude the theory line E[tau | drafts], computed for the report only."""
    record = generate(target, draft, prompt, method=method, num_drafts=K, draft_length=L, temperature=T,
                      max_new_tokens=tokens, seed=seed, with_theory=with_theory)
    return record, record.tokens_per_second


def run_cell(target, draft, prompts, method, K, L, T, tokens, ar_rates, with_theory=True) -> dict:
    """One method at one setting over prompts: per-prompt BE and SR, plus tau and theory per iteration."""
    be, sr, taus, expected = [], [], [], []
    for i, prompt in enumerate(prompts):
        key = (i, T)
        if key not in ar_rates:
            ar_rates[key] = timed_run(target, None, prompt, "ar", K, L, T, tokens, i)[1]
        record, rate = timed_run(target, draft, prompt, method, K, L, T, tokens, i, with_theory)
        be.append(record.block_efficiency)
        sr.append(rate / ar_rates[key])
        taus += [it.num_accepted for it in record.iterations]
        expected += [it.expected_accepted for it in record.iterations]
    return {"method": method, "K": K, "L": L, "T": T, "be": be, "sr": sr, "taus": taus,
            "expected": None if any(e is None for e in expected) else expected}


def main_table(target, draft, families, tokens, log) -> list[dict]:
    ar_rates: dict = {}
    cells = []
    for family, prompts in families.items():
        for method in METHODS:
            cell = run_cell(target, draft, prompts, method, DEFAULT_K, DEFAULT_L, DEFAULT_T, tokens, ar_rates)
            cells.append(cell | {"family": family})
            log(f"{family:10s} {method:20s} BE {mean_ci(cell['be'])[0]:.2f}  SR {mean_ci(cell['sr'])[0]:.2f}")
        ar_rates.clear()  # AR is timed per prompt of each family
    return cells


def ablations(target, draft, prompts, tokens, log) -> dict[str, list[dict]]:
    out = {}
    for axis, values in ABLATIONS.items():
        ar_rates: dict = {}
        rows = []
        for value in values:
            K, L, T = (value if axis == "K" else DEFAULT_K, value if axis == "L" else DEFAULT_L,
                       value if axis == "T" else DEFAULT_T)
            for method in ABLATION_METHODS[axis]:
                # No theory line here: SpecTr's E[tau | drafts] recursion grows quickly with K (it is
                # checked in the main table).
                cell = run_cell(target, draft, prompts, method, K, L, T, tokens, ar_rates, with_theory=False)
                rows.append(cell | {"value": value})
                log(f"ablation {axis}={value:<4} {method:12s} BE {mean_ci(cell['be'])[0]:.2f}  SR {mean_ci(cell['sr'])[0]:.2f}")
        out[axis] = rows
    return out


def lossy_cost(target, draft, contexts, runs, log) -> list[dict]:
    """Exact vs released SpecTr-GBV: the first token's law from fixed contexts, N runs each."""
    rows = []
    for c, prompt in enumerate(contexts):
        for method in ("spectr_gbv", "spectr_gbv_released"):
            config = DecodeConfig(method=method, num_drafts=DEFAULT_K, draft_length=DEFAULT_L, temperature=DEFAULT_T)
            result = fidelity(target, draft, prompt, config, runs, 1)
            rows.append({"context": c, "method": method, "runs": runs, "tv": result.total_variation,
                         "noise_tv_95": result.noise_tv_95, "chi_square_p": result.chi_square_p})
            log(f"fidelity context {c} {method:20s} TV {result.total_variation:.3f} (noise 95% {result.noise_tv_95:.3f})")
    return rows


# ------------------------------------------------------------------------------------ reporting


def _fmt(values: list[float]) -> str:
    mean, half = mean_ci(values)
    return f"{mean:.2f}" if math.isnan(half) else f"{mean:.2f} ± {half:.2f}"


def main_markdown(cells: list[dict], families: list[str]) -> str:
    head = "| method | " + " | ".join(f"{f} BE | {f} SR" for f in families) + " | avg BE | avg SR |"
    lines = [head, "|" + "---|" * (2 * len(families) + 3)]
    for method in METHODS:
        mine = {c["family"]: c for c in cells if c["method"] == method}
        parts = [f"{_fmt(mine[f]['be'])} | {_fmt(mine[f]['sr'])}" for f in families]
        avg_be = sum(mean_ci(mine[f]["be"])[0] for f in families) / len(families)
        avg_sr = sum(mean_ci(mine[f]["sr"])[0] for f in families) / len(families)
        lines.append(f"| {method} | " + " | ".join(parts) + f" | {avg_be:.2f} | {avg_sr:.2f} |")
    return "\n".join(lines)


def ablation_markdown(axis: str, rows: list[dict]) -> str:
    methods = ABLATION_METHODS[axis]
    lines = [f"| {axis} | " + " | ".join(f"{m} BE | {m} SR" for m in methods) + " |", "|" + "---|" * (2 * len(methods) + 1)]
    for value in ABLATIONS[axis]:
        cells = {r["method"]: r for r in rows if r["value"] == value}
        lines.append(f"| {value} | " + " | ".join(f"{_fmt(cells[m]['be'])} | {_fmt(cells[m]['sr'])}" for m in methods) + " |")
    return "\n".join(lines)


def theory_markdown(cells: list[dict]) -> str:
    lines = ["| method | iterations | mean tau (measured) | mean E[tau given drafts] (theory) | difference, 95 % CI | agree |",
             "|---|---|---|---|---|---|"]
    rows = []
    for method in METHODS:
        mine = [c for c in cells if c["method"] == method]
        taus = [t for c in mine for t in c["taus"]]
        if any(c["expected"] is None for c in mine):
            lines.append(f"| {method} | {len(taus)} | {sum(taus) / len(taus):.3f} | – (no theory: lossy rule) | – | – |")
            continue
        expected = [e for c in mine for e in c["expected"]]
        diff, half = mean_ci([t - e for t, e in zip(taus, expected)])
        agree = abs(diff) <= half
        rows.append(agree)
        lines.append(f"| {method} | {len(taus)} | {sum(taus) / len(taus):.3f} | {sum(expected) / len(expected):.3f} | "
                     f"{diff:+.3f} ± {half:.3f} | {'yes' if agree else 'no'} |")
    return "\n".join(lines)


def lossy_markdown(rows: list[dict], cells: list[dict]) -> str:
    be = {m: sum(mean_ci(c["be"])[0] for c in cells if c["method"] == m) / len({c["family"] for c in cells})
          for m in ("spectr_gbv", "spectr_gbv_released")}
    lines = [f"Average BE over the families: exact SpecTr-GBV {be['spectr_gbv']:.2f}, released rule "
             f"{be['spectr_gbv_released']:.2f}.", "",
             "| context | method | runs | TV of the first token's law | TV that exact sampling exceeds 5 % of the time | chi-square p |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['context'] + 1} | {r['method']} | {r['runs']} | {r['tv']:.3f} | {r['noise_tv_95']:.3f} | "
                     f"{r['chi_square_p']:.2g} |")
    return "\n".join(lines)


MAIN_SETTING = (DEFAULT_K, DEFAULT_L, DEFAULT_T)
TREND_AXES = {axis: [(v if axis == "K" else DEFAULT_K, v if axis == "L" else DEFAULT_L, v if axis == "T" else DEFAULT_T)
                     for v in values] for axis, values in ABLATIONS.items()}
TREND_SETTINGS = list(dict.fromkeys([MAIN_SETTING, *(s for axis in TREND_AXES.values() for s in axis)]))


# At the paper's default every exact rule is compared; along the axes the trends compare
# SpecTr-GBV with itself and with SpecTr only. The released rule has no verdict (it is lossy).
TREND_RULES = {s: [m for m in METHODS if m != "spectr_gbv_released"] if s == MAIN_SETTING else ["spectr", "spectr_gbv"]
               for s in TREND_SETTINGS}


def trend_report(target, draft, prompts, tokens, time_budget_s, log) -> tuple[list[trend_lib.Trend], int]:
    """The paper's trends on coupled BE (TREND_RULES at every trend setting), and how many
    prompts fitted in the budget."""
    be, used = trend_lib.measure(target, draft, prompts, TREND_RULES, tokens, time_budget_s, log)
    return trend_lib.trend_checks(be, MAIN_SETTING, TREND_AXES), used


def speedup_trend(abl: dict[str, list[dict]]) -> trend_lib.Trend:
    """SR peaking inside the L range, from the timed L ablation (SpecTr-GBV, paired by prompt)."""
    rows = [r for r in abl["L"] if r["method"] == "spectr_gbv"]
    return trend_lib.speedup_peak_trend({r["value"]: r["sr"] for r in rows})


def trends_markdown(checks: list[trend_lib.Trend], prompts: int, tokens: int) -> str:
    return (f"Coupled block efficiency on {prompts} prompts ({tokens} new tokens each; the suite's families in "
            f"turn), one decode per prompt and setting judged by every rule; a verdict holds only when the 95 % "
            f"interval of the paired difference excludes the opposite.\n\n" + "\n".join(f"* {c.line()}" for c in checks))


def figures(abl: dict[str, list[dict]], out: Path) -> list[str]:
    from plotly.subplots import make_subplots

    written = []
    for axis, rows in abl.items():
        fig = make_subplots(rows=1, cols=2, subplot_titles=("block efficiency (hardware-free)",
                                                            "speedup vs AR (this machine; hardware-dependent)"))
        for i, method in enumerate(ABLATION_METHODS[axis]):
            mine = [r for r in rows if r["method"] == method]
            xs = [r["value"] for r in mine]
            for col, key in ((1, "be"), (2, "sr")):
                ys, errs = zip(*(mean_ci(r[key]) for r in mine))
                fig.add_scatter(x=xs, y=ys, error_y=dict(array=[0 if math.isnan(e) else e for e in errs]),
                                name=method, legendgroup=method, showlegend=col == 1, row=1, col=col,
                                line=dict(color=["#636efa", "#ef553b", "#00cc96", "#ab63fa"][i]))
        fig.update_layout(title=f"Ablation over {axis} on the default pair", template="plotly_white", height=420, width=1000)
        fig.update_xaxes(title_text=axis)
        html = out / f"ablation_{axis}.html"
        fig.write_html(str(html), include_plotlyjs="cdn")
        written.append(html.name)
        try:
            fig.write_image(str(out / f"ablation_{axis}.png"))
            written.append(f"ablation_{axis}.png")
        except Exception as error:  # noqa: BLE001 - PNG export needs kaleido and a browser
            print(f"PNG export skipped ({type(error).__name__}: {str(error).splitlines()[0][:120]})")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 prompts per family, 16 tokens, 1 ablation prompt, 50 fidelity runs")
    parser.add_argument("--out", default="bench-results/paper", help="folder for the JSON, markdown and figures")
    parser.add_argument("--prompts-per-family", type=int, default=None)
    parser.add_argument("--max-new-tokens", type=int, default=None)
    parser.add_argument("--ablation-prompts", type=int, default=None, help="prompts per ablation setting (math and code alternately)")
    parser.add_argument("--fidelity-runs", type=int, default=None, help="runs per method for the released rule's TV")
    parser.add_argument("--trends-only", action="store_true", help="only the trend checks (coupled BE), no timed runs")
    parser.add_argument("--trend-prompts", type=int, default=None, help="prompts for the trend checks (the suite's families in turn)")
    parser.add_argument("--trend-tokens", type=int, default=None, help="new tokens per trend decode (default: --max-new-tokens)")
    parser.add_argument("--time-budget", type=float, default=None, help="seconds after which the trend checks start no new prompt")
    args = parser.parse_args()
    for name in ("prompts_per_family", "max_new_tokens", "ablation_prompts", "fidelity_runs", "trend_prompts", "trend_tokens"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.time_budget is not None and not args.time_budget > 0:
        parser.error("--time-budget must be a positive number of seconds")
    per_family = args.prompts_per_family or (2 if args.quick else 24)
    tokens = args.max_new_tokens or (16 if args.quick else 64)
    ablation_prompts, fidelity_runs, contexts = (1, 50, 1) if args.quick else (4, 300, 2)
    ablation_prompts = args.ablation_prompts or ablation_prompts
    fidelity_runs = args.fidelity_runs or fidelity_runs
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    log = lambda line: print(f"[{time.perf_counter() - started:6.0f} s] {line}", flush=True)  # noqa: E731

    target, draft, tokenizer = load_pair("default")
    trend_tokens = args.trend_tokens or tokens
    trend_prompts = [chat_prompt_ids(tokenizer, text) for text in
                     prompt_texts(DEFAULT_KEY, args.trend_prompts or (2 if args.quick else 24))]
    command = f"python -m spectr_gbv.bench.paper {' '.join(sys.argv[1:])}"
    if args.trends_only:
        checks, used = trend_report(target, draft, trend_prompts, trend_tokens, args.time_budget, log)
        md = (f"Target: {target.name}; draft: {draft.name}; device: {target.device} ({platform.machine()}, torch "
              f"{torch.__version__}, {torch.get_num_threads()} threads). Command: `{command}` "
              f"({time.perf_counter() - started:.0f} s).\n\n**The paper's trends on this pair**\n\n"
              + trends_markdown(checks, used, trend_tokens))
        (out / "paper_trends.md").write_text(md + "\n")
        (out / "paper_trends.json").write_text(json.dumps({"prompts": used, "tokens": trend_tokens, "settings": TREND_SETTINGS,
                                                          "trends": [asdict(c) for c in checks]}, indent=1))
        print(md)
        return
    suite = json.loads(SUITE.read_text())["families"]
    families = {f: [chat_prompt_ids(tokenizer, p) for p in prompts[:per_family]] for f, prompts in suite.items()}
    generate(target, draft, families["gsm8k"][0], max_new_tokens=4, with_theory=False)  # warm-up
    cells = main_table(target, draft, families, tokens, log)
    # Ablation prompts: math and code alternately (quick: the first math prompt only).
    ablation_set = [families[f][i] for i in range(ablation_prompts) for f in ("gsm8k", "humaneval")][:ablation_prompts]
    abl = ablations(target, draft, ablation_set, tokens, log)
    lossy = lossy_cost(target, draft, [families[f][0] for f in ("alpaca", "lm1b")][:contexts], fidelity_runs, log)
    checks, used = trend_report(target, draft, trend_prompts, trend_tokens, args.time_budget, log)
    checks.append(speedup_trend(abl))
    names = list(families)
    md = "\n\n".join([
        f"Target: {target.name}; draft: {draft.name}; device: {target.device} ({platform.machine()}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads); {per_family} prompts per family, {tokens} new tokens, K = {DEFAULT_K}, "
        f"L = {DEFAULT_L}, T = {DEFAULT_T}; mean ± 95 % CI over prompts; SR measured against AR on this machine. "
        f"{ablation_prompts} prompt(s) per ablation setting; {fidelity_runs} runs per method for the first-token law. "
        f"Command: `{command}` ({time.perf_counter() - started:.0f} s).",
        "**Main table** (BE = tokens per target call; SR = tokens/s over AR's)\n\n" + main_markdown(cells, names),
        "**Theory against measured** (all families)\n\n" + theory_markdown(cells),
        f"**Ablation over K** (L = {DEFAULT_L}, T = {DEFAULT_T})\n\n" + ablation_markdown("K", abl["K"]),
        f"**Ablation over L** (K = {DEFAULT_K}, T = {DEFAULT_T})\n\n" + ablation_markdown("L", abl["L"]),
        f"**Ablation over T** (K = {DEFAULT_K}, L = {DEFAULT_L})\n\n" + ablation_markdown("T", abl["T"]),
        "**Exact and released SpecTr-GBV** (first-token law from fixed contexts)\n\n" + lossy_markdown(lossy, cells),
        "**The paper's trends on this pair** (SR: the timed L ablation)\n\n" + trends_markdown(checks, used, trend_tokens),
    ])
    (out / "paper_results.md").write_text(md + "\n")
    (out / "paper_results.json").write_text(json.dumps({"settings": {"K": DEFAULT_K, "L": DEFAULT_L, "T": DEFAULT_T,
                                                                     "tokens": tokens, "prompts_per_family": per_family},
                                                        "main": cells, "ablations": abl, "lossy": lossy,
                                                        "trends": [asdict(c) for c in checks], "trend_prompts": used},
                                                       indent=1))
    # Figures last: the numbers above are on disk even if image export fails or is interrupted.
    written = figures(abl, out)
    md += "\n\nFigures: " + ", ".join(written)
    (out / "paper_results.md").write_text(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
