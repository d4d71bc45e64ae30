"""Browse and watch a run: its total duration and tokens in/out, sub-agents nested under the
step that started them, and the picture of the run (a waterfall of steps, attempts and backoff gaps with
identical failing calls folded), built from its steps (``tracer.waterfall``) and drawn on its page."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from agents.events import ModelAttempt
from tests.dom import page
from tests.factories import (
    RunFactory,
    StepFactory,
    failed_attempt,
    final_step,
    ok_attempt,
    step_row,
    steps_add,
    tool_step,
)
from tracer import recording
from tracer.models import Run
from tracer.reads import run_page
from tracer.tasks import run_execute_task
from tracer.waterfall import MAX_ROWS, waterfall_build

from .test_views_queries import HTMX, queries

pytestmark = pytest.mark.django_db

REFUSAL = {"isError": True, "error": {"errorCategory": "transient", "isRetryable": True, "message": "timed out"}}


def flaky(index: int, *, order: str = "0871") -> object:
    """A lookup that failed twice, waiting 0.5 s then 1 s before its retries, and then gave up."""
    attempts = [
        failed_attempt(1, category="transient", retryable=True, message="timed out", latency_ms=20),
        failed_attempt(2, category="transient", retryable=True, message="timed out", latency_ms=30, backoff_s=0.5),
        failed_attempt(3, category="transient", retryable=True, message="timed out", latency_ms=50, backoff_s=1.0),
    ]
    return tool_step(index, attempts, tool="lookup_order", input={"order_id": order}, result_content=REFUSAL)


def rows_of(events) -> list:
    return [step_row(event) for event in events]


# --- the waterfall's data ----------------------------------------------------------------------


def test_a_step_is_a_row_of_its_attempts_with_the_backoff_gaps_between_them():
    picture = waterfall_build(steps=rows_of([flaky(1)]), step_count=1)
    (row,) = picture.rows
    assert [(s.kind, round(s.start_s, 3), round(s.duration_s, 3)) for s in row.segments] == [
        ("fail", 0.0, 0.02),
        ("wait", 0.02, 0.5),
        ("fail", 0.52, 0.03),
        ("wait", 0.55, 1.0),
        ("fail", 1.55, 0.05),
    ]
    assert row.attempts == 3 and row.failed and row.waited_s == 1.5
    assert row.duration_text == "1.60 s"
    assert row.summary == (
        "step 1 lookup_order; 3 attempts, failed; 2 backoff gaps (1.50 s waiting: 500 ms, 1.00 s); "
        "1.60 s in all, from 0.0 ms"
    )
    # drawn left to right in proportion, on one axis that ends where the run's measured time ends
    xs = [(s.x, s.end_x) for s in row.segments]
    assert xs == sorted(xs) and xs[-1][1] == pytest.approx(picture.plot_x + picture.plot_w, abs=0.2)


def test_steps_follow_each_other_on_one_axis_with_their_model_calls():
    answer = final_step(3, "Refunded.")
    answer.model_attempts = [
        ModelAttempt(number=1, status=529, error="overloaded (529)", latency_ms=100),
        ModelAttempt(number=2, status=200, wait_s=2.0, latency_ms=400),
    ]
    ok = tool_step(2, [ok_attempt(1, latency_ms=100)], tool="process_refund")
    picture = waterfall_build(steps=rows_of([flaky(1), ok, answer]), step_count=3)
    first, second, third = picture.rows
    assert second.start_s == pytest.approx(first.duration_s)
    assert third.start_s == pytest.approx(1.6 + 0.1)
    assert [s.kind for s in third.segments] == ["model-fail", "wait", "model"]
    assert third.label == "3 final answer" and third.duration_text == "2.50 s"
    assert picture.total_s == pytest.approx(4.2)
    assert [t.text for t in picture.ticks] == ["0 s", "1.00 s", "2.00 s", "3.00 s", "4.00 s"]
    assert picture.summary == "3 steps in 4.20 s; 3.50 s of it waiting between attempts"


def test_identical_failing_calls_after_the_first_fold_into_one_row():
    events = [flaky(1), *(flaky(i) for i in range(2, 9)), flaky(9, order="0999"), final_step(10)]
    picture = waterfall_build(steps=rows_of(events), step_count=10)
    labels = [r.label for r in picture.rows]
    assert labels == ["1 lookup_order", "7 more identical failing calls", "9 lookup_order", "10 final answer"]
    folded = picture.rows[1]
    assert (folded.first, folded.last, folded.folded, folded.attempts) == (2, 8, 7, 21)
    assert folded.waited_s == pytest.approx(7 * 1.5)
    assert folded.summary.startswith("steps 2–8: 7 more identical failing calls to lookup_order; 21 attempts, failed")
    assert picture.summary.endswith("7 identical failing calls folded")


def test_a_call_that_worked_is_never_folded_nor_one_that_failed_differently():
    same_ok = [tool_step(i, [ok_attempt(1)], tool="lookup_order") for i in (1, 2)]
    other_error = tool_step(3, [failed_attempt(1)], tool="lookup_order", input={"order_id": "0871"})
    picture = waterfall_build(steps=rows_of([*same_ok, other_error, flaky(4)]), step_count=4)
    assert [r.folded for r in picture.rows] == [0, 0, 0, 0]


def test_a_long_run_draws_its_first_rows_and_says_how_many_steps_are_left_out():
    events = [tool_step(i, [ok_attempt(1)], tool="lookup_order", input={"n": i}) for i in range(1, MAX_ROWS + 11)]
    picture = waterfall_build(steps=rows_of(events), step_count=MAX_ROWS + 10)
    assert len(picture.rows) == MAX_ROWS and picture.hidden_steps == 10
    assert picture.summary.endswith(f"the first {MAX_ROWS} of {MAX_ROWS + 10} steps: 10 later ones not drawn")


def test_imported_steps_without_timings_are_drawn_as_ticks_without_failing():
    steps = rows_of([tool_step(1, [ok_attempt(1, latency_ms=0)])])
    steps[0].attempts = [{"number": 1, "ok": True, "latency_ms": "soon", "backoff_s": None}, "not an attempt"]
    picture = waterfall_build(steps=steps, step_count=1)
    (segment,) = picture.rows[0].segments
    assert segment.duration_s == 0 and segment.width > 0
    assert picture.summary == "1 step; their timings were not recorded"


# --- the run page ----------------------------------------------------------------------------


def test_the_run_page_shows_the_measured_duration_and_tokens_in_and_out(admin_client):
    # its steps measured 83 s, 20 s of it waiting; its start and end are a day apart (the wall clock)
    run = RunFactory(input_tokens=1234, output_tokens=56, measured_ms=83_000, waited_ms=20_000, step_count=3)
    Run.objects.filter(pk=run.pk).update(finished_at=run.started_at + timedelta(days=1))
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    stats = dict(zip(doc.texts("#run-status dt"), doc.texts("#run-status dd"), strict=True))
    assert stats["Duration"] == "1 min 23 s (20.0 s of it waiting between attempts)"
    assert stats["Tokens"] == "1234 in · 56 out"
    assert "simulated" in doc.texts(".head-badges .badge")


def test_a_run_whose_steps_recorded_no_timings_says_not_recorded(admin_client):
    run = RunFactory(step_count=2)
    Run.objects.filter(pk=run.pk).update(finished_at=run.started_at + timedelta(seconds=83))
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    stats = dict(zip(doc.texts("#run-status dt"), doc.texts("#run-status dd"), strict=True))
    assert stats["Duration"] == "not recorded"


def test_a_running_run_says_how_long_its_steps_took_so_far(admin_client):
    run = RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="", finished_at=None)
    recording.step_record(run=run, step=flaky(1))  # 20 + 500 + 30 + 1000 + 50 ms
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    (duration,) = [
        dd for dt, dd in zip(doc.texts("#run-status dt"), doc.texts("#run-status dd"), strict=True) if dt == "Duration"
    ]
    assert duration == "1.60 s so far (1.50 s of it waiting between attempts)"


def test_the_run_page_draws_its_waterfall_with_durations_gaps_and_folded_repeats(admin_client):
    run = RunFactory(step_count=10)
    steps_add(run, [flaky(1), *(flaky(i) for i in range(2, 9)), flaky(9, order="<b>0999</b>"), final_step(10)])
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    svg = doc.one("#run-waterfall svg.wide")
    rows = svg.select("g.row")
    assert [r["aria-label"].split(";")[0] for r in rows] == [
        "step 1 lookup_order",
        "steps 2–8: 7 more identical failing calls to lookup_order",
        "step 9 lookup_order",
        "step 10 final answer",
    ]
    assert "2 backoff gaps (1.50 s waiting: 500 ms, 1.00 s)" in rows[0]["aria-label"]
    assert [t for t in svg.texts("text.figure")] == ["1.60 s", "11.2 s", "1.60 s", "0.0 ms"]
    assert len(rows[1].select("line.wait")) == 14  # the folded calls' backoffs still show
    assert "7 more identical failing calls" in svg.texts("text.label")
    assert "7 identical failing calls folded" in svg["aria-label"]
    assert doc.one("#waterfall-text").texts("li")[1].startswith("steps 2–8: 7 more identical failing calls")


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(lambda: [flaky(1), final_step(2)], id="short"),
        pytest.param(lambda: [flaky(i, order=str(i)) for i in range(1, 51)], id="one window"),
        pytest.param(lambda: [flaky(i, order=str(i)) for i in range(1, 52)], id="one more than a window"),
        pytest.param(lambda: [flaky(i) for i in range(1, 300)], id="folded beyond the window"),
        pytest.param(lambda: [flaky(i, order=str(i % 2)) for i in range(1, 300)], id="more than 50 rows"),
    ],
)
def test_the_picture_drawn_from_the_timelines_steps_is_the_one_read_alone(steps, django_assert_max_num_queries):
    run = RunFactory(step_count=0)
    events = steps()
    steps_add(run, events)
    Run.objects.filter(pk=run.pk).update(step_count=len(events))
    run.refresh_from_db()
    alone = run_page.run_waterfall(run=run)
    window = run_page.step_window_first(run=run)
    sub_agents = run_page.run_sub_agents(run=run)  # the page reads them for its timeline anyway
    with django_assert_max_num_queries(1):  # the steps after the window's, only when the rows are not full
        from_window = run_page.run_waterfall(run=run, window=window, sub_agents=sub_agents)
    assert from_window.svg == alone.svg
    assert from_window.summary == alone.summary
    assert [r.summary for r in from_window.rows] == [r.summary for r in alone.rows]


def test_a_tool_name_from_a_trace_is_drawn_as_text(admin_client):
    run = RunFactory(step_count=1, source=Run.Source.IMPORT)
    steps_add(run, [tool_step(1, [ok_attempt(1)], tool='<img src=x onerror="alert(1)">')])
    response = admin_client.get(reverse("tracer:run", args=[run.pk]))
    svg = page(response).one("#run-waterfall svg.wide")
    assert svg.select("img") == [] and b"<img src=x" not in response.content
    assert svg.one("g.row")["aria-label"].startswith('step 1 <img src=x onerror="alert(1)">')


def test_the_waterfall_redraws_itself_while_the_run_runs_and_stops_when_it_ended(admin_client):
    run = RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="", step_count=1)
    steps_add(run, [flaky(1)])
    url = reverse("tracer:run", args=[run.pk])
    section = page(admin_client.get(url)).one("#run-waterfall")
    assert section["hx-trigger"] == "runStepsArrived from:body" and section["hx-get"] == url

    poll = admin_client.get(reverse("tracer:run-steps", args=[run.pk]) + "?after=0", headers=HTMX)
    assert poll["HX-Trigger"] == '{"runStepsArrived": {}}'
    assert "HX-Trigger" not in admin_client.get(reverse("tracer:run-steps", args=[run.pk]) + "?after=1", headers=HTMX)

    steps_add(run, [final_step(2)])
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED, step_count=2)
    response = admin_client.get(url, headers={**HTMX, "HX-Target": "run-waterfall"})
    fragment = page(response)
    assert [e["id"] for e in fragment.elements] == ["run-waterfall"]
    assert fragment.elements[0].get("hx-trigger") is None
    assert len(fragment.select("svg.wide g.row")) == 2
    assert "HX-Target" in response["Vary"]


def test_the_review_form_arrives_with_the_runs_end_in_place_of_reviewed_once_it_has_ended(admin_client):
    run = RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="", step_count=1)
    steps_add(run, [flaky(1)])
    panel = page(admin_client.get(reverse("tracer:run", args=[run.pk]))).one(f"#run-review-{run.pk}")
    assert "Reviewed once it has ended." in panel.text and not panel.select("form")
    poll_url = reverse("tracer:run-steps", args=[run.pk]) + "?after=1"
    assert not page(admin_client.get(poll_url, headers=HTMX)).select(f"#run-review-{run.pk}")

    steps_add(run, [final_step(2)])
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED, step_count=2, verdict=Run.Verdict.FAIL)
    panel = page(admin_client.get(poll_url, headers=HTMX)).one(f"#run-review-{run.pk}")

    assert panel["hx-swap-oob"] == "true"  # it replaces the page's panel
    assert "Reviewed once it has ended." not in panel.text
    assert panel.one("select[name=verdict_override]").texts("option")[0] == "judge's verdict stands (fail)"
    assert panel.one("input[name=next]")["value"] == reverse("tracer:run", args=[run.pk])


def test_sub_agents_show_under_the_step_that_started_them_with_their_tokens(admin_client):
    run = RunFactory(scenario="coordinator-partial", policy_name="structured")
    run.status, run.stop_reason, run.verdict = Run.Status.QUEUED, "", ""
    run.save()
    run_execute_task(run.pk)
    run.refresh_from_db()
    children = list(run.children.order_by("id"))
    assert children and all(c.parent_step for c in children)
    starters = {s.index: s.tool_name for s in run.steps.filter(index__in=[c.parent_step for c in children])}
    assert set(starters.values()) == {"run_subagent"}

    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    for child in children:
        nested = doc.one(f"#step-{child.parent_step} .sub-agents")
        (item,) = [li for li in nested.select("li.sub-agent") if li.one("a")["href"] == f"/runs/{child.pk}/"]
        assert child.label in item.text
        assert f"tokens {child.input_tokens} in · {child.output_tokens} out" in item.text
        assert "simulated" in item.text
    assert sum(len(doc.select(f"#step-{i} li.sub-agent")) for i in starters) == len(children)
    assert f"#sub-agents-{children[0].parent_step}" in [href for _, href in doc.one("aside").links]


def test_sub_agents_recorded_before_their_step_was_kept_are_folded_after_the_steps(admin_client):
    run = RunFactory(scenario="coordinator-partial")
    StepFactory(run=run, event=final_step(1, "Done."))
    old = RunFactory(parent=run, label="sub-agent 1: <i>lookup</i>", input_tokens=7, output_tokens=3)
    steps_add(old, [tool_step(1, [ok_attempt(1)], tool="lookup_order")])
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    after = doc.one("#sub-agents-unplaced")
    assert "Sub-agents not under a step" in after.one("h3").text
    fold = after.one(f"details#sub-agent-{old.pk}")
    assert fold.get("open") is None  # folded until it is opened
    head = fold.select("summary")[0]  # the fold's own, before its steps' own summaries
    assert head.one("a")["href"] == f"/runs/{old.pk}/"
    assert "sub-agent 1: <i>lookup</i>" in head.text and "tokens 7 in · 3 out" in head.text
    assert fold.one(f"#sub-agent-{old.pk}-step-1 code.tool").text == "lookup_order"
    assert doc.one("#step-1").select(".sub-agents") == []
    assert "#sub-agents-unplaced" in doc.one("aside").hrefs


def test_the_run_page_costs_the_same_for_n_and_3n_steps_and_sub_agents(admin_client):
    def grow(run: Run, n: int) -> None:
        start = run.steps.count()
        steps_add(run, [flaky(i) for i in range(start + 1, start + n + 1)])
        for i in range(start + 1, start + n + 1):
            RunFactory(parent=run, parent_step=i, label=f"sub-agent {i}", input_tokens=i, output_tokens=1)
        Run.objects.filter(pk=run.pk).update(step_count=start + n)

    run = RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="")
    grow(run, 5)
    url = reverse("tracer:run", args=[run.pk])
    poll = reverse("tracer:run-steps", args=[run.pk]) + "?after=0"
    n_page = queries(admin_client, url)
    n_poll = queries(admin_client, poll, headers=HTMX)
    n_picture = queries(admin_client, url, headers={**HTMX, "HX-Target": "run-waterfall"})
    grow(run, 10)
    assert run.children.count() == 15
    assert queries(admin_client, url) == n_page
    assert queries(admin_client, poll, headers=HTMX) == n_poll
    assert queries(admin_client, url, headers={**HTMX, "HX-Target": "run-waterfall"}) == n_picture


def test_a_sub_agent_still_running_is_named_on_the_live_line_until_its_step_arrives(admin_client):
    run = RunFactory(
        scenario="coordinator-partial", status=Run.Status.RUNNING, stop_reason="", verdict="", step_count=1
    )
    steps_add(run, [tool_step(1, [ok_attempt(1)], tool="run_subagent")])
    child = RunFactory(
        parent=run, parent_step=2, label="sub-agent 2: <b>lookup</b>", status=Run.Status.RUNNING, step_count=1
    )
    line = f"Step 2 is running a sub-agent: #{child.pk} sub-agent 2: <b>lookup</b>, 1 step so far"
    assert line in page(admin_client.get(reverse("tracer:run", args=[run.pk]))).one("#run-status").text
    poll = reverse("tracer:run-steps", args=[run.pk]) + "?after=1"
    assert line in page(admin_client.get(poll, headers=HTMX)).one("#run-status").text

    Run.objects.filter(pk=child.pk).update(status=Run.Status.FINISHED, step_count=2)
    steps_add(run, [tool_step(2, [ok_attempt(1)], tool="run_subagent")])
    Run.objects.filter(pk=run.pk).update(step_count=2)
    doc = page(admin_client.get(poll, headers=HTMX))
    assert "is running a sub-agent" not in doc.one("#run-status").text
    assert doc.one("#step-2 .sub-agents").hrefs == [f"/runs/{child.pk}/"]
