"""A class's pictures at the three sizes (headless Debian Chromium): 1440x900, 1024x768 in presentation
mode with the sidebar open (a projector), and 800x1000.

Read from the rendered page (bounding rectangles, scrollWidth against clientWidth): presentation mode
and "Start a class" sit on the sidebar's first screen; the chosen pair's whole name and every example
prompt are shown, wrapped, not cut; the explorer's chart keeps its width (beside the grid where both fit,
else under it) with its title whole, and its text grows in presentation mode; the Race's two lanes
stream to the finish inside the window; Start a class sets the Lesson up, closes the sidebar and leaves
the first try-it on the first screen, also from the Lesson's own button with the sidebar closed. The app runs on the Toy world
(a link sets it), opened on the offline default pair, whose name is the longest, and loads no model.
"""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from app_server import running_app
from browser_kit import (NARROW, PROJECTOR, WINDOW, browser, no_sideways_scroll, on_screen, open_page, open_sidebar,  # noqa: F401
                         open_tab, rect, screenshots, set_presentation, wait_for, wait_until)
from components.render.chart_layout import MIN_WIDTH
from components.wiring.inputs import EXAMPLES
from spectr_gbv.pairs import DEFAULT_KEY, PAIRS, TOY_KEY

pytestmark = pytest.mark.browser

# (width, height, presentation mode, sidebar open): the projector with the sidebar open is the tightest case
SIZES = [(*WINDOW, False, True), (*PROJECTOR, True, True), (*NARROW, False, False)]
IDS = ["1440x900", "1024x768-presentation-sidebar", "800x1000"]
TOY_RUN = f"?pair={TOY_KEY}&prompt=the%20cat&T=0"  # T = 0: the race's method takes fewer target calls


@pytest.fixture(scope="module")
def url():
    with running_app(default_pair=DEFAULT_KEY) as address:
        yield address


def open_at(driver, address: str, width: int, height: int, presentation: bool, sidebar: bool) -> None:
    open_page(driver, address, width, height, presentation)
    if sidebar:
        open_sidebar(driver)


def element(driver, css: str):
    return driver.find_element(By.CSS_SELECTOR, css)


def pair_name(driver) -> str:
    """The line under the pair's box, read also while the sidebar is closed (off screen)."""
    return element(driver, "#pair-name .pair-name").get_attribute("textContent").strip()


def clipped(driver, node) -> bool:
    return driver.execute_script("return arguments[0].scrollWidth > arguments[0].clientWidth + 1", node)


def viewport(driver) -> tuple[int, int]:
    return tuple(driver.execute_script("return [window.innerWidth, window.innerHeight]"))


def apart(a: dict, b: dict) -> bool:
    """Two boxes side by side or one under the other, not overlapping."""
    return a["right"] <= b["left"] + 1 or b["right"] <= a["left"] + 1 or a["bottom"] <= b["top"] + 1 \
        or b["bottom"] <= a["top"] + 1


@pytest.mark.parametrize("width, height, presentation, sidebar", SIZES, ids=IDS)
def test_presentation_mode_and_start_a_class_lead_the_sidebar_and_the_pairs_name_is_whole(browser, url, width, height,
                                                                                           presentation, sidebar):
    open_at(browser, url, width, height, presentation, sidebar=True)  # where the controls are: open it at every size
    _, tall = viewport(browser)
    for css in ("#presentation-mode", "#start-class"):
        box = rect(browser, element(browser, css))
        assert on_screen(browser, element(browser, css)), f"{css} is not on screen"
        assert 0 <= box["top"] and box["bottom"] <= tall, f"{css} lies below the sidebar's fold ({box['bottom']:.0f} px)"
    name = element(browser, "#pair-name .pair-name")
    assert name.text == PAIRS[DEFAULT_KEY].label and not clipped(browser, name)  # the box itself cuts it
    side, line = rect(browser, element(browser, ".sidebar")), rect(browser, name)
    assert side["left"] <= line["left"] and line["right"] <= side["right"] + 1

    browser.get(url + TOY_RUN)  # a link switches the pair: the line follows
    wait_until(browser, lambda d: pair_name(d) == PAIRS[TOY_KEY].label, "the Toy's name")


@pytest.mark.parametrize("width, height, presentation, sidebar", SIZES, ids=IDS)
def test_the_examples_show_their_whole_prompts(browser, url, width, height, presentation, sidebar):
    open_at(browser, url, width, height, presentation, sidebar)
    wait_for(browser, "#generate-examples td")
    cells = browser.find_elements(By.CSS_SELECTOR, "#generate-examples td")
    texts = [cell.text.strip() for cell in cells]
    for _, prompt in EXAMPLES:
        assert prompt in texts, f"the example {prompt!r} is not shown whole (cells: {texts})"
    assert not any(text.endswith("...") for text in texts)
    wide, _ = viewport(browser)
    for cell in cells:
        assert not clipped(browser, cell) and rect(browser, cell)["right"] <= wide + 1, f"{cell.text!r} runs out"
    assert no_sideways_scroll(browser)


def generate_on_the_toy(driver, url: str, width: int, height: int, presentation: bool, sidebar: bool) -> None:
    open_at(driver, url + TOY_RUN, width, height, presentation, sidebar)
    wait_until(driver, lambda d: pair_name(d) == PAIRS[TOY_KEY].label, "the Toy world")
    driver.execute_script("document.getElementById('generate-button').click()")  # the sidebar may cover it
    wait_until(driver, lambda d: "block efficiency" in element(d, "#generate-metrics").text, "the run's metrics")


def chart_text(driver) -> dict:
    """The explorer's chart: its box, its title's and a tick label's boxes, and Plotly's layout width."""
    return driver.execute_script("""
        const gd = document.querySelector('#distribution-plot .js-plotly-plot');
        const box = (e) => { const r = e.getBoundingClientRect();
                             return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, height: r.height}; };
        return {plot: box(gd), title: box(gd.querySelector('.gtitle')), tick: box(gd.querySelector('.ytick text')),
                layout_width: gd._fullLayout.width};""")


@pytest.mark.parametrize("width, height, presentation, sidebar", SIZES, ids=IDS)
def test_the_explorers_chart_keeps_its_width_and_its_title_and_grows_for_a_projector(browser, url, screenshots, width,
                                                                                     height, presentation, sidebar):
    generate_on_the_toy(browser, url, width, height, presentation, sidebar)
    open_tab(browser, "Iteration explorer")
    wait_for(browser, "#distribution-plot .js-plotly-plot .ytick text")
    wait_for(browser, "#draft-grid td.grid-final")
    chart = chart_text(browser)
    plot, title = chart["plot"], chart["title"]
    wide, _ = viewport(browser)
    assert plot["right"] - plot["left"] >= MIN_WIDTH - 1, f"the chart is squeezed to {plot['right'] - plot['left']:.0f} px"
    assert plot["left"] >= 0 and plot["right"] <= wide + 1
    assert plot["left"] <= title["left"] and title["right"] <= plot["right"] + 1, "the chart's title is cut"
    grid = rect(browser, element(browser, "#draft-grid .grid-scroll"))
    assert apart(grid, plot), "the chart lies over the grid"
    assert no_sideways_scroll(browser)
    browser.save_screenshot(str(screenshots / f"explorer-{width}x{height}.png"))
    if presentation:  # the chart's text is larger than the same chart's without presentation mode
        toolbar = "#distribution-plot .modebar-container"
        shown = "return getComputedStyle(document.querySelector(arguments[0])).display"
        assert browser.execute_script(shown, toolbar) == "none"  # no toolbar over the title on a projector
        set_presentation(browser, False)
        wait_until(browser, lambda d: chart_text(d)["tick"]["height"] < chart["tick"]["height"], "the chart back")
        plain = chart_text(browser)
        assert chart["tick"]["height"] >= 1.2 * plain["tick"]["height"]
        assert chart["title"]["height"] >= 1.2 * plain["title"]["height"]


@pytest.mark.parametrize("width, height, presentation, sidebar", SIZES, ids=IDS)
def test_the_race_streams_both_lanes_inside_the_window(browser, url, screenshots, width, height, presentation, sidebar):
    open_at(browser, url + TOY_RUN + "&tab=race", width, height, presentation, sidebar)
    wait_until(browser, lambda d: element(d, "#race-button").is_displayed(), "the Race tab")
    wait_until(browser, lambda d: pair_name(d) == PAIRS[TOY_KEY].label, "the Toy world")
    button = element(browser, "#race-button")
    wide, tall = viewport(browser)
    assert on_screen(browser, button) and rect(browser, button)["bottom"] <= tall, "Race is below the first screen"
    assert "one model call each" in element(browser, "#race-fairness").text
    button.click()
    wait_for(browser, "#race-board .race-lane.race-finished", 2)
    lanes = browser.find_elements(By.CSS_SELECTOR, "#race-board .race-lane")
    boxes = [rect(browser, lane) for lane in lanes]
    assert len(lanes) == 2 and all(on_screen(browser, lane) for lane in lanes)
    for box in boxes:
        assert box["left"] >= 0 and box["right"] <= wide + 1 and box["right"] - box["left"] >= 240
    assert apart(*boxes)
    calls = [int(lane.get_attribute("data-target-calls")) for lane in lanes]
    tokens = [int(lane.get_attribute("data-tokens")) for lane in lanes]
    assert lanes[0].get_attribute("data-method") == "ar"
    assert tokens[0] == tokens[1] == calls[0] > calls[1]  # plain decoding: a call per token; the method: fewer
    for lane, call in zip(lanes, calls):  # each lane's numbers appear as the replay reaches its finish
        stats = f"#race-board .race-lane[data-method='{lane.get_attribute('data-method')}'] .race-stats"
        wait_until(browser, lambda d: f"{call} target call" in element(d, stats).text, f"{stats} at its finish")
    assert "first across the line" in element(browser, "#race-line").text
    assert no_sideways_scroll(browser)
    browser.save_screenshot(str(screenshots / f"race-{width}x{height}.png"))


@pytest.mark.parametrize("width, height, presentation, sidebar", SIZES, ids=IDS)
def test_start_a_class_sets_the_lesson_up_at_every_size(browser, url, width, height, presentation, sidebar):
    open_at(browser, url, width, height, presentation, sidebar=True)
    _, tall = viewport(browser)
    button = element(browser, "#start-class")
    assert on_screen(browser, button) and rect(browser, button)["bottom"] <= tall
    button.click()
    wait_until(browser, lambda d: d.execute_script("return document.documentElement.classList.contains('presentation')")
               and element(d, "#main-tabs button[role='tab'][aria-selected='true']").text.strip() == "Lesson",
               "the Lesson, in presentation mode")
    wait_until(browser, lambda d: element(d, "#lesson-step-1").is_displayed(), "the Lesson's first step")
    value = lambda css: element(browser, css).get_attribute("value")  # noqa: E731
    wait_until(browser, lambda d: value("#num-drafts input[type='number']") == "1", "K = 1")
    assert value("#draft-length input[type='number']") == "3"
    assert value("input[aria-label='Method (Generate, Fidelity, Race)']") == "SD"
    assert pair_name(browser) == PAIRS[TOY_KEY].label
    assert rect(browser, element(browser, "#lesson-step-1"))["top"] < tall
    wait_until(browser, lambda d: rect(d, element(d, ".sidebar"))["right"] <= 0, "the sidebar closed after it")
    try_it = element(browser, "#lesson-try-1")
    assert on_screen(browser, try_it) and rect(browser, try_it)["bottom"] <= tall, "the first try-it needs a scroll"
    assert no_sideways_scroll(browser)


def test_on_a_projector_with_the_sidebar_closed_the_lesson_starts_a_class(browser, url):
    open_at(browser, url + "?tab=lesson", *PROJECTOR, presentation=True, sidebar=False)
    _, tall = viewport(browser)
    button = element(browser, "#lesson-start-class")
    assert on_screen(browser, button) and rect(browser, button)["bottom"] <= tall
    button.click()
    wait_until(browser, lambda d: element(d, "#num-drafts input[type='number']").get_attribute("value") == "1", "K = 1")
    assert pair_name(browser) == PAIRS[TOY_KEY].label
    try_it = element(browser, "#lesson-try-1")
    assert on_screen(browser, try_it) and rect(browser, try_it)["bottom"] <= tall, "the first try-it needs a scroll"
    assert rect(browser, element(browser, ".sidebar"))["right"] <= 0  # still closed
