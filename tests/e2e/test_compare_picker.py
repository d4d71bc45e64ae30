"""The compare picker: a typeahead on each side (a run's id, scenario, policy or label) and suggested
pairs, the same scenario under two policies, newest first; on a desktop and on a phone."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.factories import RunFactory, refund_too_old_starter, refund_too_old_structured

SIZES = [{"width": 1400, "height": 900}, {"width": 390, "height": 844}]


@pytest.mark.parametrize("size", SIZES, ids=["desktop", "phone"])
def test_the_picker_finds_runs_as_one_types_and_compares_the_two_picked(signed_in: Page, live_server, size):
    page = signed_in
    page.set_viewport_size(size)
    starter = refund_too_old_starter()
    structured = refund_too_old_structured()
    RunFactory(scenario="lookup-flaky", policy_name="patient")
    page.goto(f"{live_server.url}/compare/")
    expect(page.locator("select")).to_have_count(0)
    run_a = page.get_by_label("Run A")
    run_a.fill("refund")
    suggestions = page.locator("#suggest-a [data-pick]")
    expect(suggestions).to_have_count(2)  # the two refund runs, not the lookup one
    expect(suggestions.first).to_contain_text(f"#{structured.pk} · structured · finished · pass · simulated")
    page.locator(f"#suggest-a [data-run='{starter.pk}']").click()
    expect(run_a).to_have_value(str(starter.pk))
    expect(page.locator("#suggest-a")).to_be_hidden()

    run_b = page.get_by_label("Run B")
    run_b.fill("struct")
    page.locator(f"#suggest-b [data-run='{structured.pk}']").click()
    expect(run_b).to_have_value(str(structured.pk))
    page.get_by_role("button", name="Compare", exact=True).click()
    expect(page).to_have_url(re.compile(rf"a={starter.pk}&b={structured.pk}"))
    expect(page.locator(".compare-heads .run-card")).to_have_count(2)
    assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]

    page.goto(f"{live_server.url}/compare/")
    page.get_by_label("Run A").fill("no such thing")
    expect(page.locator("#suggest-a")).to_contain_text("No run matches “no such thing”.")


@pytest.mark.parametrize("size", SIZES, ids=["desktop", "phone"])
def test_the_picker_suggests_one_scenario_under_two_policies_newest_first(signed_in: Page, live_server, size):
    page = signed_in
    page.set_viewport_size(size)
    old_starter = refund_too_old_starter()
    refund_too_old_structured()
    starter = refund_too_old_starter()
    patient = RunFactory(scenario="lookup-flaky", policy_name="patient")
    impatient = RunFactory(scenario="lookup-flaky", policy_name="impatient")
    RunFactory(scenario="lookup-empty", policy_name="patient")  # one policy only: no pair
    page.goto(f"{live_server.url}/compare/")
    pairs = page.locator(".suggested-pairs li")
    expect(pairs).to_have_count(2)
    expect(pairs.nth(0)).to_contain_text("lookup-flaky: patient vs impatient")
    expect(pairs.nth(1)).to_contain_text("refund-too-old: structured vs starter")
    expect(pairs.nth(1)).not_to_contain_text(f"#{old_starter.pk} ")
    pairs.nth(0).get_by_role("link").click()
    expect(page).to_have_url(re.compile(rf"a={patient.pk}&b={impatient.pk}"))
    expect(page.locator(".compare-heads .run-card")).to_have_count(2)
    assert starter.pk > old_starter.pk
    assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
