"""A run's duration and cost in Chromium: one figure on the run's header, its picture, the runs list,
a coordinator's sub-agent line and the policies page's mean; the pace named apart; "not recorded" for
a transcript without timings; the list's duration, tokens and cost columns and their sorts; "/" and
j/k on the list."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from agents.events import ModelAttempt, RunEnd, StepEvent
from agents.vocabulary import StepKind
from tests.factories import ExperimentFactory, failed_attempt, ok_attempt, recorded_run, tool_step
from tracer.intake.files import item_arrival, run_import
from tracer.models import Run


def _recorded(*, model: str, steps: list[StepEvent], experiment=None, started_ago_s: float = 0.0) -> Run:
    end = RunEnd("final_answer", final_answer="Done.")
    return recorded_run(steps=steps, end=end, model=model, experiment=experiment, started_ago_s=started_ago_s)


def _timed_steps() -> list[StepEvent]:
    # 120 ms and 80 ms of model time, a 40 ms tool call, then a 500 ms backoff and a 60 ms retry
    failed = failed_attempt(1, category="transient", retryable=True, latency_ms=40.0)
    first = tool_step(1, [failed, ok_attempt(2, backoff_s=0.5, latency_ms=60.0)])
    first.model_attempts = [ModelAttempt(number=1, latency_ms=120.0)]
    first.input_tokens, first.output_tokens = 1_000_000, 0
    final = StepEvent(index=2, kind=StepKind.FINAL_ANSWER, text="Done.", input_tokens=0, output_tokens=200_000)
    final.model_attempts = [ModelAttempt(number=1, latency_ms=80.0)]
    return [first, final]


def test_one_duration_on_the_header_the_picture_and_the_list_with_the_pace_apart(signed_in: Page, live_server):
    page = signed_in
    paced = ExperimentFactory(step_delay_s=2.0)
    run = _recorded(model="claude-haiku-4-5", steps=_timed_steps(), experiment=paced, started_ago_s=30)
    assert run.measured_ms == 800.0 and run.waited_ms == 500.0

    page.goto(f"{live_server.url}/runs/{run.pk}/")
    # 120 + 40 + 500 + 60 + 80 ms, not the 30 s from its start to its end, nor the pace
    expect(page.locator("#run-duration")).to_contain_text("800 ms")
    expect(page.locator("#run-duration")).to_contain_text("500 ms of it waiting between attempts")
    expect(page.locator("#run-pace")).to_have_text(re.compile(r"2\.00 s after each step \(not counted\)"))
    expect(page.locator(".waterfall-legend")).to_contain_text("2 steps in 800 ms; 500 ms of it waiting")
    # one million tokens in at $1, 200,000 out at $5 per million: $2.00, and each step's share
    expect(page.locator("#run-cost")).to_have_text("$2.00")
    expect(page.locator("#step-1 .meta").first).to_contain_text("720 ms · 1000000/0 tokens · $1.00")
    expect(page.locator("#step-2 .meta").first).to_contain_text("80 ms · 0/200000 tokens · $1.00")

    page.goto(f"{live_server.url}/")
    row = page.locator(f"#run-row-{run.pk}")
    expect(row.locator("td").nth(9)).to_have_text("800 ms")
    expect(row.locator("td").nth(10)).to_have_text("1200000")
    expect(row.locator("td").nth(11)).to_have_text("$2.00")

    # the policies page's mean is of the same figure: not the 30 s of wall time with its pace
    page.goto(f"{live_server.url}/policies/")
    expect(page.locator('td[data-label="Duration"]')).to_have_text(["800 ms/run"])


def test_a_transcript_without_timings_says_not_recorded_and_an_unpriced_model_unknown(signed_in: Page, live_server):
    page = signed_in
    transcript = {
        "model": "a-model-nobody-prices",
        "messages": [
            {"role": "user", "content": "Refund order 0871."},
            {
                "role": "assistant",
                "content": "Order 0871 is past the 30-day window.",
                "usage": {"input_tokens": 50, "output_tokens": 20},
            },
        ],
    }
    run = run_import(arrival=item_arrival(data=transcript, scenario="refund-too-old", policy="structured"))
    page.goto(f"{live_server.url}/runs/{run.pk}/")
    expect(page.locator("#run-duration")).to_have_text("not recorded")
    expect(page.locator(".waterfall-legend")).to_contain_text("their timings were not recorded")
    page.goto(f"{live_server.url}/")
    row = page.locator(f"#run-row-{run.pk}")
    expect(row.locator("td").nth(9)).to_have_text("not recorded")
    expect(row.locator("td").nth(10)).to_have_text("70")
    expect(row.locator("td").nth(11)).to_have_text("unknown")


def test_the_list_sorts_by_duration_cost_verdict_and_stop_and_keys_move_through_it(signed_in: Page, live_server):
    page = signed_in
    cheap = _recorded(model="claude-haiku-4-5", steps=[tool_step(1, [ok_attempt(1, latency_ms=5.0)], tokens=(10, 5))])
    dear = _recorded(model="claude-haiku-4-5", steps=_timed_steps())
    unpriced = _recorded(model="a-model-nobody-prices", steps=[tool_step(1, [ok_attempt(1, latency_ms=50.0)])])
    Run.objects.filter(pk__in=[dear.pk, unpriced.pk]).update(verdict=Run.Verdict.PASS)
    Run.objects.filter(pk=cheap.pk).update(verdict=Run.Verdict.FAIL, stop_reason="consecutive_errors")
    page.goto(f"{live_server.url}/")
    ids = page.locator("#run-rows tr td:nth-child(2)")

    page.get_by_role("link", name="Duration").click()  # longest first
    expect(page).to_have_url(re.compile(r"sort=-duration"))
    expect(ids).to_have_text([f"#{dear.pk}", f"#{unpriced.pk}", f"#{cheap.pk}"])
    page.get_by_role("link", name="Cost").click()  # dearest first; an unknown cost sorts as the least
    expect(page).to_have_url(re.compile(r"sort=-cost"))
    expect(ids).to_have_text([f"#{dear.pk}", f"#{cheap.pk}", f"#{unpriced.pk}"])
    page.get_by_role("link", name=re.compile("^Cost")).click()  # cheapest first
    expect(ids).to_have_text([f"#{unpriced.pk}", f"#{cheap.pk}", f"#{dear.pk}"])
    page.get_by_role("link", name="Verdict").click()  # fail before pass
    expect(page).to_have_url(re.compile(r"sort=verdict"))
    expect(ids.first).to_have_text(f"#{cheap.pk}")
    page.get_by_role("link", name="Stop reason").click()  # consecutive_errors before final_answer
    expect(page).to_have_url(re.compile(r"sort=stop"))
    expect(ids.first).to_have_text(f"#{cheap.pk}")

    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("/")
    expect(page.get_by_role("textbox", name="Search")).to_be_focused()
    page.keyboard.press("Escape")
    page.locator("h1").click()
    page.keyboard.press("j")
    expect(page.locator(f"#run-row-{cheap.pk}")).to_be_focused()
    page.keyboard.press("j")
    expect(page.locator(f"#run-row-{dear.pk}")).to_be_focused()
    page.keyboard.press("k")
    expect(page.locator(f"#run-row-{cheap.pk}")).to_be_focused()
    page.keyboard.press("o")
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Run #{cheap.pk}")
