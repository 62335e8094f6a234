"""The page's layout in a real browser (headless Debian Chromium), issue 24: what a student sees.

Read from the rendered page, not from the HTML alone: bounding rectangles, and scrollWidth
against clientWidth for clipping. At 1440x900, 1024x768 (a projector, in presentation mode)
and 800x1000: the lesson's step titles sit side by side without overlapping or clipping; in
presentation mode the header is compact and the lossy note and the prompt are folded, so the
chosen tab starts on the first screen (and both come back when the mode ends); only one K
and one L slider are on screen, on the Playground too (its own replace the sidebar's, which
keep their values). No model runs here.
"""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from app_server import running_app
from components.tabs import lesson as lesson_steps
from browser_kit import (NARROW, PROJECTOR, WINDOW, browser, no_sideways_scroll, on_screen, open_page, open_sidebar,  # noqa: F401
                         open_tab, rect, screenshots, set_presentation, wait_for, wait_until)

pytestmark = pytest.mark.browser

# (width, height, presentation mode): the three sizes of the issue, and the titles also at the other mode
SIZES = [(*WINDOW, False), (*PROJECTOR, True), (*NARROW, False)]
TITLE_SIZES = SIZES + [(*PROJECTOR, False), (*NARROW, True)]


@pytest.fixture(scope="module")
def url():
    with running_app(default_pair="toy", default_prompt="the cat") as address:
        yield address


def sliders_on_screen(driver, label: str) -> list:
    boxes = driver.find_elements(By.CSS_SELECTOR, f"input[aria-label='number input for {label}']")
    return [box for box in boxes if on_screen(driver, box)]


@pytest.mark.parametrize("width, height, presentation", TITLE_SIZES)
def test_the_lessons_step_titles_fit_side_by_side(browser, url, width, height, presentation):
    open_page(browser, url, width, height, presentation)
    open_tab(browser, "Lesson")
    wait_until(browser, lambda d: d.find_element(By.ID, "lesson-step-1").is_displayed(), "the lesson")
    lesson = rect(browser, browser.find_element(By.ID, "lesson"))
    labels = browser.find_elements(By.CSS_SELECTOR, "#lesson .step-label")
    assert len(labels) == len(lesson_steps.step_texts()) and all(label.is_displayed() for label in labels)
    boxes = [rect(browser, label) for label in labels]
    for label, box in zip(labels, boxes):
        assert lesson["left"] <= box["left"] and box["right"] <= lesson["right"], f"{label.text!r} leaves the lesson"
        scroll, client = browser.execute_script("return [arguments[0].scrollWidth, arguments[0].clientWidth]", label)
        assert scroll <= client, f"{label.text!r} is clipped ({scroll} > {client} px)"
    for (a, left), (b, right) in zip(zip(labels, boxes), zip(labels[1:], boxes[1:])):
        assert left["right"] <= right["left"], f"{a.text!r} overlaps {b.text!r}"
    body = rect(browser, browser.find_element(By.ID, "lesson-step-1"))
    assert max(box["bottom"] for box in boxes) <= body["top"], "a title runs into the step's text"
    assert no_sideways_scroll(browser)


def test_presentation_mode_starts_the_tab_on_a_projectors_first_screen(browser, url, screenshots):
    open_page(browser, url, *PROJECTOR, presentation=False)
    prompt = browser.find_element(By.CSS_SELECTOR, "#page-fold textarea")
    note = browser.find_element(By.CSS_SELECTOR, "#page-fold .lossy-note")
    fold_header = browser.find_element(By.CSS_SELECTOR, "#page-fold > .label-wrap")
    assert prompt.is_displayed() and note.is_displayed() and not fold_header.is_displayed()  # no fold drawn

    set_presentation(browser, True)
    wait_until(browser, lambda d: not prompt.is_displayed(), "the prompt folded away")
    assert not note.is_displayed() and fold_header.is_displayed()
    assert not browser.find_element(By.CSS_SELECTOR, "#page-heading p").is_displayed()  # the title alone
    for tab in ("Generate", "Lesson", "Playground"):
        open_tab(browser, tab)
        panel = wait_until(browser, lambda d: next((p for p in d.find_elements(By.CSS_SELECTOR, "#main-tabs > .tabitem")
                                                    if p.is_displayed()), None), f"the {tab} tab's content")
        assert rect(browser, panel)["top"] < PROJECTOR[1] / 2, f"{tab} starts below the first half-screen"
    open_tab(browser, "Generate")
    button = browser.find_element(By.ID, "generate-button")
    assert rect(browser, button)["bottom"] <= PROJECTOR[1]  # the tab's first control is on the first screen
    assert no_sideways_scroll(browser)
    browser.save_screenshot(str(screenshots / "presentation.png"))

    fold_header.click()  # the prompt stays a click away
    wait_until(browser, lambda d: prompt.is_displayed(), "the fold opened")
    prompt.send_keys(Keys.END, " sat")
    assert prompt.get_attribute("value") == "the cat sat"
    fold_header.click()
    wait_until(browser, lambda d: not prompt.is_displayed(), "the fold closed again")

    set_presentation(browser, False)
    wait_until(browser, lambda d: prompt.is_displayed() and note.is_displayed(), "the note and prompt back")
    assert not fold_header.is_displayed()
    assert browser.find_element(By.CSS_SELECTOR, "#page-heading p").is_displayed()


@pytest.mark.parametrize("width, height, presentation", SIZES)
def test_one_k_and_one_l_slider_on_screen_and_the_playgrounds_replace_the_sidebars(browser, url, width, height,
                                                                                   presentation):
    open_page(browser, url, width, height, presentation)
    open_sidebar(browser)  # the hardest case: the sidebar's sliders and a tab's both on screen
    box = browser.find_element(By.CSS_SELECTOR, "#num-drafts input[type='number']")
    box.clear()
    box.send_keys("3", Keys.ENTER)
    wait_until(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#num-drafts input[type='number']")
               .get_attribute("value") == "3", "the sidebar's K set")

    def ids(label):
        return [b.find_element(By.XPATH, "ancestor::*[@id!=''][1]").get_attribute("id") for b in sliders_on_screen(browser, label)]

    assert ids("K (drafts)") == ["num-drafts"] and ids("L (draft length)") == ["draft-length"]
    open_tab(browser, "Playground")
    wait_for(browser, "#playground-plot .js-plotly-plot")
    wait_until(browser, lambda d: ids("K (drafts)") == ["playground-k"], "only the Playground's K on screen")
    assert ids("L (draft length)") == ["playground-l"]
    note = browser.find_element(By.ID, "sidebar-playground-note")
    assert on_screen(browser, note) and "Playground" in note.text

    open_tab(browser, "Compare")
    wait_until(browser, lambda d: ids("K (drafts)") == ["num-drafts"], "the sidebar's K back")
    assert ids("L (draft length)") == ["draft-length"]
    assert browser.find_element(By.CSS_SELECTOR, "#num-drafts input[type='number']").get_attribute("value") == "3"
    assert not [n for n in browser.find_elements(By.ID, "sidebar-playground-note") if n.is_displayed()]


def test_a_link_to_the_playground_shows_its_sliders_alone(browser, url):
    open_page(browser, url + "?tab=playground&K=3", *WINDOW, presentation=False)
    wait_for(browser, "#playground-plot .js-plotly-plot")
    wait_until(browser, lambda d: [len(sliders_on_screen(d, "K (drafts)")), len(sliders_on_screen(d, "L (draft length)"))]
               == [1, 1], "one K and one L")
    assert browser.find_element(By.ID, "playground-k").is_displayed()
