"""A coordinator's run page is one tree: each sub-agent folded under the step that ran it, opening on its
steps, live while it runs; the picture nests its rows the same way; a sub-agent's other policies are the
matching sub-agents of the other policies' coordinators."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.dom import page, parse
from tests.factories import RunFactory, final_step, ok_attempt, steps_add, steps_grow, tool_step
from tracer.execution import run_execute
from tracer.experiments import run_create
from tracer.models import PolicyVariant, Run
from tracer.reads import run_page
from tracer.waterfall import duration_text, seconds_text, step_time_s

from .test_views_queries import HTMX, queries

pytestmark = pytest.mark.django_db


def coordinator(policy: str = "structured") -> Run:
    run = run_create(scenario="coordinator-partial", policy=PolicyVariant.objects.get(name=policy))
    return run_execute(run_id=run.pk)


def test_each_sub_agent_is_folded_under_its_step_with_its_policy_verdict_steps_duration_and_failures(admin_client):
    run = coordinator()
    children = list(run.children.order_by("id"))
    assert len(children) == 4
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    for child in children:
        fold = doc.one(f"#step-{child.parent_step} .sub-agents details#sub-agent-{child.pk}")
        assert fold.get("open") is None  # folded by default
        head = fold.select("summary")[0]
        assert head.one("a")["href"] == f"/runs/{child.pk}/" and child.label in head.text
        assert head.one(".badge.policy").text == child.policy_name
        assert head.one(".verdict, .unjudged").text == (child.verdict or "unjudged")
        meta = head.one(".meta").text
        steps = f"{child.step_count} step{'s' if child.step_count != 1 else ''}"
        assert meta.startswith(f"{steps} · {child.error_count} failed step")
        assert meta.endswith(duration_text(child.measured_ms))
        # its steps, nested, with ids of their own and what each called
        nested = fold.select("ol.nested-steps > li.step")
        assert [n["id"] for n in nested] == [
            f"sub-agent-{child.pk}-step-{s.index}" for s in child.steps.order_by("index")
        ]
        tools = [s.tool_name for s in child.steps.order_by("index") if s.kind == "tool_use"]
        assert [n.one("code.tool").text for n in nested if n.select("code.tool")] == tools
    assert len(doc.select("li.step[id^=step-]")) == run.step_count  # the nested steps are not the run's own
    slow = next(c for c in children if "1050" in c.label)
    assert "is-error" in doc.one(f"#sub-agent-{slow.pk}-step-1").classes  # the lookup that timed out


def test_a_sub_agent_of_hundreds_of_steps_nests_its_first_and_links_to_the_rest(admin_client):
    run = RunFactory(step_count=2)
    steps_add(run, [tool_step(1, [ok_attempt(1)], tool="run_subagent"), final_step(2, "Done.")])
    child = RunFactory(parent=run, parent_step=1, label="long job", step_count=300, verdict=Run.Verdict.FAIL)
    steps_grow(child, 300)
    body = admin_client.get(reverse("tracer:run", args=[run.pk])).content
    fold = parse(body).one(f"details#sub-agent-{child.pk}")
    assert len(fold.select("ol.nested-steps > li.step")) == run_page.SUB_STEPS
    more = fold.one(".sub-agent-more")
    assert f"{300 - run_page.SUB_STEPS} more steps (of 300) on its page" in more.text
    assert more.one("a")["href"] == f"/runs/{child.pk}/"
    assert len(body) < 150_000  # not 300 steps' cards


def coordinator_running_a_sub_agent() -> tuple[Run, Run]:
    """A coordinator running its second step's sub-agent, which has made one call so far."""
    run = RunFactory(
        scenario="coordinator-partial", status=Run.Status.RUNNING, stop_reason="", verdict="", step_count=1
    )
    steps_add(run, [tool_step(1, [ok_attempt(1)], tool="run_subagent")])
    child = RunFactory(
        parent=run,
        parent_step=2,
        label="sub-agent 2",
        status=Run.Status.RUNNING,
        stop_reason="",
        verdict="",
        step_count=1,
    )
    steps_add(child, [tool_step(1, [ok_attempt(1)], tool="lookup_order")])
    return run, child


def sub_agent_goes_on(child: Run) -> None:
    steps_add(child, [tool_step(2, [ok_attempt(1)], tool="callback_check")])
    Run.objects.filter(pk=child.pk).update(step_count=2)


def sub_agent_returns(run: Run, child: Run) -> None:
    """The sub-agent answers and ends, and the coordinator's step that ran it is recorded."""
    steps_add(child, [final_step(3, "Order 1043 shipped.")])
    Run.objects.filter(pk=child.pk).update(status=Run.Status.FINISHED, step_count=3, verdict=Run.Verdict.PASS)
    steps_add(run, [tool_step(2, [ok_attempt(1)], tool="run_subagent")])
    Run.objects.filter(pk=run.pk).update(step_count=2)


def test_a_running_sub_agent_nests_its_steps_in_the_live_poll_until_its_step_arrives(admin_client):
    run, child = coordinator_running_a_sub_agent()
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    poller = doc.one("#step-poll")
    fold = poller.one(f"details#sub-agent-{child.pk}")
    assert "1 step so far" in fold.select("summary")[0].text
    assert [n["id"] for n in fold.select("li.step")] == [f"sub-agent-{child.pk}-step-1"]

    sub_agent_goes_on(child)  # the next poll nests its new step
    poll = reverse("tracer:run-steps", args=[run.pk]) + "?after=1"
    doc = page(admin_client.get(poll, headers=HTMX))
    fold = doc.one(f"#step-poll details#sub-agent-{child.pk}")
    assert "2 steps so far" in fold.select("summary")[0].text
    assert fold.texts("li.step code.tool") == ["lookup_order", "callback_check"]

    # it returns and its step is recorded: the fold, the same id, is under the step, not in the poll
    sub_agent_returns(run, child)
    doc = page(admin_client.get(poll, headers=HTMX))
    assert doc.one("#step-poll").select("details") == []
    fold = doc.one(f"#step-2 details#sub-agent-{child.pk}")
    assert "3 steps ·" in fold.select("summary")[0].text and fold.one(".verdict.pass").text == "pass"
    assert len(fold.select("li.step")) == 3


def test_the_picture_nests_each_sub_agents_rows_under_the_step_that_ran_it(admin_client):
    run = coordinator()
    children = {c.pk: c for c in run.children.all()}
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    svg = doc.one("#run-waterfall svg.wide")
    rows = svg.select("g.row")
    heads = [r for r in rows if "sub-agent" in r.classes]
    assert sorted(int(r["data-run"]) for r in heads) == sorted(children)
    for head in heads:
        child = children[int(head["data-run"])]
        i = rows.index(head)
        starter = rows[i - 1]  # right under the step that ran it
        assert starter["data-steps"] == f"{child.parent_step}-{child.parent_step}" and "data-run" not in starter.attrs
        nested = [r for r in rows[i + 1 :] if r.get("data-run") == str(child.pk)]
        assert nested and all("nested" in r.classes for r in nested)
        assert nested[-1]["data-steps"].endswith(f"-{child.step_count}") or nested[-1]["data-steps"] == (
            f"{child.step_count}-{child.step_count}"
        )
        assert f"sub-agent #{child.pk} {child.label}: {child.step_count} step" in head["aria-label"]
    assert "4 sub-agents nested under the steps that ran them" in svg["aria-label"]
    assert len(doc.one("#waterfall-text").select("li")) == len(rows)
    # the fragment the live page redraws is the same picture
    fragment = page(
        admin_client.get(reverse("tracer:run", args=[run.pk]), headers={**HTMX, "HX-Target": "run-waterfall"})
    )
    assert len(fragment.one("svg.wide").select("g.row")) == len(rows)


def test_the_call_that_ran_a_sub_agent_measured_at_least_the_sub_agents_time_its_waits_included():
    run = coordinator()
    by_step: dict[int, list[Run]] = {}
    for child in run.children.order_by("id"):
        by_step.setdefault(child.parent_step, []).append(child)
    slow = next(c for c in run.children.all() if "1050" in c.label)
    assert slow.waited_ms > 100  # the backoff before its retry: passed on the simulated clock, not slept
    steps = list(run.steps.order_by("index"))
    for step in steps:
        children = by_step.get(step.index, [])
        if not children:
            continue
        tool_ms = sum(a["latency_ms"] for a in step.attempts)
        assert tool_ms >= sum(c.measured_ms for c in children), f"step {step.index} measured less than it ran"
    times = [step_time_s(model_attempts=s.model_attempts, attempts=s.attempts)[0] for s in steps]
    assert run.measured_ms == pytest.approx(sum(times) * 1000, abs=0.01)
    assert run.measured_ms > slow.measured_ms


def test_one_duration_on_a_coordinators_header_picture_list_and_sub_agent_lines(admin_client):
    run = coordinator()
    children = {c.pk: c for c in run.children.all()}
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    shown = duration_text(run.measured_ms)
    assert doc.one("#run-duration").text.startswith(shown)
    assert f"{run.step_count} steps in {shown}" in doc.one(".waterfall-legend").text
    for child in children.values():
        head = doc.one(f"details#sub-agent-{child.pk} summary .meta").text
        assert head.endswith(duration_text(child.measured_ms))
    # each sub-agent's bar lies inside the bar of the call that ran it, on the run's own axis
    rows = doc.one("#run-waterfall svg.wide").select("g.row")
    for i, row in enumerate(rows):
        if "sub-agent" not in row.classes:
            continue
        child = children[int(row["data-run"])]
        starter = next(
            r for r in reversed(rows[:i]) if r.get("data-steps") == f"{child.parent_step}-{child.parent_step}"
        )
        call = [
            (float(r["x"]), float(r["x"]) + float(r["width"])) for r in starter.select("rect.seg.ok, rect.seg.fail")
        ]
        (bar,) = row.select("rect.seg.agent")
        start, end = float(bar["x"]), float(bar["x"]) + float(bar["width"])
        assert call[0][0] <= start and end <= call[-1][1] + 0.2, f"sub-agent #{child.pk} outside its call"
        assert f"{seconds_text(child.measured_ms / 1000)} in all" in row["aria-label"]
    listed = page(admin_client.get(reverse("tracer:runs"))).one(f"#run-row-{run.pk}")
    assert listed.select("td")[9].text == shown


def test_runs_recorded_before_their_calls_measured_their_sub_agents_are_measured_again_by_the_migration():
    import importlib

    from django.apps import apps

    migration = importlib.import_module("tracer.migrations.0039_sub_agent_calls_measured")
    run = coordinator("starter")  # its step 3 ran a sub-agent on each of its three attempts
    step = run.steps.get(index=3)
    children = list(run.children.filter(parent_step=3).order_by("id"))
    assert len(children) == len(step.attempts) == 3
    # as the recorder stored it when a call's time was its wall time alone: shorter than its sub-agent's
    Run.objects.filter(pk=children[1].pk).update(measured_ms=5_000.0)
    short = [{**a, "latency_ms": 1.0} for a in step.attempts]
    type(step).objects.filter(pk=step.pk).update(attempts=short, latency_ms=3.0)
    migration.measure_again(apps, None)
    step.refresh_from_db()
    assert [a["latency_ms"] for a in step.attempts] == [
        max(1.0, round(children[0].measured_ms, 3)),
        5_000.0,
        max(1.0, round(children[2].measured_ms, 3)),
    ]
    assert step.latency_ms == pytest.approx(sum(a["latency_ms"] for a in step.attempts), abs=0.01)
    run.refresh_from_db()
    steps = run.steps.all()
    times = [step_time_s(model_attempts=s.model_attempts, attempts=s.attempts)[0] for s in steps]
    assert run.measured_ms == pytest.approx(sum(times) * 1000, abs=0.01) and run.measured_ms > 5_000


def test_a_sub_agents_other_policies_are_the_matching_sub_agents_of_the_other_coordinators(admin_client):
    structured, starter = coordinator("structured"), coordinator("starter")
    mine = structured.children.get(label__contains="1050")
    theirs = starter.children.filter(label=mine.label).get()  # starter's first try of the same job
    doc = page(admin_client.get(reverse("tracer:run", args=[mine.pk])))
    aside = doc.one("aside")
    assert "Same sub-agent, other policies" in aside.one("h2").text
    (mini,) = aside.select(".mini")
    assert mini.select("a")[0]["href"] == f"/runs/{theirs.pk}/" and theirs.pk != starter.pk
    assert f"same job, under coordinator #{starter.pk}" in mini.one(".pairing").text
    assert f"/compare/?a={mine.pk}&b={theirs.pk}" in mini.hrefs

    # starter tried the 1050 lookup three times, so its call back is sub-agent 6, structured's 4: the
    # same step of the coordinator pairs them
    callback = structured.children.get(label__contains="call Ana Ruiz back")
    (peer,) = run_page.run_other_policies(run=callback)
    assert peer.label.endswith("Check whether support can call Ana Ruiz back.") and peer.label != callback.label
    assert peer.parent_id == starter.pk and peer.pairing.startswith("same step")
    # and starter's second try of 1050 pairs with structured's only one, under the same step
    (peer,) = run_page.run_other_policies(run=starter.children.filter(label__contains="1050").order_by("id")[1])
    assert peer.pk == mine.pk and peer.pairing.startswith("same step")


def test_a_sub_agent_with_no_job_or_step_in_common_pairs_by_its_place(admin_client):
    left = RunFactory(scenario="coordinator-partial", policy_name="structured")
    right = RunFactory(scenario="coordinator-partial", policy_name="starter")
    mine = [RunFactory(parent=left, parent_step=None, label=f"job {i}", policy_name="structured") for i in (1, 2)]
    theirs = [RunFactory(parent=right, parent_step=None, label=f"task {i}", policy_name="starter") for i in (1, 2)]
    (peer,) = run_page.run_other_policies(run=mine[1])
    assert peer.pk == theirs[1].pk and peer.pairing.startswith("same position")
    RunFactory(scenario="coordinator-partial", policy_name="message")  # a coordinator that ran none
    assert [p.policy_name for p in run_page.run_other_policies(run=mine[0])] == ["starter"]


def coordinator_of_many(n: int, steps: int) -> tuple[Run, list[Run]]:
    """An ended coordinator whose first ``n`` steps each ran a sub-agent of ``steps`` steps."""
    run = RunFactory(step_count=n + 1)
    steps_add(run, [*(tool_step(i, [ok_attempt(1)], tool="run_subagent") for i in range(1, n + 1)), final_step(n + 1)])
    children = [RunFactory(parent=run, parent_step=i, label=f"job {i}", step_count=steps) for i in range(1, n + 1)]
    for child in children:
        steps_grow(child, steps)
    return run, children


def test_folds_past_the_pages_budget_of_nested_steps_read_theirs_when_opened(admin_client):
    run, children = coordinator_of_many(12, run_page.SUB_STEPS)
    body = admin_client.get(reverse("tracer:run", args=[run.pk])).content
    doc = parse(body)
    assert len(doc.select("ol.nested-steps > li.step")) == run_page.NESTED_STEPS  # all folds together
    loaded = run_page.NESTED_STEPS // run_page.SUB_STEPS
    for child in children[:loaded]:
        assert doc.select(f"#sub-agent-{child.pk} ol.nested-steps")
    for child in children[loaded:]:
        fold = doc.one(f"details#sub-agent-{child.pk}")
        later = fold.one(f"#sub-agent-steps-{child.pk}")
        assert later["hx-get"] == reverse("tracer:run-steps", args=[child.pk])
        assert "toggle once" in later["hx-trigger"] and fold.select("li.step") == []
    # opened, it asks for the sub-agent's first steps, with the ids they have under the fold
    child = children[-1]
    asked = {**HTMX, "HX-Target": f"sub-agent-steps-{child.pk}"}
    fragment = page(admin_client.get(reverse("tracer:run-steps", args=[child.pk]), headers=asked))
    steps = fragment.one(f"div#sub-agent-steps-{child.pk}").select("ol.nested-steps > li.step")
    assert [s["id"] for s in steps] == [f"sub-agent-{child.pk}-step-{i}" for i in range(1, run_page.SUB_STEPS + 1)]
    assert fragment.pollers == [] and not fragment.select("#run-status")


def test_a_coordinator_of_many_sub_agents_costs_the_same_queries_and_a_bounded_page(admin_client):
    few, _ = coordinator_of_many(2, 5)
    many, _ = coordinator_of_many(40, 60)
    few_page = queries(admin_client, reverse("tracer:run", args=[few.pk]))
    assert queries(admin_client, reverse("tracer:run", args=[many.pk])) == few_page
    assert len(admin_client.get(reverse("tracer:run", args=[many.pk])).content) < 200_000
