"""The list, matrix and stop-queue queries read an index in order instead of sorting or grouping every run.

Found through the ``parent_id`` index, the latest 50 runs would mean sorting every top-level run
(tests/bench/bench_pages.py measures it). SQLite's planner
here has no statistics (the app never runs ANALYZE), so the plan it picks on an empty test database
is the plan it picks on a full one.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import StopReviewFactory, guard_stop
from tracer import search
from tracer.reads import runs_list, stops_page
from tracer.reads.findings_page import patterns
from tracer.reads.matrix import policy_matrix
from tracer.reads.rollups import Scope

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's plans without statistics"),
]


def plan(sql: str, params=()) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return " | ".join(row[3] for row in cursor.fetchall())


def queryset_plan(qs) -> str:
    return plan(*qs.query.sql_with_params())


def captured_plan(fn, marker: str) -> str:
    """The plan of the query ``fn`` runs whose SQL contains ``marker``."""
    with CaptureQueriesContext(connection) as ctx:
        fn()
    [sql] = [q["sql"] for q in ctx.captured_queries if marker in q["sql"]]
    return plan(sql)


def test_the_latest_runs_come_from_an_index_in_order():
    found = queryset_plan(runs_list.run_list(filters={})[:50])
    assert "run_top_created_idx" in found
    assert "TEMP B-TREE" not in found


def test_runs_of_one_scenario_and_policy_come_from_an_index_in_order():
    found = queryset_plan(runs_list.run_list(filters={"scenario": "refund-too-old", "policy_name": "structured"})[:50])
    assert "run_scen_pol_created_idx" in found
    assert "TEMP B-TREE" not in found


def test_the_policy_matrix_reads_the_kept_tallies_and_no_run_but_re_runs_and_overrides():
    """The matrix sums nothing per run: the tallies the triggers keep (tracer/tallies.py), the re-runs
    and the overridden verdicts, each from its index; an experiment's matrix from the tallies' index."""
    guard_stop()
    for narrowing, tally_plan in (
        ({}, "SCAN tracer_matrixtally"),
        ({"experiment_ids": [1]}, "matrixtally_experiment_idx"),
    ):
        with CaptureQueriesContext(connection) as ctx:
            policy_matrix(**narrowing)
        plans = [plan(q["sql"]) for q in ctx.captured_queries]
        assert len(plans) == 3 and tally_plan in plans[0], plans
        assert "rerun_of_id" in plans[1] and "review_override_idx" in plans[2], plans
        assert not any("SCAN tracer_run" in p for p in plans), plans


def test_other_policies_newest_runs_are_found_by_hopping_through_an_index_not_reading_every_run():
    """The run page's and stop queue's "other policy" runs: each policy name, then its newest run,
    looked up in the scenario-and-policy index, where a grouped MAX over the scenario's runs would
    grow with the runs."""
    run = guard_stop()
    found = captured_plan(lambda: stops_page.stop_cases(runs=[run]), "WITH RECURSIVE")
    searches = [part for part in found.split(" | ") if part.startswith("SEARCH r ")]
    assert len(searches) == 3 and all("run_scen_pol_created_idx" in part for part in searches), found
    assert "SCAN r" not in found and "TEMP B-TREE" not in found


@pytest.mark.parametrize("filters", [{}, {"policy": "structured"}])
def test_the_review_queue_reads_its_own_indexes_not_every_run(filters):
    """The queue (guard stops or disagreeing judges: an OR no other index serves) is a few percent of
    the runs: its filter choices, tab counts and pages read run_queue_created_idx or
    run_queue_policy_idx, not a scan of every run."""
    guard_stop()
    StopReviewFactory(run=guard_stop())
    with CaptureQueriesContext(connection) as ctx:
        stops_page.stop_filter_values()
        counts = stops_page.stop_counts(**filters)
        for state in stops_page.STOP_FILTERS:
            list(stops_page.stop_page(state=state, counts=counts, number=1, **filters))
    plans = [plan(q["sql"]) for q in ctx.captured_queries if "tracer_run" in q["sql"].partition(" WHERE ")[0]]
    assert len(plans) == 5, plans
    for found in plans:
        assert "run_queue_created_idx" in found or "run_queue_policy_idx" in found, found
        assert "run_policy_idx" not in found and "TEMP B-TREE" not in found, found


# --- the runs list's search, sorts, count and filter choices ---------------------------------------


@pytest.mark.skipif(not search.fts_supported(), reason="SQLite older than 3.34: no trigram tokenizer")
def test_a_search_reads_the_trigram_table_newest_first_and_stops_at_the_page():
    found = queryset_plan(runs_list.run_list(filters={"q": "laptop"})[:51])
    assert "VIRTUAL TABLE" in found and "tracer_run_search" in found
    assert "TEMP B-TREE" not in found  # the table hands matches over by id, newest first
    assert "SCAN tracer_run " not in found
    # the one subquery: the archived experiments, found in their index (reads.common.not_archived)
    assert found.count("LIST SUBQUERY") == 1 and "experiment_archived_idx" in found, found


@pytest.mark.parametrize(
    "name", ["scenario", "policy", "status", "steps", "errors", "retries", "verdict", "stop", "duration", "cost"]
)
@pytest.mark.parametrize("direction", ["", "-"])
def test_each_column_sort_reads_its_index_in_order(name, direction):
    found = queryset_plan(runs_list.run_list(filters={}, sort=f"{direction}{name}")[:51])
    assert f"run_sort_{name}_idx" in found
    assert "TEMP B-TREE" not in found


@pytest.mark.parametrize(
    ("column", "value", "index"),
    [
        ("stop_reason", "consecutive_errors", "run_stop_created_idx"),
        ("verdict", "fail", "run_verdict_created_idx"),
        ("model_backend", "claude", "run_backend_created_idx"),
        ("status", "running", "run_status_created_idx"),
        ("source", "otlp", "run_source_created_idx"),
    ],
)
def test_runs_filtered_on_one_column_come_from_an_index_in_order(column, value, index):
    found = queryset_plan(runs_list.run_list(filters={column: value})[:51])
    assert index in found
    assert "TEMP B-TREE" not in found


def test_the_run_count_stops_at_its_cap():
    for filters, cap in (({}, runs_list.RUN_COUNT_CAP), ({"q": "laptop"}, runs_list.SEARCH_COUNT_CAP)):
        with CaptureQueriesContext(connection) as ctx:
            runs_list.run_page(runs=runs_list.run_list(filters=filters), page=1, per_page=50, searched="q" in filters)
        [count] = [q["sql"] for q in ctx.captured_queries if "COUNT(" in q["sql"]]
        assert f"LIMIT {cap + 1}" in count


def test_the_filter_choices_probe_an_index_per_value_instead_of_reading_every_run():
    found = captured_plan(runs_list.run_distinct_values, "WITH RECURSIVE")
    assert "SCAN tracer_run" not in found
    assert "run_scen_pol_created_idx" in found and "run_policy_idx" in found


# --- the runs list's live poll: new runs ---------------------------------------------------------


def test_the_poll_finds_the_newest_run_from_an_index_without_reading_every_run():
    found = captured_plan(lambda: runs_list.run_rows_changed(versions={}, watch=True), "ORDER BY")
    assert "SCAN tracer_run" not in found and "TEMP B-TREE" not in found, found


@pytest.mark.parametrize(
    "filters", [{}, {"scenario": "refund-too-old", "policy_name": "structured"}, {"stop_reason": "max_steps"}]
)
def test_new_runs_are_read_in_their_range_of_ids_whatever_the_filters(filters):
    found = captured_plan(
        lambda: runs_list.run_rows_new(filters=filters, after=100, newest=140, limit=50), '"tracer_run"."id" >'
    )
    assert "SCAN tracer_run" not in found and "TEMP B-TREE" not in found, found
    assert "id>? AND id<?" in found or "rowid>? AND rowid<?" in found, found


@pytest.mark.skipif(not search.fts_supported(), reason="SQLite older than 3.34: no trigram tokenizer")
def test_new_runs_of_a_search_are_read_from_the_trigram_table_in_their_range_of_ids_newest_first():
    """A bound on the run's id alone would leave the table reading every match of a common word to find
    a few new runs: its rowid is bounded too (FTS5's plan says > and <)."""
    found = captured_plan(
        lambda: runs_list.run_rows_new(filters={"q": "laptop"}, after=100, newest=140, limit=50), "MATCH"
    )
    [table] = [part for part in found.split(" | ") if "VIRTUAL TABLE" in part]
    assert ">" in table.rpartition(":")[2] and "<" in table.rpartition(":")[2], found
    assert "TEMP B-TREE" not in found, found


def test_the_findings_patterns_are_summed_from_their_index_without_reading_the_rollup_rows():
    found = captured_plan(lambda: patterns(scope=Scope()), "OVER ()")
    assert "COVERING INDEX patternday_signature_idx" in found
