"""A new session's state without Gradio working out every block's config for it first.

Gradio 6's `SessionState.__init__`, run on a session's first event, works out the config of every
block of the page (this page has about 250) and keeps them for one reader only: a deep link
(`gr.DeepLinkButton`, /gradio_api/deep_link), which this app does not offer. That was about 27 ms
of server time per new session on the 2-core AVX2 EPYC; in a class that presses Generate at once,
30 new sessions, about a quarter of the server's work on a warm Toy-world class (py-spy, GIL
samples, `tests/class_load.py`).

`defer_session_configs()` makes those configs a mapping filled when first read whole: Gradio's
own `__init__` still runs (it is handed the page with no blocks to work out), and every entry it
or a later event sets is kept as it set it. `tests/test_sessions.py` ties the filled mapping to
the one Gradio's own `__init__` makes, and counts the configs worked out for a new session.
"""

from __future__ import annotations

import functools

_DEFERRED = "_spectr_gbv_deferred_configs"  # set on SessionState once its __init__ is wrapped


class _PageWithoutBlocks:
    """The page as `SessionState.__init__` sees it: every attribute the page's, but no blocks, so
    the eager configs come out empty; anything else the constructor reads is the page's own."""

    blocks: dict = {}

    def __init__(self, page):
        self._page = page

    def __getattr__(self, name):
        return getattr(self._page, name)


class ConfigsOnDemand(dict):
    """`SessionState.config_values`: entries set as they come; the rest worked out when the mapping
    is read whole (items, keys, values, iteration, length), as Gradio's deep link reads it."""

    def __init__(self, state, page):
        super().__init__()
        self._state, self._page, self._whole = state, page, False

    def fill(self) -> None:
        if self._whole:
            return
        self._whole = True
        for key, block in self._state.blocks_config.blocks.items():
            if key in self._page.blocks and not super().__contains__(key):
                super().__setitem__(key, self._state.blocks_config.config_for_block(key, [], block))

    def items(self):
        self.fill()
        return super().items()

    def keys(self):
        self.fill()
        return super().keys()

    def values(self):
        self.fill()
        return super().values()

    def __iter__(self):
        self.fill()
        return super().__iter__()

    def __len__(self) -> int:
        self.fill()
        return super().__len__()


def defer_session_configs() -> None:
    """Wrap `SessionState.__init__` (once) so a new session's block configs wait for a reader."""
    from gradio.state_holder import SessionState

    if getattr(SessionState, _DEFERRED, False):
        return
    eager_init = SessionState.__init__

    @functools.wraps(eager_init)
    def init(self, blocks):
        eager_init(self, _PageWithoutBlocks(blocks))
        self.config_values = ConfigsOnDemand(self, blocks)

    SessionState.__init__ = init
    setattr(SessionState, _DEFERRED, True)
