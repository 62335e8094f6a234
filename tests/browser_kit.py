"""What every browser test shares: Debian's headless Chromium driven by Selenium, and small waits.

Import the fixtures into a test module with `from browser_kit import browser, screenshots  # noqa: F401`;
`browser` opens a window of WINDOW (1440x900); a test that needs another size calls `resize(driver, w, h)`.
Screenshots go to $SPECTR_GBV_SCREENSHOTS when set (`make screenshots`), else to a temporary folder.
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

from components.wiring.screens import NARROW_PX

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
TIMEOUT = 90
# How often a wait asks the page again. Selenium's default, 0.5 s, made every wait not met at once cost
# half a second; the browser tests wait hundreds of times. A check is one round trip of a few ms.
POLL_S = 0.05
WINDOW = (1440, 900)
NARROW = (800, 1000)
PROJECTOR = (1024, 768)  # a classroom projector, shown in presentation mode


@pytest.fixture(scope="module")
def browser():
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.fail("Debian's chromium and chromium-driver are missing: `make test` installs them (apt-get)")
    options = Options()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", f"--window-size={WINDOW[0]},{WINDOW[1]}"):
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


def waiter(driver, timeout: float = TIMEOUT) -> WebDriverWait:
    """Selenium's wait, asking every POLL_S."""
    return WebDriverWait(driver, timeout, poll_frequency=POLL_S)


def wait_until(driver, condition, message: str):
    """`condition(driver)`'s first truthy value within TIMEOUT, else a timeout naming `message`."""
    return waiter(driver).until(lambda d: condition(d), message=message)


def wait_for(driver, css: str, at_least: int = 1):
    waiter(driver).until(lambda d: count(d, css) >= at_least, message=f"waiting for {at_least} x {css}")


def choose(driver, field: str, option: str) -> None:
    """Pick `option` in the dropdown whose input `field` (CSS) finds, as a user does: open it, click the option."""
    driver.find_element(By.CSS_SELECTOR, field).click()
    item = wait_until(driver, lambda d: next((o for o in d.find_elements(By.CSS_SELECTOR, "li[role='option']")
                                              if o.get_attribute("aria-label") == option), None), f"option {option}")
    driver.execute_script("arguments[0].scrollIntoView({block: 'nearest'});", item)
    item.click()


def scroll_to(driver, css: str) -> None:
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", driver.find_element(By.CSS_SELECTOR, css))


def open_tab(driver, name: str) -> None:
    tab = waiter(driver).until(
        lambda d: next((b for b in d.find_elements(By.CSS_SELECTOR, "button[role='tab']") if b.text.strip() == name), None),
        message=f"tab {name}")
    tab.click()


def resize(driver, width: int, height: int) -> None:
    """The viewport (the page's inner size), not the outer window, set to width x height."""
    driver.set_window_size(width, height)
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight];")
    driver.set_window_size(2 * width - inner[0], 2 * height - inner[1])


def open_page(driver, address: str, width: int, height: int, presentation: bool) -> None:
    resize(driver, width, height)
    driver.get(address)
    wait_for(driver, "#generate-button")
    # the page's load event closes the sidebar on a narrow window: wait for it, or it closes what a test opened
    narrow = width < NARROW_PX
    wait_until(driver, lambda d: (rect(d, d.find_element(By.CSS_SELECTOR, ".sidebar"))["right"] <= 0) == narrow,
               "the sidebar as the window's width sets it")
    if presentation:
        set_presentation(driver, True)


def set_presentation(driver, on: bool) -> None:
    driver.execute_script("document.querySelector('#presentation-mode input').click()")  # the sidebar may be closed
    wait_until(driver, lambda d: d.execute_script("return document.documentElement.classList.contains('presentation')")
               == on, f"presentation mode {'on' if on else 'off'}")


def rect(driver, element) -> dict:
    return driver.execute_script("const r = arguments[0].getBoundingClientRect();"
                                 "return {left: r.left, right: r.right, top: r.top, bottom: r.bottom};", element)


def on_screen(driver, element) -> bool:
    """Rendered, and inside the window sideways (a closed sidebar's controls sit left of it)."""
    return driver.execute_script("""
        const e = arguments[0], r = e.getBoundingClientRect();
        return e.checkVisibility() && r.width > 0 && r.height > 0 && r.right > 0 && r.left < window.innerWidth;""",
                                 element)


def no_sideways_scroll(driver) -> bool:
    return driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")


def open_sidebar(driver) -> None:
    if rect(driver, driver.find_element(By.CSS_SELECTOR, ".sidebar"))["right"] <= 0:
        driver.find_element(By.CSS_SELECTOR, "button[aria-label='Toggle Sidebar']").click()
    wait_until(driver, lambda d: rect(d, d.find_element(By.CSS_SELECTOR, ".sidebar"))["left"] >= 0, "the sidebar open")
