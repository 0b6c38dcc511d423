"""The /web page in a real headless Chromium (Debian's, driven by Playwright): a person plays an
oracle episode through the page; each tab has its own episode. Screenshots are kept in
$SQLENV_ARTIFACTS (default: artifacts/) as test artifacts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import REPO_ROOT, RunningServer
from sqlenv.env.verifier import format_answer

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
LAUNCH_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


def artifacts_dir() -> Path:
    path = Path(os.environ.get("SQLENV_ARTIFACTS", REPO_ROOT / "artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        message = "Debian chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_FLAGS)
        yield browser
        browser.close()


def test_a_person_plays_an_oracle_episode_in_the_browser(
    demo_server: RunningServer, demo_dataset, browser
) -> None:
    record = next(
        r for r in demo_dataset.split("train") if r.answer_type == "table" and len(r.tables_involved) >= 2
    )
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.goto(demo_server.url + "/web")
    page.wait_for_selector("#question-select option[value='" + record.question_id + "']", state="attached")
    page.select_option("#question-select", record.question_id)
    page.click("#new-episode")
    # Wait for the episode itself (the placeholder text is already long, so wait on its content).
    page.wait_for_function("q => document.querySelector('#question').textContent === q", arg=record.question)
    page.wait_for_function("document.querySelector('#budget').textContent === '15'")
    assert page.inner_text("#budget") == "15"

    expected_total = 0.0
    for table in record.tables_involved:
        page.click(f"#tables button[data-kind='DESCRIBE'][data-table='{table}']")
        page.wait_for_function(
            f"document.querySelectorAll('#transcript li').length >= {record.tables_involved.index(table) + 1}"
        )
        assert f"table {table}" in page.inner_text("#result")
        expected_total += float(page.inner_text("#last-reward"))
    page.click(f"#tables button[data-kind='SAMPLE'][data-table='{record.tables_involved[0]}']")
    page.wait_for_function(
        f"document.querySelectorAll('#transcript li').length >= {len(record.tables_involved) + 1}"
    )
    assert page.locator("#result table.result").count() == 1
    expected_total += float(page.inner_text("#last-reward"))

    page.fill("#sql", record.gold_sql)
    page.click("#run-query")
    page.wait_for_function(
        f"document.querySelectorAll('#transcript li').length >= {len(record.tables_involved) + 2}"
    )
    headers = page.locator("#result table.result th").all_inner_texts()
    assert headers == list(record.gold_columns)
    assert page.locator("#result table.result tbody tr").count() == min(len(record.gold_answer), 20)
    expected_total += float(page.inner_text("#last-reward"))

    page.fill("#answer-input", format_answer(record.gold_answer, record.answer_type))
    page.click("#answer-btn")
    page.wait_for_selector("#verdict.correct")
    expected_total += float(page.inner_text("#last-reward"))
    assert page.inner_text("#last-reward") == "1.000"
    assert float(page.inner_text("#total")) == pytest.approx(expected_total, abs=0.002)
    assert 1.0 <= float(page.inner_text("#total")) <= 1.3
    assert page.locator("#transcript li").count() == len(record.tables_involved) + 3
    assert page.is_disabled("#run-query") and page.is_disabled("#answer-btn")
    page.screenshot(path=str(artifacts_dir() / "web_oracle_episode.png"), full_page=True)
    page.close()


def test_each_tab_has_its_own_episode(demo_server: RunningServer, browser) -> None:
    context = browser.new_context()
    first, second = context.new_page(), context.new_page()
    for page, qid in ((first, "demo-0000"), (second, "demo-0001")):
        page.goto(demo_server.url + "/web")
        page.wait_for_selector(f"#question-select option[value='{qid}']", state="attached")
        page.select_option("#question-select", qid)
        page.click("#new-episode")
        page.wait_for_function("document.querySelector('#budget').textContent === '15'")
    first.fill("#answer-input", "definitely wrong")
    first.click("#answer-btn")
    first.wait_for_selector("#verdict.wrong")
    # The second tab's episode is untouched: it can still act, with its full budget.
    assert second.inner_text("#budget") == "15"
    second.fill("#sql", "SELECT 1")
    second.click("#run-query")
    second.wait_for_function("document.querySelector('#budget').textContent === '14'")
    assert second.inner_text("#verdict") == ""
    assert first.inner_text("#question") != second.inner_text("#question")
    context.close()


def test_errors_show_on_the_page_and_the_episode_goes_on(demo_server: RunningServer, browser) -> None:
    page = browser.new_page()
    page.goto(demo_server.url + "/web")
    page.wait_for_selector("#question-select option:nth-child(2)", state="attached")
    page.click("#new-episode")
    page.wait_for_function("document.querySelector('#budget').textContent === '15'")
    page.fill("#sql", "DROP TABLE books")
    page.click("#run-query")
    page.wait_for_selector("#result .error")
    assert "not allowed" in page.inner_text("#result")
    assert page.is_enabled("#run-query")
    page.screenshot(path=str(artifacts_dir() / "web_error.png"), full_page=True)
    page.close()
