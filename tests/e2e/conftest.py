"""Browser tests: real Chromium (Debian's package) driven by Playwright against a live server.

A failing test leaves a screenshot of its page in ``test-artifacts/`` (or ``RLT_TEST_ARTIFACTS``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop in this thread; the test's own ORM calls are still
# synchronous and safe, so Django's async-context guard is lifted for browser tests.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import Page, sync_playwright

from tests.conftest import ARTIFACTS

BASE_DIR = Path(__file__).resolve().parents[2]
SCREENSHOTS = BASE_DIR / "docs" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
USERNAME, PASSWORD = "admin", "a-long-test-password"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """Mark the browser tests and run them last, after pytest-django has put the tests in its order.

    The session's Playwright loop keeps running on the main thread from the first browser test to
    the end of the session, and ``asyncio.run`` (or ``anyio.run``) refuses to start there: a test run
    after a browser test that starts an event loop would fail only in the whole suite's order."""
    here = Path(__file__).parent
    browser = [item for item in items if Path(str(item.fspath)).parent == here]
    for item in browser:
        item.add_marker(pytest.mark.e2e)
    if browser:
        last = set(browser)
        items[:] = [item for item in items if item not in last] + browser


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.rlt_call_report = report
    return report


@pytest.fixture(scope="session")
def browser():
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("the browser tests need Chromium: apt-get install chromium")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    report = getattr(request.node, "rlt_call_report", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()


@pytest.fixture
def user(django_user_model):
    """The dashboard's login as ``ensure_login`` makes it: a superuser, who may launch and create policies."""
    return django_user_model.objects.create_superuser(USERNAME, email="", password=PASSWORD)


@pytest.fixture
def signed_in(page: Page, live_server, user) -> Page:
    """A page logged in through the login form, as a person would."""
    page.goto(f"{live_server.url}/")
    assert "/login/" in page.url
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/")
    return page


def save_screenshot(page: Page, name: str) -> None:
    """A README screenshot, made by the browser tests: into test-artifacts/ on every run, and into
    docs/screenshots/ only when RLT_UPDATE_SCREENSHOTS=1, so a test run leaves the work tree clean."""
    folder = SCREENSHOTS if os.environ.get("RLT_UPDATE_SCREENSHOTS") == "1" else ARTIFACTS / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name), full_page=True)
