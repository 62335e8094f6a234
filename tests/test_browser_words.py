"""The lesson, shareable links and narrow screens in a real browser (headless Debian Chromium).

No model runs here: the lesson's steps, a link's settings and the layout are all page-side,
so the module takes a few seconds once the server is up.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlparse

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from app_server import running_app
from browser_kit import NARROW, WINDOW, browser, open_tab, resize, screenshots, wait_for, wait_until  # noqa: F401
from components.wiring.share import TABS
from spectr_gbv.pairs import PAIRS

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def url():
    with running_app(default_pair="toy", default_prompt="the cat") as address:
        yield address


def field(driver, aria_label: str) -> str:
    """The value an input of the page shows, found by its accessible name."""
    return driver.find_element(By.CSS_SELECTOR, f"input[aria-label='{aria_label}']").get_attribute("value")


def prompt_text(driver) -> str:
    return driver.execute_script("const box = Array.from(document.querySelectorAll('textarea')).find("
                                 "t => (t.closest('label') || t.parentElement).textContent.includes('Prompt'));"
                                 "return box ? box.value : null;")


def selected_tab(driver) -> str:
    return driver.find_element(By.CSS_SELECTOR, "#main-tabs button[role='tab'][aria-selected='true']").text.strip()


def sidebar_box(driver) -> dict:
    return driver.execute_script("const r = document.querySelector('.sidebar').getBoundingClientRect();"
                                 "return {left: r.left, right: r.right};")


def step_shown(driver, step: int) -> bool:
    panels = driver.find_elements(By.ID, f"lesson-step-{step}")
    return bool(panels) and panels[0].is_displayed()


def open_page(driver, address: str) -> None:
    driver.get(address)
    wait_for(driver, "#generate-button")


def test_the_lessons_steps_advance_and_its_last_step_opens_fidelity(browser, url, screenshots):
    resize(browser, *WINDOW)
    open_page(browser, url)
    wait_until(browser, lambda d: sidebar_box(d)["left"] >= 0, "the sidebar open on a wide screen")
    open_tab(browser, "Lesson")
    wait_until(browser, lambda d: step_shown(d, 1), "the lesson's first step")
    for step in (1, 2, 3, 4):
        browser.find_element(By.ID, f"lesson-next-{step}").click()
        wait_until(browser, lambda d: step_shown(d, step + 1) and not step_shown(d, step), f"lesson step {step + 1}")
    assert "total variation" in browser.find_element(By.ID, "lesson-step-5").text
    browser.save_screenshot(str(screenshots / "lesson.png"))
    browser.find_element(By.ID, "lesson-back-5").click()
    wait_until(browser, lambda d: step_shown(d, 4), "back to step 4")
    browser.find_element(By.ID, "lesson-next-4").click()
    wait_until(browser, lambda d: step_shown(d, 5), "step 5 again")
    browser.find_element(By.ID, "lesson-try-5").click()  # the released rule on the two-token example, in Fidelity
    wait_until(browser, lambda d: selected_tab(d) == "Fidelity", "the Fidelity tab")
    assert field(browser, "Model pair") == PAIRS["two-token"].label
    assert "released" in field(browser, "Method (Generate, Fidelity, Race)")
    assert field(browser, "number input for K (drafts)") == "1" and field(browser, "number input for L (draft length)") == "2"


def test_a_link_restores_the_settings_and_the_page_writes_one(browser, url):
    resize(browser, *WINDOW)
    open_page(browser, url + "?pair=two-token&prompt=A%20B&method=sd&K=3&L=2&T=0.45&seed=9&tab=compare")
    wait_until(browser, lambda d: selected_tab(d) == "Compare", "the link's tab")
    wait_until(browser, lambda d: field(d, "number input for K (drafts)") == "3", "the link's K")
    assert field(browser, "Model pair") == PAIRS["two-token"].label
    assert field(browser, "Method (Generate, Fidelity, Race)") == "SD"
    assert field(browser, "number input for L (draft length)") == "2"
    assert field(browser, "number input for T (temperature)") == "0.45"
    assert field(browser, "Seed") == "9"
    assert prompt_text(browser) == "A B"
    assert not browser.find_elements(By.CSS_SELECTOR, "#link-note") or not browser.find_element(By.ID, "link-note").text

    open_tab(browser, "Sweep")
    browser.find_element(By.ID, "copy-link").click()
    box = "#share-link textarea"
    link = wait_until(browser, lambda d: d.find_element(By.CSS_SELECTOR, box).get_attribute("value") or None, "the link")
    assert dict(parse_qsl(urlparse(link).query)) == {"pair": "two-token", "prompt": "A B", "method": "sd", "K": "3",
                                                      "L": "2", "T": "0.45", "seed": "9", "tab": "sweep", "present": "0"}
    assert link.startswith(url) and browser.current_url == link  # also in the address bar


def test_a_link_with_a_pair_and_no_prompt_gives_the_pair_a_prompt_it_reads(browser, url):
    from components.wiring.inputs import example_prompt

    resize(browser, *WINDOW)
    open_page(browser, url + "?pair=two-token")  # the page's prompt ("the cat") is not the two-token world's
    wait_until(browser, lambda d: prompt_text(d) == example_prompt("two-token"), "the pair's own prompt")
    assert field(browser, "Model pair") == PAIRS["two-token"].label
    browser.find_element(By.ID, "generate-button").click()
    wait_for(browser, "#generate-output span.tok")  # the first Generate runs


def test_a_bad_link_says_what_it_could_not_use_and_keeps_the_defaults(browser, url):
    resize(browser, *WINDOW)
    open_page(browser, url + "?K=99&L=3&tab=nowhere&method=magic")
    note = wait_until(browser, lambda d: d.find_element(By.ID, "link-note").text or None, "the link's note")
    assert "K (drafts) must be in [1, 8]" in note and "unknown tab 'nowhere'" in note and "unknown method 'magic'" in note
    wait_until(browser, lambda d: field(d, "number input for L (draft length)") == "3", "the good value applied")
    assert field(browser, "number input for K (drafts)") == "2" and selected_tab(browser) == "Generate"


def test_the_playground_answers_when_a_setting_changes(browser, url, screenshots):
    resize(browser, *WINDOW)
    open_page(browser, url + "?tab=playground")
    wait_for(browser, "#playground-plot .js-plotly-plot")
    summary = browser.find_element(By.ID, "playground-summary")
    assert "K = 2" in summary.text and "speedup" in summary.text
    box = browser.find_element(By.CSS_SELECTOR, "#playground-k input[type='number']")
    box.clear()
    box.send_keys("4", Keys.ENTER)
    wait_until(browser, lambda d: "K = 4" in d.find_element(By.ID, "playground-summary").text, "the playground's answer")
    traces = browser.execute_script("return document.querySelector('#playground-plot .js-plotly-plot').data.length")
    assert traces == 8  # K = 1 and K = 4: tokens and speedup, each a line and a marker
    browser.save_screenshot(str(screenshots / "playground.png"))


def test_on_a_narrow_screen_every_tab_shows_its_name_and_the_sidebar_is_closed(browser, url, screenshots):
    resize(browser, *NARROW)
    open_page(browser, url + "?tab=compare")
    wait_until(browser, lambda d: sidebar_box(d)["right"] <= 0, "the sidebar closed below 1100 px")
    tabs = browser.find_elements(By.CSS_SELECTOR, "#main-tabs button[role='tab']")
    assert [t.text.strip() for t in tabs if t.is_displayed()] == list(TABS)  # every tab, by name, no "..." menu
    assert all(t.rect["x"] + t.rect["width"] <= NARROW[0] for t in tabs)
    assert not [m for m in browser.find_elements(By.CSS_SELECTOR, ".overflow-menu") if m.is_displayed()]
    chart = browser.find_element(By.ID, "compare-efficiency")
    assert chart.rect["width"] > 0.6 * NARROW[0]  # one chart per row, not two squeezed side by side
    open_tab(browser, "Playground")
    wait_for(browser, "#playground-plot .js-plotly-plot")
    assert browser.find_element(By.ID, "playground-plot").rect["width"] > 0.6 * NARROW[0]
    browser.save_screenshot(str(screenshots / "narrow.png"))
    open_tab(browser, "About")
    wait_for(browser, "#about-picture svg")
    picture = browser.find_element(By.CSS_SELECTOR, "#about-picture svg")
    assert 0 < picture.rect["x"] + picture.rect["width"] <= NARROW[0]
