"""The Race: plain decoding and a method take turns, one target call each, on the Toy world.

The race generator (components.tabs.race.Race) gives the next turn to the side behind on its own
clock, and a frame shows both sides at the same moment of their clocks: tested with a clock that
gives each side's calls a fixed length. Paced by target calls (a teaching pair) the sides alternate
and both reach the token budget; at T = 0 the Toy world's draft (a blurred copy of the target with
the same argmax) has every draft token kept, so the speculative side needs one target call per
L + 1 tokens while plain decoding needs one per token. The handler sends a teaching pair's race
once, as a replay paced by target calls, and a model pair's frame by frame; it refuses bad settings
with Generate's own messages, and Stop ends both sides.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import gradio as gr
import pytest

from components.tabs import generate, race
from components.wiring.runs import STOPS
from spectr_gbv.pairs import TOY_KEY, get_pair

from helpers import last

pytestmark = pytest.mark.unit

TOKENS, K, L = 20, 2, 4


def toy_race(method="spectr_gbv", temperature=0.0, tokens=TOKENS, num_drafts=K, draft_length=L, seed=0,
             clock=None):
    """A race on the Toy world, paced by target calls; with `clock` ({side: seconds a call}), by a clock
    on which each of a side's calls takes that long."""
    from components.wiring.settings import settings

    pair = get_pair(TOY_KEY)
    base = settings(num_drafts, draft_length, temperature, tokens, seed)
    if clock is None:
        return race.Race(pair.target, pair.draft, pair.encode("the cat"), base.config("ar", with_theory=False),
                         base.config(method, with_theory=False), timed=False)
    now = [0.0]
    contest = race.Race(pair.target, pair.draft, pair.encode("the cat"), base.config("ar", with_theory=False),
                        base.config(method, with_theory=False), clock=lambda: now[0], timed=True)

    def taking(steps, seconds):
        for step in steps:
            now[0] += seconds
            yield step

    for side, lane in contest.lanes.items():
        lane.steps = taking(lane.steps, clock[side])
    return contest


def test_the_sides_alternate_one_target_call_a_turn_and_both_reach_the_budget():
    contest = toy_race()
    turns = []
    for turn in contest.turns():
        lane = contest.lanes[turn.side]
        turns.append((turn.side, lane.target_calls))
    plain, spec = contest.lanes[race.PLAIN], contest.lanes[race.SPECULATIVE]
    # plain first, then the method, alternating while both run; then the one left runs alone
    both = 2 * min(plain.target_calls, spec.target_calls)
    assert [side for side, _ in turns[:both]] == [race.PLAIN, race.SPECULATIVE] * (both // 2)
    assert {side for side, _ in turns[both:]} == {race.PLAIN}
    # every turn is exactly one more target call of its side
    for side in (race.PLAIN, race.SPECULATIVE):
        assert [calls for s, calls in turns if s == side] == list(range(1, contest.lanes[side].target_calls + 1))
    assert plain.tokens == spec.tokens == TOKENS
    assert contest.finished and len(turns) == contest.turn == plain.target_calls + spec.target_calls


def test_at_full_acceptance_speculation_needs_a_call_per_block_and_plain_one_per_token():
    contest = toy_race()
    for _ in contest.turns():
        pass
    plain, spec = contest.lanes[race.PLAIN], contest.lanes[race.SPECULATIVE]
    assert plain.target_calls == TOKENS
    assert spec.target_calls == math.ceil(TOKENS / (L + 1)) < plain.target_calls
    assert all(it.num_accepted == L for it in spec.iterations[:-1])
    assert contest.leader() == race.SPECULATIVE
    assert spec.finished_turn < plain.finished_turn


@pytest.mark.parametrize("method", ["sd", "spectr", "spectr_gbv", "as_bv"])
def test_at_any_acceptance_the_method_never_needs_more_calls_than_tokens(method):
    contest = toy_race(method, temperature=1.0, seed=3)
    for _ in contest.turns():
        pass
    spec = contest.lanes[race.SPECULATIVE]
    assert spec.tokens == TOKENS and spec.target_calls <= spec.tokens
    assert sum(len(it.emitted) for it in spec.iterations) == TOKENS


def test_timed_the_side_behind_goes_next_and_a_frame_shows_both_at_the_same_moment():
    seconds = {race.PLAIN: 1.0, race.SPECULATIVE: 2.5}  # a call of the method scores L + 1 positions
    contest = toy_race(temperature=1.0, seed=5, clock=seconds)
    for turn in contest.turns():
        lane = contest.lanes[turn.side]
        other = contest.lanes[race.SPECULATIVE if turn.side == race.PLAIN else race.PLAIN]
        # the side that moved was not ahead of the other (plain first on a tie), or the other had finished
        assert other.finished or lane.clock - seconds[turn.side] <= other.clock
        assert lane.ends == [seconds[turn.side] * (n + 1) for n in range(lane.target_calls)]
        now = contest.now
        for view, shown in zip(contest.views(), contest.lanes.values()):
            ended = [end for end in shown.ends if end <= now]
            assert view.record.target_calls == len(ended)  # exactly what had ended by the frame's moment
            assert view.seconds == (ended[-1] if ended else 0.0)
        if not contest.finished:
            assert now == min(lane.clock for lane in contest.lanes.values() if not lane.finished)
    plain, spec = contest.lanes[race.PLAIN], contest.lanes[race.SPECULATIVE]
    assert plain.tokens == spec.tokens == TOKENS
    # who finished first is who finished first on its own clock
    expected = race.SPECULATIVE if spec.clock < plain.clock else race.PLAIN if plain.clock < spec.clock else "tie"
    assert contest.leader() == expected
    assert contest.summary()["pacing"] == "own measured time"


def test_the_leader_waits_for_the_round_to_end():
    contest = toy_race(tokens=1)  # both sides finish on their first call: a tie, after both have made it
    seen = []
    for _ in contest.turns():
        seen.append(contest.leader())
    assert seen == [None, "tie"]


def test_a_teaching_pairs_race_comes_once_as_a_replay_paced_by_target_calls():
    import html
    import re

    frames = list(race.race_stream(TOY_KEY, "the cat", "spectr_gbv", K, L, 0.0, TOKENS, 0))
    assert len(frames) == 1  # over in a blink: sent once, replayed on the page
    final = frames[0]
    plain_lane, spec_lane = final.board.split('class="race-lane')[1:]
    token = r'<span class="tok [^"]*tok-replay"[^>]*animation-delay:([0-9.]+)s'
    delays = {name: [float(d) for d in re.findall(token, lane)] for name, lane in (("plain", plain_lane),
                                                                                  ("spec", spec_lane))}
    # plain: its n-th token with its n-th call; the method: each block of L + 1 tokens at once, with its call
    assert delays["plain"] == [pytest.approx(race.CALL_PACE_S * n) for n in range(1, TOKENS + 1)]
    assert delays["spec"] == [pytest.approx(race.CALL_PACE_S * (1 + n // (L + 1))) for n in range(TOKENS)]
    assert html.escape(race.REPLAY_NOTE) in final.board and "tok-fresh" not in final.board
    assert final.data["plain"]["target_calls"] == TOKENS and final.data["speculative"]["tokens"] == TOKENS
    assert final.data["first_to_finish"] == race.SPECULATIVE and final.data["stopped"] is None
    assert final.data["pacing"] == f"one target call every {race.CALL_PACE_S:g} s"
    assert "AR, SpecTr-GBV" in final.line and "race-finished" in final.board
    assert "finished after 4 target calls" in spec_lane and f"finished after {TOKENS} target calls" in plain_lane


def test_a_live_race_streams_a_frame_per_turn_with_bursts_outlined(monkeypatch):
    monkeypatch.setattr(race, "streams_live", lambda pair: True)  # as a model pair's
    told = []  # what the race tells a progress bar: nothing (one would cover the lanes)
    frames = list(race.race_stream(TOY_KEY, "the cat", "spectr_gbv", K, L, 0.0, TOKENS, 0,
                                   progress=lambda *args, **kwargs: told.append((args, kwargs))))
    assert told == []
    calls = TOKENS + math.ceil(TOKENS / (L + 1))
    assert len(frames) == calls + 1  # one after every turn, then the final frame with the data
    first, second = frames[0].board, frames[1].board
    # after plain's first call the method has not had its turn: the moment shown is before both
    assert first.count('data-tokens="0" data-target-calls="0"') == 2
    # after the method's first call: one plain token, and a whole block that arrived in one call, outlined
    assert 'data-method="ar" data-tokens="1" data-target-calls="1"' in second
    assert f'data-method="spectr_gbv" data-tokens="{L + 1}" data-target-calls="1"' in second
    plain_lane, spec_lane = second.split('class="race-lane')[1:]
    assert spec_lane.count("tok-fresh") == L + 1 and spec_lane.count("tok tok-accepted") == L
    assert plain_lane.count("tok-fresh") == 1  # plain decoding's latest call: one token
    assert "tok-fresh" not in frames[-1].board  # both finished: nothing outlined


def test_a_teaching_pair_prints_no_tokens_per_second():
    """The Toy world is a lookup table: its lanes and data say its speed means nothing, not a rate."""
    from components.render.race import LaneView, race_html
    from components.render.text import UNTIMED_NOTE

    frame = last(race.race_stream(TOY_KEY, "the cat", "spectr_gbv", K, L, 0.0, TOKENS, 0))
    assert "tokens/s" not in frame.board and frame.board.count(UNTIMED_NOTE) == 2
    frames = [frame]
    for side in (race.PLAIN, race.SPECULATIVE):
        assert frames[-1].data[side]["tokens_per_second"] == UNTIMED_NOTE
    # a model pair's lanes (timed) keep their rate
    lane = LaneView("AR", "ar", toy_race().record(race.PLAIN), 2.0, TOKENS, None, fresh=False)
    assert "tokens/s" in race_html([lane], get_pair(TOY_KEY).token_text) and UNTIMED_NOTE not in race_html(
        [lane], get_pair(TOY_KEY).token_text)

BAD = [  # (position in the arguments, value): every one refused by Generate too
    (0, "no such pair"), (1, ""), (1, "   "), (3, 0), (3, "two"), (4, 17), (5, 9), (5, float("nan")), (6, 0),
    (7, -1), (7, 1.5), (3, None),
]


@pytest.mark.parametrize("position, value", BAD)
def test_bad_settings_get_generates_message(position, value):
    args = [TOY_KEY, "the cat", "spectr_gbv", K, L, 0.7, TOKENS, 0]
    args[position] = value
    with pytest.raises(gr.Error) as raced:
        list(race.race_stream(*args))
    with pytest.raises(gr.Error) as generated:
        list(generate.generate_stream(*args))
    assert raced.value.message == generated.value.message and raced.value.message


def test_plain_decoding_cannot_race_itself():
    with pytest.raises(gr.Error, match="other side already: choose a speculative method"):
        list(race.race_stream(TOY_KEY, "the cat", "ar", K, L, 0.7, TOKENS, 0))


def test_stop_ends_both_sides_at_the_next_turn(monkeypatch):
    monkeypatch.setattr(race, "streams_live", lambda pair: True)  # a frame a turn, as a model pair's
    request = SimpleNamespace(session_hash="race-stop-test")
    stream = race.race_stream(TOY_KEY, "the cat", "spectr_gbv", K, L, 0.0, TOKENS, 0, request=request)
    next(stream), next(stream)
    STOPS.ask(request.session_hash)
    frames = list(stream)
    assert len(frames) == 1  # the stop is seen before the next turn: the final frame at once
    final = frames[-1]
    assert "you pressed Stop" in final.data["stopped"] and "you pressed Stop" in final.line
    assert final.data["plain"]["tokens"] == 1 and final.data["speculative"]["tokens"] == L + 1  # one turn each
    assert final.data["first_to_finish"] is None
    # the request was taken: the next race of this session runs to its end
    assert last(race.race_stream(TOY_KEY, "the cat", "spectr_gbv", K, L, 0.0, TOKENS, 0, request=request)
                ).data["stopped"] is None


def test_a_teaching_pair_asks_for_no_gpu_and_a_model_pair_for_both_runs():
    assert race.race_cost(TOY_KEY, "the cat", "sd", K, L, 0.7, TOKENS, 0) is None
    runs = race.race_cost("default", "Hi", "spectr_gbv", K, L, 0.7, TOKENS, 0)
    assert [(run.num_drafts, run.draft_length, run.tokens) for run in runs] == [(0, 0, TOKENS), (K, L, TOKENS)]


def test_at_the_page_defaults_the_default_pair_races_within_budget_and_starts_at_once():
    """From the per-pair costs measured on a 2-core CPU (components.wiring.admission.cost): the race at the
    sidebar's defaults fits the share of the time budget the other views' defaults fit, and the
    first turn of each side (each one's prefill and first target call) is well within 3 s."""
    from components.serving import limits
    from components.wiring.admission import cost
    from components.wiring.inputs import DEFAULT_METHOD, DEFAULT_SETTINGS
    from spectr_gbv.pairs import DEFAULT_KEY

    k, length, tokens = DEFAULT_SETTINGS
    both = (cost.run_seconds(DEFAULT_KEY, "ar", k, length, tokens)
            + cost.run_seconds(DEFAULT_KEY, DEFAULT_METHOD, k, length, tokens))
    assert both <= cost.DEFAULT_FRACTION * limits.LIMITS.seconds
    first = cost.pair_cost(DEFAULT_KEY)
    assert 2 * first.prefill_s + first.step_s + cost.iteration_seconds(DEFAULT_KEY, k, length) < 3
