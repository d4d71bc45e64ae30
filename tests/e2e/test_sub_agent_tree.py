"""A coordinator's run in Chromium, at 1400 × 900 and on a phone (390 × 844): each sub-agent is folded
under the step that ran it and opens on its own steps, the picture nests its rows under that step, and
nothing scrolls sideways; a running sub-agent's steps arrive in its fold, which stays open when the step
that ran it is recorded."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_phone import PHONE, no_sideways_scroll
from tests.tracer.test_sub_agent_tree import (
    coordinator,
    coordinator_of_many,
    coordinator_running_a_sub_agent,
    sub_agent_goes_on,
    sub_agent_returns,
)

DESKTOP = {"width": 1400, "height": 900}


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_coordinators_sub_agents_are_folded_under_their_steps_and_open_on_their_steps(
    signed_in: Page, live_server, viewport
):
    page = signed_in
    page.set_viewport_size(viewport)
    run = coordinator("structured")
    children = list(run.children.order_by("id"))
    page.goto(f"{live_server.url}/runs/{run.pk}/")

    for child in children:
        fold = page.locator(f"#step-{child.parent_step} .sub-agents details#sub-agent-{child.pk}")
        expect(fold).to_have_count(1)
        expect(fold).not_to_have_attribute("open", "")
        first = page.locator(f"#sub-agent-{child.pk}-step-1")
        expect(first).to_be_hidden()  # folded: its steps are there, not shown
        fold.locator("> summary .meta").click()
        expect(first).to_be_visible()
        expect(first.locator("code.tool")).to_have_text(child.steps.get(index=1).tool_name)
        box = first.bounding_box()
        starter = page.locator(f"#step-{child.parent_step}").bounding_box()
        assert box["x"] > starter["x"], "the sub-agent's steps sit inside the step that ran it"
        assert box["x"] + box["width"] <= starter["x"] + starter["width"] + 1
    sideways(page, viewport)
    fold = page.locator(f"details#sub-agent-{children[0].pk}")
    fold.locator("> summary .meta").click()
    expect(page.locator(f"#sub-agent-{children[0].pk}-step-1")).to_be_hidden()

    # the picture: each sub-agent's row and its steps' rows right under the row of the step that ran it
    svg = "svg.wide" if viewport is DESKTOP else "svg.narrow"
    rows = page.locator(f"#run-waterfall {svg} g.row")
    expect(page.locator(f"#run-waterfall {svg}")).to_be_visible()
    steps = rows.evaluate_all("(rows) => rows.map((r) => [r.dataset.steps, r.dataset.run || '', r.classList.value])")
    for child in children:
        head = steps.index([f"1-{child.step_count}", str(child.pk), "row sub-agent"])
        assert steps[head - 1][0] == f"{child.parent_step}-{child.parent_step}" and steps[head - 1][1] == ""
        assert steps[head + 1][1] == str(child.pk) and "nested" in steps[head + 1][2]
    label = page.locator(f'#run-waterfall {svg} g.sub-agent[data-run="{children[0].pk}"] text.label')
    assert label.bounding_box()["height"] >= 9, "the sub-agent's row is readable"
    sideways(page, viewport)


def sideways(page: Page, viewport: dict) -> None:
    """The page does not scroll sideways, its sub-agents' steps open."""
    if viewport is PHONE:
        no_sideways_scroll(page)
    else:
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]


def test_a_running_sub_agents_steps_arrive_in_its_open_fold_which_stays_open_under_its_step(
    signed_in: Page, live_server
):
    page = signed_in
    run, child = coordinator_running_a_sub_agent()
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    fold = page.locator(f"details#sub-agent-{child.pk}")
    fold.locator("> summary .meta").click()
    expect(page.locator(f"#sub-agent-{child.pk}-step-1")).to_be_visible()

    sub_agent_goes_on(child)
    expect(page.locator(f"#sub-agent-{child.pk}-step-2 code.tool")).to_have_text("callback_check")
    expect(fold.locator("> summary .meta")).to_contain_text("2 steps so far")
    expect(fold).to_have_attribute("open", "")  # the poll's new copy was opened again

    sub_agent_returns(run, child)
    nested = page.locator(f"#step-2 details#sub-agent-{child.pk}")
    expect(nested).to_have_count(1)
    expect(nested).to_have_attribute("open", "")
    expect(page.locator(f"#sub-agent-{child.pk}-step-3")).to_be_visible()
    expect(page.locator("#step-poll details")).to_have_count(0)


def test_a_fold_past_the_pages_budget_reads_its_steps_when_opened(signed_in: Page, live_server):
    page = signed_in
    run, children = coordinator_of_many(6, 20)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    last = children[-1]
    expect(page.locator(f"#sub-agent-{last.pk}-step-1")).to_have_count(0)  # not on the page yet
    page.locator(f"details#sub-agent-{last.pk} > summary .meta").click()
    expect(page.locator(f"#sub-agent-{last.pk}-step-1")).to_be_visible()
    expect(page.locator(f"details#sub-agent-{last.pk} ol.nested-steps > li.step")).to_have_count(20)
    expect(page.locator(f"details#sub-agent-{last.pk} .sub-agent-more")).to_have_count(0)
