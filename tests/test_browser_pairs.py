"""Choosing another pair in a real browser (headless Debian Chromium): the prompt box gets one the
new pair reads, so Generate runs, and Fidelity's N becomes the pair's own default, so the released
rule is seen OUTSIDE the noise band on the two-token example without touching N."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from app_server import running_app
from browser_kit import browser, choose, open_tab, wait_for, wait_until  # noqa: F401
from components.tabs import fidelity
from components.wiring.inputs import DEFAULT_K, DEFAULT_L, EXAMPLES
from spectr_gbv import METHODS
from spectr_gbv.pairs import DEFAULT_KEY, PAIRS, TWO_TOKEN_KEY

pytestmark = pytest.mark.browser

RELEASED = "spectr_gbv_released"
RUNS = "#fidelity-runs input[type='number']"
PAIR_FIELD = "input[aria-label='Model pair']"


@pytest.fixture(scope="module")
def url():
    with running_app() as address:  # the default pair and its default prompt, as a visitor finds them
        yield address


def prompt(driver) -> str:
    return driver.find_element(By.CSS_SELECTOR, "#page-fold textarea").get_attribute("value")


def runs(driver) -> str:
    return driver.find_element(By.CSS_SELECTOR, RUNS).get_attribute("value")


def fidelity_title(driver) -> str:
    return driver.execute_script("""const g = [...document.querySelectorAll('#fidelity-figure .js-plotly-plot')].find(
        (g) => g.layout && g.layout.title && String(g.layout.title.text).includes('noise band'));
        return g ? g.layout.title.text : '';""")


def test_choosing_the_two_token_example_gives_it_its_prompt_and_fidelity_n(browser, url):
    browser.get(url)
    wait_for(browser, "#generate-button")
    open_tab(browser, "Fidelity")  # its controls are mounted when it is first shown
    wait_for(browser, RUNS)
    assert prompt(browser) == EXAMPLES[0][1] and runs(browser) == str(fidelity.default_runs(DEFAULT_KEY))
    choose(browser, PAIR_FIELD, PAIRS[TWO_TOKEN_KEY].label)
    wait_until(browser, lambda d: prompt(d) == "A", "the two-token example's own prompt")
    choose(browser, "input[aria-label='Method (Generate, Fidelity, Race)']", METHODS[RELEASED].label)
    own = fidelity.default_runs(TWO_TOKEN_KEY, RELEASED, DEFAULT_K, DEFAULT_L, 3)
    wait_until(browser, lambda d: runs(d) == str(own), f"N = {own}, the pair's own default")
    # Fidelity from its own settings: the released rule is outside the band
    browser.find_element(By.ID, "fidelity-button").click()
    wait_until(browser, lambda d: "OUTSIDE" in fidelity_title(d), "the released rule OUTSIDE the noise band")
    # Generate reads the prompt it was given (no "unknown word(s)")
    open_tab(browser, "Generate")
    browser.find_element(By.ID, "generate-button").click()
    wait_for(browser, "#generate-output .tok")
    # back to the default pair: its default prompt again
    choose(browser, PAIR_FIELD, PAIRS[DEFAULT_KEY].label)
    wait_until(browser, lambda d: prompt(d) == EXAMPLES[0][1], "the default pair's prompt back")
