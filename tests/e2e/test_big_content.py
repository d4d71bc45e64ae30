"""A run with a 7 MiB step, sent through the step API: its page loads small, showing the start of the
step's text, and "show all" puts the whole text in its place, as text."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.tracer.test_api import Api
from tracer.previews import PREVIEW_CHARS
from tracer.tokens import token_create

MiB = 1024 * 1024
HOSTILE = '<img src=x onerror="window.pwned=1">'
TEXT = HOSTILE + "word " * ((7 * MiB - len(HOSTILE) - 4) // 5) + "#END"


@pytest.fixture
def big_run(user) -> int:
    api = Api(token_create(user=user, name="big agent")[1])
    run_id = api.post("/runs", {"scenario": "refund-too-old", "policy": "structured"}).json()["id"]
    call = {"kind": "tool_use", "tool_name": "lookup_order", "input": {"order_id": "0871"}, "text": TEXT}
    assert api.post(f"/runs/{run_id}/steps", {"steps": [call]}).status_code == 200
    answer = {"kind": "final_answer", "text": "Order 0871 cannot be refunded: it is 239 days old."}
    assert api.post(f"/runs/{run_id}/steps", {"steps": [answer]}).status_code == 200
    assert api.post(f"/runs/{run_id}/finish", {}).status_code == 200
    return run_id


@pytest.mark.parametrize(
    "size", [{"width": 1400, "height": 900}, {"width": 390, "height": 844}], ids=["desktop", "phone"]
)
def test_a_run_with_a_7_mib_step_loads_small_and_show_all_shows_the_whole_text(
    signed_in: Page, live_server, big_run, size
):
    page = signed_in
    page.set_viewport_size(size)
    response = page.goto(f"{live_server.url}/runs/{big_run}/")
    assert response.ok
    assert len(response.body()) < 200_000
    said = page.locator("#step-1 .said")
    expect(said).to_contain_text(HOSTILE)  # as text
    expect(said).not_to_contain_text("#END")
    show_all = said.get_by_role("link", name="show all (7,168 KB)")
    expect(show_all).to_be_visible()
    show_all.click()
    whole = said.locator(".clipped.whole")
    # 7 MiB to send, escape, parse and lay out, on a machine that may be busy
    expect(whole).to_contain_text("#END", timeout=60_000)
    assert whole.evaluate("node => node.textContent") == TEXT
    expect(said.get_by_role("link", name="show all")).to_have_count(0)
    assert page.evaluate("window.pwned") is None
    expect(page.locator("#step-1 img")).to_have_count(0)
    assert len(TEXT) > PREVIEW_CHARS
