"""Nothing lost, in a real browser (headless Chromium, Toy world): a budget that runs out mid-Compare
leaves the methods that finished on screen, with a header saying where it stopped; an example
runs Generate with the sidebar's settings and fills the explorer; L's maximum follows K; Stop keeps
the tokens so far and fills the explorer with their iterations."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from components.tabs import compare
from components.wiring import inputs
from app_server import running_app
from browser_kit import TIMEOUT, WINDOW, browser, count, open_tab, screenshots, resize, scroll_to, wait_for, waiter  # noqa: F401
from helpers import slow_toy_pair

pytestmark = pytest.mark.browser


def test_a_budget_stop_leaves_partial_results_on_screen(browser, screenshots, limits):
    # The up-front minimum for the defaults: AR's 40 iterations at 40 tokens and, per repeat (the Toy
    # world's default repeats), 8 drafted runs of at least 8 (7 methods and the coupled run, 5 tokens an
    # iteration at L = 4); real runs take more.
    least = 40 + 8 * 8 * compare.default_repeats("toy")
    limits(iterations=least)
    with running_app(default_pair="toy", default_prompt="the cat") as url:
        resize(browser, *WINDOW)  # the README's screenshots: a 1440x900 page, not a 1440x900 window
        browser.get(url)
        open_tab(browser, "Compare")
        browser.find_element(By.CSS_SELECTOR, "#compare-button").click()
        waiter(browser, TIMEOUT).until(lambda d: "stopped at" in d.find_element(By.ID, "compare-outputs").text,
                                              message="the 'stopped at' header")
        text = browser.find_element(By.ID, "compare-outputs").text
        assert "Toy world" in text and "K = 2" in text and "seed 0" in text and f"more than {least} decoding iterations" in text
        assert 1 <= count(browser, "#compare-outputs .compare-column") < 7  # what finished, not all seven
        assert count(browser, "#compare-outputs span.tok") >= 40  # a finished method's whole text
        wait_for(browser, "#compare-efficiency .js-plotly-plot")
        assert not browser.find_elements(By.CSS_SELECTOR, ".toast-body.error")  # a note, not an error
        scroll_to(browser, "#compare-outputs")
        browser.save_screenshot(str(screenshots / "compare-stopped.png"))

        open_tab(browser, "Generate")
        example = next(e for e in browser.find_elements(By.CSS_SELECTOR, ".gallery-item, button.example, tr.tr-body")
                       if "the cat" in e.text)
        example.click()
        waiter(browser, TIMEOUT).until(lambda d: "K = 2" in d.find_element(By.ID, "generate-metrics").text,
                                              message="the example's run with the sidebar's K")
        open_tab(browser, "Iteration explorer")
        wait_for(browser, "#draft-grid tr.grid-row", at_least=2)  # the sidebar's K = 2 draft rows
        assert count(browser, "#draft-grid tr.grid-row") == 2

        k_box = browser.find_element(By.CSS_SELECTOR, "#num-drafts input[type='number']")
        k_box.clear()
        k_box.send_keys("8", Keys.ENTER)  # K = 8: L may be at most 64 // 8 = 8 before any click
        waiter(browser, TIMEOUT).until(
            lambda d: d.find_element(By.CSS_SELECTOR, "#draft-length input[type='range']").get_attribute("max") == "8",
            message="L's maximum following K")
        assert "at most 8 at K = 8" in browser.find_element(By.ID, "draft-length").text


def test_stop_keeps_the_tokens_and_fills_the_explorer(browser, monkeypatch):
    slow_toy = slow_toy_pair(0.01)
    monkeypatch.setattr(inputs, "get_pair", lambda key, **kwargs: slow_toy)
    with running_app(default_pair="toy", default_prompt="the cat") as url:
        browser.get(url)
        wait_for(browser, "#generate-button")
        browser.find_element(By.CSS_SELECTOR, "#generate-button").click()
        wait_for(browser, "#generate-output span.tok", at_least=3)  # a few iterations in, of 40 tokens
        browser.find_element(By.CSS_SELECTOR, "#stop-button").click()
        waiter(browser, TIMEOUT).until(lambda d: "you pressed Stop" in d.find_element(By.ID, "generate-metrics").text,
                                              message="the note that Stop stopped the run")
        line = browser.find_element(By.ID, "generate-metrics").text
        tokens = count(browser, "#generate-output span.tok")
        assert f"stopped at {tokens} / 40 tokens" in line and tokens < 40  # the note counts the tokens on screen
        assert "Error" not in line and "Error" not in browser.find_element(By.ID, "generate-output").text  # no badge
        open_tab(browser, "Iteration explorer")
        wait_for(browser, "#draft-grid tr.grid-row", at_least=2)  # the explorer shows the iterations decoded so far
        assert "Iteration 1:" in browser.find_element(By.ID, "draft-grid").text
