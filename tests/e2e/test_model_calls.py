"""A claude run whose model calls the API answered with 529 and 429, read in the browser:
the run page shows each attempt and the wait before it apart from the tool's retries, and a run that
crashed on the API says why in words, with the call that ended it."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.fake_messages_api import error, reply, tool_use
from tracer.execution import run_execute
from tracer.experiments import run_create
from tracer.models import PolicyVariant, Run


def claude_run(fake_api, settings) -> Run:
    settings.ANTHROPIC_API_KEY = fake_api.key
    run = run_create(
        scenario="lookup-flaky", policy=PolicyVariant.objects.get(name="structured"), model_backend="claude"
    )
    return run_execute(run_id=run.pk)


def test_a_429_529_sequence_shows_its_waits_on_the_run_page(signed_in: Page, live_server, fake_api, settings):
    page = signed_in
    fake_api.script(error(529, retry_after=0.05), error(429, retry_after=0.1))
    retried = claude_run(fake_api, settings)
    page.goto(f"{live_server.url}/runs/{retried.pk}/")
    call = page.locator("#step-1 .model-call")
    expect(call.locator(".attempt .badge")).to_have_text(["529", "429", "200"])
    expect(call.locator(".attempt").nth(1)).to_contain_text("waited 0.05 s")
    expect(call.locator(".attempt").nth(2)).to_contain_text("waited 0.1 s")
    expect(call).to_contain_text("was overloaded (529)")
    expect(page.locator("#run-status")).to_contain_text(re.compile(r"Model retries\s*2"))

    fake_api.script(reply(tool_use("lookup", {"key": "answer"})), *[error(529, retry_after=0.01)] * 3)
    crashed = claude_run(fake_api, settings)
    page.goto(f"{live_server.url}/runs/{crashed.pk}/")
    banner = page.locator("#run-status .banner")
    expect(banner.locator(".error-text")).to_contain_text("the model API was overloaded (529) three times")
    expect(banner.locator(".error-text")).to_contain_text("Done before it stopped: step 1 lookup succeeded")
    expect(banner.locator(".model-call .attempt .badge")).to_have_text(["529", "529", "529"])
