"""A person at the dashboard: launch, watch runs finish live, find the split, review a stop, add a policy.

Runs are executed by a real Celery worker process over the configured broker, or in-process by the
same service the worker calls.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from agents.policies import PRESET_NAMES
from agents.scenarios import scenario_names
from tests.conftest import WorkerProcess, purge_test_queue
from tests.e2e.conftest import save_screenshot
from tracer.execution import run_execute
from tracer.experiments import run_create
from tracer.models import PolicyVariant, Run


@pytest.fixture
def holding_worker(live_server):
    """A worker that holds each run before its final answer until the test calls ``release()``, so
    the test watches runs that are still running for as long as it looks."""
    purge_test_queue()
    worker = WorkerProcess(hold=True, concurrency=2)
    worker.wait_ready()
    yield worker
    worker.stop()


def execute(scenario: str, policy: str) -> Run:
    """One run recorded in-process by the service a worker calls."""
    run = run_create(scenario=scenario, policy=PolicyVariant.objects.get(name=policy))
    return run_execute(run_id=run.pk)


def test_launch_watch_live_and_find_where_starter_and_structured_split(signed_in: Page, holding_worker):
    page = signed_in
    page.get_by_role("link", name="Launch", exact=True).click()
    page.get_by_label("refund-too-old").check()
    page.get_by_label("starter").check()
    page.get_by_label("structured").check()
    page.get_by_role("button", name="Launch").click()

    expect(page.get_by_role("heading", level=1)).to_have_text(re.compile(r"experiment \d+"))
    expect(page.locator("#experiment-progress")).to_contain_text("0 of 2 runs finished")

    # Open the starter run while it is still running and watch its steps arrive without a reload.
    page.locator("#experiment-progress a", has_text=re.compile(r"^#\d+$")).first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("refund-too-old under starter")
    expect(page.locator("#step-poll")).to_be_attached()
    page.evaluate("window.notReloaded = true")
    expect(page.locator("#step-1")).to_contain_text("process_refund", timeout=30_000)
    expect(page.locator("#step-1 .attempt")).to_have_count(3)
    expect(page.locator("#run-status")).to_contain_text("running")  # held before its final answer
    expect(page.locator("#step-2")).to_have_count(0)
    holding_worker.release()
    expect(page.locator("#step-2")).to_contain_text("generic error", timeout=30_000)
    expect(page.locator(".banner")).to_contain_text("Stopped:")
    expect(page.locator("#step-poll")).to_have_count(0)  # polling stopped by itself
    assert page.evaluate("window.notReloaded") is True
    review = page.locator("section.review")  # the end brought the review form with it
    expect(review.get_by_label("Verdict")).to_contain_text("judge's verdict stands (fail)")
    expect(review).not_to_contain_text("Reviewed once it has ended")
    page.locator("#run-transcript > summary").click()  # the raw Messages API exchange, arrived with the end
    expect(page.locator("#run-transcript .json-tree")).to_contain_text('"role": "assistant"')
    page.locator("#run-transcript > summary").click()
    expect(page.locator(".badge.sim").first).to_have_text("simulated")
    save_screenshot(page, "run.png")

    # Back on the experiment: both finished; open the compare pair.
    page.go_back()
    expect(page.locator("#experiment-progress")).to_contain_text("2 of 2 runs finished — done", timeout=30_000)
    pair = page.locator(".pairs").get_by_role("link", name="refund-too-old")
    expect(pair).to_have_attribute("title", re.compile(r"^starter #\d+ vs structured #\d+$"))
    pair.click()

    split = page.locator(".pair.is-split")
    expect(split).to_have_count(1)
    expect(split.locator(".split-label")).to_have_text("This is where the runs split")
    split_line = split.locator(".attempt-line.is-split")
    expect(split_line.locator(".cell").nth(0)).to_contain_text("Retry · attempt 2")
    expect(split_line.locator(".cell").nth(1)).to_contain_text("no retry: the result went back to the model")
    cause = split.locator(".attempt-line.is-cause")
    expect(cause.locator(".cell").nth(0)).to_contain_text('bare "Error"')
    expect(cause.locator(".cell").nth(1)).to_contain_text("business · not retryable")
    expect(page.locator(".split-summary")).to_contain_text("which then gave its final answer")
    expect(page.locator("table.diffs tr.differs")).to_contain_text(["Retries"])
    save_screenshot(page, "compare.png")


def test_the_runs_list_updates_active_rows_live_and_compares_two_ticked_runs(signed_in: Page, holding_worker):
    page = signed_in
    page.get_by_role("link", name="Launch", exact=True).click()
    page.get_by_label("lookup-flaky", exact=True).check()
    page.get_by_label("starter").check()
    page.get_by_label("structured").check()
    page.get_by_role("button", name="Launch").click()
    expect(page.locator("#experiment-progress")).to_contain_text("of 2 runs finished")

    page.get_by_role("link", name="Runs", exact=True).click()
    rows = page.locator("#run-rows tr")
    expect(rows).to_have_count(2)
    expect(page.locator("#run-rows .status.finished")).to_have_count(0)  # both held, still active
    page.evaluate("window.notReloaded = true")
    compare_button = page.locator("[data-compare-button]")
    expect(compare_button).to_be_disabled()
    boxes = page.locator('#run-rows input[name="run"]')
    boxes.nth(0).check()  # ticked while the rows refresh: the tick survives each refresh
    holding_worker.release()
    expect(page.locator("#run-rows .status.finished")).to_have_count(2, timeout=30_000)
    expect(page.locator("#run-rows")).not_to_have_attribute("hx-trigger", re.compile("every"))  # polling stopped
    assert page.evaluate("window.notReloaded") is True
    expect(boxes.nth(0)).to_be_checked()
    boxes.nth(1).check()
    expect(compare_button).to_be_enabled()
    compare_button.click()
    expect(page.locator(".compare-heads .run-card").first).to_contain_text("starter")  # the older run is A
    expect(page.locator(".compare-heads .run-card").nth(1)).to_contain_text("structured")


def test_review_a_guard_stop(signed_in: Page):
    stopped = execute("stuck-model", "structured")
    other = execute("stuck-model", "starter")
    assert stopped.stop_reason == Run.StopReason.CONSECUTIVE_ERRORS
    page = signed_in

    page.get_by_role("link", name="Stops", exact=True).click()
    case = page.locator(f"#stop-{stopped.pk}")
    expect(case).to_contain_text(f"guard: {stopped.guard}")
    expect(case.locator(".failing-calls")).to_contain_text("free_slots")
    expect(case.locator(".beside")).to_contain_text(f"Run #{other.pk}")
    expect(page.locator("#stop-counts")).to_contain_text("Reviewed 0")

    case.get_by_label("unhelpful error message").check()
    case.get_by_label("Note").fill("the date error never reaches a model that can fix it")
    case.get_by_role("button", name="Save review").click()

    expect(case.locator("div.reviewed")).to_contain_text("unhelpful error message")
    expect(case.locator("div.reviewed")).to_contain_text("the date error never reaches a model that can fix it")
    expect(page.locator("#stop-counts")).to_contain_text("Reviewed 1")  # the counts refreshed on the event
    page.get_by_role("link", name=re.compile("^Reviewed")).click()
    expect(page.locator(f"#stop-{stopped.pk}")).to_be_visible()


def test_create_a_custom_policy_with_a_message_per_invalid_field(signed_in: Page):
    for scenario in scenario_names():
        for policy in PRESET_NAMES:
            execute(scenario, policy)
    page = signed_in
    page.get_by_role("link", name="Policies", exact=True).click()
    expect(page.locator("#policy-matrix")).to_contain_text("refund-too-old")
    save_screenshot(page, "policies.png")

    page.get_by_role("link", name="New policy variant").click()
    expect(page).to_have_url(re.compile(r"/policies/variants/new/$"))
    form = page.locator("#policy-form")
    expect(form.get_by_label("Max attempts")).to_have_value("3")  # the base preset's values, shown
    form.get_by_label("Name").fill("Patient Structured")
    form.get_by_label("Max attempts").fill("40")
    form.get_by_role("button", name="Create policy").click()
    expect(form.locator("#error-name")).to_contain_text(
        "expected lowercase letters, digits, - and _, starting with a letter or digit, at most 40 characters"
    )
    expect(form.locator("#error-max_attempts")).to_contain_text("less than or equal to 10")
    form.get_by_label("Name").fill("p" * 41)  # one past the limit: refused naming it, never cut to 40
    form.get_by_role("button", name="Create policy").click()
    expect(form.locator("#error-name")).to_contain_text("at most 40 characters; got 41")
    assert not PolicyVariant.objects.filter(name__startswith="ppp").exists()

    form.get_by_label("Name").fill("patient-structured")
    form.get_by_label("Max attempts").fill("5")
    form.get_by_role("button", name="Create policy").click()
    expect(form.locator(".success")).to_contain_text("Policy patient-structured created.")
    assert PolicyVariant.objects.get(name="patient-structured").settings["max_attempts"] == 5
    form.get_by_role("link", name="See it among the variants").click()
    expect(page.locator("#variant-patient-structured")).to_contain_text("custom")

    # a matrix square opens the matching runs
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Policies").click()
    page.locator("#policy-matrix a.heat").first.click()
    expect(page).to_have_url(re.compile(r"/\?scenario=.+&policy=.+"))
    expect(page.locator("#run-rows tr")).to_have_count(1)
