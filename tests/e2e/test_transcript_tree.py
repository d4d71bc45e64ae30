"""The run page's raw transcript as a tree that folds: entries open and close, what a trace holds is
shown as text (escaped), and a long value is cut, saying how much more the download has."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from tests.factories import refund_too_old_starter
from tracer.json_tree import STRING_CHARS
from tracer.models import Run

HOSTILE = '<img src=x onerror="window.pwned=1">'


def unfold(part) -> None:
    """Opens every fold in ``part`` as a person would, outermost first (the first closed one in document
    order is never inside another closed one)."""
    closed = part.locator("details.j-node:not([open])")
    while closed.count():
        closed.first.locator(":scope > summary").click()


@pytest.mark.parametrize(
    "size", [{"width": 1400, "height": 900}, {"width": 390, "height": 844}], ids=["desktop", "phone"]
)
def test_the_raw_transcript_is_a_tree_that_folds_escaped_and_bounded(signed_in: Page, live_server, size):
    page = signed_in
    page.set_viewport_size(size)
    run = refund_too_old_starter()
    transcript = [
        {"role": "user", "content": "Refund order A-1001, please."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "name": "lookup_order", "input": {"order_id": "A-1001", "note": HOSTILE}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "content": "x" * (STRING_CHARS + 5000)}]},
    ]
    Run.objects.filter(pk=run.pk).update(transcript=transcript)
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    page.locator("#run-transcript > summary").click()
    tree = page.locator("#run-transcript .json-tree")
    expect(tree).to_be_visible()
    entries = tree.locator(":scope > details.j-node > ul > li")
    expect(entries).to_have_count(3)
    expect(entries.first).to_contain_text('"role": "user"')
    # Below its first levels the tree starts folded: the tool call's input shows once unfolded, as text.
    tool_call = entries.nth(1)
    expect(tool_call.get_by_text('"lookup_order"')).to_be_hidden()
    unfold(tool_call)
    expect(tool_call).to_contain_text('"name": "lookup_order"')
    expect(tool_call).to_contain_text(json.dumps(HOSTILE))  # as text, in JSON quotes
    assert page.evaluate("window.pwned") is None
    expect(page.locator("#run-transcript img")).to_have_count(0)
    # The long result is cut and says by how much.
    long = entries.nth(2)
    unfold(long)
    expect(long.locator(".j-cut")).to_have_text("… 5,000 more characters")
    assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
    # Folding the root closes the whole tree.
    tree.locator(":scope > details.j-node > summary").click()
    expect(entries.first).to_be_hidden()
