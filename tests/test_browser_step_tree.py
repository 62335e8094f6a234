"""The explorer's step-through and drafts tree in a real browser (headless Debian Chromium), Toy world.

One Generate run at the defaults (K = 2 drafts), then at 1440x900, at 1024x768 in presentation
mode and at 800x1000: the step control walks the shown iteration from the drafts to the final
token, one stage per click, and each stage shows the values it claims (the coin and h equal
the grid's for that cell, the failure is the first failed test, tau and the final token are the
grid's); the tree is on screen, below or beside the grid and clear of the grid and the chart,
has one node per distinct prefix, marks the grid's accepted path and final token, and follows
the explorer to the next iteration (the step-through starting over).
"""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from app_server import running_app
from browser_kit import NARROW, WINDOW, browser, resize, screenshots, wait_for, wait_until  # noqa: F401

pytestmark = pytest.mark.browser

PROJECTOR = (1024, 768)


@pytest.fixture(scope="module")
def url():
    with running_app(default_pair="toy", default_prompt="the cat") as address:
        yield address


def box(driver, css: str) -> dict:
    return driver.execute_script("""
        const r = document.querySelector(arguments[0]).getBoundingClientRect();
        return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height};""", css)


def overlap(a: dict, b: dict) -> bool:
    return (a["left"] < b["right"] - 1 and b["left"] < a["right"] - 1
            and a["top"] < b["bottom"] - 1 and b["top"] < a["bottom"] - 1)


def uncovered(driver, css: str) -> bool:
    """Scrolled to, the element is what the page shows at its middle (nothing lies over it)."""
    return driver.execute_script("""
        const e = document.querySelector(arguments[0]);
        e.scrollIntoView({block: 'center'});
        const r = e.getBoundingClientRect();
        const hit = document.elementFromPoint(r.left + Math.min(r.width / 2, 40), r.top + r.height / 2);
        return e.checkVisibility() && r.width > 0 && r.height > 0 && !!hit && e.contains(hit);""", css)


def stage(driver) -> dict:
    """The step-through's data attributes (what its stage claims) and its visible text."""
    return driver.execute_script("""
        const s = document.querySelector('#explorer-steps .step-through');
        return s ? {...s.dataset, text: s.innerText} : {};""")


def grid_iteration(driver) -> int:
    return int(driver.find_element(By.CSS_SELECTOR, "#draft-grid .grid-caption").text.split()[1].rstrip(":"))


def grid_cell_title(driver, draft: int, column: int) -> str:
    return driver.execute_script("""
        const row = document.querySelectorAll('#draft-grid tbody tr.grid-row')[arguments[0] - 1];
        const cell = row.querySelector(`td[data-column="${arguments[1]}"]`);
        return cell.classList.contains('grid-final') ? '' : cell.title;""", draft, column)


def grid_final(driver) -> tuple[str, int]:
    """(the final token's text in the grid, the grid's tau)."""
    return tuple(driver.execute_script("""
        const grid = document.querySelector('#draft-grid .draft-grid');
        const cell = grid.querySelector('td.grid-final');
        return [cell.lastChild.textContent, parseInt(grid.dataset.tau)];"""))


def click(driver, element_id: str) -> None:
    button = driver.find_element(By.ID, element_id)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", button)
    button.click()


def show_iteration(driver, n: int) -> None:
    field = driver.find_element(By.CSS_SELECTOR, "#explorer-iteration input[type='number']")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", field)
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(str(n), Keys.ENTER)
    wait_until(driver, lambda d: grid_iteration(d) == n and stage(d).get("stage") == "1"
               and d.find_element(By.CSS_SELECTOR, "#draft-tree .draft-tree").get_attribute("data-iteration") == str(n),
               f"the grid, the tree and the step-through on iteration {n}")


def walk_the_steps(driver) -> list[dict]:
    """Every stage of the shown iteration, one click of "step ▶" each; two more clicks stay on the last."""
    stages = [stage(driver)]
    total = int(stages[0]["stages"])
    while len(stages) < total:
        click(driver, "explorer-step")
        wait_until(driver, lambda d: stage(d).get("stage") == str(len(stages) + 1), f"step {len(stages) + 1}")
        stages.append(stage(driver))
    click(driver, "explorer-step")
    click(driver, "explorer-step-back")
    wait_until(driver, lambda d: stage(d).get("stage") == str(total - 1), "one step back")
    click(driver, "explorer-step-first")
    wait_until(driver, lambda d: stage(d).get("stage") == "1", "back to the first step")
    return stages


def check_steps(driver, stages: list[dict]) -> None:
    kinds = [s["kind"] for s in stages]
    tests = [s for s in stages if s["kind"] == "test"]
    assert kinds == ["drafts", *["test"] * len(tests), "decision", "distribution", "final"]
    assert stages[0]["drafts"] == "2" and f"{stages[0]['drafts']} drafts" in stages[0]["text"]
    last_at = {(s["draft"], s["end"]): s for s in tests}  # the grid's cell shows the last test ending there
    for s in tests:
        assert s["text"].startswith(f"Step {kinds.index('test') + int(s['test'])} of {len(stages)}")
        assert f"η = {s['eta']}" in s["text"]
        assert (f"h = {s['h']}" in s["text"]) if s["h"] else "h is not computed" in s["text"]
        title = grid_cell_title(driver, int(s["draft"]), int(s["end"]))
        if last_at[(s["draft"], s["end"])] is s and title:
            assert (f"h = {s['h']}" in title) if s["h"] else "skipped" in title
    failed = [s["test"] for s in tests if s["accepted"] == "false"]
    decision = stages[kinds.index("decision")]
    assert decision["failedTest"] == (failed[0] if failed else "")
    final_text, tau = grid_final(driver)
    assert decision["tau"] == stages[-1]["tau"] == str(tau)
    assert stages[-1]["finalToken"] == final_text and final_text in stages[-1]["text"]


def check_tree(driver) -> None:
    tree, grid, chart = (box(driver, css) for css in ("#draft-tree", "#draft-grid", "#distribution-plot"))
    assert tree["width"] > 200 and tree["height"] > 60
    assert tree["top"] >= grid["bottom"] - 1 or tree["left"] >= grid["right"] - 1  # below or beside the grid
    assert not overlap(tree, grid) and not overlap(tree, chart) and not overlap(box(driver, "#explorer-steps"), tree)
    assert tree["right"] <= driver.execute_script("return window.innerWidth") + 1
    assert driver.execute_script(  # the tree fits its column: no sideways scroll (K up to 4, 1024 px included)
        "const s = document.querySelector('#draft-tree .tree-scroll'); return s.scrollWidth <= s.clientWidth + 1")
    assert uncovered(driver, "#draft-tree svg") and uncovered(driver, "#explorer-steps .step-through")
    nodes = driver.execute_script("""
        const t = document.querySelector('#draft-tree .draft-tree');
        const nodes = [...t.querySelectorAll('g.tree-node')].map((g) => ({...g.dataset}));
        return {count: parseInt(t.dataset.nodes), nodes, final: {...t.querySelector('g.tree-final').dataset}};""")
    assert len(nodes["nodes"]) == nodes["count"] > 0
    prefixes = {(n["depth"], n["drafts"]) for n in nodes["nodes"]}
    assert len(prefixes) == len(nodes["nodes"])
    final_text, tau = grid_final(driver)
    path = sorted((n for n in nodes["nodes"] if n.get("accepted") == "true"), key=lambda n: int(n["depth"]))
    assert [int(n["depth"]) for n in path] == list(range(1, tau + 1))
    assert nodes["final"]["token"] == final_text and nodes["final"]["depth"] == str(tau + 1)


def check_explorer(driver, screenshots, name: str) -> None:
    show_iteration(driver, 1)
    check_tree(driver)
    check_steps(driver, walk_the_steps(driver))
    driver.save_screenshot(str(screenshots / f"explorer-steps-{name}.png"))
    click(driver, "explorer-next")  # the tree and the step-through follow the explorer's iteration
    wait_until(driver, lambda d: grid_iteration(d) == 2 and stage(d).get("stage") == "1"
               and d.find_element(By.CSS_SELECTOR, "#draft-tree .draft-tree").get_attribute("data-iteration") == "2",
               "the tree and the step-through on iteration 2")
    check_tree(driver)
    check_steps(driver, walk_the_steps(driver))


def set_presentation(driver, on: bool) -> None:
    driver.execute_script("document.querySelector('#presentation-mode input').click()")  # the sidebar may be closed
    wait_until(driver, lambda d: d.execute_script("return document.documentElement.classList.contains('presentation')")
               == on, f"presentation mode {'on' if on else 'off'}")


def test_the_step_through_and_the_tree_at_three_sizes(browser, url, screenshots):
    resize(browser, *WINDOW)
    browser.get(url)
    wait_for(browser, "#generate-button")
    tokens = browser.find_element(By.CSS_SELECTOR, "input[aria-label='number input for Max new tokens']")
    tokens.send_keys(Keys.CONTROL, "a")
    tokens.send_keys("16", Keys.ENTER)
    browser.find_element(By.CSS_SELECTOR, "#generate-button").click()
    wait_until(browser, lambda d: "block efficiency" in d.find_element(By.ID, "generate-metrics").text, "the run's end")
    browser.execute_script("""[...document.querySelectorAll('button[role="tab"]')]
        .find((b) => b.textContent.trim() === 'Iteration explorer').click();""")
    wait_for(browser, "#draft-tree .draft-tree[data-iteration='1']")
    check_explorer(browser, screenshots, "1440")

    resize(browser, *PROJECTOR)  # the sidebar stays open, as the teacher left it
    set_presentation(browser, True)
    large = browser.execute_script(
        "return parseFloat(getComputedStyle(document.querySelector('#explorer-steps .step-through')).fontSize)")
    assert large >= 20  # presentation type reaches the step-through
    check_explorer(browser, screenshots, "1024-presentation")
    set_presentation(browser, False)

    resize(browser, *NARROW)
    check_explorer(browser, screenshots, "800")
    check_predict_then_reveal(browser, screenshots)


def check_predict_then_reveal(driver, screenshots) -> None:
    """The box ticked, a test stage asks "kept or not?" with the coin and the verdict out of sight,
    and one click on the fold shows them; unticked, the stage tells at once again."""
    show_iteration(driver, 1)
    click(driver, "explorer-step")  # the first test
    wait_until(driver, lambda d: stage(d).get("kind") == "test", "the first test")
    driver.execute_script("document.querySelector('#explorer-predict input').click()")
    wait_until(driver, lambda d: stage(d).get("predict") == "true" and stage(d).get("stage") == "2", "the test, asked")
    shown = """const s = document.querySelector('#explorer-steps .step-through');
        const answer = s.querySelector('details.step-reveal p');
        return {asked: s.querySelector('.step-ask').checkVisibility(),
                fold: s.querySelector('details.step-reveal summary').checkVisibility(),
                answer: answer.checkVisibility(), text: s.innerText};"""
    before = driver.execute_script(shown)
    assert before["asked"] and before["fold"] and not before["answer"]
    assert "Kept or not?" in before["text"] and "η =" not in before["text"]
    driver.save_screenshot(str(screenshots / "explorer-predict.png"))
    summary = driver.find_element(By.CSS_SELECTOR, "#explorer-steps details.step-reveal summary")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", summary)
    summary.click()
    wait_until(driver, lambda d: d.execute_script(shown)["answer"], "the answer shown")
    assert "η =" in driver.execute_script(shown)["text"]
    driver.execute_script("document.querySelector('#explorer-predict input').click()")
    wait_until(driver, lambda d: "predict" not in stage(d) and stage(d).get("stage") == "2", "the test, told")
