"""Dark mode from the system's setting (``prefers-color-scheme``): pages dark, their words light, with
the contrast WCAG asks of body text, on a desktop and on a phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import PASSWORD, USERNAME
from tests.factories import guard_stop, refund_too_old_starter, refund_too_old_structured

# The relative luminance (WCAG 2) of an element's computed colour, and the contrast of two.
LUMINANCE = """
window.rltLuminance = (css) => {
    const [r, g, b] = css.match(/[\\d.]+/g).slice(0, 3).map(Number).map((v) => {
        v /= 255;
        return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
};
window.rltContrast = (a, b) => {
    const [hi, lo] = [rltLuminance(a), rltLuminance(b)].sort((x, y) => y - x);
    return (hi + 0.05) / (lo + 0.05);
};
"""


def colours(page: Page, selector: str, background_of: str) -> dict:
    return page.evaluate(
        """([sel, bg]) => {
            const el = document.querySelector(sel);
            const back = getComputedStyle(document.querySelector(bg)).backgroundColor;
            const ink = getComputedStyle(el).color;
            return {back: rltLuminance(back), ink: rltLuminance(ink), contrast: rltContrast(back, ink)};
        }""",
        [selector, background_of],
    )


@pytest.fixture(params=[{"width": 1400, "height": 900}, {"width": 390, "height": 844}], ids=["desktop", "phone"])
def dark(browser, live_server, user, request) -> Page:
    context = browser.new_context(viewport=request.param, color_scheme="dark")
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.add_init_script(LUMINANCE)
    page.goto(f"{live_server.url}/")
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{live_server.url}/")
    yield page
    context.close()


def test_in_dark_mode_the_pages_are_dark_with_light_words_that_read(dark: Page, live_server):
    page = dark
    run = refund_too_old_starter()
    refund_too_old_structured()
    stopped = guard_stop()
    checks = {
        "/": [("h1", "body"), ("#run-rows td", ".table-wrap"), ("#run-rows a", ".table-wrap"), ("select", "select")],
        f"/runs/{run.pk}/": [("h1", "body"), (".step", ".step"), (".banner", ".banner"), (".muted", "body")],
        f"/runs/{stopped.pk}/": [(".step.is-error", ".step.is-error")],
        "/policies/": [("h1", "body"), ("#policy-matrix th", ".table-wrap")],
        "/stops/": [("h1", "body")],
        "/tokens/": [("h1", "body"), ("input", "input")],
    }
    for url, pairs in checks.items():
        page.goto(live_server.url + url)
        expect(page.locator("h1")).to_be_visible()
        for selector, background in pairs:
            seen = colours(page, selector, background)
            assert seen["back"] < 0.05, f"{url} {background} is not dark: {seen}"
            assert seen["ink"] > 0.35, f"{url} {selector} is not light: {seen}"
            assert seen["contrast"] >= 4.5, f"{url} {selector} on {background}: {seen}"


def test_in_light_mode_the_pages_stay_light(signed_in: Page, live_server):
    page = signed_in
    page.add_init_script(LUMINANCE)
    page.goto(f"{live_server.url}/")
    seen = colours(page, "h1", "body")
    assert seen["back"] > 0.8 and seen["ink"] < 0.05 and seen["contrast"] >= 4.5
