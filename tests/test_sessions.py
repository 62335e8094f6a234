"""A new session's block configs wait for a reader (components.serving.sessions): the same mapping
as Gradio's own once read whole, and none worked out when a session starts."""

from __future__ import annotations

import pytest
from gradio.blocks import BlocksConfig
from gradio.state_holder import SessionState

from components.serving.sessions import ConfigsOnDemand, defer_session_configs

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def demo():
    import app

    return app.build_demo(default_pair="toy")


def eager_state(demo) -> SessionState:
    """A SessionState made by Gradio's own constructor (the wrapped one keeps it as __wrapped__)."""
    state = SessionState.__new__(SessionState)
    getattr(SessionState.__init__, "__wrapped__", SessionState.__init__)(state, demo)
    return state


def test_a_new_session_works_out_no_config_until_read_whole(demo, monkeypatch):
    defer_session_configs()
    defer_session_configs()  # once: a second call wraps nothing again
    worked_out = []
    original = BlocksConfig.config_for_block
    monkeypatch.setattr(BlocksConfig, "config_for_block",
                        staticmethod(lambda *args, **kwargs: worked_out.append(args[0]) or original(*args, **kwargs)))
    state = SessionState(demo)
    assert isinstance(state.config_values, ConfigsOnDemand) and worked_out == []
    assert len(state.config_values) == len(eager_state(demo).config_values) > 200
    assert len(worked_out) > 200  # the reader pays, once


def test_the_filled_configs_are_gradios_and_entries_set_before_are_kept(demo):
    defer_session_configs()
    state, eager = SessionState(demo), eager_state(demo)
    assert {k: v for k, v in state.__dict__.items() if k != "config_values"}.keys() == \
        {k: v for k, v in eager.__dict__.items() if k != "config_values"}.keys()
    some = next(k for k, v in eager.config_values.items() if "props" in v)
    state._update_value_in_config(some, "a value set before any reader")
    assert dict(state.config_values.items())[some]["props"]["value"] == "a value set before any reader"
    eager._update_value_in_config(some, "a value set before any reader")
    assert dict(state.config_values.items()) == dict(eager.config_values.items())
