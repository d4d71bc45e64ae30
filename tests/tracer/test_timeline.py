"""A long run's timeline is windowed: the run page shows its first 50 steps (a live run's newest too),
and each gap loads the next 50 as an htmx fragment; a link to a step beyond the window still reaches it."""

import html

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.dom import parse
from tests.factories import RunFactory, StepFactory, ok_attempt, run_with_steps, steps_grow, tool_step
from tracer.models import Run

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def step_ids(doc) -> list[int]:
    return [int(li["id"].removeprefix("step-")) for li in doc.select("li.step")]


def gap_fill(client, gap) -> object:
    """What the gap's control gets, asked as htmx asks it (its target: the gap)."""
    link = gap.one("a[hx-get]")
    response = client.get(link["hx-get"], headers={**HTMX, "HX-Target": gap["id"]})
    assert response.status_code == 200
    return parse(response.content.decode())


def test_a_500_step_run_page_shows_its_first_50_steps_and_a_control_for_the_next(admin_client):
    run = run_with_steps(500)
    doc = parse(admin_client.get(reverse("tracer:run", args=[run.pk])).content.decode())
    assert step_ids(doc) == list(range(1, 51))
    [gap] = doc.select("li.step-gap")
    assert "Show steps 51–100" in gap.text
    assert "450 steps not shown yet (51–500)" in gap.text
    assert gap.one("a")["href"] == f"/runs/{run.pk}/?at=51#step-51"  # without JavaScript: the page at step 51


def test_the_gap_loads_the_next_50_steps_and_a_gap_for_the_rest_then_the_last(admin_client):
    run = run_with_steps(120)
    doc = parse(admin_client.get(reverse("tracer:run", args=[run.pk])).content.decode())
    more = gap_fill(admin_client, doc.one("li.step-gap"))
    assert step_ids(more) == list(range(51, 101))
    assert more.select("#run-status, #step-poll") == []  # only the steps, no status out of band
    [gap] = more.select("li.step-gap")
    assert "Show steps 101–120" in gap.text
    last = gap_fill(admin_client, gap)
    assert step_ids(last) == list(range(101, 121))
    assert last.select("li.step-gap") == []
    assert "Gave up." in last.one("#step-120").text


def test_a_link_to_a_step_beyond_the_window_opens_the_page_at_that_step(admin_client):
    run = run_with_steps(500)
    doc = parse(admin_client.get(reverse("tracer:run", args=[run.pk]), {"at": 480}).content.decode())
    assert step_ids(doc) == list(range(451, 501))
    [before] = doc.select("li.step-gap")
    assert "Show steps 1–50" in before.text
    assert step_ids(gap_fill(admin_client, before)) == list(range(1, 51))


def test_a_gap_asked_for_one_step_loads_the_window_that_holds_it(admin_client):
    run = run_with_steps(500)
    doc = parse(admin_client.get(reverse("tracer:run", args=[run.pk])).content.decode())
    gap = doc.one("li.step-gap")
    url = gap.one("a[hx-get]")["hx-get"] + "&at=480"
    response = admin_client.get(url, headers={**HTMX, "HX-Target": gap["id"]})
    filled = parse(response.content.decode())
    assert step_ids(filled) == list(range(451, 501))
    [hidden] = filled.select("li.step-gap")
    assert "400 steps not shown yet (51–450)" in hidden.text


def test_a_long_live_run_shows_its_newest_steps_and_polls_after_the_newest(admin_client):
    run = run_with_steps(300, status=Run.Status.RUNNING, stop_reason="", verdict="")
    doc = parse(admin_client.get(reverse("tracer:run", args=[run.pk])).content.decode())
    assert step_ids(doc) == [*range(1, 51), *range(291, 301)]
    assert "Show steps 51–100" in doc.one("li.step-gap").text
    assert doc.one("#step-poll")["hx-get"].endswith("?after=300")


def test_the_live_poll_sends_the_newest_steps_behind_a_gap_when_many_arrived(admin_client):
    run = run_with_steps(300, status=Run.Status.RUNNING, stop_reason="", verdict="")
    url = reverse("tracer:run-steps", args=[run.pk])
    doc = parse(admin_client.get(url, {"after": 20}, headers=HTMX).content.decode())
    assert step_ids(doc) == list(range(291, 301))
    assert "Show steps 21–70" in doc.one("li.step-gap").text
    assert doc.one("#step-poll")["hx-get"].endswith("?after=300")


def test_a_gap_of_nonsense_bounds_answers_the_first_window(admin_client):
    run = run_with_steps(80)
    url = reverse("tracer:run-steps", args=[run.pk])
    response = admin_client.get(
        url, {"after": "x", "before": "-3", "at": "y"}, headers={**HTMX, "HX-Target": "step-gap-1"}
    )
    assert response.status_code == 200
    assert step_ids(parse(response.content.decode())) == list(range(1, 51))


def test_a_gap_costs_the_same_queries_for_100_and_1000_steps(admin_client):
    run = run_with_steps(100)
    url = reverse("tracer:run-steps", args=[run.pk]) + "?after=50"
    headers = {**HTMX, "HX-Target": "step-gap-51"}

    def queries() -> int:
        admin_client.get(url, headers=headers)
        with CaptureQueriesContext(connection) as ctx:
            assert admin_client.get(url, headers=headers).status_code == 200
        return len(ctx.captured_queries)

    hundred = queries()
    steps_grow(run, 1000)
    assert queries() == hundred


def test_a_steps_json_shows_indented_with_sorted_keys_and_escaped(admin_client):
    run = RunFactory()
    content = {"zeta": "<script>alert(1)</script>", "alpha": {"café": [1, 2]}, "big": 2**70}
    StepFactory(run=run, event=tool_step(1, [ok_attempt(1, content)], tool="lookup_orders", result_content=content))
    response = admin_client.get(reverse("tracer:run", args=[run.pk]))
    body = response.content.decode()
    assert "<script>alert(1)</script>" not in body
    assert parse(body).one("#step-1 details.result pre")  # the tool_result, in full
    result = body[body.index('<details class="result">') :]
    shown = html.unescape(result[result.index("<pre>") + 5 : result.index("</pre>")])
    assert "<script>" in shown  # escaped in the page, read back as written
    assert shown.index('"alpha"') < shown.index('"big"') < shown.index('"zeta"')
    assert '\n  "alpha": {\n    "café": [\n      1,' in shown
    assert str(2**70) in shown  # beyond orjson's 64 bits: the standard library writes it
