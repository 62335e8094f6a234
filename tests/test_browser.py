"""A real browser: headless Debian Chromium driven by Selenium against the app on loopback.

It runs a Toy-world generation, opens the iteration explorer and the compare tab, and checks
that the output tokens, the draft grid and the Plotly charts are really rendered in the page.
Screenshots go to $SPECTR_GBV_SCREENSHOTS when set (`make screenshots` writes the README's
images to assets/screenshots), else to a temporary folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from app_server import running_app

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
TIMEOUT = 90


@pytest.fixture(scope="module")
def browser():
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.fail("Debian's chromium and chromium-driver are missing: `make test` installs them (apt-get)")
    options = Options()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1500,1800"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


@pytest.fixture
def screenshots(tmp_path) -> Path:
    folder = Path(os.environ.get("SPECTR_GBV_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def count(driver, css: str) -> int:
    return len(driver.find_elements(By.CSS_SELECTOR, css))


def wait_for(driver, css: str, at_least: int = 1):
    WebDriverWait(driver, TIMEOUT).until(lambda d: count(d, css) >= at_least, message=f"waiting for {at_least} x {css}")


def scroll_to(driver, css: str) -> None:
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", driver.find_element(By.CSS_SELECTOR, css))


def open_tab(driver, name: str) -> None:
    tab = WebDriverWait(driver, TIMEOUT).until(
        lambda d: next((b for b in d.find_elements(By.CSS_SELECTOR, "button[role='tab']") if b.text.strip() == name), None),
        message=f"tab {name}")
    tab.click()


def test_generate_explore_and_compare_in_a_real_browser(browser, screenshots):
    with running_app(default_pair="toy", default_prompt="the cat") as url:
        browser.get(url)
        wait_for(browser, "#generate-button")
        browser.find_element(By.CSS_SELECTOR, "#generate-button").click()
        wait_for(browser, "#generate-output span.tok", at_least=40)  # the default 40 new tokens, coloured
        WebDriverWait(browser, TIMEOUT).until(lambda d: "block efficiency" in d.find_element(By.ID, "generate-metrics").text)
        assert count(browser, "#generate-output span.tok-accepted") >= 1
        browser.save_screenshot(str(screenshots / "generate.png"))

        open_tab(browser, "Iteration explorer")
        wait_for(browser, "#draft-grid tr.grid-row", at_least=2)  # the default K = 2 draft rows
        assert count(browser, "#draft-grid tr.grid-row") == 2
        assert count(browser, "#draft-grid td.grid-cell[title*='q/p']") >= 4  # hover details on drafted tokens (K x L)
        wait_for(browser, "#distribution-plot .js-plotly-plot")
        browser.find_element(By.CSS_SELECTOR, "#explorer-next").click()
        WebDriverWait(browser, TIMEOUT).until(lambda d: "Iteration 2:" in d.find_element(By.ID, "draft-grid").text)
        browser.save_screenshot(str(screenshots / "explorer.png"))

        open_tab(browser, "Compare")
        browser.find_element(By.CSS_SELECTOR, "#compare-button").click()
        wait_for(browser, "#compare-outputs .compare-column", at_least=5)
        wait_for(browser, "#compare-efficiency .js-plotly-plot")
        assert count(browser, ".js-plotly-plot") >= 6
        scroll_to(browser, "#compare-outputs")
        browser.save_screenshot(str(screenshots / "compare.png"))
    assert all((screenshots / f"{name}.png").stat().st_size > 10_000 for name in ("generate", "explorer", "compare"))
