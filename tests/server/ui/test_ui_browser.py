"""The memory browser in a real browser: headless Chromium (Debian's chromium and chromium-driver;
``make test`` installs them when it can) drives ``memlane ui`` running as a subprocess on a real
embedded database, through the flows a user follows: list, search, open, edit, forget, explore a
recall. Skipped, saying why, where no Chromium or chromedriver can be found."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from support.db import new_database
from support.processes import MEMLANE, free_port, server_env, wait_for_port

from memlane.pipeline.config import DatabaseConfig, EngineConfig
from memlane.pipeline.engine import Engine

pytestmark = pytest.mark.slow

# CHROMEDRIVER in the environment points at another driver (or, set to a missing path, shows the skip).
CHROMEDRIVER = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
XSS = '<script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'">'

DEMO = [
    {
        "content": "Alice prefers tabs over spaces in Python projects",
        "category": "preference",
        "tags": ["style"],
    },
    {
        "content": "We picked PostgreSQL for billing because it has transactions",
        "category": "decision",
        "priority": 5,
    },
    {
        "content": "The Friday deploy broke the login page for an hour",
        "category": "incident",
        "occurred_at": "2024-05-03",
    },
    {"content": "Bob is the on-call engineer for the payments service", "category": "person"},
]


def _skip_reason() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    if not Path(CHROMEDRIVER).exists():
        return "no chromedriver: apt-get install chromium chromium-driver (make test does it as root)"
    if CHROMIUM is None:
        return "no chromium binary on PATH: apt-get install chromium"
    return None


@pytest.fixture(scope="module")
def site(pg_root, embedder):
    """``memlane ui`` on a free loopback port over a seeded database; yields (base URL, engine config)."""
    if why := _skip_reason():
        pytest.skip(f"real-browser tests skipped: {why}")
    url = new_database(pg_root)
    data_dir = Path(tempfile.mkdtemp(prefix="memlane-ui-browser-"))
    config = EngineConfig(data_dir=data_dir, database=DatabaseConfig(url=url))

    async def seed():
        engine = Engine(config, embedder=embedder)
        await engine.open()
        try:
            await engine.remember_many([dict(m, project="acme") for m in DEMO])
            await engine.remember({"content": XSS, "project": "acme", "category": "fact"})
            # No category given and only vague words, so no automatic topic gives it one.
            await engine.remember({"content": "It was a good day", "project": "notes"})
        finally:
            await engine.close()

    asyncio.run(seed())
    port = free_port()
    proc = subprocess.Popen(
        [MEMLANE, "ui", "--port", str(port)],
        env=server_env(data_dir, MEMLANE_DATABASE__URL=url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, proc, timeout=90)
        yield f"http://127.0.0.1:{port}", config
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser(site):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(arg)
    if CHROMIUM:
        options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(5)
    try:
        yield driver
    finally:
        driver.quit()


def follow(browser, element) -> None:
    """Click something that loads a new page and wait until the old page is gone: an element looked
    up right after the click could otherwise be found on the page being left (a stale element)."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    def left(_) -> bool:
        try:
            element.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as e:
            # Chrome may say this instead of "stale" while the new document replaces the old one.
            if "does not belong to the document" in str(e):
                return True
            raise
        return False

    element.click()
    WebDriverWait(browser, 15).until(left)


def by(kind: str):
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


def test_list_open_a_project_search_and_open_a_memory(site, browser):
    base, _ = site
    browser.get(base + "/")
    assert "Projects" in browser.title
    follow(browser, browser.find_element(by("LINK_TEXT"), "acme"))
    rows = browser.find_elements(by("CSS_SELECTOR"), "#memories tbody tr")
    assert len(rows) == 5
    search = browser.find_element(by("NAME"), "q")
    search.send_keys("which database did we choose for billing")
    search.submit()
    first = browser.find_element(by("CSS_SELECTOR"), "#results tbody tr td.content a")
    assert "PostgreSQL for billing" in first.text
    follow(browser, first)
    assert "PostgreSQL for billing" in browser.find_element(by("ID"), "content").text
    assert "decision" in browser.find_element(by("ID"), "fields").text


def test_the_no_category_chip_opens_the_memories_without_one(site, browser):
    base, _ = site
    browser.get(base + "/")
    card = next(
        c for c in browser.find_elements(by("CSS_SELECTOR"), "section.card.project") if "notes" in c.text
    )
    follow(browser, card.find_element(by("PARTIAL_LINK_TEXT"), "no category"))
    rows = browser.find_elements(by("CSS_SELECTOR"), "#memories tbody tr td.content")
    assert [r.text for r in rows] == ["It was a good day"]
    assert browser.find_element(by("ID"), "uncategorized").is_selected()


def test_a_memory_with_markup_shows_as_text_and_runs_nothing(site, browser):
    base, _ = site
    browser.get(base + "/projects/acme")
    link = next(
        a for a in browser.find_elements(by("CSS_SELECTOR"), "#memories td.content a") if "<script>" in a.text
    )
    follow(browser, link)
    assert browser.find_element(by("ID"), "content").text == XSS  # the exact characters, as text
    assert "pwned" not in browser.title
    assert browser.find_elements(by("CSS_SELECTOR"), "main img") == []


def test_entities_then_an_entity_page_then_a_graph_node_to_its_memory(site, browser):
    base, _ = site
    browser.get(base + "/projects/acme")
    follow(browser, browser.find_element(by("ID"), "nav-entities"))
    follow(browser, browser.find_element(by("PARTIAL_LINK_TEXT"), "Alice"))
    assert "Alice" in browser.find_element(by("ID"), "entity-name").text
    node = browser.find_element(by("CSS_SELECTOR"), "#graph svg a[href*='/memories/']")
    href = node.get_dom_attribute("href")  # an SVG href property is not a string
    follow(browser, node)
    assert browser.current_url.endswith(href.rsplit("/", 1)[-1])
    assert "Alice" in browser.find_element(by("ID"), "content").text
    assert browser.find_element(by("CSS_SELECTOR"), "#entities a.entity").text


def test_edit_then_forget_with_the_confirmation(site, browser):
    base, _ = site
    browser.get(base + "/projects/acme?category=preference")
    follow(browser, browser.find_element(by("CSS_SELECTOR"), "#memories td.content a"))
    memory_url = browser.current_url
    form = browser.find_element(by("ID"), "edit-form")
    content = form.find_element(by("NAME"), "content")
    content.clear()
    content.send_keys("Alice prefers tabs, never spaces, in every project")
    form.find_element(by("NAME"), "tags").clear()
    form.find_element(by("NAME"), "tags").send_keys("style, editor")
    follow(browser, browser.find_element(by("ID"), "save"))
    assert browser.find_element(by("ID"), "notice").text == "Saved."
    assert (
        browser.find_element(by("ID"), "content").text == "Alice prefers tabs, never spaces, in every project"
    )
    assert "editor" in browser.find_element(by("ID"), "fields").text

    follow(browser, browser.find_element(by("ID"), "pin"))
    assert browser.find_element(by("ID"), "pin").text == "Unpin"

    follow(browser, browser.find_element(by("ID"), "forget"))
    assert "Forget this memory?" in browser.find_element(by("TAG_NAME"), "h1").text
    follow(browser, browser.find_element(by("LINK_TEXT"), "Cancel"))  # cancelling keeps it
    assert browser.current_url == memory_url
    follow(browser, browser.find_element(by("ID"), "forget"))
    follow(browser, browser.find_element(by("ID"), "confirm-forget"))
    assert browser.find_element(by("ID"), "notice").text == "The memory was forgotten."
    assert "tabs, never spaces" not in browser.find_element(by("ID"), "memories").text
    browser.get(memory_url)
    assert "Not found" in browser.find_element(by("TAG_NAME"), "h1").text


def test_recall_explorer_draws_the_trace(site, browser):
    base, _ = site
    browser.get(base + "/recall?project=acme")
    q = browser.find_element(by("NAME"), "query")
    q.send_keys("who is on call for payments?")
    follow(browser, browser.find_element(by("ID"), "run-recall"))
    stages = [
        r.find_element(by("TAG_NAME"), "strong").text
        for r in browser.find_elements(by("CSS_SELECTOR"), "#stages tr.stage-row")
    ]
    assert stages[0] == "intent" and "retrieval" in stages and "assembly" in stages
    bars = browser.find_elements(by("CSS_SELECTOR"), "#trace-picture g.stage")
    assert len(bars) == len(stages)
    assert browser.find_elements(by("CSS_SELECTOR"), "#stages .badge.status.skipped")  # offline: no LLM
    assert "on-call engineer" in browser.find_element(by("ID"), "returned").text
    header = browser.find_element(by("CSS_SELECTOR"), "#candidates thead").text.lower()
    assert "vector" in header and "keyword" in header
    browser.get(base + "/stats")
    assert browser.find_elements(by("ID"), "latency-chart") and browser.find_elements(
        by("ID"), "memories-chart"
    )
