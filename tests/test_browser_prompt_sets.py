"""The prompt-set dropdowns in a real browser (headless Chromium, Toy world): picking "examples" on Compare
runs the coupled Compare over the pair's example prompts and shows the set's result (each rule's mean with the
paired 95 % interval of its difference, the set's charts), and on Sweep a sweep over the same prompts; no error
either time."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from app_server import running_app
from browser_kit import browser, choose, open_tab, wait_for, wait_until  # noqa: F401
from components.wiring.prompt_set_choice import set_size

pytestmark = pytest.mark.browser

SET = "examples"


def text(driver, element_id: str) -> str:
    return driver.find_element(By.ID, element_id).text


def no_error(driver) -> bool:
    return not driver.find_elements(By.CSS_SELECTOR, ".toast-body.error, .run-failed")


def plot_text(driver, element_id: str) -> str:
    """A Plotly chart's own text (titles, ticks, subtitles), read from its SVG."""
    return " ".join(e.get_attribute("textContent") or ""
                    for e in driver.find_elements(By.CSS_SELECTOR, f"#{element_id} .js-plotly-plot svg text"))


def run_over_the_set(browser, url: str, tab: str, view: str, header: str) -> int:
    """Open `tab`, choose SET in its prompt-set dropdown, run, and wait until `header` says the run over
    the set finished; the set's size."""
    size = set_size(SET, "toy")
    browser.get(url)
    open_tab(browser, tab)
    choose(browser, f"#{view}-prompt-set input", SET)
    browser.find_element(By.ID, f"{view}-button").click()
    wait_until(browser, lambda d: f"prompt set {SET} ({size} prompts)" in text(d, header)
               and "running" not in text(d, header), f"the {view}'s finished header")
    return size


@pytest.fixture(scope="module")
def url():
    with running_app(default_pair="toy", default_prompt="the cat") as address:
        yield address


def test_compare_over_the_examples_set_shows_means_with_paired_intervals(browser, url):
    size = run_over_the_set(browser, url, "Compare", "compare", "compare-outputs")
    outputs = text(browser, "compare-outputs")
    assert "Coupled runs, one per prompt and repeat" in outputs and "paired per prompt against SpecTr" in outputs
    rows = browser.find_elements(By.CSS_SELECTOR, "#compare-outputs table.compare-set-table tr")
    cells = [[c.text for c in row.find_elements(By.CSS_SELECTOR, "td")] for row in rows[1:]]
    assert len(cells) >= 2 and any(c[-1] == "baseline" for c in cells)  # SpecTr, the baseline
    # every other exact rule: its difference with the 95 % interval, "+0.012 [-0.003, +0.027]"
    assert any(c[-1].count("[") == 1 and c[-1].endswith("]") for c in cells if c[-1] != "baseline")
    wait_for(browser, "#compare-efficiency .js-plotly-plot")
    title = "Block efficiency over the prompt set, coupled runs"
    wait_until(browser, lambda d: title in plot_text(d, "compare-efficiency"), "the set's block-efficiency chart")
    assert f"{SET}: mean over {size} prompts" in plot_text(browser, "compare-efficiency")
    assert no_error(browser) and "stopped" not in outputs


def test_sweep_over_the_examples_set_runs_every_point(browser, url):
    size = run_over_the_set(browser, url, "Sweep", "sweep", "sweep-header")
    wait_for(browser, "#sweep-efficiency .js-plotly-plot")
    assert no_error(browser) and "stopped" not in text(browser, "sweep-header")
    # its downloads' command box says the command line sweeps one prompt, not the set
    wait_until(browser, lambda d: f"a sweep over the prompt set {SET}" in text(d, "sweep-command"), "the command note")
