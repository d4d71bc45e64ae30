"""Browse and watch, as a person does in Chromium: launch with a pace and watch the steps of a
run arrive one by one, the newest kept in view until they stop following; a section they opened stays
open when the run ends; the picture of the run with its durations, backoff gaps and folded repeats;
sub-agents under the step that started them with their tokens; the total duration. No CSP violation."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Page, expect

from tests.conftest import WorkerProcess, purge_test_queue
from tests.e2e.test_csp import LISTEN, violations
from tracer.execution import run_execute
from tracer.experiments import run_create
from tracer.models import PolicyVariant, Run
from tracer.reads.run_page import run_waterfall
from tracer.waterfall import duration_text, seconds_text

STEPS = "#step-list > li.step"


@pytest.fixture
def worker(live_server):
    """A worker with no delay of its own: the pace comes from the launch form."""
    purge_test_queue()
    worker = WorkerProcess(concurrency=1)
    worker.wait_ready()
    yield worker
    worker.stop()


@pytest.fixture
def watched(signed_in: Page):
    console: list[str] = []
    signed_in.on("console", lambda msg: console.append(msg.text) if "Content Security Policy" in msg.text else None)
    signed_in.add_init_script(LISTEN)
    yield signed_in, console


def step_count(page: Page) -> int:
    return page.locator(STEPS).count()


def test_launch_with_a_pace_and_watch_the_steps_arrive_one_by_one(watched, worker):
    page, console = watched
    page.get_by_role("link", name="Launch", exact=True).click()
    page.get_by_label("stuck-model").check()
    page.get_by_label("starter").check()
    page.get_by_label("Pace: seconds between steps").fill("1.2")
    page.get_by_role("button", name="Launch").click()
    expect(page.locator("#experiment-progress")).to_contain_text("of 1 runs finished")
    page.locator("#experiment-progress a", has_text=re.compile(r"^#\d+$")).first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("stuck-model under starter")
    expect(page.locator(".head-badges .badge.sim")).to_have_text("simulated")
    page.evaluate("window.notReloaded = true")
    expect(page.locator("#run-status .live")).to_contain_text("Paced: 1.2 s after each step")

    # Open the transcript while the run runs: it must stay open when the run's end replaces it.
    page.locator("#run-transcript > summary").click()
    expect(page.locator("#run-transcript")).to_have_attribute("open", "")

    # The steps arrive one by one, and each newest one is scrolled into view.
    expect(page.locator(STEPS)).to_have_count(1, timeout=30_000)
    seen = [1]
    while seen[-1] < 4:
        expect(page.locator(STEPS)).not_to_have_count(seen[-1], timeout=15_000)
        seen.append(step_count(page))
        expect(page.locator(STEPS).last).to_be_in_viewport()
    assert seen == [1, 2, 3, 4], f"steps arrived in bunches, not one by one: {seen}"
    # The picture redrew itself as they came: the repeats of the stuck call are folded already.
    expect(page.locator("#run-waterfall svg.wide text.label").nth(1)).to_have_text(
        re.compile(r"^[3-9] more identical failing calls$")
    )
    expect(page.locator("#run-status")).to_contain_text("so far")  # a running run's duration

    # Scrolling up to read stops following; the button starts it again.
    page.mouse.wheel(0, -200)
    follow = page.get_by_role("button", name="Follow new steps")
    expect(follow).to_be_visible()
    follow.click()
    expect(page.locator(STEPS).last).to_be_in_viewport()

    # Stop following: back at the top, the page stays there as more steps arrive.
    page.get_by_role("button", name="Stop following").click()
    expect(page.get_by_role("button", name="Follow new steps")).to_be_visible()
    page.evaluate("window.scrollTo(0, 0)")
    before = step_count(page)
    expect(page.locator(STEPS)).not_to_have_count(before, timeout=15_000)
    time.sleep(0.3)  # let a scroll that should not happen have its chance
    assert page.evaluate("window.scrollY") == 0
    expect(page.locator(STEPS).last).not_to_be_in_viewport()

    # The end: polling stops, the opened transcript is still open and now holds the exchange.
    expect(page.locator(".banner")).to_contain_text("Stopped:", timeout=60_000)
    expect(page.locator("#step-poll")).to_have_count(0)
    assert page.evaluate("window.notReloaded") is True
    expect(page.locator("#run-transcript")).to_have_attribute("open", "")
    expect(page.locator("#run-transcript .json-tree")).to_be_visible()
    expect(page.locator("#run-transcript .json-tree")).to_contain_text('"role": "assistant"')
    # ... and the review form came with the end: a review is saved without a reload.
    review = page.locator("section.review")
    review.get_by_label("model stuck").check()
    review.get_by_label("Note").fill("watched it loop on the same date")
    review.get_by_role("button", name="Save review").click()
    expect(review.locator(".success")).to_contain_text("saved")
    expect(review.locator("div.reviewed")).to_contain_text("watched it loop on the same date")
    assert page.evaluate("window.notReloaded") is True

    # The picture: identical failing calls folded, each row's duration as the steps recorded it.
    run = Run.objects.get(scenario="stuck-model")
    picture = run_waterfall(run=run)
    rows = page.locator("#run-waterfall svg.wide g.row")
    expect(rows).to_have_count(len(picture.rows))
    assert any(r.folded for r in picture.rows), "the stuck run's repeats are folded"
    expect(page.locator("#run-waterfall svg.wide text.label")).to_contain_text(
        [r.label for r in picture.rows if r.folded][:1]
    )
    expect(page.locator("#run-waterfall svg.wide text.figure")).to_have_text([r.duration_text for r in picture.rows])
    first_attempts = run.steps.get(index=1).attempts
    gaps = [a["backoff_s"] for a in first_attempts if a["backoff_s"]]
    if gaps:
        label = rows.first.get_attribute("aria-label")
        assert ", ".join(seconds_text(g) for g in gaps) in label
    assert violations(page, console) == []


def execute(scenario: str, policy: str) -> Run:
    run = run_create(scenario=scenario, policy=PolicyVariant.objects.get(name=policy))
    return run_execute(run_id=run.pk)


def test_sub_agents_sit_under_their_step_and_the_picture_reads_at_800_px(watched, live_server):
    page, console = watched
    run = execute("coordinator-partial", "structured")
    children = list(run.children.order_by("id"))
    page.set_viewport_size({"width": 800, "height": 900})
    page.goto(f"{live_server.url}/runs/{run.pk}/")

    for child in children:
        nested = page.locator(f"#step-{child.parent_step} .sub-agents li.sub-agent", has_text=child.label)
        expect(nested).to_contain_text(f"tokens {child.input_tokens} in · {child.output_tokens} out")
        expect(nested.locator(".badge.sim")).to_have_text("simulated")
        # the sub-agent's duration as its own page gives it
        expect(nested).to_contain_text(duration_text(child.measured_ms))
    expect(page.locator(".sub-agents li.sub-agent")).to_have_count(len(children))
    stats = page.locator("#run-status")
    expect(stats).to_contain_text(f"{run.input_tokens} in · {run.output_tokens} out")
    expect(stats.locator("dt", has_text="Duration")).to_be_visible()
    expect(stats.locator("div", has=page.locator("dt", has_text="Duration")).locator("dd")).to_have_text(
        re.compile(r"^\d+(\.\d+)? (ms|s)( \(.+ of it waiting between attempts\))?$")
    )

    # The picture fits the 800 px window, its words are legible, and its text alternative opens.
    svg = page.locator("#run-waterfall svg.wide")
    box = svg.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 800
    label_size = page.locator("#run-waterfall svg.wide text.label").first.bounding_box()
    assert label_size is not None and label_size["height"] >= 9, "row labels are readable at 800 px"
    assert page.evaluate("document.documentElement.scrollWidth") <= 800
    page.locator("#waterfall-text summary").click()
    expect(page.locator("#waterfall-text li").first).to_contain_text("step 1")
    expect(page.locator("#waterfall-text li")).to_have_count(page.locator("#run-waterfall svg.wide g.row").count())
    assert violations(page, console) == []
