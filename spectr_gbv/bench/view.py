"""The app's result views from the command line: the same library calls as Compare, Sweep and Fidelity, the same rows.

    python -m spectr_gbv.bench.view compare --pair toy --prompt "the cat" --methods sd gbv spectr_gbv \\
        --drafts 2 --length 4 --temperature 0.8 --max-new-tokens 20 --seeds 0 1 2 [--independent]
    python -m spectr_gbv.bench.view sweep --pair toy --prompt "the cat" --methods sd spectr_gbv --axis K \\
        --values 1 2 4 --drafts 2 --length 4 --temperature 0.8 --max-new-tokens 20 --seeds 0 1
    python -m spectr_gbv.bench.view compare --pair toy --prompt-set suite-10 --methods sd spectr spectr_gbv \\
        --drafts 2 --length 4 --temperature 0.7 --max-new-tokens 20 --seeds 0 --repeats 2 --baseline spectr
    python -m spectr_gbv.bench.view fidelity --pair two-token --prompt A --method spectr_gbv_released \\
        --drafts 1 --length 2 --temperature 1 --runs 600 --tokens 3

Prints the rows as JSON: exactly the rows a view's "Download" offers (CSV and JSON) for the same
settings and seeds, one row per (method, seed) in Compare, per (method, swept value, seed) in Sweep
and per observed outcome in Fidelity (docs/views.md lists their columns). With `--prompt-set`
(`spectr_gbv.prompt_sets.SET_NAMES`) Compare and Sweep run over that set as the app does: Compare
one row per rule (`spectr_gbv.bench.set_compare`; `--seeds` is then the first seed, `--repeats`
the repeats), Sweep its points over every (prompt, seed). The view's header
line under its charts gives the command for its own run (`command_line`). Block efficiency,
accepted counts and the fidelity law are hardware-free and reproduce exactly; a speedup (model
pairs only) is wall-clock, so the command reproduces how it is measured, not its value.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from dataclasses import replace
from typing import Iterable, Mapping, Sequence

import numpy as np

from ..config import DecodeConfig
from ..coupled import coupled_run
from ..engine import generate_config
from ..intervals import t_interval
from ..methods import METHODS
from ..prompt_sets import SET_NAMES, SINGLE, named_set
from .frontier import without_nan  # NaN (no band, no theory line) as JSON null, as the frontier writes it

MODULE = "python -m spectr_gbv.bench.view"
AUTOREGRESSIVE = "ar"


# ------------------------------------------------------------------ shared by the views and the command


def compare_order(methods: Sequence[str]) -> list[str]:
    """The methods in the order Compare runs them: the app's default method first (a budget stop still shows it)."""
    return sorted(methods, key=lambda m: not METHODS[m].app_default)


def coupled_leader(methods: Sequence[str]) -> str:
    """The method whose drafts drive a coupled run: the registry's leader if listed, else the first exact one."""
    leaders = [m for m in methods if METHODS[m].leads_coupled]
    return leaders[0] if leaders else next((m for m in methods if METHODS[m].exact), methods[0])


def band(values: Sequence[float]) -> tuple[float, float | None, float | None]:
    """Mean and 95 % Student-t interval of the mean (no interval from one value), as the charts draw it."""
    data = [float(v) for v in values if v is not None]
    if not data:
        return math.nan, None, None
    mean, low, high = t_interval(data)
    return (float(mean), None, None) if len(data) == 1 else (float(mean), float(low), float(high))


def speedup_stats(rates: Sequence[float], ar_rates: Sequence[float]) -> dict:
    """A method's speedup from its runs' tokens/s against the AR runs just before and after them:
    median, range and runs of rate / (harmonic mean of the AR rates), as the views chart it."""
    ar_rate = len(ar_rates) / sum(1 / rate for rate in ar_rates)
    ratios = sorted(rate / ar_rate for rate in rates)
    return {"median": float(np.median(ratios)), "low": ratios[0], "high": ratios[-1], "runs": len(ratios)}


def _point(summaries: Sequence[dict]) -> dict:
    mean, low, high = band([s["block_efficiency"] for s in summaries])
    theory = [s.get("mean_expected_accepted") for s in summaries]
    theory = [t for t in theory if t is not None]
    return {"mean_block_efficiency": mean, "band_low": low, "band_high": high,
            "theory_block_efficiency": 1 + float(np.mean(theory)) if theory else None}


def _drafts_used(method: str, K: int) -> int:
    return K if METHODS[method].multi_draft else 1


def compare_rows(pair_key: str, prompt: str, summaries: Mapping[str, Sequence[dict]], seeds: Sequence[int],
                 num_drafts: int, draft_length: int, temperature: float, max_new_tokens: int, coupled: bool,
                 speedups: Mapping[str, dict] | None = None) -> list[dict]:
    """Compare's rows: per method and seed, the run's hardware-free numbers the charts drew (`summaries`:
    per method, one run summary per seed), the method's mean and 95 % band over the seeds, and (timed
    pairs) its speedup (`speedup_stats`)."""
    rows = []
    for method, runs in summaries.items():
        point = _point(runs)
        speed = (speedups or {}).get(method)
        for seed, s in zip(seeds, runs):
            rows.append({
                "view": "compare", "pair": pair_key, "prompt": prompt, "method": method, "label": METHODS[method].label,
                "K": num_drafts, "drafts_used": _drafts_used(method, num_drafts), "L": draft_length, "T": temperature,
                "max_new_tokens": max_new_tokens, "seed": seed, "runs": "coupled" if coupled else "independent",
                "block_efficiency": s["block_efficiency"], "mean_accepted": s["mean_accepted"],
                "mean_expected_accepted": s.get("mean_expected_accepted"), "target_calls": s["target_calls"],
                "per_position_acceptance": list(s.get("per_position_acceptance") or []),
                "accepted_length_histogram": list(s.get("accepted_length_histogram") or []),
                **point,
                "speedup_median": speed["median"] if speed else None,
                "speedup_low": speed["low"] if speed else None,
                "speedup_high": speed["high"] if speed else None,
            })
    return rows


def sweep_rows(pair_key: str, prompt: str, rows: Iterable[dict], num_drafts: int, draft_length: int, temperature: float,
               max_new_tokens: int, timed: bool) -> list[dict]:
    """Sweep's rows from `spectr_gbv.sweep.iter_sweep`'s: per method, swept value and seed, the run's block
    efficiency, E[tau | drafts] and target calls, with its point's mean and 95 % band and (timed pairs, more
    than one run) the point's speedup."""
    out = []
    for row in rows:
        axis, value, method = row["axis"], row["value"], row["method"]
        K = int(value) if axis == "K" else num_drafts
        L = int(value) if axis == "L" else draft_length
        T = float(value) if axis == "T" else temperature
        runs = [{"block_efficiency": b, "mean_expected_accepted": e}
                for b, e in zip(row["repeat_block_efficiency"], row["repeat_expected_accepted"])]
        point = _point(runs)
        speed = (speedup_stats(row["repeat_tokens_per_second"], row["ar_tokens_per_second"])
                 if timed and len(row["repeat_tokens_per_second"]) > 1 else None)
        for seed, run, calls in zip(row["seeds"], runs, row["repeat_target_calls"]):
            out.append({
                "view": "sweep", "pair": pair_key, "prompt": prompt, "method": method, "label": METHODS[method].label,
                "axis": axis, "value": value, "K": K, "drafts_used": _drafts_used(method, K), "L": L, "T": T,
                "max_new_tokens": max_new_tokens, "seed": seed, "block_efficiency": run["block_efficiency"],
                "mean_expected_accepted": run["mean_expected_accepted"], "target_calls": calls, **point,
                "speedup_median": speed["median"] if speed else None,
                "speedup_low": speed["low"] if speed else None,
                "speedup_high": speed["high"] if speed else None,
            })
    return out


def fidelity_rows(pair_key: str, prompt: str, result, outcome_text: Sequence[str], num_drafts: int,
                  draft_length: int, temperature: float) -> list[dict]:
    """Fidelity's rows: per observed outcome (its first tokens), the count, empirical and exact frequencies and
    the 95 % band of an exact method's frequency; the comparison's TV, noise TV and chi-square p on every row."""
    return [{
        "view": "fidelity", "pair": pair_key, "prompt": prompt, "method": result.method,
        "label": METHODS[result.method].label if result.method in METHODS else result.method,
        "K": num_drafts, "L": draft_length, "T": temperature, "runs": result.num_runs, "seeds": f"0-{result.num_runs - 1}",
        "tokens": result.num_tokens, "outcome": text, "outcome_ids": " ".join(map(str, r.outcome)), "count": r.count,
        "empirical": float(r.empirical), "exact": float(r.exact), "band_low": float(r.band_low),
        "band_high": float(r.band_high),
        "total_variation": result.total_variation, "noise_tv_95": result.noise_tv_95,
        "chi_square_p": result.chi_square_p,
    } for r, text in zip(result.rows, outcome_text)]


def outcome_text(pair, outcome: Sequence[int]) -> str:
    """An outcome's tokens as text, one token per space-separated piece (spaces inside a token shown as ␣)."""
    return " ".join(t.replace(" ", "␣") or "∅" for t in pair.token_text(list(outcome)))


def _q(text: str) -> str:
    return shlex.quote(str(text))


def _nums(values: Iterable) -> str:
    return " ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def command_line(view: str, pair_key: str, prompt: str, *, methods: Sequence[str] = (), method: str | None = None,
                 num_drafts: int, draft_length: int, temperature: float, max_new_tokens: int | None = None,
                 seeds: Sequence[int] = (), coupled: bool = True, axis: str | None = None,
                 values: Sequence[float] = (), runs: int | None = None, tokens: int | None = None,
                 prompt_set: str = SINGLE, repeats: int = 1, baseline: str | None = None) -> str:
    """The command that reproduces a view's run (its rows, as JSON); over a prompt set other than the prompt
    alone, the set's name replaces the prompt (Compare: `seeds` holds the first seed, with `repeats`)."""
    over_set = prompt_set != SINGLE
    parts = [MODULE, view, "--pair", _q(pair_key)]
    parts += ["--prompt-set", prompt_set] if over_set else ["--prompt", _q(prompt)]
    if view == "fidelity":
        parts += ["--method", method]
    else:
        parts += ["--methods", *methods]
    if view == "sweep":
        parts += ["--axis", axis, "--values", _nums(values)]
    parts += ["--drafts", str(num_drafts), "--length", str(draft_length), "--temperature", f"{temperature:g}"]
    if view == "fidelity":
        parts += ["--runs", str(runs), "--tokens", str(tokens)]
    else:
        parts += ["--max-new-tokens", str(max_new_tokens), "--seeds", _nums(seeds)]
    if view == "compare" and over_set:
        parts += ["--repeats", str(repeats)] + (["--baseline", baseline] if baseline else [])
    if view == "compare" and not coupled:
        parts.append("--independent")
    return " ".join(parts)


# ------------------------------------------------------------------ the command's runs


def _compare(pair, set_ids, args) -> list[dict]:
    if args.prompt_set != SINGLE:
        return _compare_set(pair, set_ids, args)
    ids = set_ids[0]
    timed = not pair.info.teaching
    base = DecodeConfig(method=args.methods[0], num_drafts=args.drafts, draft_length=args.length,
                        temperature=args.temperature, max_new_tokens=args.max_new_tokens, seed=args.seeds[0])
    summaries: dict[str, list[dict]] = {}
    speedups: dict[str, dict] = {}
    if timed or not args.coupled:  # the independent runs, in Compare's order: AR, then each method, AR after each
        def ar() -> float:
            return generate_config(pair.target, None, ids, replace(base, method=AUTOREGRESSIVE, with_theory=False)
                                   ).tokens_per_second

        rates = [ar()]
        order = compare_order(args.methods)
        for method in order:
            records = [generate_config(pair.target, pair.draft, ids, replace(base, method=method, seed=seed))
                       for seed in args.seeds]
            summaries[method] = [r.summary() | {"accepted_length_histogram": r.accepted_length_histogram}
                                 for r in records]
            if timed:
                rates.append(ar())
                speedups[method] = speedup_stats([r.tokens_per_second for r in records], rates[-2:])
        summaries = {m: summaries[m] for m in order}
    if args.coupled:
        order = compare_order(args.methods)
        leader = coupled_leader(order)
        runs = [coupled_run(pair.target, pair.draft, ids, order, replace(base, method=leader, seed=seed))
                for seed in args.seeds]
        summaries = {m: [run.summary(m) for run in runs] for m in order}
    return compare_rows(args.pair, args.prompt, summaries, args.seeds, args.drafts, args.length, args.temperature,
                        args.max_new_tokens, args.coupled, speedups if timed and len(args.seeds) > 1 else None)


def _compare_set(pair, prompt_ids, args) -> list[dict]:
    from .set_compare import SetCompare, baseline_of

    if len(args.seeds) != 1:
        raise SystemExit("over a prompt set --seeds takes one value, the first seed (--repeats says how many)")
    order = compare_order(args.methods)
    baseline = args.baseline or baseline_of(order)
    if baseline not in order:
        raise SystemExit(f"--baseline {baseline} is not one of --methods")
    base = DecodeConfig(method=order[0], num_drafts=args.drafts, draft_length=args.length,
                        temperature=args.temperature, max_new_tokens=args.max_new_tokens, seed=args.seeds[0])
    runs = SetCompare(args.pair, args.prompt_set, prompt_ids, order, base, args.coupled, args.repeats, baseline,
                      coupled_leader(order), timed=not args.coupled and not pair.info.teaching)
    for _ in runs.run(pair.target, pair.draft):
        pass
    return runs.table()


def _sweep(pair, set_ids, args) -> list[dict]:
    from ..sweep import iter_set_sweep, iter_sweep

    timed = not pair.info.teaching
    base = DecodeConfig(method=args.methods[0], num_drafts=args.drafts, draft_length=args.length,
                        temperature=args.temperature, max_new_tokens=args.max_new_tokens, seed=args.seeds[0])
    repeats = len(args.seeds)
    interleave = timed and repeats > 1
    if args.prompt_set == SINGLE:
        rows, shown = iter_sweep(pair.target, pair.draft, set_ids[0], args.methods, args.axis, args.values, base,
                                 repeats=repeats, interleave_ar=interleave), args.prompt
    else:
        rows = iter_set_sweep(pair.target, pair.draft, set_ids, args.methods, args.axis, args.values, base,
                              repeats=repeats, interleave_ar=interleave)
        shown = set_label(args.prompt_set, len(set_ids))
    return sweep_rows(args.pair, shown, rows, args.drafts, args.length, args.temperature, args.max_new_tokens, timed)


def set_label(set_name: str, count: int) -> str:
    """What a Sweep over a set writes in its rows' prompt column."""
    return f"[prompt set {set_name}, {count} prompts]"


def _fidelity(pair, set_ids, args) -> list[dict]:
    from ..fidelity import fidelity_result, fidelity_sample

    ids = set_ids[0]
    config = DecodeConfig(method=args.method, num_drafts=args.drafts, draft_length=args.length,
                          temperature=args.temperature, max_new_tokens=1, seed=0, with_theory=False)
    draft = None if args.method == AUTOREGRESSIVE else pair.draft
    samples = [fidelity_sample(pair.target, draft, ids, config, seed, args.tokens) for seed in range(args.runs)]
    result = fidelity_result(pair.target, ids, config, samples, args.tokens)
    return fidelity_rows(args.pair, args.prompt, result, [outcome_text(pair, r.outcome) for r in result.rows],
                         args.drafts, args.length, args.temperature)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=MODULE, description=__doc__.splitlines()[0])
    views = top.add_subparsers(dest="view", required=True)
    for name in ("compare", "sweep", "fidelity"):
        p = views.add_parser(name)
        p.add_argument("--pair", required=True, help="a key of spectr_gbv.pairs.PAIRS (toy, two-token, default, ...)")
        if name == "fidelity":
            p.add_argument("--prompt", required=True)
        else:
            prompts = p.add_mutually_exclusive_group(required=True)
            prompts.add_argument("--prompt")
            prompts.add_argument("--prompt-set", choices=[n for n in SET_NAMES if n != SINGLE],
                                 help="run over this set of prompts instead (spectr_gbv.prompt_sets.named_set)")
        if name == "fidelity":
            p.add_argument("--method", required=True)
            p.add_argument("--runs", type=int, required=True, help="N runs, seeds 0 to N - 1")
            p.add_argument("--tokens", type=int, default=3, help="first tokens compared")
        else:
            p.add_argument("--methods", nargs="+", required=True)
            p.add_argument("--max-new-tokens", type=int, required=True)
            p.add_argument("--seeds", type=int, nargs="+", required=True, help="one run per seed (Repeats)")
        if name == "sweep":
            p.add_argument("--axis", choices=("K", "L", "T"), required=True)
            p.add_argument("--values", type=float, nargs="+", required=True)
        if name == "compare":
            p.add_argument("--independent", dest="coupled", action="store_false",
                           help="charts from independent runs (Compare's Coupled unticked)")
            p.add_argument("--repeats", type=int, default=1, help="over a prompt set: seeds per prompt (coupled) "
                           "or seeds (independent)")
            p.add_argument("--baseline", help="over a prompt set, coupled: the rule the differences are against")
        p.add_argument("--drafts", type=int, required=True, help="K")
        p.add_argument("--length", type=int, required=True, help="L")
        p.add_argument("--temperature", type=float, required=True, help="T")
    return top


def main(argv: Sequence[str] | None = None) -> list[dict]:
    """Run one view's library calls and print its rows as JSON; returns the rows."""
    from ..pairs import get_pair

    args = parser().parse_args(argv)
    names = [args.method] if args.view == "fidelity" else args.methods
    unknown = [m for m in names if m not in METHODS and not (args.view == "fidelity" and m == AUTOREGRESSIVE)]
    if unknown:
        parser().error(f"unknown methods {unknown}; choose from {', '.join(METHODS)}")
    if args.view == "sweep" and args.axis in ("K", "L"):
        args.values = [int(v) for v in args.values]
    pair = get_pair(args.pair)
    args.prompt_set = getattr(args, "prompt_set", None) or SINGLE
    set_ids = [pair.encode(text) for text in named_set(args.prompt_set, args.pair, args.prompt)]
    rows = {"compare": _compare, "sweep": _sweep, "fidelity": _fidelity}[args.view](pair, set_ids, args)
    rows = without_nan(rows)
    print(json.dumps(rows, indent=1, ensure_ascii=False))
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
