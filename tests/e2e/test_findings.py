"""A person reading what diagnosis found in the demo experiment's runs (every lesson scenario under starter
and structured): the run page's findings panel, the Tools page with its message lint and advice, the
Findings page with its patterns; on a desktop, on a 390 px phone and in dark mode."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from agents.scenarios import registry
from tests.e2e.conftest import save_screenshot
from tracer.execution import run_execute
from tracer.experiments import run_create
from tracer.models import PolicyVariant, Run

LESSONS = [name for name, pack in registry().pack_of.items() if pack.name == "lessons"]


@pytest.fixture
def demo(transactional_db) -> dict[str, Run]:
    """The demo experiment's runs, recorded in-process by the service a worker calls."""
    runs = {}
    for policy in ("starter", "structured"):
        variant = PolicyVariant.objects.get(name=policy)
        for scenario in LESSONS:
            runs[f"{scenario}/{policy}"] = run_execute(run_id=run_create(scenario=scenario, policy=variant).pk)
    return runs


def no_sideways_scroll(page: Page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")


def test_the_run_page_names_the_mistakes_and_marks_their_steps(signed_in: Page, live_server, demo):
    page = signed_in
    page.goto(f"{live_server.url}/runs/{demo['refund-too-old/starter'].pk}/")
    panel = page.locator("#run-findings")
    expect(panel.locator(".finding-head .badge")).to_have_text(["retried-refusal", "vague-error"])
    expect(panel).to_contain_text("retry_on: transient")
    expect(panel).to_contain_text("Refunds close after 30 days")  # the rewrite, from the tool's own message
    panel.locator(".finding").first.get_by_role("link", name="step 1").click()
    expect(page).to_have_url(f"{live_server.url}/runs/{demo['refund-too-old/starter'].pk}/#step-1")
    expect(page.locator("#step-1 .step-head a.badge.finding")).to_have_text(["retried-refusal", "vague-error"])
    save_screenshot(page, "findings-run.png")
    page.goto(f"{live_server.url}/runs/{demo['refund-too-old/structured'].pk}/")
    expect(page.locator("#run-findings")).to_contain_text("None of the lessons' mistakes found")


def test_the_tools_page_shows_a_tools_lint_and_advice_and_narrows_to_a_policy(signed_in: Page, live_server, demo):
    page = signed_in
    page.get_by_role("link", name="Tools", exact=True).click()
    card = page.locator("section.tool-card[data-tool=process_refund]")
    expect(card.locator(".advice-item").filter(has_text="retry_on: transient")).to_contain_text("sure")
    worst = card.locator("table.lint tbody tr").first
    expect(worst.locator("code.template")).to_have_text("Error")
    expect(worst.locator("code.rewrite")).to_contain_text("Refunds close after 30 days")
    expect(card.locator(".tool-findings")).to_contain_text("retried-refusal")
    page.locator("#tool-filters").get_by_label("Tool").select_option("process_refund")
    expect(page.locator("section.tool-card")).to_have_count(1)
    save_screenshot(page, "tools.png")
    page.goto(f"{live_server.url}/tools/")
    # the filters swap the list in place and keep the address
    page.locator("#tool-filters").get_by_label("Policy").select_option("structured")
    expect(page).to_have_url(
        f"{live_server.url}/tools/?source=&scenario=&policy=structured&started_from=&started_to=&tool="
    )
    card = page.locator("section.tool-card[data-tool=process_refund]")
    expect(card.locator(".tool-findings")).not_to_contain_text("retried-refusal")
    expect(card.locator(".tool-findings")).not_to_contain_text("vague-error")
    expect(card.locator("table.lint tbody tr").first.locator("code.template")).not_to_have_text("Error")


def test_the_findings_page_shows_each_kind_its_runs_and_the_patterns(signed_in: Page, live_server, demo):
    page = signed_in
    page.get_by_role("link", name="Findings", exact=True).click()
    expect(page.locator("#kind-retried-refusal td.num").first).not_to_have_text("0")
    page.locator("#kind-empty-as-error").get_by_role("link", name="empty-as-error").click()
    expect(page.locator("#finding-list-head")).to_contain_text("empty-as-error")
    expect(page.locator("#finding-list .finding-runs li")).to_have_count(1)
    expect(page.locator("#kind-empty-as-error")).to_have_attribute("aria-current", "true")
    expect(page).to_have_url(f"{live_server.url}/findings/?kind=empty-as-error")
    patterns = page.locator("table.patterns tbody tr")
    expect(patterns.first.locator("td").nth(2)).not_to_be_empty()  # the tool that failed last
    expect(patterns.first.locator("td.share")).to_contain_text("%")
    save_screenshot(page, "findings.png")
    patterns.first.get_by_role("link").click()
    expect(page.locator("#run-findings")).to_be_visible()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_both_pages_fit_a_390_px_phone_in_light_and_dark(browser, live_server, user, demo, scheme):
    from tests.e2e.conftest import PASSWORD, USERNAME

    context = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme=scheme)
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/login/")
        page.get_by_label("Username").fill(USERNAME)
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        for path in ("/tools/", "/findings/", f"/runs/{demo['stuck-model/starter'].pk}/"):
            page.goto(f"{live_server.url}{path}")
            expect(page.locator("h1")).to_be_visible()
            no_sideways_scroll(page)
        dark = page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches")
        assert dark is (scheme == "dark")
    finally:
        context.close()
