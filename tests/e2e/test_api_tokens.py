"""In Chromium: a person makes an API token on its page and sees the secret once; an agent using it
reports a run step by step, and the run's page shows each step arrive, as it does for a worker's run."""

from __future__ import annotations

import re

import httpx2
from playwright.sync_api import Page, expect

from tracer.models import ApiToken


def test_a_token_is_made_on_its_page_shown_once_and_revoked(signed_in: Page, live_server):
    from tests.e2e.test_csp import LISTEN

    page = signed_in
    page.add_init_script(LISTEN)  # every CSP violation from here on
    page.get_by_role("link", name="API tokens").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("API tokens")
    expect(page.locator("#token-list")).to_contain_text("No tokens yet")

    page.get_by_label("Name").fill("n" * 101)  # one past the limit: refused naming it, never cut to fit
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#token-form")).to_contain_text("at most 100 characters; got 101")
    assert not ApiToken.objects.exists()

    page.get_by_label("Name").fill("support bot on ci")
    page.get_by_role("button", name="Create token").click()
    secret_box = page.locator("#token-secret")
    expect(secret_box).to_have_value(re.compile(r"^rlt_[A-Za-z0-9_-]{40,}$"))
    secret = secret_box.input_value()
    expect(page.locator("#token-form")).to_contain_text("shown only this once")
    # the list refreshed itself (htmx event), showing the prefix, never the secret
    token = ApiToken.objects.get(name="support bot on ci")
    expect(page.locator("#token-list")).to_contain_text(f"{token.prefix}…")
    expect(page.locator("#token-list")).not_to_contain_text(secret)
    page.get_by_role("button", name="Copy").click()
    expect(page.get_by_role("button", name=re.compile("Copied|Selected"))).to_be_visible()

    assert page.evaluate("window.cspViolations") == []  # htmx swaps and the copy button, under the CSP

    # the token works against the API…
    api = httpx2.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {secret}"})
    assert api.get("/api/runs").status_code == 200

    # …and after a reload the secret is gone for good
    page.reload()
    expect(page.locator("#token-secret")).to_have_count(0)
    assert secret not in page.content()

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(f"#token-{token.pk}").get_by_role("button", name="Revoke").click()
    expect(page.locator(f"#token-{token.pk}")).to_contain_text(re.compile(r"\d{4}-\d\d-\d\d"))
    expect(page.locator(f"#token-{token.pk}").get_by_role("button", name="Revoke")).to_have_count(0)
    assert api.get("/api/runs").status_code == 401


def test_a_run_reported_through_the_api_arrives_live_on_its_page(signed_in: Page, live_server, user):
    from tracer.tokens import token_create

    page = signed_in
    api = httpx2.Client(
        base_url=live_server.url, headers={"Authorization": f"Bearer {token_create(user=user, name='agent')[1]}"}
    )
    run = api.post("/api/runs", json={"scenario": "refund-too-old", "policy": "structured", "task": "Refund 0871"})
    assert run.status_code == 201, run.text
    run_id = run.json()["id"]

    page.goto(f"{live_server.url}/runs/{run_id}/")
    expect(page.locator("#run-status")).to_contain_text("running")
    expect(page.locator(".imported-note")).to_contain_text("step API")
    expect(page.locator("#step-poll")).to_be_attached()

    refusal = {
        "kind": "tool_use",
        "tool_name": "process_refund",
        "tool_use_id": "toolu_1",
        "input": {"order_id": "0871"},
        "attempts": [{"number": 1, "ok": False, "category": "business", "retryable": False, "message": "239 days old"}],
    }
    assert api.post(f"/api/runs/{run_id}/steps", json={"steps": [refusal]}).status_code == 200
    expect(page.locator("#step-1")).to_contain_text("process_refund")  # polled in, no reload
    expect(page.locator("#step-1")).to_contain_text("business")
    expect(page.locator("#run-status")).to_contain_text("running")

    answer = {"kind": "final_answer", "text": "Order 0871 is 239 days old: no refund."}
    assert api.post(f"/api/runs/{run_id}/steps", json={"steps": [answer]}).status_code == 200
    assert api.post(f"/api/runs/{run_id}/finish", json={"verdict": "pass"}).status_code == 200
    expect(page.locator("#step-2")).to_contain_text("239 days old")
    expect(page.locator("#run-status")).to_contain_text("finished")
    expect(page.locator("#run-status")).to_contain_text("Final answer")
    expect(page.locator("#step-poll")).to_have_count(0)  # polling stopped by itself


def test_the_api_docs_page_works_under_the_csp(page: Page, live_server, user):
    """Swagger UI from this site's static files: browse an operation, authorize, try it out."""
    from tests.e2e.test_csp import LISTEN
    from tracer.tokens import token_create

    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text) if "Content Security Policy" in msg.text else None)
    page.add_init_script(LISTEN)
    page.goto(f"{live_server.url}/api/docs")
    expect(page.get_by_text("Repair Loop Tracer API")).to_be_visible()
    page.get_by_role("button", name="Authorize").first.click()
    dialog = page.locator(".dialog-ux")
    dialog.locator(".auth-container input").fill(token_create(user=user, name="docs")[1])
    dialog.get_by_role("button", name="Apply credentials").click()
    dialog.get_by_role("button", name="Close").click()
    page.get_by_text("Your runs", exact=True).click()
    page.get_by_role("button", name="Try it out").click()
    page.get_by_role("button", name="Execute").click()
    expect(page.locator(".responses-wrapper .live-responses-table")).to_contain_text("200")
    assert [*page.evaluate("window.cspViolations"), *console] == []


def test_the_api_docs_page_leads_back_to_the_dashboard(signed_in: Page, live_server):
    page = signed_in
    for size in ({"width": 1400, "height": 900}, {"width": 390, "height": 844}):
        page.set_viewport_size(size)
        page.goto(f"{live_server.url}/api/docs")
        expect(page.get_by_text("Repair Loop Tracer API")).to_be_visible()
        page.get_by_role("link", name="Back to the dashboard").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Runs")
    page.goto(f"{live_server.url}/api/docs")
    page.get_by_role("navigation", name="Dashboard").get_by_role("link", name="API tokens").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("API tokens")
