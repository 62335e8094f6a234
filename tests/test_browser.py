"""A real browser: headless Debian Chromium driven by Selenium against the app on loopback.

It runs a Toy-world generation, opens the iteration explorer and the compare tab, and checks
that the output tokens, the draft grid and the Plotly charts are really rendered in the page.
Screenshots go to $SPECTR_GBV_SCREENSHOTS when set (`make screenshots` writes the README's
images to assets/screenshots), else to a temporary folder.
"""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from app_server import running_app
from browser_kit import TIMEOUT, WINDOW, browser, count, open_tab, screenshots, resize, scroll_to, wait_for, waiter  # noqa: F401

pytestmark = pytest.mark.browser


def sideways_scrollers(driver) -> list[str]:
    """Sidebar elements that scroll sideways (a long word in a control's note once did)."""
    return driver.execute_script("""
        return [...document.querySelectorAll('.sidebar *')].filter((e) => e.offsetParent !== null
            && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX) && e.scrollWidth > e.clientWidth + 1)
            .map((e) => e.className || e.tagName);""")


def ticks_outside(driver, css: str) -> list[str]:
    """The x tick labels of a Plotly chart that stick out of its frame (tilted long names were cut off)."""
    return driver.execute_script("""
        const chart = document.querySelector(arguments[0] + ' .js-plotly-plot');
        const frame = chart.querySelector('svg.main-svg').getBoundingClientRect();
        return [...chart.querySelectorAll('.xtick text')].filter((t) => { const r = t.getBoundingClientRect();
            return r.left < frame.left - 1 || r.right > frame.right + 1 || r.bottom > frame.bottom + 1; })
            .map((t) => t.textContent);""", css)


def test_generate_explore_and_compare_in_a_real_browser(browser, screenshots):
    with running_app(default_pair="toy", default_prompt="the cat") as url:
        resize(browser, *WINDOW)  # the README's screenshots: a 1440x900 page, not a 1440x900 window
        browser.get(url)
        wait_for(browser, "#generate-button")
        browser.find_element(By.CSS_SELECTOR, "#generate-button").click()
        wait_for(browser, "#generate-output span.tok", at_least=40)  # the default 40 new tokens, coloured
        waiter(browser, TIMEOUT).until(lambda d: "block efficiency" in d.find_element(By.ID, "generate-metrics").text)
        assert count(browser, "#generate-output span.tok-accepted") >= 1
        browser.save_screenshot(str(screenshots / "generate.png"))

        open_tab(browser, "Iteration explorer")
        wait_for(browser, "#draft-grid tr.grid-row", at_least=2)  # the default K = 2 draft rows
        assert count(browser, "#draft-grid tr.grid-row") == 2
        assert count(browser, "#draft-grid td.grid-cell[title*='q/p']") >= 4  # hover details on drafted tokens (K x L)
        wait_for(browser, "#distribution-plot .js-plotly-plot")
        browser.find_element(By.CSS_SELECTOR, "#explorer-next").click()
        waiter(browser, TIMEOUT).until(lambda d: "Iteration 2:" in d.find_element(By.ID, "draft-grid").text)
        browser.save_screenshot(str(screenshots / "explorer.png"))

        open_tab(browser, "Compare")
        browser.find_element(By.CSS_SELECTOR, "#compare-button").click()
        wait_for(browser, "#compare-outputs .compare-column", at_least=5)
        wait_for(browser, "#compare-efficiency .js-plotly-plot")
        assert count(browser, ".js-plotly-plot") >= 6
        assert ticks_outside(browser, "#compare-efficiency") == []  # every method's name readable, the lossy one too
        assert sideways_scrollers(browser) == []
        scroll_to(browser, "#compare-efficiency")  # the charts (compare-stopped.png shows the columns)
        browser.save_screenshot(str(screenshots / "compare.png"))
    assert all((screenshots / f"{name}.png").stat().st_size > 10_000 for name in ("generate", "explorer", "compare"))
