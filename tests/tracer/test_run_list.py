"""The runs list (issues 12 and 13): search over every field it names, column sorts, the experiment
filter, counting up to a cap, and the live poll that sends only the rows of active runs that changed
and, on the first page newest first, the new runs that match.

These run on whichever database DATABASE_URL names (SQLite's FTS5 trigram table or PostgreSQL's
pg_trgm indexes serve the search); run them once with a PostgreSQL URL too.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agents.events import RunEnd
from tests.dom import page
from tests.factories import ExperimentFactory, RunFactory, failed_attempt, final_step, ok_attempt, tool_step
from tracer import recording, search
from tracer.models import Run
from tracer.reads import runs_list

pytestmark = pytest.mark.django_db
RUNS = reverse("tracer:runs")
LIVE = reverse("tracer:run-rows-live")
HTMX = {"HX-Request": "true"}


def listed(client, **query) -> list[int]:
    """The ids of the runs the list shows, top to bottom."""
    response = client.get(RUNS, query)
    assert response.status_code == 200
    return [int(tr["id"].removeprefix("run-row-")) for tr in page(response).select("#run-rows tr[id]")]


def running(**fields) -> Run:
    return RunFactory(status=Run.Status.RUNNING, stop_reason="", verdict="", finished_at=None, **fields)


# --- search ------------------------------------------------------------------------------------


def test_search_finds_a_run_by_each_field_it_names_in_any_case(admin_client):
    """Scenario, policy, tool name, tool input, error message (from the recorder) and answer."""
    by_scenario = RunFactory(scenario="lookup-flaky-exhausted", policy_name="starter")
    by_policy = RunFactory(scenario="refund-bad-id", policy_name="fragile-variant")
    recorded = running(scenario="room-book-permission", policy_name="structured")
    recording.step_record(
        run=recorded,
        step=tool_step(
            1,
            [failed_attempt(1, category="permission", retryable=False, message="Needs a MANAGER's approval")],
            tool="book_slot",
            input={"room": "Orion-7"},
        ),
    )
    recording.step_record(run=recorded, step=final_step(2, "I asked Dana to book Orion."))
    crashed = RunFactory(scenario="refund-bad-id", policy_name="message", error="payment credentials revoked")
    assert listed(admin_client, q="FLAKY-exh") == [by_scenario.pk]
    assert listed(admin_client, q="gile-var") == [by_policy.pk]
    assert listed(admin_client, q="book_sl") == [recorded.pk]  # tool name
    assert listed(admin_client, q="orion-7") == [recorded.pk]  # tool input
    assert listed(admin_client, q="manager's approval") == [recorded.pk]  # error message
    assert listed(admin_client, q="asked dana") == [recorded.pk]  # the answer, recorded as a step
    assert listed(admin_client, q="credentials REVOKED") == [crashed.pk]  # the run's error
    assert listed(admin_client, q="nothing like this") == []


def test_search_follows_each_write_to_a_run(admin_client):
    run = running(scenario="refund-too-old")
    assert listed(admin_client, q="239 days") == []
    recording.run_finish(run=run, end=RunEnd(stop_reason="final_answer", final_answer="This order is 239 days old."))
    assert listed(admin_client, q="239 days") == [run.pk]
    Run.objects.filter(pk=run.pk).update(final_answer="Refunded.")
    assert listed(admin_client, q="239 days") == []
    assert listed(admin_client, q="refunded") == [run.pk]
    Run.objects.filter(pk=run.pk).delete()
    assert listed(admin_client, q="refunded") == []


def test_search_matches_quotes_and_punctuation_as_typed(admin_client):
    run = RunFactory(search_text='process_refund {"order_id": "0871"}\n')
    RunFactory(search_text='process_refund {"order_id": "0872"}\n')
    assert listed(admin_client, q='"0871"') == [run.pk]
    assert listed(admin_client, q='id": "08') == sorted(listed(admin_client, q="process_refund"), reverse=True)
    assert listed(admin_client, q="0871 OR 0872") == []  # no query syntax: a substring, as typed


def test_search_shows_newest_first_and_keeps_other_filters(admin_client):
    old = RunFactory(policy_name="starter", final_answer="laptop stand refunded")
    new = RunFactory(policy_name="starter", final_answer="Laptop stand refunded")
    other = RunFactory(policy_name="structured", final_answer="laptop stand refunded")
    assert listed(admin_client, q="laptop stand") == [other.pk, new.pk, old.pk]
    assert listed(admin_client, q="laptop stand", policy="starter") == [new.pk, old.pk]


def test_a_search_shorter_than_three_characters_says_so_and_lists_no_run(admin_client):
    RunFactory(), RunFactory()
    doc = page(admin_client.get(RUNS, {"q": "ok"}))
    assert doc.texts(".search-short") == ["Search: type 3 or more characters (this has 2)."]
    assert doc.texts(".error") == []
    assert doc.select("#run-rows tr[id]") == []


def test_the_search_index_is_the_one_the_list_reads():
    qs = runs_list.run_list(filters={"q": "laptop"})
    sql = str(qs.query)
    if connection.vendor == "sqlite" and search.fts_supported():
        assert "tracer_run_search" in sql and "MATCH" in sql
    else:
        for column in search.SEARCHED:
            assert f'UPPER("tracer_run"."{column}' in sql


# --- sort --------------------------------------------------------------------------------------


def test_columns_sort_both_ways_and_ties_keep_a_stable_order(admin_client):
    a = RunFactory(scenario="b-scenario", step_count=5, error_count=1)
    b = RunFactory(scenario="a-scenario", step_count=9, error_count=1)
    c = RunFactory(scenario="c-scenario", step_count=5, error_count=0)
    assert listed(admin_client, sort="-steps") == [b.pk, c.pk, a.pk]
    assert listed(admin_client, sort="steps") == [a.pk, c.pk, b.pk]
    assert listed(admin_client, sort="scenario") == [b.pk, a.pk, c.pk]
    assert listed(admin_client, sort="-errors") == [b.pk, a.pk, c.pk]
    assert listed(admin_client, sort="run") == [a.pk, b.pk, c.pk]
    assert listed(admin_client) == listed(admin_client, sort="-started") == [c.pk, b.pk, a.pk]


def test_a_header_says_how_the_list_is_sorted_and_links_to_the_other_way(admin_client):
    RunFactory()
    doc = page(admin_client.get(RUNS, {"sort": "-steps", "policy": "structured", "page": "1"}))
    steps = doc.one("th[aria-sort=descending]")
    assert steps.text.startswith("Steps")
    [(_, href)] = steps.links
    assert "sort=steps" in href and "policy=structured" in href and "page=" not in href
    assert doc.one("th[aria-sort=none] a[href*=scenario]")  # the others sort by themselves
    assert doc.one("input[name=sort][type=hidden]")["value"] == "-steps"  # a filter keeps the sort


def test_sorting_answers_the_table_and_tells_the_filter_form_the_sort(admin_client):
    RunFactory()
    response = admin_client.get(RUNS, {"sort": "errors"}, headers={**HTMX, "HX-Target": "run-table"})
    doc = page(response)
    assert doc.one("#run-table th[aria-sort=ascending]").text.startswith("Errors")
    assert doc.one("#run-table input[name=sort][form=run-filters]")["value"] == "errors"
    assert response["Vary"] and "HX-Request" in response["Vary"]


def test_an_unknown_sort_is_named_and_the_list_is_newest_first(admin_client):
    old, new = RunFactory(), RunFactory()
    doc = page(admin_client.get(RUNS, {"sort": "final_answer"}))
    assert doc.texts(".error") == ["Sort: Select a valid choice. final_answer is not one of the available choices."]
    assert [tr["id"] for tr in doc.select("#run-rows tr[id]")] == [f"run-row-{new.pk}", f"run-row-{old.pk}"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans (SQLite's: test_query_plans.py)")
@pytest.mark.parametrize(
    "sort",
    [
        *("scenario", "-policy", "status", "-steps", "errors", "-retries", "-started"),
        *("verdict", "-verdict", "stop", "-stop", "duration", "-duration", "cost", "-cost"),
    ],
)
def test_each_sort_reads_an_index_in_order_on_postgresql(sort):
    """No Sort node: the page is the first 51 entries of one index. A test table is too small for the
    planner to prefer one, so sequential scans and sorts are priced out: a Sort left in the plan means
    no index holds that order."""
    sql, params = runs_list.run_list(filters={}, sort=sort)[:51].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Sort  (" not in plan and "Index" in plan


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans (SQLite's: test_query_plans.py)")
@pytest.mark.parametrize("filters", [{}, {"scenario": "refund-too-old"}, {"q": "laptop"}])
def test_the_poll_reads_new_runs_in_their_range_of_ids_on_postgresql(filters):
    """The live poll's new runs: an index scan bounded by the range of new ids, not the runs that came
    before them."""
    with CaptureQueriesContext(connection) as ctx:
        runs_list.run_rows_new(filters=filters, after=100, newest=140, limit=50)
    [sql] = [q["sql"] for q in ctx.captured_queries if '"tracer_run"."id" >' in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql.replace("%", "%%"))
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Cond:" in plan and "id > 100" in plan.partition("Index Cond:")[2].split("\n")[0], plan


# --- the experiment filter and the count ---------------------------------------------------------


def test_the_experiment_filter_is_a_visible_choice_of_experiments(admin_client):
    exp = ExperimentFactory(name="retry study")
    mine = RunFactory(experiment=exp)
    RunFactory()
    doc = page(admin_client.get(RUNS))
    select = doc.one("form.filters select[name=experiment]")
    assert f"#{exp.pk} retry study" in select.texts("option")
    assert listed(admin_client, experiment=str(exp.pk)) == [mine.pk]
    doc = page(admin_client.get(RUNS, {"experiment": str(exp.pk)}))
    assert doc.one("select[name=experiment] option[selected]").text == f"#{exp.pk} retry study"


def test_the_list_counts_up_to_a_cap_and_still_pages_beyond_it(admin_client, monkeypatch):
    monkeypatch.setattr(runs_list, "RUN_COUNT_CAP", 60)
    Run.objects.bulk_create([Run(scenario="refund-too-old", status=Run.Status.FINISHED) for _ in range(120)])
    doc = page(admin_client.get(RUNS))
    assert "more than 60 runs" in doc.one(".table-tools").text
    assert "page 1" in doc.one(".pager").text and " of " not in doc.one(".pager").text
    doc = page(admin_client.get(RUNS, {"page": "3"}))
    assert len(doc.select("#run-rows tr[id]")) == 20
    assert "older →" not in doc.one(".pager").text
    monkeypatch.setattr(runs_list, "SEARCH_COUNT_CAP", 30)  # a search counts fewer
    assert "more than 30 runs" in page(admin_client.get(RUNS, {"q": "refund"})).one(".table-tools").text
    monkeypatch.setattr(runs_list, "RUN_COUNT_CAP", 1000)
    doc = page(admin_client.get(RUNS, {"page": "99"}))  # past the end: the last page
    assert "120 runs" in doc.one(".table-tools").text and "page 3 of 3" in doc.one(".pager").text


def test_a_filter_beyond_what_a_column_holds_counts_no_runs(admin_client):
    RunFactory(step_count=3)
    doc = page(admin_client.get(RUNS, {"min_steps": str(10**19)}))
    assert doc.one("#run-count").text == "0 runs" and "No runs match." in doc.one("#run-rows").text


# --- the live poll -----------------------------------------------------------------------------


def test_the_list_polls_its_active_rows_and_on_its_first_page_newest_first_watches_for_new_runs(admin_client):
    finished = RunFactory()
    [poller] = page(admin_client.get(RUNS)).pollers
    assert poller["id"] == "run-live"
    assert (poller["hx-get"], poller["hx-trigger"]) == (f"{LIVE}?after={finished.pk}", "every 2s")
    active = running(step_count=2)
    [poller] = page(admin_client.get(RUNS, {"scenario": "refund-too-old", "q": "", "page": "1"})).pollers
    assert poller["hx-get"] == f"{LIVE}?v={active.pk}.2.running&scenario=refund-too-old&after={active.pk}"
    assert poller["hx-trigger"] == "every 1s"
    # another order: the active rows only, as on a later page
    [poller] = page(admin_client.get(RUNS, {"sort": "-steps"})).pollers
    assert poller["hx-get"] == f"{LIVE}?v={active.pk}.2.running"
    Run.objects.filter(pk=active.pk).update(status=Run.Status.FINISHED)
    assert page(admin_client.get(RUNS, {"sort": "-steps"})).pollers == []
    assert page(admin_client.get(RUNS, {"sort": "-started"})).pollers[0]["hx-get"] == f"{LIVE}?after={active.pk}"


def test_the_list_with_no_run_watches_for_the_first(admin_client):
    doc = page(admin_client.get(RUNS))
    assert "No runs match." in doc.one("#run-rows").text
    assert doc.pollers[0]["hx-get"] == f"{LIVE}?after=0"
    assert admin_client.get(LIVE, {"after": "0"}, headers=HTMX).status_code == 204
    first = running()
    doc = page(admin_client.get(LIVE, {"after": "0"}, headers=HTMX))
    assert [tr["id"] for tr in doc.select("tbody[hx-swap-oob] tr")] == [f"run-row-{first.pk}"]
    assert doc.one("tr[hx-swap-oob^=delete]")["hx-swap-oob"] == "delete:#run-rows tr.no-runs"  # "No runs match" goes
    assert doc.one("#run-count").text == "1 run"


def new_rows(doc) -> list[int]:
    """The ids of the runs a poll's answer puts at the top of the list."""
    [rows] = doc.select("tbody[hx-swap-oob]")
    assert rows["hx-swap-oob"] == "afterbegin:#run-rows"
    return [int(tr["id"].removeprefix("run-row-")) for tr in rows.select("tr")]


def test_new_runs_that_match_the_filters_come_in_at_the_top_newest_first_with_the_count(admin_client):
    old = RunFactory(scenario="refund-too-old", final_answer="refund refused")
    poll = page(admin_client.get(RUNS, {"scenario": "refund-too-old"})).pollers[0]["hx-get"]
    other = RunFactory(scenario="lookup-flaky")  # newer, but another scenario
    one = RunFactory(scenario="refund-too-old")
    two = running(scenario="refund-too-old", step_count=1)
    doc = page(admin_client.get(poll, headers=HTMX))
    assert new_rows(doc) == [two.pk, one.pk]
    assert (
        "running" in doc.one(f"#run-row-{two.pk}").texts("td")
        and "refund-too-old" in doc.one(f"#run-row-{two.pk}").text
    )
    assert doc.one("#run-count").text == "3 runs" and doc.one("#run-count")["hx-swap-oob"] == "true"
    assert not doc.select("tr[hx-swap-oob^=delete]")  # the list had rows: nothing to take away
    # the next poll follows the new active run and watches from the newest run on
    assert doc.pollers[0]["hx-get"] == f"{LIVE}?v={two.pk}.1.running&scenario=refund-too-old&after={two.pk}"
    assert admin_client.get(doc.pollers[0]["hx-get"], headers=HTMX).status_code == 204
    assert old.pk < other.pk < one.pk


def test_a_new_run_the_filters_leave_out_only_moves_the_watch_on(admin_client):
    RunFactory(final_answer="laptop stand refunded")
    poll = page(admin_client.get(RUNS, {"q": "laptop"})).pollers[0]["hx-get"]
    elsewhere = RunFactory(final_answer="charger refunded")
    doc = page(admin_client.get(poll, headers=HTMX))
    assert not doc.select("tbody[hx-swap-oob]") and not doc.select("#run-count")
    assert doc.pollers[0]["hx-get"] == f"{LIVE}?q=laptop&after={elsewhere.pk}"
    assert admin_client.get(doc.pollers[0]["hx-get"], headers=HTMX).status_code == 204  # not asked about again
    found = RunFactory(final_answer="LAPTOP bag refunded")
    assert new_rows(page(admin_client.get(doc.pollers[0]["hx-get"], headers=HTMX))) == [found.pk]


def test_html_in_a_new_runs_row_is_shown_as_text(admin_client):
    script = "<script>alert('x')</script>"
    run = RunFactory(label=script, final_answer=f"answer {script}", source="api", source_detail=script)
    response = admin_client.get(LIVE, {"after": "0"}, headers=HTMX)
    assert script not in response.content.decode()  # never the raw markup
    doc = page(response)
    assert new_rows(doc) == [run.pk] and not doc.select("script")
    row = doc.one(f"#run-row-{run.pk}")
    assert script in row.text and f"answer {script}" in row.text


def test_a_new_sub_agent_run_is_not_listed(admin_client):
    parent = running()
    poll = page(admin_client.get(RUNS)).pollers[0]["hx-get"]
    RunFactory(parent=parent)
    assert admin_client.get(poll, headers=HTMX).status_code == 204


def test_an_idle_poll_sends_nothing(admin_client):
    active = running(step_count=2)
    response = admin_client.get(LIVE, {"v": f"{active.pk}.2.running"}, headers=HTMX)
    assert response.status_code == 204 and response.content == b""


def test_a_run_that_records_a_step_or_finishes_updates_its_row_out_of_band(admin_client):
    one, two = running(step_count=2), running(step_count=0)
    quiet = RunFactory()
    recording.step_record(run=one, step=tool_step(3, [ok_attempt(1)], tool="lookup"))
    response = admin_client.get(LIVE, {"v": [f"{one.pk}.2.running", f"{two.pk}.0.running"]}, headers=HTMX)
    doc = page(response)
    [row] = doc.select("tr[hx-swap-oob]")
    assert row["id"] == f"run-row-{one.pk}" and "3" in row.texts("td")
    assert doc.one("#run-live")["hx-get"] == f"{LIVE}?v={two.pk}.0.running&v={one.pk}.3.running"  # newest first
    recording.run_finish(run=one, end=RunEnd(stop_reason="final_answer", final_answer="done"))
    recording.run_finish(run=two, end=RunEnd(stop_reason="final_answer", final_answer="done"))
    doc = page(admin_client.get(LIVE, {"v": [f"{one.pk}.3.running", f"{two.pk}.0.running"]}, headers=HTMX))
    rows = {tr["id"]: tr for tr in doc.select("tr[hx-swap-oob]")}
    assert set(rows) == {f"run-row-{one.pk}", f"run-row-{two.pk}"}
    assert "finished" in rows[f"run-row-{one.pk}"].texts("td")
    assert doc.pollers == []  # none active: polling stops
    assert f"run-row-{quiet.pk}" not in rows


@pytest.mark.parametrize("bad", ["-1", "x", "01", "1.5", "9999999999999999999", ""])
def test_a_bad_after_in_the_poll_is_a_400_naming_it(admin_client, bad):
    response = admin_client.get(LIVE, {"after": bad}, headers=HTMX)
    assert response.status_code == 400
    assert "after: expected the id of the newest run the list shows" in page(response).text


@pytest.mark.parametrize("bad", ["12;drop", "0.1.running", "9999999999999999999.1.running", "12.x.running"])
def test_a_bad_version_in_the_poll_is_a_400_naming_it(admin_client, bad):
    response = admin_client.get(LIVE, {"v": bad}, headers=HTMX)
    assert response.status_code == 400
    assert "v: expected <run id>.<steps>.<status>" in page(response).text


# --- cost --------------------------------------------------------------------------------------


def queries(client, url: str, data=None, **kwargs) -> int:
    client.get(url, data, **kwargs)
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url, data, **kwargs).status_code in (200, 204)
    return len(ctx.captured_queries)


@pytest.mark.parametrize(
    "query", [{}, {"q": "refund"}, {"sort": "-errors"}, {"scenario": "refund-too-old", "page": "2"}]
)
def test_the_list_costs_the_same_for_5_and_80_runs(admin_client, query):
    for _ in range(5):
        RunFactory(final_answer="refund applied")
    five = queries(admin_client, RUNS, query)
    for _ in range(75):
        RunFactory(final_answer="refund applied", experiment=ExperimentFactory())
    assert queries(admin_client, RUNS, query) == five


def test_a_poll_that_watches_for_new_runs_costs_no_more_when_there_are_none(admin_client):
    """The first page's poll asks for its active rows and the newest run in one query: when nothing
    changed it costs what a poll of the active rows alone costs, and still sends nothing."""
    active = running(step_count=2)
    RunFactory(final_answer="laptop stand refunded")
    newest = Run.objects.latest("id").pk
    rows_only = queries(admin_client, LIVE, {"v": f"{active.pk}.2.running"}, headers=HTMX)
    watching = {"v": f"{active.pk}.2.running", "after": newest, "q": "laptop", "scenario": "refund-too-old"}
    assert queries(admin_client, LIVE, watching, headers=HTMX) == rows_only
    assert queries(admin_client, LIVE, {"after": newest, "q": "laptop"}, headers=HTMX) == rows_only
    response = admin_client.get(LIVE, watching, headers=HTMX)
    assert response.status_code == 204 and response.content == b""


def test_the_live_poll_costs_the_same_for_1_and_20_active_runs(admin_client):
    one = [running()]
    single = queries(admin_client, LIVE, {"v": [f"{r.pk}.9.running" for r in one]}, headers=HTMX)
    many = [running() for _ in range(20)]
    assert queries(admin_client, LIVE, {"v": [f"{r.pk}.9.running" for r in many]}, headers=HTMX) == single


def test_the_filters_offer_a_new_scenario_and_policy_as_soon_as_a_run_has_one(admin_client):
    RunFactory(scenario="refund-too-old", policy_name="starter")

    def offered(name: str) -> list[str]:
        response = admin_client.get(RUNS)
        return [o["value"] for o in page(response).select(f"#run-filters select[name={name}] option") if o["value"]]

    assert offered("scenario") == ["refund-too-old"] and offered("policy") == ["starter"]
    RunFactory(scenario="lookup-flaky", policy_name="structured")
    assert offered("scenario") == ["lookup-flaky", "refund-too-old"]
    assert offered("policy") == ["starter", "structured"]
    # a choice picked stays picked, and the next page without it picks none
    response = admin_client.get(RUNS, {"scenario": "lookup-flaky"})
    chosen = page(response).select("#run-filters select[name=scenario] option[selected]")
    assert [o["value"] for o in chosen] == ["lookup-flaky"]
    chosen = page(admin_client.get(RUNS)).select("#run-filters select[name=scenario] option[selected]")
    assert [o["value"] for o in chosen] == [""]
