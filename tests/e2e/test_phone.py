"""On a phone (390 × 844): the navigation folds into a menu, the runs list's filters fold above the
first row, the picture of a run stacks its rows with labels at a readable size, and no page scrolls
sideways."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from agents.events import RunEnd, Verdict
from agents.vocabulary import SIMULATED_MODEL_NAME
from tests.e2e.conftest import save_screenshot
from tests.factories import (
    RunFactory,
    guard_stop_steps,
    recorded_run,
    refund_too_old_starter,
    refund_too_old_structured,
)
from tracer import tokens

PHONE = {"width": 390, "height": 844}
NAV_LINKS = ("Runs", "Tools", "Findings", "Compare", "Policies", "Stops", "Launch", "Import", "API tokens")


@pytest.fixture
def phone(signed_in: Page) -> Page:
    signed_in.set_viewport_size(PHONE)
    return signed_in


def no_sideways_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    if width > PHONE["width"]:
        wide = page.evaluate(
            """(limit) => [...document.querySelectorAll("main *")]
                .filter((el) => el.getBoundingClientRect().right > limit + 1)
                .filter((el) => {
                    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
                        if (getComputedStyle(up).overflowX !== "visible") return false;
                    }
                    return true;
                })
                .slice(0, 8).map((el) => `${el.tagName.toLowerCase()}.${el.className}`)""",
            PHONE["width"],
        )
        raise AssertionError(f"{page.url} is {width} px wide at {PHONE['width']} px: {wide}")


def test_on_a_phone_the_navigation_is_a_menu_that_opens_and_closes(phone: Page, live_server):
    page = phone
    page.goto(f"{live_server.url}/")
    header = page.locator("header.top").bounding_box()
    assert header is not None and header["height"] <= 70, f"the header takes {header['height']} px"
    nav = page.get_by_role("navigation", name="Main")
    menu = page.get_by_role("button", name="Menu")
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(nav.get_by_role("link", name="Policies")).to_be_hidden()
    menu.click()
    expect(menu).to_have_attribute("aria-expanded", "true")
    for name in NAV_LINKS:
        expect(nav.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()
    no_sideways_scroll(page)
    nav.get_by_role("link", name="Policies").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Policies")
    expect(page.get_by_role("button", name="Menu")).to_have_attribute("aria-expanded", "false")

    page.set_viewport_size({"width": 1400, "height": 900})  # on a desktop: no menu, every link in view
    expect(page.get_by_role("button", name="Menu")).to_be_hidden()
    for name in NAV_LINKS:
        expect(nav.get_by_role("link", name=name, exact=True)).to_be_in_viewport()


def test_on_a_phone_the_runs_list_folds_its_filters_above_the_first_row(phone: Page, live_server):
    page = phone
    run = refund_too_old_starter()
    refund_too_old_structured()
    page.goto(f"{live_server.url}/")
    first_row = page.locator("#run-rows tr").first
    expect(first_row).to_be_in_viewport()
    box = first_row.bounding_box()
    assert box is not None and box["y"] < 400, f"the first row starts at {box['y']} px"
    verdict = page.locator("form.filters select[name=verdict]")
    expect(verdict).to_be_hidden()
    page.get_by_text("Filters", exact=True).click()
    expect(verdict).to_be_visible()
    verdict.select_option("fail")
    expect(page.locator("#run-rows tr")).to_have_count(1)
    expect(page.locator("#run-rows")).to_contain_text(f"#{run.pk}")
    page.reload()  # a filter in use: the fold says so
    expect(page.locator(".filter-fold summary")).to_contain_text("1 set")
    no_sideways_scroll(page)

    page.set_viewport_size({"width": 1400, "height": 900})
    page.reload()
    expect(verdict).to_be_visible()  # on a desktop the filters show open


def test_on_a_phone_the_picture_of_a_run_stacks_its_rows_with_readable_labels(phone: Page, live_server):
    page = phone
    # recorded as the worker records a run, so its header's figures are the recorder's (the README's screenshot)
    end = RunEnd("consecutive_errors", guard="3 tool errors in a row", verdict=Verdict(passed=False, reason="stuck"))
    run = recorded_run(steps=guard_stop_steps(), end=end, backend="simulated", model=SIMULATED_MODEL_NAME)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    # the model sent the refused call twice more: no harness retry, two wasted repeats
    expect(page.locator("#run-retries")).to_have_text(
        "0 (2 wasted on non-retryable errors, the model's repeats counted)"
    )
    picture = page.locator("#run-waterfall svg.waterfall.narrow")
    expect(picture).to_be_visible()
    expect(page.locator("#run-waterfall svg.waterfall.wide")).to_be_hidden()
    labels = picture.locator("text.label")
    first = labels.first.bounding_box()
    assert first is not None and first["height"] >= 10, f"labels are {first['height']} px tall"
    bar = picture.locator("g.row").first.locator("rect").first.bounding_box()
    assert bar is not None and bar["y"] >= first["y"] + first["height"] - 1, "the row's bar is under its label"
    expect(labels).to_have_count(page.locator("#waterfall-text li").count())
    no_sideways_scroll(page)
    save_screenshot(page, "run-phone.png")

    page.set_viewport_size({"width": 1400, "height": 900})
    expect(page.locator("#run-waterfall svg.waterfall.wide")).to_be_visible()
    expect(picture).to_be_hidden()


def test_on_a_phone_compare_does_not_scroll_sideways(phone: Page, live_server):
    page = phone
    a = refund_too_old_starter()
    b = refund_too_old_structured()
    page.goto(f"{live_server.url}/compare/")
    no_sideways_scroll(page)
    page.goto(f"{live_server.url}/compare/?a={a.pk}&b={b.pk}")
    expect(page.locator(".compare-heads .run-card")).to_have_count(2)
    no_sideways_scroll(page)


def test_on_a_phone_policies_does_not_scroll_sideways(phone: Page, live_server):
    page = phone
    refund_too_old_starter()
    refund_too_old_structured()
    for policy in ("patient", "impatient", "careful"):
        RunFactory(policy_name=policy)
    page.goto(f"{live_server.url}/policies/")
    expect(page.locator("#policy-matrix table")).to_be_visible()
    no_sideways_scroll(page)


def test_on_a_phone_tokens_does_not_scroll_sideways(phone: Page, live_server, user):
    page = phone
    tokens.token_create(user=user, name="a fairly long token name for the support bot on ci")
    page.goto(f"{live_server.url}/tokens/")
    expect(page.locator("#token-list")).to_contain_text("support bot")
    no_sideways_scroll(page)
