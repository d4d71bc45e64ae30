"""A person comparing two variants of one policy: from a run's page to the compare, where the split's
reason names the setting that made it, the settings table marks it, and repeated rows stay folded
until opened. Runs are recorded in-process by the service a worker calls (simulated model)."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.tracer.test_compare_page import execute
from tracer.models import Run


def open_compare_from_run_page(page: Page, live_server, run: Run, other: Run) -> None:
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    row = page.locator(".mini", has=page.get_by_role("link", name=f"#{other.pk} {other.policy_name}"))
    row.get_by_role("link", name="compare").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Compare two runs")


def test_a_guard_against_no_guard_names_the_guard_and_folds_the_repeated_calls(signed_in: Page, live_server):
    unguarded = execute("stuck-model", "unguarded", consecutive_error_limit=0)
    guarded = execute("stuck-model", "structured")
    assert (unguarded.step_count, guarded.step_count) == (10, 3)
    page = signed_in

    open_compare_from_run_page(page, live_server, unguarded, guarded)

    summary = page.locator(".split-summary")
    expect(summary).to_contain_text(
        "Run B's consecutive-error guard stopped the run after 3 errors in a row; run A has no guard."
    )
    expect(summary).not_to_contain_text("chose differently")
    setting = page.locator("table.settings tr.differs")
    expect(setting).to_have_count(1)
    expect(setting.locator("th")).to_contain_text("consecutive_error_limit")
    expect(setting.locator("td")).to_have_text(["off (no guard)", "3"])

    # 10 steps against 3 fit a screen: the repeats are folded, the split is not
    folds = page.locator("details.stretch")
    expect(folds.locator("summary")).to_have_text(
        [
            "2 more identical failing calls of free_slots in both runs",
            "6 more identical failing calls of free_slots in run A; run B has no such steps",
        ]
    )
    expect(page.locator(".pair.is-split")).to_be_visible()
    height = page.locator("section.aligned").bounding_box()["height"]
    assert height < 700, f"the aligned steps take {height:.0f} px"
    hidden = folds.nth(1).locator(".pair")
    expect(hidden.first).to_be_hidden()
    folds.nth(1).locator("summary").click()
    expect(hidden).to_have_count(6)
    expect(hidden.first).to_be_visible()
    expect(hidden.first.locator(".cell").nth(1)).to_contain_text("no such step: the run had ended")
    expect(page.locator(".pair.is-split .cell").nth(1)).to_contain_text("the run had ended (3 tool errors in a row)")


def test_three_attempts_against_five_names_max_attempts(signed_in: Page, live_server):
    three = execute("lookup-flaky-exhausted", "structured")
    five = execute("lookup-flaky-exhausted", "five-attempts", max_attempts=5)
    page = signed_in

    open_compare_from_run_page(page, live_server, three, five)

    expect(page.locator(".split-summary")).to_contain_text(
        "Run A gave up after 3 attempts (its max_attempts is 3); run B's max_attempts is 5."
    )
    split = page.locator(".attempt-line.is-split")
    expect(split.locator(".cell").nth(0)).to_contain_text("no retry")
    expect(split.locator(".cell").nth(1)).to_contain_text("Retry · attempt 4")
    expect(page.locator("table.settings tr.explains th")).to_have_text(re.compile(r"^max_attempts"))
    expect(page.locator("table.diffs tr.differs")).to_contain_text(["Retries"])
