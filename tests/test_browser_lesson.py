"""The lesson's "try it" buttons in a real browser (headless Debian Chromium), issue 24.

Each step's button, pressed in turn at 1440x900, at 1024x768 in presentation mode
(a projector) and at 800x1000, must run its example and end on the view that shows the step:
on that tab, with the step's content on the first screen (read from its bounding rectangle),
and with every control the step sets showing the value its text assumes (the values of
components.tabs.lesson_try, which the text is computed from). The runs are the teaching
pairs' (milliseconds per token); step 5's Fidelity check is the slowest, a few seconds.
"""

from __future__ import annotations

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By

from app_server import running_app
from browser_kit import NARROW, WINDOW, browser, open_tab, resize, screenshots, wait_for, wait_until  # noqa: F401
from components.tabs import lesson_try
from components.tabs.playground import tokens_shown
from spectr_gbv import METHODS
from spectr_gbv.pairs import PAIRS

pytestmark = pytest.mark.browser

SIZES = [(*WINDOW, False), (1024, 768, True), (*NARROW, False)]
# Where each control a step sets shows its value on the page (a slider: its number box).
FIELDS = {"pair": "input[aria-label='Model pair']", "method": "input[aria-label='Method (Generate, Fidelity, Race)']",
          "K": "#num-drafts input[type='number']", "L": "#draft-length input[type='number']",
          "T": "input[aria-label='number input for T (temperature)']",
          "tokens": "input[aria-label='number input for Max new tokens']", "seed": "input[aria-label='Seed']",
          "prompt": "#page-fold textarea", "N": "#fidelity-runs input[type='number']",
          "first tokens": "input[aria-label='number input for First tokens compared']",
          "alpha": "#playground-alpha input[type='number']", "playground K": "#playground-k input[type='number']",
          "playground L": "#playground-l input[type='number']"}
TAB_NAMES = {"generate": "Generate", "explorer": "Iteration explorer", "playground": "Playground", "fidelity": "Fidelity"}


@pytest.fixture(scope="module")
def url():
    with running_app(default_pair="toy", default_prompt="the cat") as address:
        yield address


def selected_tab(driver) -> str:
    return driver.find_element(By.CSS_SELECTOR, "#main-tabs button[role='tab'][aria-selected='true']").text.strip()


def first_screen(driver, css: str) -> bool:
    """The element is rendered and starts on the first screen (no scrolling to find it)."""
    return driver.execute_script("""
        const e = document.querySelector(arguments[0]); if (!e || !e.checkVisibility()) return false;
        const r = e.getBoundingClientRect(); return r.height > 0 && 0 <= r.top && r.top < window.innerHeight;""", css)


def shown(value) -> str:
    """A value as its control shows it: a pair or method by its label, a whole number without '.0'."""
    if value in PAIRS:
        return PAIRS[value].label
    if value in METHODS:
        return METHODS[value].label
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def plot_title(driver, css: str) -> str:
    return driver.execute_script("const g = document.querySelector(arguments[0]);"
                                 "return g && g.layout && g.layout.title ? g.layout.title.text : '';", css)


def fidelity_title(driver) -> str:
    return driver.execute_script("""const g = [...document.querySelectorAll('.js-plotly-plot')].find(
        (g) => g.layout && g.layout.title && String(g.layout.title.text).includes('noise band'));
        return g ? g.layout.title.text : '';""")


def caption(driver) -> str:
    found = driver.find_elements(By.CSS_SELECTOR, "#draft-grid .grid-caption")
    return found[0].text if found else ""


def shows_step(driver, step: int, plan) -> bool:
    """The content step `step`'s text points at, from this step's run (not an earlier one's)."""
    if step == 1:
        return first_screen(driver, "#generate-output .tok-accepted")
    if step in (2, 3):
        text = caption(driver)
        kept = int(text.split("tau = ")[1].split()[0]) if "tau = " in text else -1
        chart = plot_title(driver, "#distribution-plot .js-plotly-plot")
        return (text.startswith("Iteration 1:") and f"of {plan.values['L']} accepted" in text and "correction" in text
                and (kept >= 1 if step == 2 else kept == 0) and "correction" in chart)
    if step == 4:
        return plan_tokens(plan) + " tokens per iteration" in driver.find_element(By.ID, "playground-summary").text
    if step == 6:  # SpecTr with three drafts: draft 1 rejected, a later draft kept
        text = caption(driver)
        return text.startswith("Iteration 1:") and "accepted from draft" in text and "E[tau | drafts]" in text
    return "noise band" in fidelity_title(driver)


def plan_tokens(plan) -> str:
    return tokens_shown(plan.values["alpha"], plan.values["playground K"], plan.values["playground L"])


# The element of each step's content that must start on the first screen.
ON_FIRST_SCREEN = {1: "#generate-output .tok-accepted", 2: "#draft-grid .grid-caption", 3: "#draft-grid td.grid-final",
                   4: "#playground-summary", 5: "#fidelity-header", 6: "#draft-grid .grid-caption"}


@pytest.mark.parametrize("width, height, presentation", SIZES)
def test_each_try_it_runs_its_example_and_lands_on_the_view_that_shows_it(browser, url, screenshots, width, height,
                                                                         presentation):
    resize(browser, width, height)
    browser.get(url)
    wait_for(browser, "#generate-button")
    if presentation:
        browser.execute_script("document.querySelector('#presentation-mode input').click()")
        wait_until(browser, lambda d: d.execute_script("return document.documentElement.classList.contains('presentation')"),
                   "presentation mode")
    for step, plan in lesson_try.try_its().items():
        open_tab(browser, "Lesson")
        if step > 1:
            browser.find_element(By.ID, f"lesson-next-{step - 1}").click()
        wait_until(browser, lambda d: d.find_element(By.ID, f"lesson-step-{step}").is_displayed(), f"lesson step {step}")
        text = browser.find_element(By.ID, f"lesson-step-{step}").text
        browser.find_element(By.ID, f"lesson-try-{step}").click()
        wait_until(browser, lambda d: selected_tab(d) == TAB_NAMES[plan.tab], f"step {step}: the {plan.tab} tab")
        wait_until(browser, lambda d: shows_step(d, step, plan), f"step {step}: its example run and shown")
        assert first_screen(browser, ON_FIRST_SCREEN[step]), f"step {step}: its content is below the first screen"
        for name, value in plan.values.items():
            field = browser.find_element(By.CSS_SELECTOR, FIELDS[name]).get_attribute("value")
            assert field == shown(value), f"step {step}: {name} shows {field!r}, the text assumes {shown(value)!r}"
        if step == 4:  # the number the text quotes is the one the Playground shows
            assert f"{plan_tokens(plan)} tokens per target call" in text
            assert f"alpha = {plan.values['alpha']:g}" in text
        if step == 5:
            assert "OUTSIDE" in fidelity_title(browser)  # the released rule's bars leave the noise band
        if presentation and step == 3:  # the explorer on a projector, as a lesson shows it
            browser.save_screenshot(str(screenshots / "lesson-try-presentation.png"))


def test_a_later_steps_number_opens_that_step(browser, url):
    """Gradio's stepper lets a click go back only; the Lesson's numbers go forward too (a teacher jumping ahead)."""
    resize(browser, *WINDOW)
    browser.get(url)
    open_tab(browser, "Lesson")
    wait_until(browser, lambda d: d.find_element(By.ID, "lesson-step-1").is_displayed(), "the lesson's first step")
    for step in (4, 6, 2):  # ahead, ahead again, then back
        number = browser.find_element(By.ID, f"lesson-step-{step}-button")
        ActionChains(browser).move_to_element(number).click().perform()  # a pointer's click where the number is
        wait_until(browser, lambda d: d.find_element(By.ID, f"lesson-step-{step}").is_displayed(), f"step {step}")
        assert not browser.find_element(By.ID, "lesson-step-1").is_displayed()
