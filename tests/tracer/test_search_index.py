"""On PostgreSQL the runs list's substring search has trigram indexes to read, one per searched field.

Without them a search reads every run; with them the plan is a BitmapOr of the indexes
(``run_list(filters={"q": …})``, count and first page; tests/bench/bench_list.py shows the plans at
scale). A test table is too small for the planner to prefer them, so this checks that
each index matches the expression Django's icontains compares.
"""

import pytest
from django.db import connection

from tracer.models import Run
from tracer.reads.runs_list import run_list
from tracer.search import runs_matching

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_trgm indexes exist on PostgreSQL only"),
]


# Each searched column's index and the expression it holds, as pg_indexes spells it back.
TRIGRAM_INDEXES = {
    "run_scenario_trgm_idx": ("scenario", "upper((scenario)::text)"),
    "run_policy_name_trgm_idx": ("policy_name", "upper((policy_name)::text)"),
    "run_search_text_trgm_idx": ("search_text", "upper(search_text)"),
    "run_final_answer_trgm_idx": ("final_answer", "upper(final_answer)"),
    "run_error_trgm_idx": ("error", "upper(error)"),
}


def test_every_searched_field_has_a_trigram_index_on_the_expression_icontains_compares():
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'tracer_run'")
        indexes = dict(cursor.fetchall())
    sql, _ = run_list(filters={"q": "order 0871"}).query.sql_with_params()
    for name, (column, expression) in TRIGRAM_INDEXES.items():
        assert f"USING gin ({expression} gin_trgm_ops)" in indexes[name]
        assert f'UPPER("tracer_run"."{column}"' in sql  # ::text on a text column is no cast at all


def test_each_searched_field_can_be_answered_from_its_trigram_index():
    """A test table is too small for the planner to prefer the indexes over reading it (the benchmark,
    tests/bench/bench_list.py, shows the plans at 100,000 runs): with sequential and plain index scans
    priced out, the search is a BitmapOr over the five indexes, so each one serves its field."""
    Run.objects.bulk_create([Run(scenario=f"scenario-{i % 40}", search_text=f"lookup k{i}") for i in range(300)])
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")  # the other way in: the parent_id index
        sql, params = runs_matching(Run.objects.order_by(), "zzq-missing").query.sql_with_params()
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "BitmapOr" in plan
    for name in TRIGRAM_INDEXES:
        assert f"Bitmap Index Scan on {name}" in plan
