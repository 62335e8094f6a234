"""The iteration explorer and the method colours in a real browser (issue 16, items 1 and 2).

On the Toy world pair, at 1440x900 and at 800x1000 (and 1024x768 for the layout): a click
on an output token opens its iteration; the final token sits in the column numbered tau + 1
(read from the page's layout, not from the HTML alone); typing a number into the slider's box and the arrow keys redraw
the grid; a click pins a token's details; Play steps on by itself; hint text is >= 14 px and
presentation mode enlarges the grid; a method keeps its colour in the Compare charts and
columns when the selection around it changes.
"""

from __future__ import annotations

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from app_server import running_app
from browser_kit import NARROW, TIMEOUT, WINDOW, browser, resize, wait_for, waiter  # noqa: F401
from components.render.chart_layout import MIN_WIDTH
from components.render.palette import METHOD_COLOURS

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def toy_url():
    with running_app(default_pair="toy", default_prompt="the cat") as url:
        yield url


def caption(driver) -> str:
    return driver.find_element(By.CSS_SELECTOR, "#draft-grid .grid-caption").text


def wait_for_iteration(driver, n: int) -> None:
    waiter(driver, TIMEOUT).until(lambda d: caption(d).startswith(f"Iteration {n}:"),
                                         message=f"the grid showing iteration {n}")


def final_token_column(driver) -> tuple[int, int]:
    """(tau + 1 from the grid's caption data, the number of the header column the final cell sits under)."""
    return driver.execute_script("""
        const grid = document.querySelector('#draft-grid .draft-grid');
        const final = grid.querySelector('td.grid-final').getBoundingClientRect();
        const middle = (final.left + final.right) / 2;
        const under = [...grid.querySelectorAll('th.grid-pos')].find((th) => {
            const r = th.getBoundingClientRect(); return r.left <= middle && middle <= r.right; });
        return [parseInt(grid.dataset.tau) + 1, under ? parseInt(under.textContent) : -1];""")


def rgb(colour: str) -> str:
    r, g, b = (int(colour.lstrip("#")[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgb({r}, {g}, {b})"


def spectr_colours(driver) -> tuple[str, str]:
    """SpecTr's bar in the block-efficiency chart (as rendered) and its Compare column's edge."""
    return tuple(driver.execute_script("""
        const gd = document.querySelector('#compare-efficiency .js-plotly-plot');
        const index = gd.data[0].x.indexOf('SpecTr');
        const bar = gd.querySelectorAll('.barlayer .trace')[0].querySelectorAll('path')[index];
        const column = document.querySelector('#compare-outputs .compare-column[data-method="spectr"]');
        return [bar.style.fill, getComputedStyle(column).borderLeftColor];"""))


def run_compare(driver) -> tuple[str, str]:
    # Mark the columns already there: the new result replaces them with unmarked ones.
    driver.execute_script("document.querySelectorAll('#compare-outputs .compare-column').forEach((c) => c.dataset.stale = 1)")
    driver.find_element(By.CSS_SELECTOR, "#compare-button").click()
    wait_for(driver, "#compare-outputs .compare-column[data-method='spectr']:not([data-stale])")
    wait_for(driver, "#compare-efficiency .js-plotly-plot .barlayer .trace")
    return spectr_colours(driver)


def untick(driver, label: str) -> None:
    box = driver.find_element(By.XPATH, f"//label[.//span[normalize-space()='{label}']]//input[@type='checkbox']")
    assert box.is_selected()
    driver.execute_script("arguments[0].click()", box)  # the sidebar may cover it on a narrow screen
    waiter(driver, TIMEOUT).until(lambda d: not box.is_selected())


def show_tab(driver, name: str, shows: str) -> None:
    """Open a tab, also one folded into the tab bar's overflow menu on a narrow screen, and wait
    until the element `shows` is on screen."""
    driver.execute_script("""
        const tab = [...document.querySelectorAll('button[role="tab"], .overflow-dropdown button')]
            .find((b) => b.textContent.trim() === arguments[0]);
        tab.click();""", name)
    waiter(driver, TIMEOUT).until(
        lambda d: d.execute_script("return document.querySelector(arguments[0])?.offsetParent != null;", shows),
        message=f"tab {name} showing {shows}")


def type_number(driver, box, value: int) -> None:
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(str(value), Keys.ENTER)


def check_explorer(driver, screenshots, size) -> None:
    iterations = int(driver.find_elements(By.CSS_SELECTOR, "#generate-output span.tok[data-iteration]")[-1]
                     .get_attribute("data-iteration"))
    assert iterations >= 3  # 12 tokens, at most L + 1 = 5 per iteration

    # A token of the output opens its iteration in the explorer tab.
    show_tab(driver, "Generate", "#generate-output")
    token = driver.find_element(By.CSS_SELECTOR, "#generate-output span.tok[data-iteration='2']")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", token)
    token.click()
    wait_for_iteration(driver, 2)
    assert driver.find_element(By.CSS_SELECTOR, "button[role='tab'][aria-selected='true']").text == "Iteration explorer"

    # The final token in column tau + 1, on every iteration, each reached by typing its number.
    box = driver.find_element(By.CSS_SELECTOR, "#explorer-iteration input[type='number']")
    for n in [*range(1, iterations + 1), 1]:
        type_number(driver, box, n)
        wait_for_iteration(driver, n)
        expected, drawn_under = final_token_column(driver)
        assert drawn_under == expected, f"iteration {n}: final token under column {drawn_under}, tau + 1 = {expected}"
    # The arrow keys: on the slider itself, then on the page (the explorer's own stepping).
    slider = driver.find_element(By.CSS_SELECTOR, "#explorer-iteration input[type='range']")
    slider.send_keys(Keys.ARROW_RIGHT)
    wait_for_iteration(driver, 2)
    driver.execute_script("document.activeElement.blur()")
    ActionChains(driver).send_keys(Keys.ARROW_RIGHT).perform()
    wait_for_iteration(driver, 3)
    ActionChains(driver).send_keys(Keys.ARROW_LEFT).perform()
    wait_for_iteration(driver, 2)

    # A click pins a drafted token's details (p, q, q/p) beside the table.
    cell = driver.find_element(By.CSS_SELECTOR, "#draft-grid td.grid-cell:not(.grid-final)")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
    cell.click()
    detail = driver.find_element(By.CSS_SELECTOR, "#draft-grid .grid-detail-body").text
    assert "q/p" in detail and "p (draft)" in detail and "pinned" in cell.get_attribute("class")
    if size == WINDOW:
        assert side_by_side(driver)
        check_play_and_type(driver)
    else:  # below 1000 px the chart goes under the grid, as wide as the row (the sidebar may be open)
        grid, chart, row = (driver.find_element(By.ID, i).rect for i in ("draft-grid", "distribution-plot", "explorer-main"))
        assert chart["y"] >= grid["y"] + grid["height"] - 1 and chart["width"] > 0.9 * row["width"]
    driver.save_screenshot(str(screenshots / f"explorer-{size[0]}.png"))


def side_by_side(driver) -> bool:
    """The distribution chart to the right of the grid, their tops level."""
    grid, chart = (driver.find_element(By.ID, i).rect for i in ("draft-grid", "distribution-plot"))
    return chart["x"] >= grid["x"] + grid["width"] - 1 and abs(chart["y"] - grid["y"]) < 40


def stacked_at_full_width(driver) -> bool:
    """The distribution chart under the grid, as wide as a chart is laid out for (not squeezed beside it)."""
    grid, chart = (driver.find_element(By.ID, i).rect for i in ("draft-grid", "distribution-plot"))
    return chart["y"] >= grid["y"] + grid["height"] - 1 and chart["width"] >= MIN_WIDTH - 1


def font_px(driver, css: str) -> float:
    return driver.execute_script("return parseFloat(getComputedStyle(document.querySelector(arguments[0])).fontSize);", css)


def check_play_and_type(driver) -> None:
    """Play steps on by itself (and a second press pauses); hints are >= 14 px; presentation mode enlarges."""
    start = int(caption(driver).split()[1].rstrip(":"))
    play = driver.find_element(By.ID, "explorer-play")
    play.click()
    wait_for_iteration(driver, start + 1)
    if "Pause" in play.text:
        play.click()
        waiter(driver, TIMEOUT).until(lambda d: "Play" in play.text)
    assert font_px(driver, "#explorer-iteration .info-text") >= 14
    normal = font_px(driver, "#draft-grid .draft-grid")
    toggle = "document.querySelector('#presentation-mode input').click()"
    driver.execute_script(toggle)
    waiter(driver, TIMEOUT).until(lambda d: font_px(d, "#draft-grid .draft-grid") > normal)
    driver.execute_script(toggle)
    waiter(driver, TIMEOUT).until(lambda d: font_px(d, "#draft-grid .draft-grid") == normal)


def test_explorer_columns_slider_and_method_colours_at_two_sizes(browser, tmp_path, toy_url):
    screenshots = tmp_path  # checks, not README images: those come from test_browser.py
    resize(browser, *WINDOW)
    browser.get(toy_url)
    wait_for(browser, "#generate-button")
    tokens = browser.find_element(By.CSS_SELECTOR, "input[aria-label='number input for Max new tokens']")
    type_number(browser, tokens, 12)  # short runs: a fast test
    browser.find_element(By.CSS_SELECTOR, "#generate-button").click()
    wait_for(browser, "#generate-output span.tok[data-iteration]", at_least=12)
    waiter(browser, TIMEOUT).until(lambda d: "block efficiency" in d.find_element(By.ID, "generate-metrics").text)
    check_explorer(browser, screenshots, WINDOW)
    resize(browser, 1024, 768)  # a projector's screen beside the open sidebar: the chart keeps its width, under the grid
    waiter(browser, TIMEOUT).until(lambda d: stacked_at_full_width(d), message="the chart under the grid at 1024x768")
    show_tab(browser, "Compare", "#compare-button")
    first = run_compare(browser)

    resize(browser, *NARROW)
    check_explorer(browser, screenshots, NARROW)
    # SpecTr's colour after SD and GBV leave the selection (its place in the charts changes).
    untick(browser, "SD")
    untick(browser, "GBV")
    show_tab(browser, "Compare", "#compare-button")
    second = run_compare(browser)
    assert first == second == (rgb(METHOD_COLOURS["spectr"]),) * 2
