"""A stuck run's timeline in Chromium: its identical failing calls fold after the first, as the picture
folds them, into one line that opens on them; a link to a folded step opens the fold."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.factories import RunFactory, failed_attempt, final_step, steps_add, tool_step
from tracer.models import Run

MESSAGE = "no customer c-404"
REFUSAL = {"isError": True, "error": {"errorCategory": "validation", "isRetryable": False, "message": MESSAGE}}


def _same_failure(index: int):
    return tool_step(
        index,
        [failed_attempt(1, category="validation", message="no customer c-404")],
        tool="lookup_orders",
        input={"customer": "c-404"},
        result_content=REFUSAL,
    )


def test_identical_failing_calls_fold_in_the_timeline_and_open(signed_in: Page, live_server):
    page = signed_in
    run = RunFactory(stop_reason=Run.StopReason.MAX_STEPS, verdict=Run.Verdict.FAIL, step_count=9)
    steps_add(run, [*(_same_failure(i) for i in range(1, 9)), final_step(9, "Gave up.")])
    page.goto(f"{live_server.url}/runs/{run.pk}/")

    fold = page.locator("#step-list .folded-repeats > details > summary")
    expect(fold).to_have_count(1)
    expect(fold).to_have_text("7 more identical failing calls to lookup_orders… steps 2–8")
    expect(page.locator("#step-1")).to_be_visible()
    expect(page.locator("#step-5")).to_be_hidden()
    expect(page.locator("#step-9")).to_be_visible()
    # the picture folds the same steps the same way
    expect(page.locator('svg.waterfall g.folded[data-steps="2-8"]').first).to_be_attached()
    box = page.locator("#step-list").bounding_box()
    assert box["height"] < 900, box  # three lines, not nine cards

    fold.click()
    expect(page.locator("#step-5")).to_be_visible()
    fold.click()
    expect(page.locator("#step-5")).to_be_hidden()

    page.goto(f"{live_server.url}/runs/{run.pk}/#step-6")
    expect(page.locator("#step-6")).to_be_visible()
