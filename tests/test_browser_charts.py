"""Readable charts and honest buttons, measured in a real browser (headless Chromium; issue 24).

At 1440x900 (sidebar open, two charts a row), 1100x800 (sidebar open, the charts stacked: two would
be 330 px) and 800x1000 (sidebar closed): on every chart of Compare and Sweep the legend lies below
the x-axis title and the tick labels, titles, subtitles and ticks stay inside the chart, method
names do not run into each other, position axes show whole numbers, and no annotation covers a
bar. Generate's button reads "Running…" and is disabled while a run goes, and comes back after it
ends, fails or is stopped; a failed run's message replaces the old output (no red "Error" badge
over it); AS-BV+H's detail panel starts with what happened, in words, above the symbols.

The pair is made to count as timed (as tests/test_defaults.py does), so Compare and Sweep draw
their wall-clock charts; its lookup-table timings are meaningless, but the charts' geometry is real.
"""

from __future__ import annotations

import dataclasses

import pytest
from selenium.webdriver.common.by import By

from app_server import running_app
from browser_kit import NARROW, TIMEOUT, WINDOW, browser, count, open_page, open_tab, screenshots, wait_for, waiter  # noqa: F401
from components.tabs import compare, sidebar, sweep
from components.wiring import inputs
from components.wiring.run_events import RUNNING
from helpers import slow_toy_pair
from spectr_gbv.pairs import HUB

pytestmark = pytest.mark.browser

SIZES = [WINDOW, (1100, 800), NARROW]
COMPARE_CHARTS = ("efficiency", "histogram", "per-position", "calls", "speedup", "theory")
WHOLE_NUMBER_AXES = ("histogram", "per-position", "theory")

GEOMETRY = """
const chart = document.querySelector(arguments[0] + ' .js-plotly-plot');
if (!chart) return null;
const rect = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
const shown = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
const texts = (css) => [...chart.querySelectorAll(css)].filter((e) => e.textContent.trim() && shown(e));
return {
  svg: rect(chart.querySelector('svg.main-svg')),
  legend: chart.querySelector('.legend') ? rect(chart.querySelector('.legend')) : null,
  xtitles: texts('.g-xtitle text, .g-x2title text').map(rect),
  ticks: texts('.xtick text, .x2tick text').map((t) => [rect(t), t.textContent]),
  titles: texts('.g-gtitle text').map(rect),
  annotations: texts('.annotation').map(rect),
  bars: [...chart.querySelectorAll('.bars .point path')].filter(shown).map(rect),
};"""


def overlap(a, b, slack: float = 1.0) -> bool:
    """Whether two [left, top, right, bottom] boxes share more than `slack` px each way."""
    return min(a[2], b[2]) - max(a[0], b[0]) > slack and min(a[3], b[3]) - max(a[1], b[1]) > slack


def inside(box, frame, slack: float = 1.0) -> bool:
    return box[0] >= frame[0] - slack and box[2] <= frame[2] + slack and box[1] >= frame[1] - slack and \
        box[3] <= frame[3] + slack


def check_chart(driver, css: str, whole_numbers: bool = False) -> dict:
    """Every readability rule on one rendered chart; returns its geometry for more checks."""
    g = driver.execute_script(GEOMETRY, css)
    assert g is not None, f"{css}: no chart drawn"
    svg = g["svg"]
    for box in g["titles"] + [t[0] for t in g["ticks"]] + g["xtitles"]:
        assert inside(box, svg), f"{css}: a title, subtitle or tick is cut off ({box} outside {svg})"
    if g["legend"]:
        assert inside(g["legend"], svg), f"{css}: the legend is cut off"
        for box in g["xtitles"] + [t[0] for t in g["ticks"]]:  # the legend lies below them all
            assert g["legend"][1] >= box[3] - 1, f"{css}: the legend {g['legend']} reaches into {box}"
    ticks = [t[0] for t in g["ticks"]]
    for i, a in enumerate(ticks):  # names and numbers do not run into each other
        for b in ticks[i + 1:]:
            assert not overlap(a, b, slack=2), f"{css}: tick labels overlap: {g['ticks']}"
    for note in g["annotations"]:
        assert not any(overlap(note, bar) for bar in g["bars"]), f"{css}: an annotation covers a bar"
    if whole_numbers:
        labels = [t[1] for t in g["ticks"]]
        assert labels and all(label.strip().isdigit() for label in labels), f"{css}: ticks {labels}"
    return g


def timed_prepare(pair_key, prompt, progress=None):
    """Compare and Sweep time the teaching pair as if it were a model pair."""
    pair, ids = inputs.prepare(pair_key, prompt, progress)
    return dataclasses.replace(pair, info=dataclasses.replace(pair.info, kind=HUB), words=None), ids


@pytest.fixture(scope="module")
def charts_app():
    """One app for the three window sizes: the first size's Compare and Sweep run, the next two read the
    same runs back (identical requests are served once, components/serving/shared_runs.py), so each size
    renders the same charts without paying for their runs again. The two-token example: its ceiling (the
    best any exact rule can do) is drawn at the default K and L. Runs of 12 tokens, not the sidebar's 40:
    the charts' geometry does not depend on the runs' length, and 40 tokens cost 40 to 80 s of CPU."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compare, "prepare", timed_prepare)
        patch.setattr(sweep, "prepare", timed_prepare)
        patch.setattr(sidebar, "DEFAULT_TOKENS", 12)
        with running_app(default_pair="two-token", default_prompt="A") as url:
            yield url


def set_number(driver, css: str, value) -> None:
    box = driver.find_element(By.CSS_SELECTOR, f"{css} input")
    box.clear()
    box.send_keys(str(value))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_compare_and_sweep_charts_are_readable(browser, screenshots, charts_app, size):
    open_page(browser, charts_app, *size, presentation=False)  # after the page's load event, which moves the layout
    open_tab(browser, "Compare")
    browser.find_element(By.CSS_SELECTOR, "#compare-button").click()
    waiter(browser, TIMEOUT).until(
        lambda d: count(d, "#compare-outputs .compare-column") >= 7
        and "running" not in d.find_element(By.ID, "compare-outputs").text, message="Compare's seven methods")
    wait_for(browser, "#compare-speedup .js-plotly-plot .bars")
    for name in COMPARE_CHARTS:
        css = f"#compare-{name}"
        browser.execute_script("document.querySelector(arguments[0]).scrollIntoView({block: 'center'})", css)
        check_chart(browser, css, whole_numbers=name in WHOLE_NUMBER_AXES)
    if size == WINDOW:  # two charts a row beside the open sidebar, each at least the chart's minimum width
        first, second = (browser.find_element(By.ID, f"compare-{n}").rect for n in ("efficiency", "histogram"))
        assert abs(first["y"] - second["y"]) < 2 and first["width"] >= 430
    else:  # one chart a row, the row's width: two would have squeezed the method names together
        first, second = (browser.find_element(By.ID, f"compare-{n}").rect for n in ("efficiency", "histogram"))
        assert second["y"] >= first["y"] + first["height"] - 1
    efficiency = browser.find_element(By.ID, "compare-efficiency").text
    assert "best any exact rule, on average (LP)" in efficiency  # the dashed line, named in the legend
    browser.execute_script("document.querySelector('#compare-speedup').scrollIntoView({block: 'center'})")
    browser.save_screenshot(str(screenshots / f"charts-compare-{size[0]}.png"))

    open_tab(browser, "Sweep")
    set_number(browser, "#sweep-repeats", 2)  # speedups over repeats: a median and its range per point
    browser.find_element(By.CSS_SELECTOR, "#sweep-button").click()
    # 21 timed points: minutes on a loaded 2-core machine, and the wait is for the last frame, not a speed.
    waiter(browser, 4 * TIMEOUT).until(
        lambda d: "seeds" in d.find_element(By.ID, "sweep-header").text
        and "running" not in d.find_element(By.ID, "sweep-header").text, message="the sweep's last point")
    wait_for(browser, "#sweep-speed .js-plotly-plot .scatterlayer .trace")
    for name in ("efficiency", "speed"):
        check_chart(browser, f"#sweep-{name}")
    ticks = [t[1] for t in browser.execute_script(GEOMETRY, "#sweep-speed")["ticks"]]
    assert ticks == ["1", "2", "4"][:len(ticks)] and ticks  # the swept K values, no 1.5 drafts
    browser.execute_script("document.querySelector('#sweep-speed').scrollIntoView({block: 'center'})")
    browser.save_screenshot(str(screenshots / f"charts-sweep-{size[0]}.png"))


def generate_button(driver):
    return driver.find_element(By.ID, "generate-button")


def error_badges(driver) -> list[str]:
    """Gradio's red "Error" marks over output blocks (the toast in the corner is not one)."""
    return driver.execute_script("""
        return [...document.querySelectorAll('.block *')].filter((e) => !e.closest('.toast-wrap, [data-testid="toast-body"]')
            && e.children.length === 0 && e.textContent.trim() === 'Error' && e.offsetParent !== null)
            .map((e) => (e.closest('[id]') || {}).id || e.className);""")


@pytest.mark.parametrize("size", [WINDOW, NARROW], ids=lambda s: f"{s[0]}x{s[1]}")
def test_generate_is_busy_while_it_runs_and_a_failed_run_shows_its_message(browser, screenshots, monkeypatch, size):
    slow_toy = slow_toy_pair(0.03)
    monkeypatch.setattr(inputs, "get_pair", lambda key, **kwargs: slow_toy)
    with running_app(default_pair="toy", default_prompt="the cat") as url:
        # after the page's load event, as the other browser tests start: clicked before it, the run failed to
        # begin in a few of a dozen runs on one machine
        open_page(browser, url, *size, presentation=False)
        assert generate_button(browser).is_enabled() and generate_button(browser).text == "Generate"
        generate_button(browser).click()
        # A run going, and a second click has nowhere to go, visibly: both seen in one look at the page
        # (two looks apart, a loaded machine saw the run end between them).
        busy = ("const b = document.querySelector('#generate-button'); if (!b) return [0, false, ''];"
                "return [document.querySelectorAll('#generate-output span.tok').length, b.disabled, b.innerText.trim()];")
        waiter(browser, TIMEOUT).until(lambda d: (lambda n, off, text: n >= 2 and off and text == RUNNING)(
            *d.execute_script(busy)), message="tokens streaming while the button reads " + RUNNING)
        waiter(browser, TIMEOUT).until(lambda d: "block efficiency" in d.find_element(By.ID, "generate-metrics").text)
        waiter(browser, TIMEOUT).until(lambda d: generate_button(d).is_enabled(), message="Generate back")
        assert generate_button(browser).text == "Generate"

        # AS-BV+H (the default method): its detail panel opens with what happened, in words, above the symbols.
        open_tab(browser, "Iteration explorer")
        wait_for(browser, "#draft-grid .grid-detail-body dt")
        terms = browser.find_elements(By.CSS_SELECTOR, "#draft-grid .grid-detail-body dt")
        labels = [t.text for t in terms]
        assert labels[0] == "what happened" and "drawn from, in symbols" in labels
        story = browser.find_element(By.CSS_SELECTOR, "#draft-grid .grid-detail-body dd")
        symbols = terms[labels.index("drawn from, in symbols")]
        assert story.is_displayed() and "AS-BV chose draft" in story.text and "ω" not in story.text
        assert story.rect["y"] < symbols.rect["y"]  # read first
        panel = browser.find_element(By.CSS_SELECTOR, "#draft-grid .grid-detail").rect
        assert panel["x"] >= 0 and panel["x"] + panel["width"] <= browser.execute_script("return innerWidth") + 1
        browser.save_screenshot(str(screenshots / f"handoff-panel-{size[0]}.png"))

        # A run that fails: the message replaces the old output, with no red "Error" over it.
        open_tab(browser, "Generate")
        prompt = next(t for t in browser.find_elements(By.CSS_SELECTOR, "textarea")
                      if (t.get_attribute("value") or "") == "the cat")
        prompt.clear()
        prompt.send_keys("the zebra")
        generate_button(browser).click()
        waiter(browser, TIMEOUT).until(lambda d: count(d, "#generate-output .run-failed") == 1,
                                              message="the message in place of the output")
        message = browser.find_element(By.CSS_SELECTOR, "#generate-output .run-failed")
        assert "unknown word(s) ['zebra']" in message.text and message.is_displayed()
        assert count(browser, "#generate-output span.tok") == 0  # the old tokens are gone
        assert not browser.find_element(By.ID, "generate-metrics").text.strip()  # and their metrics line
        assert not error_badges(browser)
        waiter(browser, TIMEOUT).until(lambda d: generate_button(d).is_enabled(), message="Generate back")
        browser.save_screenshot(str(screenshots / f"generate-failed-{size[0]}.png"))

        # Stopped: the button comes back too. On a pair slow enough that the run is still going when Stop
        # is clicked, however loaded the machine (on the faster one, a Stop once came after the run's end).
        slower_toy = slow_toy_pair(0.1)  # about 2 s an iteration
        monkeypatch.setattr(inputs, "get_pair", lambda key, **kwargs: slower_toy)
        prompt.clear()
        prompt.send_keys("the cat")
        generate_button(browser).click()
        wait_for(browser, "#generate-output span.tok", at_least=2)
        browser.find_element(By.ID, "stop-button").click()
        waiter(browser, TIMEOUT).until(lambda d: "you pressed Stop" in d.find_element(By.ID, "generate-metrics").text)
        waiter(browser, TIMEOUT).until(lambda d: generate_button(d).is_enabled(), message="Generate back")
        assert generate_button(browser).text == "Generate" and not error_badges(browser)
