"""The pre-start check in a real browser (headless Chromium): settings whose estimate does not fit the budget
put a note and one-click fixes under Compare's button before any click, and a fix sets its control to a
value that fits, which clears the note. No model runs (the note is the estimate's)."""

from __future__ import annotations

import re

import pytest
from selenium.webdriver.common.by import By

from app_server import running_app
from browser_kit import browser, open_tab, wait_for, wait_until  # noqa: F401

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
        fix = browser.find_element(By.ID, "compare-fix-max-new-tokens")
        tokens = re.fullmatch(r"(\d+) tokens per run", fix.text.strip()).group(1)
        fix.click()
        wait_until(browser, lambda d: d.find_element(By.CSS_SELECTOR, TOKENS).get_attribute("value") == tokens,
                   "the fix's tokens in the sidebar")
        wait_until(browser, lambda d: note(d) == "", "the note cleared: it fits now")
