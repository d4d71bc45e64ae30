"""What a person meets on any page: the compare picker, our own error pages, the favicon, a layout
that works 800 px wide (wide tables scroll, with a hint that they do), the skip link, and every
control reachable with the keyboard."""

from __future__ import annotations

import re

import pytest
from django.urls import include, path
from playwright.sync_api import Page, expect

from tests.factories import ExperimentFactory, RunFactory, guard_stop, refund_too_old_starter, refund_too_old_structured
from tracer.models import Run


def _fail(request):
    raise RuntimeError("a secret detail of the failure")


# The project's URLs and one view that fails, for the 500 page through Django's real handler.
urlpatterns = [path("fail/", _fail), path("", include("config.urls"))]


def test_compare_from_the_navigation_offers_a_picker_and_compares_the_two_runs_picked(signed_in: Page):
    page = signed_in
    starter = refund_too_old_starter()
    structured = refund_too_old_structured()
    RunFactory(scenario="lookup-flaky")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Compare").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Compare two runs")
    expect(page.locator(".error")).to_have_count(0)  # no "This field is required" before asking
    page.get_by_label("Run A").fill(str(starter.pk))
    page.get_by_role("button", name="Compare", exact=True).click()  # Run B left out: the browser asks for it
    assert page.get_by_label("Run B").evaluate("el => el.validity.valueMissing")
    expect(page).to_have_url(re.compile(r"/compare/$"))
    page.goto(f"{page.url}?a={starter.pk}")  # asked without the browser's check, the page names it
    expect(page.locator("#error-b")).to_have_text("Run B: pick a run")
    expect(page.get_by_label("Run A")).to_have_value(str(starter.pk))

    page.get_by_label("Run B").fill(str(structured.pk))
    page.get_by_role("button", name="Compare", exact=True).click()
    expect(page).to_have_url(re.compile(rf"a={starter.pk}&b={structured.pk}"))
    expect(page.locator(".compare-heads .run-card")).to_have_count(2)
    expect(page.locator(".compare-heads .run-card").nth(1)).to_contain_text("structured")

    page.goto(f"{page.url.split('?')[0]}?a={starter.pk}&b=99999")
    expect(page.locator("#error-b")).to_have_text("Run B: there is no run #99999")
    expect(page.get_by_label("Run A")).to_have_value(str(starter.pk))


def test_an_unknown_address_shows_our_page_not_found(signed_in: Page, live_server):
    page = signed_in
    response = page.goto(f"{live_server.url}/runs/999999/")
    assert response.status == 404
    expect(page.get_by_role("heading", level=1)).to_have_text("Page not found")
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    page.get_by_role("link", name="Go to the runs").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Runs")


@pytest.mark.urls(__name__)
def test_a_failing_page_shows_our_server_error_page_not_a_traceback(signed_in: Page, live_server, settings):
    assert settings.DEBUG is False
    page = signed_in
    response = page.goto(f"{live_server.url}/fail/")
    assert response.status == 500
    expect(page.get_by_role("heading", level=1)).to_have_text("Something went wrong")
    expect(page.locator("body")).not_to_contain_text("a secret detail")
    expect(page.locator("body")).not_to_contain_text("Traceback")
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(246, 247, 249)"  # styled
    page.get_by_role("link", name="Go to the runs").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Runs")


def test_the_favicon_shows_and_no_page_asks_for_a_missing_file(signed_in: Page, live_server):
    page = signed_in
    run = refund_too_old_starter()
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status >= 400 else None)
    page.on("console", lambda m: missing.append(m.text) if m.type == "error" else None)
    for url in ("/", f"/runs/{run.pk}/", "/compare/", "/policies/", "/stops/", "/admin/", "/api/docs"):
        page.goto(live_server.url + url)
        page.wait_for_load_state("networkidle")
        # The icon the browser shows: the page's own, or /favicon.ico for pages without one (the admin).
        size = page.evaluate(
            """async () => {
                const link = document.querySelector("link[rel=icon]");
                const img = new Image();
                img.src = link ? link.href : "/favicon.ico";
                await img.decode();
                return img.naturalWidth;
            }"""
        )
        assert size > 0, url
    assert missing == []


@pytest.fixture
def narrow(signed_in: Page) -> Page:
    signed_in.set_viewport_size({"width": 800, "height": 900})
    return signed_in


def scroll_hint(page: Page, selector: str) -> str:
    """The hint a wide table shows under itself (CSS generated content), or "" when it fits."""
    return page.eval_on_selector(selector, "el => getComputedStyle(el, '::after').content.replace(/^none$/, '')")


def test_at_800_px_the_runs_list_scrolls_inside_its_frame_with_a_hint(narrow: Page, live_server):
    page = narrow
    refund_too_old_starter()
    guard_stop()
    page.goto(f"{live_server.url}/")
    frame = "#run-table .table-wrap"
    expect(page.locator(frame)).to_have_attribute("data-overflowing", "")
    assert "scroll sideways" in scroll_hint(page, frame)
    # The page itself does not scroll sideways: only the table, inside its frame.
    assert page.evaluate("document.documentElement.scrollWidth") <= 800
    nav = page.get_by_role("navigation", name="Main")
    for name in ("Runs", "Compare", "Policies", "Stops", "Launch", "Import", "API tokens"):
        link = nav.get_by_role("link", name=name, exact=True)
        expect(link).to_be_in_viewport()
    page.locator(frame).evaluate("el => el.scrollBy(2000, 0)")
    expect(page.locator(f"{frame} th", has_text="Final answer")).to_be_in_viewport()

    page.set_viewport_size({"width": 1800, "height": 900})  # wide enough: no hint
    expect(page.locator(frame)).not_to_have_attribute("data-overflowing", "")
    assert scroll_hint(page, frame) == ""


def test_at_800_px_a_wide_matrix_scrolls_with_a_hint(narrow: Page, live_server):
    page = narrow
    for policy in ("starter", "structured", "patient", "impatient", "careful"):
        RunFactory(policy_name=policy)
    page.goto(f"{live_server.url}/policies/?cells=detail")  # the detailed cells: the heat map fits
    frame = "#policy-matrix .table-wrap"
    expect(page.locator(f"{frame} table")).to_be_visible()
    expect(page.locator(frame)).to_have_attribute("data-overflowing", "")
    assert "scroll sideways" in scroll_hint(page, frame)
    assert page.evaluate("document.documentElement.scrollWidth") <= 800


def test_the_skip_link_comes_first_and_jumps_to_the_content(signed_in: Page, live_server):
    page = signed_in
    page.goto(f"{live_server.url}/")
    skip = page.get_by_role("link", name="Skip to the content")
    expect(skip).not_to_be_in_viewport()  # out of sight until the keyboard reaches it
    page.keyboard.press("Tab")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()
    page.keyboard.press("Tab")  # the next stop is inside the content, past the navigation
    assert page.evaluate("document.activeElement.closest('main') !== null")


def focus_path(page: Page, stops: int) -> list[str]:
    """What Tab reaches, in order: each focused element's role-ish name."""
    seen = []
    for _ in range(stops):
        page.keyboard.press("Tab")
        seen.append(
            page.evaluate(
                """() => {
                    const el = document.activeElement;
                    const name = el.getAttribute("aria-label") || el.name || el.textContent.trim().slice(0, 40);
                    return `${el.tagName.toLowerCase()}:${name}`;
                }"""
            )
        )
    return seen


def test_the_runs_list_and_compare_work_from_the_keyboard(signed_in: Page, live_server):
    page = signed_in
    a = refund_too_old_starter()
    b = refund_too_old_structured()
    page.goto(f"{live_server.url}/")
    path_ = focus_path(page, 60)
    for stop in ("a:Compare", "a:Policies", "select:verdict", f"a:#{a.pk}", f"input:tick run {b.pk}"):
        assert stop in path_, f"{stop} not reached: {path_}"
    # Every stop shows where the focus is.
    page.get_by_role("link", name=f"#{a.pk}", exact=True).focus()
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"

    # Tick both runs and compare, with the keyboard only.
    page.locator(f"#run-pick-{a.pk}").focus()
    page.keyboard.press("Space")
    page.locator(f"#run-pick-{b.pk}").focus()
    page.keyboard.press("Space")
    button = page.locator("[data-compare-button]")
    expect(button).to_be_enabled()
    button.focus()
    page.keyboard.press("Enter")
    expect(page.locator(".compare-heads .run-card")).to_have_count(2)
    assert Run.objects.count() == 2


def test_a_run_that_answered_wrongly_is_not_framed_as_a_success(signed_in: Page, live_server):
    page = signed_in
    failed = refund_too_old_starter()  # a final answer, judged fail
    passed = refund_too_old_structured()
    colours = {}
    for run in (failed, passed):
        page.goto(f"{live_server.url}/runs/{run.pk}/")
        colours[run.verdict] = page.locator(".banner").evaluate("el => getComputedStyle(el).borderLeftColor")
    assert colours == {"fail": "rgb(180, 35, 24)", "pass": "rgb(28, 124, 74)"}  # --bad, --ok


def test_a_fragment_the_server_could_not_give_is_said_not_dropped_in_silence(signed_in: Page, live_server):
    page = signed_in
    refund_too_old_starter()
    refund_too_old_structured()
    page.goto(f"{live_server.url}/")
    alert = page.locator("#request-error")
    expect(alert).to_be_hidden()
    verdict = page.locator("form.filters select[name=verdict]")

    def fail(route):  # the filter's fragment fails as a server error would; the page itself still loads
        if route.request.headers.get("hx-request"):
            route.fulfill(status=500, body="")
        else:
            route.continue_()

    page.route(re.compile(r"verdict=fail"), fail)
    verdict.select_option("fail")
    expect(alert).to_have_text(re.compile(r"could not answer \(500\), so this page was not updated"))
    expect(page.locator("#run-rows tr")).to_have_count(2)  # the table as it was
    page.route(re.compile(r"verdict=pass"), lambda route: route.abort())
    verdict.select_option("pass")
    expect(alert).to_have_text(re.compile(r"did not answer"))
    verdict.select_option("")  # the server answers again: the message goes
    expect(alert).to_be_hidden()
    expect(page.locator("#run-rows tr")).to_have_count(2)


# Every control a person can see: the ones Tab must reach. A radio group is one stop (arrows move
# within it), so only its first radio is asked for.
CONTROLS = """() => {
    const seen = new Set();
    const all = document.querySelectorAll("a[href], button, input, select, textarea, summary");
    const controls = [...all].filter((el) => {
        if (el.disabled || el.type === "hidden" || !el.checkVisibility()) return false;
        if (el.type === "radio") {
            if (seen.has(el.name)) return false;
            seen.add(el.name);
        }
        return true;
    });
    controls.forEach((el, i) => (el.dataset.kb = i));
    return controls.map((el) => `${el.tagName.toLowerCase()} ${el.name || el.textContent.trim().slice(0, 30)}`);
}"""
REACHED = """() => {
    const el = document.activeElement;
    const radio = el.type === "radio" && document.querySelector(`[data-kb][name="${el.name}"]`);
    return (radio || el).dataset.kb ?? null;
}"""


# The review, watch and matrix panels, which each page must show and Tab must reach: the review form,
# the picture of a run in words, the matrix's experiment and backend pickers, the pace control.
PANEL_CONTROLS = {
    "run": ["select verdict_override", "button Save review", "summary The picture in words"],
    "policies": ["input experiment", "select model_backend"],
    "stops": ["input verdict", "select verdict_override", "button Save review"],
    "launch": ["input step_delay_s"],
    "experiment": ["a Open its matrix"],
}


@pytest.mark.parametrize(
    "where", ["runs", "run", "compare", "policies", "stops", "launch", "experiment", "import", "tokens"]
)
def test_tab_reaches_every_control_a_person_can_see(signed_in: Page, live_server, where):
    page = signed_in
    experiment = ExperimentFactory(finished_runs=2, total_runs=2)
    a, b = refund_too_old_starter(experiment=experiment), refund_too_old_structured(experiment=experiment)
    guard_stop()
    url = {
        "runs": "/",
        "run": f"/runs/{a.pk}/",
        "compare": f"/compare/?a={a.pk}&b={b.pk}",
        "policies": "/policies/",
        "stops": "/stops/",
        "launch": "/launch/",
        "experiment": f"/experiments/{experiment.pk}/",
        "import": "/import/",
        "tokens": "/tokens/",
    }[where]
    page.goto(live_server.url + url)
    controls = page.evaluate(CONTROLS)
    for control in PANEL_CONTROLS.get(where, []):
        assert any(c.startswith(control) for c in controls), f"no {control} on the page: {controls}"
    reached = set()
    for _ in range(3 * len(controls) + 10):
        page.keyboard.press("Tab")
        index = page.evaluate(REACHED)
        if index is not None:
            reached.add(int(index))
    missed = [name for i, name in enumerate(controls) if i not in reached]
    assert missed == [], f"Tab never reaches {missed}"


@pytest.mark.parametrize(
    "where", ["run", "compare", "picker", "stops", "launch", "experiment", "import", "tokens", "missing"]
)
def test_at_800_px_no_page_scrolls_sideways(narrow: Page, live_server, where):
    page = narrow
    experiment = ExperimentFactory(finished_runs=2, total_runs=2)
    a, b = refund_too_old_starter(experiment=experiment), refund_too_old_structured(experiment=experiment)
    guard_stop()
    url = {
        "experiment": f"/experiments/{experiment.pk}/",
        "run": f"/runs/{a.pk}/",
        "compare": f"/compare/?a={a.pk}&b={b.pk}",
        "picker": "/compare/",
        "stops": "/stops/",
        "launch": "/launch/",
        "import": "/import/",
        "tokens": "/tokens/",
        "missing": "/runs/999999/",
    }[where]
    page.goto(live_server.url + url)
    wide = page.evaluate(
        """() => [...document.querySelectorAll("body *")]
            .filter((el) => el.getBoundingClientRect().right > 801 && !el.closest(".table-wrap, pre"))
            .map((el) => el.tagName.toLowerCase() + (el.className ? "." + el.className : ""))"""
    )
    assert page.evaluate("document.documentElement.scrollWidth") <= 800, wide
