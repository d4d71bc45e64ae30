"""The runs list in Chromium, as a person uses it: type a search, click column headers to sort, go
Back, watch an active run's row change while the rest of the table stays as it is, and see a run
started after the page loaded come in at the top."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from agents.events import RunEnd
from tests.factories import RunFactory, ok_attempt, tool_step
from tracer import recording
from tracer.models import Run


def test_search_sort_and_back_after_a_sort(signed_in: Page, live_server):
    page = signed_in
    RunFactory(scenario="refund-too-old", step_count=4, final_answer="Refunds close after 30 days.")
    RunFactory(scenario="lookup-flaky", step_count=9, error="upstream returned 503")
    RunFactory(scenario="refund-bad-id", step_count=2, final_answer="No order 0781 on this account.")
    page.goto(f"{live_server.url}/")
    rows = page.locator("#run-rows tr")
    scenarios = page.locator("#run-rows tr td:nth-child(3)")
    expect(rows).to_have_count(3)

    page.get_by_role("textbox", name="Search").fill("REFUND")  # scenario, any case; htmx after a pause
    expect(page).to_have_url(re.compile(r"q=REFUND"))
    expect(scenarios).to_have_text(["refund-bad-id", "refund-too-old"])
    page.get_by_role("textbox", name="Search").fill("returned 503")  # an error message
    expect(scenarios).to_have_text(["lookup-flaky"])
    page.get_by_role("textbox", name="Search").fill("")
    expect(rows).to_have_count(3)

    page.get_by_role("link", name="Steps").click()  # most steps first
    expect(page).to_have_url(re.compile(r"sort=-steps"))
    expect(scenarios).to_have_text(["lookup-flaky", "refund-too-old", "refund-bad-id"])
    expect(page.locator("th[aria-sort=descending]")).to_have_text(re.compile("Steps"))
    page.get_by_role("link", name=re.compile("^Steps")).click()  # again: fewest first
    expect(page).to_have_url(re.compile(r"sort=steps"))
    expect(scenarios).to_have_text(["refund-bad-id", "refund-too-old", "lookup-flaky"])

    page.get_by_role("textbox", name="Search").fill("refund")  # a search keeps the sort
    expect(page).to_have_url(re.compile(r"sort=steps.*q=refund|q=refund.*sort=steps"))
    expect(scenarios).to_have_text(["refund-bad-id", "refund-too-old"])

    sent_again = []
    listen = lambda request: sent_again.append(request.url) if "q=refund" in request.url else None  # noqa: E731
    page.on("request", listen)
    page.locator("#run-rows a").first.click()  # the search box loses its focus to the click
    expect(page.get_by_role("heading", level=1)).to_contain_text("Run #")
    page.remove_listener("request", listen)
    assert sent_again == [], "the search was sent again as its box lost focus, racing the click"
    page.go_back()
    expect(page.get_by_role("heading", level=1)).to_have_text("Runs")
    expect(scenarios).to_have_text(["refund-bad-id", "refund-too-old"])
    expect(page.get_by_role("textbox", name="Search")).to_have_value("refund")
    expect(page.locator("th[aria-sort=ascending]")).to_have_text(re.compile("Steps"))


def test_an_active_runs_row_changes_in_place_and_its_polling_stops_when_it_ends(signed_in: Page, live_server):
    page = signed_in
    finished = RunFactory(scenario="refund-too-old")
    active = RunFactory(scenario="lookup-flaky", status=Run.Status.RUNNING, stop_reason="", verdict="")
    page.goto(f"{live_server.url}/")
    row = page.locator(f"#run-row-{active.pk}")
    expect(row.locator("td").nth(6)).to_have_text("0")
    page.locator(f"#run-pick-{finished.pk}").check()  # a ticked box stays ticked: that row is not sent again

    recording.step_record(run=active, step=tool_step(1, [ok_attempt(1)], tool="lookup"))
    expect(row.locator("td").nth(6)).to_have_text("1")
    recording.run_finish(run=active, end=RunEnd(stop_reason="final_answer", final_answer="The answer is 42."))
    expect(row.locator(".status")).to_have_text("finished")
    expect(row).to_contain_text("The answer is 42.")
    # the row is no longer asked about; the first page still watches for new runs, less often
    expect(page.locator("#run-live")).to_have_attribute("hx-get", re.compile(r"^/runs/live/\?after=\d+$"))
    expect(page.locator("#run-live")).to_have_attribute("hx-trigger", "every 2s")
    expect(page.locator(f"#run-pick-{finished.pk}")).to_be_checked()


def test_a_run_started_after_the_list_loaded_comes_in_at_the_top_when_it_matches(signed_in: Page, live_server):
    page = signed_in
    RunFactory(scenario="refund-too-old", final_answer="Refunds close after 30 days.")
    page.goto(f"{live_server.url}/?scenario=refund-too-old")
    rows = page.locator("#run-rows tr")
    expect(rows).to_have_count(1)
    expect(page.locator("#run-count")).to_have_text("1 run")
    page.locator("#run-rows input[type=checkbox]").first.check()  # a ticked box stays ticked as rows come in

    RunFactory(scenario="lookup-flaky")  # another scenario: left out
    new = RunFactory(scenario="refund-too-old", status=Run.Status.RUNNING, stop_reason="", verdict="")
    expect(rows.first).to_have_id(f"run-row-{new.pk}")
    expect(rows).to_have_count(2)
    expect(page.locator("#run-count")).to_have_text("2 runs")
    expect(page.locator("#run-rows input[type=checkbox]").nth(1)).to_be_checked()
    recording.step_record(run=new, step=tool_step(1, [ok_attempt(1)], tool="process_refund"))  # and it is followed
    expect(page.locator(f"#run-row-{new.pk} td").nth(6)).to_have_text("1")
    page.locator(f"#run-pick-{new.pk}").check()
    expect(page.get_by_role("button", name="Compare the two ticked runs")).to_be_enabled()


def test_the_first_run_replaces_no_runs_match(signed_in: Page, live_server):
    page = signed_in
    page.goto(f"{live_server.url}/")
    expect(page.locator("#run-rows")).to_contain_text("No runs match.")
    run = RunFactory(scenario="refund-bad-id")
    expect(page.locator("#run-rows tr")).to_have_count(1)
    expect(page.locator("#run-rows tr").first).to_have_id(f"run-row-{run.pk}")
    expect(page.locator("#run-rows")).not_to_contain_text("No runs match.")


def test_a_search_under_three_characters_says_so_instead_of_leaving_the_rows(signed_in: Page, live_server):
    page = signed_in
    RunFactory(scenario="refund-too-old")
    RunFactory(scenario="lookup-flaky")
    page.goto(f"{live_server.url}/")
    expect(page.locator("#run-rows tr[id]")).to_have_count(2)
    page.get_by_role("textbox", name="Search").fill("re")
    expect(page.locator("#run-rows .search-short")).to_have_text("Search: type 3 or more characters (this has 2).")
    expect(page.locator("#run-rows tr[id]")).to_have_count(0)
    page.get_by_role("textbox", name="Search").fill("ref")
    expect(page.locator("#run-rows tr td:nth-child(3)")).to_have_text(["refund-too-old"])
