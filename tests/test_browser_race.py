"""The Race and a class in a real browser (headless Debian Chromium), the app on the Toy world.

Race: the race's method follows the sidebar's; both lanes reach their finish, the method's in fewer
target calls at T = 0, replayed by target calls (tokens hidden at first, all shown once plain
decoding's last call is due). (Stop is Generate's mechanism,
tested on the handler in test_race.py: a Toy race ends before a click could reach it.) Start a class: the Toy world, SD, K = 1, L = 3,
presentation mode on and the Lesson open. A link with present=1, step=3 and tab=lesson opens the
Lesson at step 3 in presentation mode, and the link the page writes there carries all three.
"""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from app_server import running_app
from browser_kit import browser, choose, open_sidebar, open_tab, wait_for, wait_until  # noqa: F401

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def url():
    with running_app(default_pair="toy", default_prompt="the cat") as address:
        yield address


def selected_tab(driver) -> str:
    return driver.find_element(By.CSS_SELECTOR, "#main-tabs button[role='tab'][aria-selected='true']").text.strip()


def presenting(driver) -> bool:
    return driver.execute_script("return document.documentElement.classList.contains('presentation')")


def set_number(driver, css: str, value) -> None:
    field = driver.find_element(By.CSS_SELECTOR, css)
    field.clear()
    field.send_keys(str(value))
    field.send_keys("\t")


def opacity(driver, element) -> float:
    return float(driver.execute_script("return getComputedStyle(arguments[0]).opacity", element))


def test_the_race_follows_the_sidebar_and_replays_both_lanes_to_the_finish(browser, url):
    browser.get(url)
    wait_for(browser, "#generate-button")
    set_number(browser, "input[aria-label='number input for T (temperature)']", 0)
    open_sidebar(browser)
    choose(browser, "input[aria-label='Method (Generate, Fidelity, Race)']", "SpecTr")
    open_tab(browser, "Race")
    assert browser.find_element(By.CSS_SELECTOR, "#race-method input").get_attribute("value") == "SpecTr"
    assert "take turns, one model call each, on one thread" in browser.find_element(By.ID, "race-fairness").text
    browser.find_element(By.ID, "race-button").click()
    wait_for(browser, "#race-board .race-lane.race-finished", 2)
    lanes = browser.find_elements(By.CSS_SELECTOR, "#race-board .race-lane")
    calls = [int(lane.get_attribute("data-target-calls")) for lane in lanes]
    tokens = [int(lane.get_attribute("data-tokens")) for lane in lanes]
    assert tokens[0] == tokens[1] == calls[0] > calls[1]  # plain: a call per token; the method: fewer
    assert lanes[1].get_attribute("data-method") == "spectr"
    assert "Replayed at one target call every" in browser.find_element(By.ID, "race-board").text
    plain_last = lanes[0].find_elements(By.CSS_SELECTOR, ".tok")[-1]
    assert opacity(browser, plain_last) < 1  # plain decoding's last call is seconds away in the replay
    wait_until(browser, lambda d: opacity(d, plain_last) == 1, "the replay reached plain decoding's last token")
    assert "first across the line" in browser.find_element(By.ID, "race-line").text


def test_start_a_class_sets_the_lesson_up_on_a_projector(browser, url):
    browser.get(url)
    wait_for(browser, "#start-class")
    browser.find_element(By.ID, "start-class").click()
    wait_until(browser, lambda d: selected_tab(d) == "Lesson" and presenting(d), "the Lesson, in presentation mode")
    wait_until(browser, lambda d: d.find_element(By.ID, "lesson-step-1").is_displayed(), "the Lesson's first step")
    value = lambda css: browser.find_element(By.CSS_SELECTOR, css).get_attribute("value")  # noqa: E731
    wait_until(browser, lambda d: value("#num-drafts input[type='number']") == "1", "K = 1")
    assert value("input[aria-label='Model pair']").startswith("Toy world")
    assert value("input[aria-label='Method (Generate, Fidelity, Race)']") == "SD"
    assert value("#draft-length input[type='number']") == "3"


def test_a_class_link_opens_the_lesson_step_in_presentation_mode_and_is_written_back(browser, url):
    browser.get(url + "?pair=toy&tab=lesson&present=1&step=3")
    wait_until(browser, lambda d: presenting(d) and selected_tab(d) == "Lesson", "presentation mode and the Lesson")
    wait_until(browser, lambda d: d.find_element(By.ID, "lesson-step-3").is_displayed(), "the Lesson's step 3")
    browser.execute_script("document.getElementById('copy-link').click()")
    def link(driver) -> str:
        return driver.find_element(By.CSS_SELECTOR, "#share-link textarea, #share-link input").get_attribute("value")

    wait_until(browser, lambda d: "tab=lesson" in link(d), "the written link")
    assert "present=1" in link(browser) and "step=3" in link(browser)
