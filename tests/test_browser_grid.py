"""The explorer's grid at its widest (K = 8, L = 8) beside the open sidebar, in a real browser:
its table scrolls sideways inside its own box, so no column hides under the chart beside it."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from app_server import running_app
from browser_kit import browser, open_tab, resize, wait_for, wait_until  # noqa: F401

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def url():
    with running_app(default_pair="toy", default_prompt="the cat") as address:
        yield address


BOXES = """const box = (css) => { const e = document.querySelector(css); if (!e) return null;
  const r = e.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
const scroller = document.querySelector('#draft-grid .grid-scroll');
if (scroller) scroller.scrollLeft = scroller.scrollWidth;
const heads = document.querySelectorAll('#draft-grid th.grid-pos');
const last = heads.length ? heads[heads.length - 1].getBoundingClientRect() : null;
return {grid: box('#draft-grid .grid-scroll') || box('#draft-grid table'), chart: box('#distribution-plot'),
        sidebar: box('.sidebar'), last: last && {left: last.left, right: last.right}, columns: heads.length};"""


@pytest.mark.parametrize("width, height", [(1440, 900), (1100, 800)])
def test_the_widest_grid_scrolls_in_its_box_and_no_column_hides_under_the_chart(browser, url, width, height):
    resize(browser, width, height)
    browser.get(url + "?K=8&L=8&method=spectr_gbv")
    wait_for(browser, "#generate-button")
    assert browser.execute_script("return document.querySelector('.sidebar').getBoundingClientRect().right") > 0
    browser.find_element(By.ID, "generate-button").click()
    wait_for(browser, "#generate-output .tok")
    open_tab(browser, "Iteration explorer")
    wait_until(browser, lambda d: d.execute_script(BOXES)["columns"] == 9, "the grid's 9 positions")
    boxes = browser.execute_script(BOXES)
    grid, chart, last = boxes["grid"], boxes["chart"], boxes["last"]
    side_by_side = chart["top"] < grid["bottom"] and grid["top"] < chart["bottom"]
    assert not side_by_side or grid["right"] <= chart["left"] + 1, boxes  # the grid's box stops before the chart
    assert grid["left"] - 1 <= last["left"] and last["right"] <= grid["right"] + 1, boxes  # its last column reachable
