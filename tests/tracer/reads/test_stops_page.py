"""Reads of the stop queue: failing calls grouped, the queue and its counts, each stop's case."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import (
    RunFactory,
    StopReviewFactory,
    failed_attempt,
    guard_stop,
    refund_too_old_structured,
    run_with_steps,
    step_row,
    steps_grow,
    tool_step,
)
from tracer.models import Run
from tracer.reads import stops_page
from tracer.reads.peers import run_policy_peers

pytestmark = pytest.mark.django_db


def test_failing_calls_group_repeats_and_keep_each_error_text_once():
    run = run_with_steps(1)
    bad_date = [failed_attempt(n, category="validation", message="bad date") for n in (1, 2)]
    steps = [
        step_row(tool_step(i, bad_date, tool="free_slots", input={"date": "next Friday"}), run=run) for i in (1, 2, 3)
    ]
    [call] = stops_page.failing_calls(steps)
    assert call.tool_name == "free_slots" and call.times == 3
    assert call.errors == [("validation · not retryable", "bad date", 6, 1, 1)]  # first said at step 1, attempt 1
    assert call.model_saw == "Error"


def test_stop_queue_and_counts_follow_reviews():
    unreviewed = guard_stop()
    reviewed = guard_stop()
    StopReviewFactory(run=reviewed)
    RunFactory(stop_reason=Run.StopReason.MAX_STEPS)
    refund_too_old_structured()
    assert stops_page.stop_counts() == {"all": 3, "reviewed": 1, "unreviewed": 2}
    assert reviewed.pk not in {r.pk for r in stops_page.stop_queue(state="unreviewed")}
    assert [r.pk for r in stops_page.stop_queue(state="reviewed")] == [reviewed.pk]
    assert unreviewed.pk in {r.pk for r in stops_page.stop_queue(state="all")}


def test_stop_cases_pair_each_stop_with_another_policys_run():
    stopped = guard_stop(scenario="stuck-model")
    other = RunFactory(scenario="stuck-model", policy_name="starter")
    [case] = stops_page.stop_cases(runs=[stopped])
    assert case.other == other
    assert [s.index for s in case.errors] == [1, 2, 3]
    assert case.review is None


def test_a_guard_stop_keeps_its_signature_once_diagnosed_and_other_runs_keep_none():
    from tracer import diagnosis

    a, b = guard_stop(), guard_stop()
    other_error = guard_stop()
    other_error.steps.filter(index=3).update(attempts=[failed_attempt(1, message="another error").to_dict()])
    answered = refund_too_old_structured()
    before = {r.pk: stops_page.stops_identical(run=r) for r in (a, other_error)}  # from their last steps
    diagnosis.runs_diagnose(run_ids=[a.pk, b.pk, other_error.pk, answered.pk])
    keys = dict(Run.objects.values_list("id", "stop_signature"))
    assert keys[a.pk] == keys[b.pk] and len(keys[a.pk]) == 16
    assert keys[other_error.pk] not in (None, keys[a.pk]) and keys[answered.pk] is None
    a.refresh_from_db()
    other_error.refresh_from_db()
    assert stops_page.stops_identical(run=a) == before[a.pk] == [b]
    assert stops_page.stops_identical(run=other_error) == before[other_error.pk] == []


def test_stops_signed_and_not_yet_signed_count_alike_as_identical():
    from tracer import diagnosis

    signed = [guard_stop() for _ in range(3)]
    diagnosis.runs_diagnose(run_ids=[r.pk for r in signed])
    unsigned = [guard_stop() for _ in range(2)]  # ended, not yet diagnosed
    StopReviewFactory(run=signed[0])
    runs = list(stops_page.stop_queue(state="all"))
    cases = {case.run.pk: case.identical for case in stops_page.stop_cases(runs=runs)}
    # four unreviewed stops of one signature: each unreviewed one has three others, the reviewed one four
    assert cases == {signed[0].pk: 4, signed[1].pk: 3, signed[2].pk: 3, unsigned[0].pk: 3, unsigned[1].pk: 3}
    assert {r.pk for r in stops_page.stops_identical(run=signed[1])} == {signed[2].pk, *(r.pk for r in unsigned)}


def test_a_long_guard_stops_card_shows_the_last_twelve_failing_steps_in_order():
    run = RunFactory(stop_reason=Run.StopReason.MAX_STEPS, step_count=40, tool_call_count=40, error_count=40)
    steps_grow(run, 40)
    [case] = stops_page.stop_cases(runs=[run])
    assert [s.index for s in case.errors] == list(range(29, 41))


def test_the_queue_holds_guard_stops_and_disagreeing_judges_and_its_filter_offers_their_policies():
    stop = guard_stop(policy_name="structured")
    disagree = RunFactory(policy_name="message", verdict="pass", model_verdict="fail", judges_disagree=True)
    StopReviewFactory(run=disagree)
    RunFactory(policy_name="starter", verdict="pass", model_verdict="pass", judges_disagree=False)
    RunFactory(policy_name="fragile", stop_reason=Run.StopReason.CRASHED)
    assert stops_page.stop_filter_values()["policies"] == ["message", "structured"]
    assert stops_page.stop_counts() == {"all": 2, "reviewed": 1, "unreviewed": 1}
    assert stops_page.stop_counts(policy="message") == {"all": 1, "reviewed": 1, "unreviewed": 0}
    assert [r.pk for r in stops_page.stop_queue(state="unreviewed")] == [stop.pk]
    assert [r.pk for r in stops_page.stop_queue(state="all")] == [disagree.pk, stop.pk]
    assert [r.pk for r in stops_page.stop_queue(state="reviewed", stop_reason="judges_disagree")] == [disagree.pk]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans (SQLite's: test_query_plans.py)")
@pytest.mark.parametrize("state", ["unreviewed", "reviewed", "all"])
def test_a_queue_page_reads_the_queues_index_newest_first_on_postgresql(state):
    """The page is the first entries of run_queue_created_idx (the unreviewed ones by an anti join that
    stops once the page is full), not every stop sorted; a test table is too small for the planner to
    prefer an index, so sequential scans and sorts are priced out."""
    guard_stop()
    sql, params = stops_page.stop_queue(state=state)[:20].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "run_queue_created_idx" in plan and "Sort  (" not in plan, plan
    if state == "unreviewed":
        assert "Anti Join" in plan, plan


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans (SQLite's: test_query_plans.py)")
def test_the_queues_counts_and_choices_read_only_the_queues_indexes_on_postgresql():
    """With the planner's statistics of a table where stops are few among many runs of a policy (on a
    test table of a few rows any index reads as cheap as another, and stale statistics decide)."""
    stop = guard_stop()
    finished = [
        RunFactory.build(owner=stop.owner, policy_name="structured", stop_reason=Run.StopReason.FINAL_ANSWER)
        for _ in range(2000)
    ]
    Run.objects.bulk_create(finished)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE tracer_run")
    with CaptureQueriesContext(connection) as ctx:
        stops_page.stop_filter_values()
        stops_page.stop_counts()
        stops_page.stop_counts(policy="structured")
    plans = []
    for query in ctx.captured_queries:
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + query["sql"].replace("%", "%%"))
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    # the policies, the experiments (by id, from the queue's runs), the two counts
    assert len(plans) == 4, plans
    for plan in (plans[0], plans[2], plans[3]):
        assert "run_queue_" in plan and "Seq Scan on tracer_run" not in plan, plan


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans (SQLite's: test_query_plans.py)")
def test_identical_stops_are_counted_from_their_own_indexes_on_postgresql():
    """The signed ones from run_stop_signature_idx, the few not yet signed from run_stop_unsigned_idx,
    not every guard stop read through the queue's indexes."""
    run = guard_stop()
    with CaptureQueriesContext(connection) as ctx:
        stops_page.unreviewed_identical(
            keys=["0123456789abcdef"], kinds=[(run.scenario, run.policy_name, run.stop_reason)]
        )
    plans = []
    for query in ctx.captured_queries:
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + query["sql"].replace("%", "%%"))
            plans.append("\n".join(row[0] for row in cursor.fetchall()))
    assert len(plans) == 2, plans
    assert "run_stop_signature_idx" in plans[0] and "run_queue_" not in plans[0], plans[0]
    assert "run_stop_unsigned_idx" in plans[1] and "run_queue_" not in plans[1], plans[1]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans (SQLite's: test_query_plans.py)")
def test_each_other_policys_newest_run_is_read_from_the_scenario_and_policy_index_on_postgresql():
    """Not the newest runs of all read through the date index until one is of the scenario and policy,
    which PostgreSQL priced high enough to JIT-compile the query (longer than running it)."""
    stop = guard_stop()
    RunFactory(scenario=stop.scenario, policy_name="starter")
    with CaptureQueriesContext(connection) as ctx:
        run_policy_peers(runs=[stop], finished=True)
    [sql] = [q["sql"] for q in ctx.captured_queries if "RECURSIVE" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql.replace("%", "%%"))
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "run_created_idx" not in plan and "run_scen_pol_created_idx" in plan, plan
