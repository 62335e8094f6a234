"""The Race tab: plain decoding and a chosen method on the same prompt, side by side.

Fairness: the two sides run in one generator on one thread (`Race.turns`), one target call a turn:
plain decoding's turn is one target call (one token), the method's turn is one target call too (its
drafts, the call that scores them, the verdict), which emits a burst of tokens when drafts are kept.
Each side has its own clock, the time of its own turns only, and the side whose clock is behind
takes the next turn. A frame shows both sides as they stood at the same moment of their own clocks
(`Race.now`), so the picture's lead is their speedup, whichever side the thread happened to serve.

Pacing: a model pair's race streams live, paced by the measured clocks (the page runs at about half
real speed, the two sides sharing one thread). A teaching pair is a lookup table, whose time means
nothing and whose race is over in a blink: its clock counts target calls, CALL_PACE_S each, and the
finished race is sent once and replayed on the page at that pace (`render.race`'s appearance delays).
Both sides use `decode_iterations`, the engine Generate streams, with the same settings and seed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import gradio as gr

from spectr_gbv import AUTOREGRESSIVE
from spectr_gbv.config import DecodeConfig
from spectr_gbv.engine import decode_iterations, run_record
from spectr_gbv.models.compiled import serving_mode
from spectr_gbv.records import IterationRecord

from ..serving.request import RACE
from ..serving import gpu, visitors
from ..serving.limits import Budget, BudgetSpent
from ..wiring import private
from ..wiring.admission import fix_buttons, pre_start
from ..wiring.admission.budget_stops import budget_stop
from ..wiring.errors import translate_error, user_errors
from ..wiring.inputs import DEFAULT_METHOD, check_runs_fit, compare_choices, prepare
from ..wiring.outputs import NamedOutputs, skip
from ..wiring.run_events import back_to_idle, run_events
from ..wiring.runs import STOPS, Stop, header_line, method_name
from ..wiring.settings import check_method, check_pair_key, settings
from ..render.race import LaneView, race_html
from ..render.text import UNTIMED_NOTE
from . import generate

PLAIN, SPECULATIVE = "plain", "speculative"
# A teaching pair's race replayed on the page: one target call of a side every CALL_PACE_S seconds,
# slow enough to see a burst of kept drafts arrive at once.
CALL_PACE_S = 0.2
FAIRNESS = ("**The two sides take turns, one model call each, on one thread**, and each side's clock counts the "
            "time of its own turns only. A turn of plain decoding is one target call: one token. A turn of the "
            "method is one target call too: its drafts, one call of the target that scores them all, and the "
            "verdict, which keeps a burst of tokens when drafts are accepted (outlined as it arrives). The page "
            "shows both sides at the same moment of their own clocks, so the lead you see is the speedup. "
            "The two texts differ: both are samples of the target's law, drawn with different random numbers "
            "(an exact method changes the speed, not the law). Stop ends both.")
LIVE_NOTE = ("Paced by each side's own measured time (the sides share one thread, so this runs at about half "
             "real speed).")
FOLLOW_THE_SIDEBAR = f"(chosen, racing) => chosen === {AUTOREGRESSIVE!r} ? racing : chosen"
REPLAY_NOTE = (f"Replayed at one target call every {CALL_PACE_S:g} s: a lookup table's own time means nothing, "
               "so each side moves by its target calls.")


@dataclass
class Lane:
    """One side of the race so far: its iterations, the time of its turns, its clock at each iteration's end."""

    name: str
    config: DecodeConfig
    steps: Iterator[IterationRecord]
    iterations: list[IterationRecord] = field(default_factory=list)
    seconds: float = 0.0
    ends: list[float] = field(default_factory=list)  # the lane's clock when each iteration ended
    finished_turn: int | None = None

    @property
    def tokens(self) -> int:
        return sum(len(it.emitted) for it in self.iterations)

    @property
    def target_calls(self) -> int:
        return len(self.iterations)

    @property
    def clock(self) -> float:
        return self.ends[-1] if self.ends else 0.0

    @property
    def finished(self) -> bool:
        return self.finished_turn is not None

    def shown(self, now: float) -> int:
        """How many of its iterations had ended by `now` on its clock."""
        return sum(1 for end in self.ends if end <= now)


@dataclass(frozen=True)
class Turn:
    number: int  # 1, 2, ...: turns of both sides together
    side: str  # PLAIN or SPECULATIVE


class Race:
    """Plain decoding against `method_config.method`, one target call a turn, the side behind on its clock first.

    `timed`: a side's clock is its measured time (`clock`, around its turns only); else its target
    calls, CALL_PACE_S each (a teaching pair: the sides then simply alternate, plain first)."""

    def __init__(self, target, draft, prompt_ids: Sequence[int], plain_config: DecodeConfig,
                 method_config: DecodeConfig, clock: Callable[[], float] = time.perf_counter, timed: bool = True):
        self.prompt_ids, self.eos, self.clock, self.timed = list(prompt_ids), target.eos_token_id, clock, timed
        self.lanes = {PLAIN: Lane(PLAIN, plain_config, decode_iterations(target, None, prompt_ids, plain_config)),
                      SPECULATIVE: Lane(SPECULATIVE, method_config,
                                        decode_iterations(target, draft, prompt_ids, method_config))}
        self.turn = 0

    @property
    def finished(self) -> bool:
        return all(lane.finished for lane in self.lanes.values())

    @property
    def now(self) -> float:
        """The moment a frame shows: the earliest clock of a side still running (every side has got
        that far), or the last finish once both are done."""
        running = [lane.clock for lane in self.lanes.values() if not lane.finished]
        return min(running) if running else max(lane.clock for lane in self.lanes.values())

    def turns(self) -> Iterator[Turn]:
        """Advance the side that is behind on its clock (plain on a tie) by one target call; yield after every turn."""
        while not self.finished:
            lane = min((lane for lane in self.lanes.values() if not lane.finished), key=lambda lane: lane.clock)
            start = self.clock()
            it = next(lane.steps, None)
            lane.seconds += self.clock() - start
            self.turn += 1
            if it is not None:
                lane.iterations.append(it)
                lane.ends.append(lane.seconds if self.timed else len(lane.iterations) * CALL_PACE_S)
            if it is None or self._done(lane):
                lane.finished_turn = self.turn
            yield Turn(self.turn, lane.name)

    def _done(self, lane: Lane) -> bool:
        last = lane.iterations[-1].emitted if lane.iterations else []
        at_eos = self.eos is not None and bool(last) and last[-1] == self.eos
        return at_eos or lane.tokens >= lane.config.max_new_tokens

    def record(self, side: str, iterations: int | None = None):
        lane = self.lanes[side]
        return run_record(lane.config, self.prompt_ids, lane.iterations[:iterations], self.eos)

    def views(self, whole: bool = False) -> list[LaneView]:
        """Each side as it stood at `now`; `whole`: everything it has done, and paced by target calls, as a replay
        (each iteration's moment on its clock, for the page to play)."""
        views, now = [], self.now
        for side, lane in self.lanes.items():
            count = lane.target_calls if whole else lane.shown(now)
            crossed = lane.finished and count == lane.target_calls
            label = "Plain decoding (AR)" if side == PLAIN else method_name(lane.config.method)
            views.append(LaneView(label, lane.config.method, self.record(side, count),
                                  lane.ends[count - 1] if count else 0.0, lane.config.max_new_tokens,
                                  self._finish_words(lane) if crossed else None,
                                  fresh=not crossed,  # its latest call outlined while it races
                                  appear_at=lane.ends[:count] if whole and not self.timed else None))
        return views

    def _finish_words(self, lane: Lane) -> str:
        if self.timed:
            return f"finished at {lane.clock:.2f} s of its own time"
        return f"finished after {lane.target_calls} target calls"

    def leader(self) -> str | None:
        """Who crossed the finish line first on its own clock: PLAIN, SPECULATIVE, "tie", or None while open.

        A side that has finished leads once the other has finished later, or has run as long without
        finishing (the other may still finish at the same moment of its clock)."""
        for side, lane in sorted(self.lanes.items(), key=lambda item: item[1].clock):
            if not lane.finished:
                continue
            others = [other for name, other in self.lanes.items() if name != side]
            if all(other.clock > lane.clock if other.finished else other.clock >= lane.clock for other in others):
                return side
        return "tie" if self.finished else None

    def summary(self) -> dict:
        sides = {}
        for view, (side, lane) in zip(self.views(whole=True), self.lanes.items()):
            sides[side] = {"method": lane.config.method, "tokens": view.tokens, "target_calls": lane.target_calls,
                           "seconds": lane.seconds, "tokens_per_second": view.tokens_per_second,
                           "finished_turn": lane.finished_turn,
                           "block_efficiency": view.record.block_efficiency}
        return {"turns": self.turn, "first_to_finish": self.leader(),
                "pacing": "own measured time" if self.timed else f"one target call every {CALL_PACE_S:g} s",
                **sides}


def race_cost(pair_key, prompt, method, num_drafts, draft_length, temperature, max_new_tokens, seed, *_, **__):
    """The GPU time a race asks for on ZeroGPU: a plain run and a run of the method (None: no model)."""
    plain = gpu.generate_cost(pair_key, prompt, AUTOREGRESSIVE, num_drafts, draft_length, temperature,
                              max_new_tokens, seed)
    if plain is None:
        return None
    return plain + gpu.generate_cost(pair_key, prompt, method, num_drafts, draft_length, temperature,
                                     max_new_tokens, seed)


@dataclass
class Raced(NamedOutputs):
    board: object = skip()  # both sides' texts and numbers
    line: object = skip()  # the header: pair, method, K, L, T, seed, and how the race stands
    data: object = skip()  # the summary (JSON), at the end


def _standing(race: Race, method: str, views: list[LaneView]) -> str:
    """Where both sides stood at the frame's moment (`Race.now`: `views`), and who crossed the line first."""
    plain, spec = views
    moment = f"at {race.now:.2f} s of each side's own time: " if race.timed else ""
    text = (f"{moment}AR {plain.tokens} tokens in {plain.record.target_calls} target calls, "
            f"{method_name(method)} {spec.tokens} tokens in {spec.record.target_calls} target calls")
    leader = race.leader()
    if leader is not None:
        names = {PLAIN: "plain decoding", SPECULATIVE: method_name(method)}
        first = "on its own clock" if race.timed else "fewer target calls"
        text += ("; both finished together" if leader == "tie"
                 else f"; first across the line ({first}): {names[leader]}")
    return text


@visitors.served(translate_error, RACE, estimate=fix_buttons.line_estimate("race"))
@gpu.on_gpu(race_cost)
@user_errors
def race_stream(pair_key, prompt, method, num_drafts, draft_length, temperature, max_new_tokens, seed,
                progress=gr.Progress(), request: gr.Request = None):
    """Race plain decoding against `method`: on a model pair a frame after every turn, on a teaching pair
    the whole race once, to be replayed on the page; Stop ends both."""
    session = getattr(request, "session_hash", None)
    STOPS.take(session)  # a Stop pressed before this run does not end it
    if method == AUTOREGRESSIVE:
        raise ValueError("plain decoding (ar) is the race's other side already: choose a speculative method")
    method = check_method(method, allow_ar=False)
    base = settings(num_drafts, draft_length, temperature, max_new_tokens, seed)
    pre_start.check(pre_start.Plan("race", check_pair_key(pair_key), (method,), base.num_drafts, base.draft_length,
                                   base.max_new_tokens))  # before any model call
    pair, prompt_ids = prepare(pair_key, prompt, progress)
    check_runs_fit(pair, [(1, 0), (1, base.draft_length)], base.max_new_tokens,
                   f"a race of plain decoding and {method_name(method)}, {base.max_new_tokens} tokens each")
    timed = not pair.info.teaching  # a teaching pair is a lookup table: its tokens/s mean nothing
    race = Race(pair.target, pair.draft, prompt_ids, base.config(AUTOREGRESSIVE, with_theory=False),
                base.config(method, with_theory=False), timed=timed)
    heading = dict(pair_key=pair.info.key, methods=[AUTOREGRESSIVE, method], num_drafts=base.num_drafts,
                   draft_length=base.draft_length, temperature=base.temperature, seed=base.seed,
                   served=serving_mode(pair.target))
    note = LIVE_NOTE if timed else REPLAY_NOTE
    budget, stop, total = Budget(), None, 2 * base.max_new_tokens
    try:
        for _turn in race.turns():  # no progress bar: it would cover the lanes
            budget.tick()
            if streams_live(pair):
                views = race.views()
                yield Raced(race_html(views, pair.spelled, note, timed=timed),
                            header_line(**heading) + _standing(race, method, views))
            reason = STOPS.take(session)
            if reason:
                stop = Stop(sum(lane.tokens for lane in race.lanes.values()), total, "tokens (both sides)", reason)
                break
    except BudgetSpent as error:
        stop = budget_stop("race", sum(lane.tokens for lane in race.lanes.values()), total, "tokens (both sides)",
                           error)
    summary = race.summary() | {"pair": pair.info.key, "stopped": stop.text() if stop else None,
                                "texts": {side: pair.text(race.record(side).tokens) for side in race.lanes}}
    if not timed:
        for side in race.lanes:
            summary[side] |= {"seconds": UNTIMED_NOTE, "tokens_per_second": UNTIMED_NOTE}
    views = race.views(whole=True)
    yield Raced(race_html(views, pair.spelled, note, timed=timed),
                header_line(**heading, stop=stop) + _standing(race, method, views), summary)


def streams_live(pair) -> bool:
    """Whether the race sends a frame after every turn: a model pair's does; a teaching pair's race is
    over in a blink and is replayed on the page instead (fewer updates for a class to serve)."""
    return not pair.info.teaching


@dataclass
class RaceTab:
    method: gr.Dropdown
    button: gr.Button
    stop_button: gr.Button
    outputs: dict[str, gr.components.Component]
    fixes: fix_buttons.FixRow | None = None  # the pre-start check's note and one-click fixes


def build(page) -> None:
    with gr.Tab("Race", id="race"):
        gr.Markdown("Plain decoding and a speculative method on the same prompt, with the sidebar's pair, K, L, T, "
                    "max new tokens and seed. " + FAIRNESS, elem_id="race-fairness")
        with gr.Row():
            method = gr.Dropdown(compare_choices(), value=DEFAULT_METHOD, label="Method racing plain decoding",
                                 elem_id="race-method", scale=3)
            button = gr.Button("Race", variant="primary", elem_id="race-button", scale=2)
            # secondary, not Gradio's red "stop": red means lossy in this app
            stop_button = gr.Button("Stop", variant="secondary", elem_id="race-stop-button", scale=1)
        fixes = fix_buttons.build("race")
        line = gr.Markdown(elem_id="race-line")
        board = gr.HTML("<i>Press Race: both sides stream here, turn by turn.</i>", elem_id="race-board")
        data = gr.JSON(label="Race data (target calls are hardware-free; tokens/s is this server's)")
    page.tab_handles.race = RaceTab(method, button, stop_button, outputs=dict(board=board, line=line, data=data),
                                    fixes=fixes)


def wire_events(page) -> None:
    tab: RaceTab = page.tab_handles.race
    s = page.sidebar
    inputs = [s.pair, page.prompt, tab.method, *page.settings_inputs]
    # As Generate: raw inputs checked by components.wiring.settings, the button busy while the race runs,
    # a failed race's message in place of the board.
    racing = run_events(tab.button.click, tab.button, race_stream, inputs, tab.outputs, message="board",
                        clear=("line", "data"), api_name="race", concurrency_id="models", preprocess=False)
    sidebar = dict(pair_key=s.pair, method=tab.method, num_drafts=s.num_drafts, draft_length=s.draft_length,
                   max_new_tokens=s.max_new_tokens)
    fix_buttons.wire(tab.fixes, sidebar, {name: sidebar[name] for name in fix_buttons.FIXABLE["race"]}, tab.button)
    # The race follows the sidebar's method (plain decoding, the race's other side already, leaves it), in
    # the browser alone: no server event.
    s.method.change(None, [s.method, tab.method], tab.method, js=FOLLOW_THE_SIDEBAR, queue=False,
                    api_visibility="private")
    # Stop, as Generate's: the race sees the request after its current turn and ends both sides with a last
    # frame; in a ZeroGPU worker it cannot, so there the event is cancelled.
    if gpu.ON_ZEROGPU:
        stopped = private.on(tab.stop_button.click, lambda: None, None, None, cancels=[racing])
        back_to_idle(stopped.then, tab.button)
    else:
        private.on(tab.stop_button.click, generate.ask_to_stop, None, None, queue=False)
