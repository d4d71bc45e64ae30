"""The Policies page at a desk (1400 × 900) and on a phone (390 × 844): the matrix as a heat map short
enough to read at a glance, totals that fit without scrolling sideways, and the new-variant form on its
own page showing the base preset's values."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from agents.policies import PRESET_NAMES, PRESETS
from agents.scenarios import scenario_names
from tests.factories import RunFactory
from tracer.models import Run

# The default page with every built-in scenario under every preset, at 1400 × 900: its heights before and
# after the heat map are in docs/dashboard.md.
HEIGHT_MAX = 2_000


@pytest.fixture
def every_scenario_under_every_preset(db):
    for i, scenario in enumerate(scenario_names()):
        for j, policy in enumerate(PRESET_NAMES):
            verdict = [Run.Verdict.PASS, Run.Verdict.FAIL, ""][(i + j) % 3]
            RunFactory(scenario=scenario, policy_name=policy, verdict=verdict, tool_call_count=3, wasted_retry_count=j)


def scroll_width(page: Page, selector: str) -> tuple[int, int]:
    return page.evaluate(
        f"[document.querySelector('{selector}').scrollWidth, document.querySelector('{selector}').clientWidth]"
    )


def test_at_1400_the_page_is_short_and_the_totals_do_not_scroll_sideways(
    signed_in: Page, every_scenario_under_every_preset
):
    page = signed_in
    page.goto(f"{page.url.rstrip('/')}/policies/")
    expect(page.locator("#policy-matrix")).to_contain_text("refund-too-old")
    height = page.evaluate("document.documentElement.scrollHeight")
    print(f"policies page height at 1400x900: {height} px")
    assert height < HEIGHT_MAX
    inner, frame = scroll_width(page, "#policy-summary .table-wrap")
    assert inner <= frame, f"the totals need {inner} px in a {frame} px frame"
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    # a cell says its figures in words, not by colour alone, and opens its runs
    cell = page.locator("#policy-matrix a.heat").first
    expect(cell).to_have_attribute("title", re.compile(r"\d+/\d+ judged passed|no verdict"))
    expect(page.locator("#policy-matrix a.heat.unjudged").first).to_have_attribute(
        "aria-label", re.compile("no verdict, unjudged")
    )
    cell.click()
    expect(page).to_have_url(re.compile(r"/\?scenario=.+&policy=.+"))


def test_at_390_the_page_does_not_scroll_sideways(browser, live_server, user, every_scenario_under_every_preset):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/policies/")
        page.get_by_label("Username").fill("admin")
        page.get_by_label("Password").fill("a-long-test-password")
        page.get_by_role("button", name="Log in").click()
        expect(page.locator("#policy-matrix")).to_contain_text("refund-too-old")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        inner, frame = scroll_width(page, "#policy-summary .table-wrap")  # the totals fold into cards
        assert inner <= frame, f"the totals need {inner} px in a {frame} px frame"
        expect(page.locator("#policy-summary table.totals tbody td").first).to_have_css("display", "flex")
    finally:
        context.close()


def test_the_new_variant_form_shows_the_base_presets_values_and_follows_a_new_base(signed_in: Page, live_server):
    page = signed_in
    page.goto(f"{live_server.url}/policies/")
    page.get_by_role("link", name="New policy variant").click()
    form = page.locator("#policy-form")
    structured, starter = PRESETS["structured"].settings(), PRESETS["starter"].settings()
    expect(form.get_by_label("Base preset")).to_have_value("structured")
    expect(form.get_by_label("Error format")).to_have_value(structured["error_format"])
    expect(form.get_by_label("Consecutive-error limit (0: off)")).to_have_value(
        str(structured["consecutive_error_limit"])
    )
    expect(form.get_by_label("Stop on fatal")).to_have_value("true")
    form.get_by_label("Name").fill("from-starter")
    form.get_by_label("Base preset").select_option("starter")
    expect(form.get_by_label("Error format")).to_have_value(starter["error_format"])
    expect(form.get_by_label("Retry", exact=True)).to_have_value(starter["retry_on"])
    expect(form.get_by_label("Stop on fatal")).to_have_value("false")
    expect(form.get_by_label("Name")).to_have_value("from-starter")  # what was typed stays
    form.get_by_role("button", name="Create policy").click()
    expect(form.locator(".success")).to_contain_text("Policy from-starter created.")

    # the variants' own page: the whole table in view, and archiving one keeps it listed, marked
    page.goto(f"{live_server.url}/policies/variants/")
    inner, frame = scroll_width(page, "#policy-list")
    assert inner <= frame, f"the variants need {inner} px in a {frame} px frame"
    row = page.locator("#variant-from-starter")
    row.get_by_role("button", name="Archive").click()
    expect(row.locator(".badge.archived")).to_have_text("archived")
    expect(row.get_by_role("button", name="Unarchive")).to_be_visible()
