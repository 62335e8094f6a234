"""The prompt-set dropdowns in a real browser (headless Chromium, Toy world): picking "examples" on Compare
runs the coupled Compare over the pair's example prompts and shows the set's result (each rule's mean with the
paired 95 % interval of its difference, the set's two charts at full width and no empty panel, the command
over the set), and on Sweep a sweep over the same prompts with its command; no error either time."""

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
    assert "drafts from" in outputs and "leader" not in outputs  # the drafting rule is no winner
    # Only the panels with data are drawn, each the width of its row: no empty box, no half-width chart.
    panels = browser.find_elements(By.CSS_SELECTOR, "#compare-efficiency, #compare-histogram, #compare-per-position, "
                                                    "#compare-calls, #compare-speedup, #compare-theory")
    shown = [p for p in panels if p.is_displayed()]
    assert {p.get_attribute("id") for p in shown} == {"compare-efficiency", "compare-theory"}
    for panel in shown:
        row = panel.find_element(By.XPATH, "..")
        assert panel.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")
        assert panel.rect["width"] >= 0.95 * row.rect["width"], panel.get_attribute("id")
        assert panel.rect["height"] >= 300, panel.get_attribute("id")
    wait_until(browser, lambda d: "--prompt-set examples --methods" in text(d, "compare-command"),
               "the command that reproduces the set's run")


def test_sweep_over_the_examples_set_runs_every_point(browser, url):
    size = run_over_the_set(browser, url, "Sweep", "sweep", "sweep-header")
    wait_for(browser, "#sweep-efficiency .js-plotly-plot")
    assert no_error(browser) and "stopped" not in text(browser, "sweep-header")
    # its downloads' command box holds the command that sweeps the same set
    wait_until(browser, lambda d: f"--prompt-set {SET} --methods" in text(d, "sweep-command"), "the set's command")


def test_a_compare_that_ranks_nothing_offers_a_set_and_one_click_runs_it(browser, url):
    """On the two-token world at the defaults every band overlaps: the page says one prompt cannot separate
    the rules, and its button picks the largest set that fits and presses Compare."""
    browser.get(url + "?pair=two-token&prompt=A&tab=compare")
    wait_until(browser, lambda d: d.find_element(By.ID, "compare-button").is_displayed(), "the Compare tab")
    browser.find_element(By.ID, "compare-button").click()
    offer = "#compare-use-set"
    wait_until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, offer)
               and d.find_element(By.CSS_SELECTOR, offer).is_displayed(), "the offered set")
    assert "One prompt cannot separate these rules" in text(browser, "compare-outputs")
    label = browser.find_element(By.CSS_SELECTOR, offer).text  # "Run over suite-40 (40 prompts, one repeat)"
    name = label.split()[2]
    assert label == f"Run over {name} ({set_size(name, 'two-token')} prompts, one repeat)"
    browser.find_element(By.CSS_SELECTOR, offer).click()
    wait_until(browser, lambda d: f"prompt set {name} (" in text(d, "compare-outputs")
               and "running" not in text(d, "compare-outputs"), "the set's finished run")
    assert no_error(browser) and "stopped" not in text(browser, "compare-outputs")
    assert browser.find_element(By.CSS_SELECTOR, "#compare-prompt-set input").get_attribute("value") == name
    assert "1 repeat(s)" in text(browser, "compare-outputs")
    assert not browser.find_elements(By.CSS_SELECTOR, offer) or not browser.find_element(By.CSS_SELECTOR, offer).is_displayed()
