"""A 500-step run in Chromium: the first screen holds its first 50 steps; scrolling to the
gap loads the next 50 and the control loads more; a link to step 480 lands on it; a live run's page
shows its newest steps and the poll appends the ones that arrive. The compare of two 500-step runs is
windowed the same way: the split first, the gaps loading on scroll or click, a link to aligned step
480 landing on it, and a long fold loading its rows when opened."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.e2e.test_csp import LISTEN, violations
from tests.factories import RunFactory, failed_attempt, lookup_failure, run_with_steps, steps_add, tool_step
from tests.tracer.test_compare_window import parted
from tracer.models import Run

STEPS = "#step-list > li.step"


def test_a_500_step_run_loads_its_steps_on_scroll_and_on_demand(signed_in: Page, live_server):
    page, console = signed_in, []
    page.on("console", lambda msg: console.append(msg.text) if "Content Security Policy" in msg.text else None)
    page.add_init_script(LISTEN)
    run = run_with_steps(500)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    expect(page.locator(STEPS)).to_have_count(50)
    expect(page.locator("#step-50")).to_be_attached()
    expect(page.locator("#step-51")).to_have_count(0)

    # Scrolling down to the gap loads the next 50 steps.
    page.locator("li.step-gap").scroll_into_view_if_needed()
    expect(page.locator(STEPS)).to_have_count(100)
    expect(page.locator("#step-100")).to_be_attached()

    # The next gap's control, clicked, loads 101–150 (the page scrolled back up first, so it is a click).
    page.evaluate("window.scrollTo(0, 0)")
    gap = page.locator("li.step-gap")
    expect(gap).to_contain_text("Show steps 101–150")
    gap.get_by_role("link", name="Show steps 101–150").click()
    expect(page.locator("#step-150")).to_be_attached()
    assert violations(page, console) == []


def test_a_link_to_step_480_of_a_500_step_run_shows_that_step(signed_in: Page, live_server):
    page = signed_in
    run = run_with_steps(500)
    page.goto(f"{live_server.url}/runs/{run.pk}/#step-480")
    expect(page.locator("#step-480")).to_be_in_viewport()
    expect(page.locator("#step-480")).to_contain_text("lookup_orders")
    # The steps before it are still one click away.
    expect(page.locator("li.step-gap", has_text="Show steps 51–100")).to_be_attached()

    # A link inside the page to a step not shown (the banner's, the picture's) does the same.
    page.evaluate("location.hash = '#step-300'")
    expect(page.locator("#step-300")).to_be_in_viewport()


def test_a_live_500_step_run_shows_its_newest_steps_and_the_poll_appends_more(signed_in: Page, live_server):
    page = signed_in
    run = run_with_steps(500, status=Run.Status.RUNNING, stop_reason="", verdict="")
    run.steps.filter(index=500).delete()
    steps_add(run, [lookup_failure(500)])
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    expect(page.locator(STEPS)).to_have_count(60)  # the first 50 and the newest 10
    expect(page.locator(STEPS).last).to_have_id("step-500")
    steps_add(run, [lookup_failure(501), lookup_failure(502)])
    Run.objects.filter(pk=run.pk).update(step_count=502)
    expect(page.locator(STEPS).last).to_have_id("step-502", timeout=10_000)
    expect(page.locator(STEPS)).to_have_count(62)


PAIRS = "section.aligned .pair"


def test_a_500_step_compare_shows_the_split_first_and_loads_rows_on_scroll_and_by_link(signed_in: Page, live_server):
    page, console = signed_in, []
    page.on("console", lambda msg: console.append(msg.text) if "Content Security Policy" in msg.text else None)
    page.add_init_script(LISTEN)
    a, b = parted(steps=500, split_at=300)
    page.goto(f"{live_server.url}/compare/?a={a.pk}&b={b.pk}")
    expect(page.locator(".split-summary")).to_contain_text("The runs split at aligned step 300.")
    page.locator(".split-summary").get_by_role("link", name="The runs split at aligned step 300").click()
    expect(page.locator(".pair.is-split")).to_be_in_viewport()
    expect(page.locator("#row-360")).to_have_count(0)

    # Scrolling on past the split reaches the gap after it, which loads the next 50 rows.
    page.locator("#row-gap-311").scroll_into_view_if_needed()
    expect(page.locator("#row-360")).to_be_attached()
    expect(page.locator("#row-361")).to_have_count(0)

    # A link to an aligned step not shown loads the rows that hold it and lands on it.
    page.evaluate("location.hash = '#row-480'")
    expect(page.locator("#row-480")).to_be_in_viewport()
    expect(page.locator("#row-480")).to_contain_text("b480")
    # The rows before the split are still one click away.
    page.evaluate("window.scrollTo(0, 0)")
    page.get_by_role("link", name="Show aligned steps 11–60").click()
    expect(page.locator("#row-60")).to_be_attached()
    assert violations(page, console) == []


def test_a_compares_long_fold_loads_its_rows_when_opened(signed_in: Page, live_server):
    page = signed_in
    long = RunFactory(scenario="stuck-model", policy_name="unguarded", stop_reason=Run.StopReason.MAX_STEPS)
    short = RunFactory(scenario="stuck-model", stop_reason=Run.StopReason.CONSECUTIVE_ERRORS)
    stuck = [
        tool_step(i, [failed_attempt(1, category="validation", message="bad date")], tool="free_slots")
        for i in range(1, 201)
    ]
    steps_add(long, stuck)
    steps_add(short, stuck[:3])
    page.goto(f"{live_server.url}/compare/?a={long.pk}&b={short.pk}")
    fold = page.locator("details.stretch", has_text="196 more identical failing calls of free_slots in run A")
    expect(fold).to_be_visible()
    page.wait_for_timeout(300)  # a closed fold loads nothing
    expect(fold.locator(".pair")).to_have_count(0)

    fold.locator("summary").click()

    expect(fold.locator(".pair")).to_have_count(50)
    expect(fold.locator("#row-5")).to_be_visible()
    expect(fold.locator(".row-gap")).to_contain_text("Show aligned steps 55–104")
