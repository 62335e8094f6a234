"""The pre-start check in a real browser (headless Chromium): settings whose estimate does not fit the budget
put a note and one-click fixes under Compare's button before any click, and disable the button; a fix sets
its control to a value that fits, which clears the note and enables the button. No model runs (the note is
the estimate's). Also the fields around a run: a number typed past a field's range goes to its end, and a
new run closes an old run's error toast."""

from __future__ import annotations

import re

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from app_server import running_app
from browser_kit import browser, open_tab, wait_for, wait_until, waiter  # noqa: F401
from components.wiring.runs import MAX_REPEATS

pytestmark = pytest.mark.browser

TOKENS = "input[aria-label='number input for Max new tokens']"


def set_number(driver, css: str, value) -> None:
    field = driver.find_element(By.CSS_SELECTOR, css)
    field.clear()
    field.send_keys(str(value))
    field.send_keys("\t")


def note(driver) -> str:
    return driver.find_element(By.ID, "compare-pre-start").text.strip()


def test_compare_over_budget_says_so_and_a_fix_button_makes_it_fit(browser):
    with running_app(default_pair="default", default_prompt="Name a fruit.") as url:
        browser.get(url)
        wait_for(browser, "#generate-button")
        set_number(browser, "#num-drafts input[type='number']", 8)
        set_number(browser, "#draft-length input[type='number']", 8)
        set_number(browser, TOKENS, 256)
        open_tab(browser, "Compare")
        wait_until(browser, lambda d: "Would not start" in note(d), "the pre-start note")
        assert "Each button below alone makes it fit" in note(browser)
        wait_until(browser, lambda d: not d.find_element(By.ID, "compare-button").is_enabled(),
                   "the Compare button disabled under the note")
        fix = browser.find_element(By.ID, "compare-fix-max-new-tokens")
        tokens = re.fullmatch(r"(\d+) tokens per run", fix.text.strip()).group(1)
        fix.click()
        wait_until(browser, lambda d: d.find_element(By.CSS_SELECTOR, TOKENS).get_attribute("value") == tokens,
                   "the fix's tokens in the sidebar")
        wait_until(browser, lambda d: note(d) == "", "the note cleared: it fits now")
        wait_until(browser, lambda d: d.find_element(By.ID, "compare-button").is_enabled(), "the button enabled again")


def toasts(driver) -> list[str]:
    # read in one script: a toast closing between a find and a read would leave a stale element
    return driver.execute_script(
        "return [...document.querySelectorAll('[data-testid=\"toast-body\"]')].map((toast) => toast.innerText)")


def test_a_number_past_its_range_goes_to_its_end_and_a_new_run_closes_an_old_toast(browser):
    with running_app(default_pair="toy", default_prompt="the cat") as url:
        browser.get(url)
        wait_for(browser, "#generate-button")
        open_tab(browser, "Compare")
        repeats = "#compare-repeats input[type='number']"
        set_number(browser, repeats, 999)
        wait_until(browser, lambda d: d.find_element(By.CSS_SELECTOR, repeats).get_attribute("value")
                   == str(MAX_REPEATS), "999 repeats brought to the field's maximum")
        set_number(browser, repeats, 0)
        wait_until(browser, lambda d: d.find_element(By.CSS_SELECTOR, repeats).get_attribute("value") == "1",
                   "0 repeats brought to the field's minimum")
        open_tab(browser, "Generate")
        prompt = browser.find_element(By.CSS_SELECTOR, "#page-fold textarea")
        prompt.send_keys(Keys.CONTROL, "a")
        prompt.send_keys(Keys.DELETE)  # as a visitor empties it (clear() sends no input event)
        browser.find_element(By.ID, "generate-button").click()
        wait_until(browser, lambda d: any("prompt is empty" in text for text in toasts(d)), "the empty prompt's toast")
        prompt.send_keys("the cat")
        browser.find_element(By.ID, "generate-button").click()
        # at once, not by its own timer (an error toast closes itself after 10 s)
        waiter(browser, 3).until(lambda d: not toasts(d), message="the old toast closed by the new run")
        wait_for(browser, "#generate-output span.tok")
