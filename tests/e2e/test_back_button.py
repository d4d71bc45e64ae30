"""The Back button on every page that swaps fragments in with htmx: it brings back the whole page
(styles, navigation, filters) as it was, with its controls matching what it shows.

Each test first makes the page fetch a fragment from its own URL (a filter, a poll, a refresh after a
form), leaves by a plain link, then presses Back; Chromium's cache then holds the fragment for that
URL, which is what the browser showed before the responses varied on HX-Request.
"""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.factories import ExperimentFactory, RunFactory, guard_stop, refund_too_old_starter, refund_too_old_structured
from tests.tracer.test_compare_window import parted
from tracer.models import Run


def expect_whole_page(page: Page, heading: str | re.Pattern) -> None:
    """The page as a person expects it: styled, with the navigation and its own heading."""
    expect(page.get_by_role("heading", level=1)).to_have_text(heading)
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs", exact=True)).to_be_visible()
    # app.css is applied: the page's background is the stylesheet's, not the browser's white.
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(246, 247, 249)"


def test_back_to_a_filtered_runs_list_shows_the_page_with_its_filter(signed_in: Page, live_server):
    page = signed_in
    failing = refund_too_old_starter()
    passing = refund_too_old_structured()
    page.goto(f"{live_server.url}/")
    rows = page.locator("#run-rows tr")
    verdict_filter = page.locator("form.filters select[name=verdict]")
    expect(rows).to_have_count(2)

    verdict_filter.select_option("fail")  # htmx swaps the table and pushes the URL
    expect(page).to_have_url(re.compile(r"verdict=fail"))
    expect(rows).to_have_count(1)
    page.get_by_role("link", name=f"#{failing.pk}", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Run #{failing.pk}")

    page.go_back()
    expect(page).to_have_url(re.compile(r"verdict=fail"))
    expect_whole_page(page, "Runs")
    expect(verdict_filter).to_have_value("fail")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(f"#{failing.pk}")

    # Back between two filters htmx pushed: the controls match the table shown.
    verdict_filter.select_option("pass")
    expect(page).to_have_url(re.compile(r"verdict=pass"))
    expect(rows.first).to_contain_text(f"#{passing.pk}")
    page.go_back()
    expect(page).to_have_url(re.compile(r"verdict=fail"))
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text(f"#{failing.pk}")
    expect(verdict_filter).to_have_value("fail")
    expect_whole_page(page, "Runs")


def test_back_to_a_later_page_of_the_runs_list(signed_in: Page, live_server):
    page = signed_in
    Run.objects.bulk_create([Run(scenario="lookup-flaky", status=Run.Status.FINISHED) for _ in range(55)])
    page.goto(f"{live_server.url}/")
    page.get_by_role("link", name="older →").click()
    expect(page).to_have_url(re.compile(r"page=2"))
    expect(page.locator(".pager")).to_contain_text("page 2 of 2")
    page.locator("#run-rows a").first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Run #")

    page.go_back()
    expect_whole_page(page, "Runs")
    expect(page.locator(".pager")).to_contain_text("page 2 of 2")
    expect(page.locator("#run-rows tr")).to_have_count(5)


def test_back_to_a_sorted_runs_list(signed_in: Page, live_server):
    page = signed_in
    Run.objects.bulk_create([Run(scenario=name, status=Run.Status.FINISHED) for name in ("beta", "alpha", "gamma")])
    page.goto(f"{live_server.url}/")
    scenarios = page.locator("#run-rows tr td:nth-child(3)")
    page.get_by_role("link", name="Scenario").click()  # htmx swaps the table, sorted, and pushes the URL
    expect(page).to_have_url(re.compile(r"sort=scenario"))
    expect(scenarios).to_have_text(["alpha", "beta", "gamma"])
    page.locator("#run-rows a").first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Run #")

    page.go_back()
    expect_whole_page(page, "Runs")
    expect(scenarios).to_have_text(["alpha", "beta", "gamma"])
    expect(page.locator("th[aria-sort=ascending]")).to_have_text(re.compile("Scenario"))


def test_back_to_a_narrowed_policy_matrix(signed_in: Page, live_server):
    page = signed_in
    refund_too_old_starter()
    refund_too_old_structured()
    page.goto(f"{live_server.url}/policies/")
    columns = page.locator("#policy-matrix thead th")
    expect(columns).to_have_text(["Scenario", "starter", "structured"])

    page.get_by_label("starter", exact=True).uncheck()  # htmx swaps the matrix and pushes the URL
    expect(page).to_have_url(re.compile(r"policy=structured"))
    expect(columns).to_have_text(["Scenario", "structured"])
    page.locator("#policy-matrix a.heat").first.click()  # a square of the heat map opens its runs
    expect(page.get_by_role("heading", level=1)).to_have_text("Runs")

    page.go_back()
    expect_whole_page(page, "Policies")
    expect(columns).to_have_text(["Scenario", "structured"])
    expect(page.get_by_label("starter", exact=True)).not_to_be_checked()
    expect(page.get_by_label("structured", exact=True)).to_be_checked()

    page.get_by_label("starter", exact=True).check()
    expect(columns).to_have_text(["Scenario", "starter", "structured"])
    page.go_back()  # to the narrowed matrix htmx pushed
    expect(columns).to_have_text(["Scenario", "structured"])
    expect(page.get_by_label("starter", exact=True)).not_to_be_checked()


def test_back_to_the_stop_queue_after_a_review_refreshed_its_counts(signed_in: Page, live_server):
    page = signed_in
    stopped = guard_stop()
    guard_stop()
    page.goto(f"{live_server.url}/stops/?state=unreviewed")
    tabs = page.locator("#stop-counts")
    expect(tabs).to_contain_text("Unreviewed 2")
    case = page.locator(f"#stop-{stopped.pk}")
    case.get_by_label("model stuck").check()
    case.get_by_role("button", name="Save review").click()
    expect(tabs).to_contain_text("Unreviewed 1")  # fetched from /stops/?state=unreviewed by htmx
    case.get_by_role("link", name=f"Run #{stopped.pk}").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Run #{stopped.pk}")

    page.go_back()
    expect_whole_page(page, "Guard stops")
    expect(page.locator("#stop-counts")).to_contain_text("Unreviewed 1")
    expect(page.locator(".stop-case")).to_have_count(1)


def test_back_to_the_token_page_after_its_list_refreshed(signed_in: Page, live_server):
    page = signed_in
    page.goto(f"{live_server.url}/tokens/")
    page.get_by_label("Name").fill("ci agent")
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#token-list")).to_contain_text("ci agent")  # fetched from /tokens/ by htmx
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Runs")

    page.go_back()
    expect_whole_page(page, "API tokens")
    expect(page.locator("#token-list")).to_contain_text("ci agent")


def test_back_to_an_experiment_whose_progress_polled(signed_in: Page, live_server):
    page = signed_in
    experiment = ExperimentFactory(total_runs=1)
    run = RunFactory(experiment=experiment, status=Run.Status.RUNNING, stop_reason="", verdict="")
    page.goto(f"{live_server.url}/experiments/{experiment.pk}/")
    url = f"{live_server.url}/experiments/{experiment.pk}/"
    with page.expect_response(lambda r: r.url == url and r.request.headers.get("hx-request") == "true"):
        pass  # one poll of its progress, from the page's own URL
    page.get_by_role("link", name=f"#{run.pk}", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Run #{run.pk}")

    page.go_back()
    expect_whole_page(page, str(experiment))
    expect(page.locator("#experiment-progress")).to_contain_text("0 of 1 runs finished")


def test_back_to_a_live_run_page_whose_steps_polled(signed_in: Page, live_server):
    page = signed_in
    run = RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="")
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    with page.expect_response(lambda r: f"/runs/{run.pk}/steps/" in r.url):
        pass
    page.get_by_role("link", name="Runs", exact=True).first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Runs")

    page.go_back()
    expect_whole_page(page, re.compile(rf"Run #{run.pk}"))
    expect(page.locator("#step-poll")).to_be_attached()


def test_back_to_the_import_page_after_an_upload_swapped_its_report(signed_in: Page, live_server, tmp_path):
    page = signed_in
    upload = tmp_path / "bad.jsonl"
    upload.write_text('{"format": "rlt.run/1", "steps": [{"kind": "tool_call"}]}\n')
    page.goto(f"{live_server.url}/import/")
    page.get_by_label("Files").set_input_files(str(upload))
    page.get_by_role("button", name="Import").click()  # htmx posts to /import/ and swaps the report in
    expect(page.locator("#import-report .file-report")).to_contain_text("steps[0].kind")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Runs")

    page.go_back()
    expect(page).to_have_url(re.compile(r"/import/$"))
    expect_whole_page(page, re.compile("Import"))
    expect(page.get_by_label("Files")).to_be_visible()
    expect(page.get_by_role("button", name="Import")).to_be_visible()


def test_back_to_a_long_compare_after_a_gap_loaded_its_rows(signed_in: Page, live_server):
    page = signed_in
    a, b = parted(steps=500, split_at=300)
    page.goto(f"{live_server.url}/compare/?a={a.pk}&b={b.pk}")
    page.get_by_role("link", name="Show aligned steps 311–360").click()  # htmx swaps the rows in
    expect(page.locator("#row-360")).to_be_attached()
    page.locator(".run-card").first.get_by_role("link", name=f"#{a.pk}", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Run #{a.pk}")

    page.go_back()
    expect_whole_page(page, "Compare two runs")
    expect(page.locator(".pair.is-split")).to_contain_text("This is where the runs split")
    expect(page.get_by_role("link", name=re.compile(r"^Show aligned steps"))).not_to_have_count(0)
