"""agents.view's page in headless Chromium: curves drawn, filters, the token view's marking, deep links.

Chromium and its driver come from the Debian packages (``apt-get install chromium chromium-driver``);
Selenium is pointed at them explicitly, so it never looks for a browser on the network.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from agents.report.page import build_report, render_html
from agents.trajectory import write_trajectories
from tests.agents.test_view import FakeTokenizer, hand_built_trajectory

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
EVAL_EPISODES = 130  # more than one page of the list (100 rows)
METRICS = [
    {"step": 0, "eval/success_rate": 0.25, "eval/success_stderr": 0.05, "eval/success_moves_1-3": 0.25},
    {"step": 1, "reward/mean": 1.0, "reward/std": 0.5, "actor/kl_ref": 0.0, "actor/entropy": 0.9},
    {"step": 2, "reward/mean": 2.0, "reward/std": 0.5, "actor/kl_ref": 0.01, "actor/entropy": 0.8},
    {"step": 3, "reward/mean": None, "actor/kl_ref": 0.02, "actor/entropy": 0.7},
    {"step": 4, "reward/mean": 3.0, "eval/success_rate": 0.5, "eval/success_stderr": 0.05, "actor/entropy": 0.6},
]


@pytest.fixture(scope="module")
def browser():
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip(f"needs {CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,1600"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def report_url(tmp_path_factory) -> str:
    """A run with 130 held-out episodes at step 4 (every third solved, seeds 100-229) and 2 samples at step 1."""
    run = tmp_path_factory.mktemp("run")
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in METRICS) + "{cut short")
    evaluations = [hand_built_trajectory(seed=100 + i, success=i % 3 == 0) for i in range(EVAL_EPISODES)]
    evaluations[1].env_id = "frozenlake"
    write_trajectories(run / "evaluations" / "step_000004.jsonl", evaluations)
    sample = {"env_id": "sokoban", "seed": 7, "success": True, "episode_return": 10.9, "termination": "terminated"}
    sample |= {"num_turns": 1, "turn_rewards": [10.9], "num_invalid_actions": 0, "sampled_tokens": 2}
    sample |= {"messages": [{"role": "user", "content": "#P_X_O#"}, {"role": "assistant", "content": "Right"}]}
    (run / "samples").mkdir()
    (run / "samples" / "step_000001.jsonl").write_text(json.dumps(sample) + "\n" + json.dumps({**sample, "seed": 8}))
    page = run / "report.html"
    page.write_text(render_html(build_report(run, tokenizer=FakeTokenizer())))
    return page.as_uri()


def open_page(browser, url: str) -> None:
    browser.get("about:blank")  # a fresh load, also when only the #fragment differs
    browser.get(url)
    assert browser.execute_script("return document.body.dataset.ready") == "1"


def visible_rows(browser) -> list[int]:
    return [
        int(i)
        for i in browser.execute_script(
            "return [...document.querySelectorAll('#episode-list tbody tr')].map(r => r.dataset.index)"
        )
    ]


def test_the_curves_draw_one_point_per_logged_finite_value(browser, report_url: str) -> None:
    open_page(browser, report_url)
    counts = browser.execute_script(
        "const n = {}; for (const p of document.querySelectorAll('#curves circle.pt'))"
        " n[p.dataset.metric] = (n[p.dataset.metric] || 0) + 1; return n;"
    )
    # reward/mean is null at step 3: a gap; actor/kl_ref's 0.0 is a point
    assert counts == {
        "eval/success_rate": 2,
        "reward/mean": 3,
        "actor/kl_ref": 3,
        "actor/entropy": 4,
        "eval/success_moves_1-3": 1,
    }
    assert browser.execute_script("return document.querySelectorAll('#curves path.line').length") == 5
    assert browser.execute_script("return document.querySelectorAll('#curves path.band').length") == 2
    notes = browser.execute_script("return document.getElementById('notes').textContent")
    assert "metrics.jsonl: skipped 1 malformed line(s)" in notes


def test_the_list_is_paged_and_the_filters_count_the_visible_episodes(browser, report_url: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    open_page(browser, report_url)
    assert visible_rows(browser) == list(range(100))
    browser.find_element(By.ID, "page-next").click()
    assert visible_rows(browser) == list(range(100, EVAL_EPISODES + 2))
    Select(browser.find_element(By.ID, "filter-success")).select_by_value("yes")
    solved = [i for i in range(EVAL_EPISODES) if i % 3 == 0] + [EVAL_EPISODES, EVAL_EPISODES + 1]
    assert visible_rows(browser) == solved  # back on the first page
    assert browser.find_element(By.ID, "episode-count").text == f"{len(solved)} of {EVAL_EPISODES + 2} episodes"
    step_select = Select(browser.find_element(By.ID, "filter-source"))
    assert [o.text for o in step_select.options] == ["all", "samples · step 1", "evaluations · step 4"]
    step_select.select_by_value("samples/step_000001")
    assert visible_rows(browser) == [EVAL_EPISODES, EVAL_EPISODES + 1]
    Select(browser.find_element(By.ID, "filter-source")).select_by_value("")
    Select(browser.find_element(By.ID, "filter-success")).select_by_value("")
    Select(browser.find_element(By.ID, "filter-env")).select_by_value("frozenlake")
    assert visible_rows(browser) == [1]
    Select(browser.find_element(By.ID, "filter-env")).select_by_value("")
    browser.find_element(By.ID, "filter-seed").send_keys("142")
    assert visible_rows(browser) == [42]


def test_the_token_view_marks_exactly_the_sampled_tokens(browser, report_url: str) -> None:
    from selenium.webdriver.common.by import By

    open_page(browser, report_url)
    browser.find_element(By.CSS_SELECTOR, '#episode-list tr[data-index="5"]').click()  # opens #episode=5
    assert browser.execute_script("return location.hash") == "#episode=5"
    t = hand_built_trajectory(seed=105)
    from selenium.webdriver.support.ui import WebDriverWait

    # the page draws the episode on its hashchange event, which the browser fires after the click returns
    marks = WebDriverWait(browser, 10).until(
        lambda b: b.execute_script(
            "return [...document.querySelectorAll('#tokens [data-mask]')]"
            ".map(s => [s.dataset.mask, s.textContent, s.title])"
        )
    )
    assert [int(m) for m, _, _ in marks] == [0] * len(t.prompt_ids) + t.response_mask
    assert "".join(text for _, text, _ in marks) == FakeTokenizer().decode(t.prompt_ids + t.response_ids)
    sampled_titles = [title for m, _, title in marks if m == "1"]
    expected = [lp for lp, m in zip(t.rollout_logprobs, t.response_mask, strict=True) if m]
    assert [float(title.split()[1]) for title in sampled_titles] == expected
    values = [v for v, m in zip(t.rollout_values, t.response_mask, strict=True) if m]
    assert [float(title.split(" · value ")[1]) for title in sampled_titles] == values
    assert all(title == "" for m, _, title in marks if m == "0")
    # each turn's reward sits right after that turn's last sampled token
    rewards = browser.execute_script(
        "return [...document.querySelectorAll('#tokens .reward')].map(r => "
        "[[...document.querySelectorAll('#tokens [data-mask]')].indexOf(r.previousElementSibling), r.textContent])"
    )
    prompt = len(t.prompt_ids)
    assert rewards == [[prompt + 3, "reward -0.10"], [prompt + 14, "reward 10.90"]]


def test_a_deep_link_opens_that_episodes_token_view(browser, report_url: str) -> None:
    open_page(browser, report_url + "#episode=77")
    assert browser.execute_script("return document.getElementById('detail').hidden") is False
    assert browser.execute_script("return document.getElementById('token-view').hidden") is False
    assert browser.execute_script("return document.getElementById('detail-title').textContent").startswith(
        "Episode 77: sokoban, seed 177"
    )
    browser.execute_script("location.hash = 'episode=999'")
    assert browser.execute_script("return document.getElementById('detail-title').textContent") == (
        "No episode 999: the report has 132"
    )
    browser.execute_script("location.hash = 'episode=131'")  # a sample: no token ids, so its turns
    assert browser.execute_script("return document.getElementById('detail-title').textContent").startswith(
        "Episode 131: sokoban, seed 8"
    )
    assert "no token ids" in browser.execute_script("return document.getElementById('tokens').textContent")
    assert browser.execute_script("return document.querySelectorAll('#turns .turn pre.obs')[0].textContent") == (
        "#P_X_O#"
    )


def test_a_screenshot_of_an_open_episode(browser, report_url: str, tmp_path: Path) -> None:
    open_page(browser, report_url + "#episode=0")
    path = tmp_path / "report.png"
    assert browser.save_screenshot(str(path))
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, browser.execute_script("return window.innerHeight"))
    assert len(data) > 20_000  # a page of drawing and text, not a blank image
