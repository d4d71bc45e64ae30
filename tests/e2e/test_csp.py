"""The pages work under the Content Security Policy: Chromium reports no violation on any main page,
nor while htmx swaps fragments in (filtering, polling, a review, a new policy), nor in the admin."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.factories import ExperimentFactory, RunFactory, guard_stop, refund_too_old_starter
from tracer.models import Run

# Every violation the page sees, from the DOM event (the console message says the same in words).
LISTEN = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  const where = `${e.sourceFile}:${e.lineNumber}`;
  window.cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${where}`);
});
"""


@pytest.fixture
def watched(signed_in: Page):
    """The signed-in page, recording CSP violations from the DOM and the console."""
    console: list[str] = []
    signed_in.on(
        "console",
        lambda msg: console.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    signed_in.add_init_script(LISTEN)
    yield signed_in, console


def violations(page: Page, console: list[str]) -> list[str]:
    return [*page.evaluate("window.cspViolations || []"), *console]


def test_no_page_reports_a_csp_violation(watched, live_server):
    page, console = watched
    starter = refund_too_old_starter()
    stopped = guard_stop()
    experiment = ExperimentFactory()
    running = RunFactory(experiment=experiment, status=Run.Status.RUNNING)
    base = live_server.url
    for path in (
        "/",
        f"/runs/{starter.pk}/",
        f"/runs/{running.pk}/",  # polls for new steps
        f"/compare/?a={starter.pk}&b={stopped.pk}",
        "/policies/",
        "/stops/",
        "/launch/",
        f"/experiments/{experiment.pk}/",  # polls its progress
        "/admin/",
        f"/admin/tracer/run/{starter.pk}/change/",
        "/admin/tracer/experiment/",  # its archive action
    ):
        page.goto(base + path)
        page.wait_for_timeout(1300)  # pollers fire every second: let one request go out and come back
        assert violations(page, console) == [], path

    # htmx swaps: filter the runs list, review a stop, create a policy
    page.goto(base + "/")
    page.get_by_label("Search").fill("refund")
    expect(page).to_have_url(re.compile(r"[?&]q=refund"))
    assert violations(page, console) == [], "runs filter"

    page.goto(base + "/stops/")
    case = page.locator(f"#stop-{stopped.pk}")
    case.get_by_label("expected", exact=True).check()
    case.get_by_role("button", name="Save review").click()
    expect(case.locator("div.reviewed")).to_be_visible()
    assert violations(page, console) == [], "stop review"

    page.goto(base + "/policies/variants/new/")
    form = page.locator("#policy-form")
    form.get_by_label("Base preset").select_option("starter")  # the form refills itself
    expect(form.get_by_label("Error format")).to_have_value("bare")
    form.get_by_label("Name").fill("csp-check")
    form.get_by_role("button", name="Create policy").click()
    expect(form.locator(".success")).to_contain_text("csp-check")
    assert violations(page, console) == [], "policy create"


def test_an_inline_script_would_be_reported(watched, live_server):
    """The listener works: a script the page itself tries to run inline is refused and recorded."""
    page, console = watched
    page.goto(live_server.url + "/")
    page.evaluate(
        "() => { const s = document.createElement('script');"
        " s.textContent = 'window.ran = 1'; document.body.append(s); }"
    )
    page.wait_for_timeout(200)
    assert page.evaluate("window.ran") is None
    assert any("script-src" in v for v in violations(page, console))
