"""The policy matrix says which policy is better: what it counts (re-runs once, a reviewer's override,
the chosen experiments and backend), each policy's totals and pass interval, the verdict sentence, the
chart's figures, the experiment page's summary, and a query count that does not grow with the runs."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from tests.dom import Node, page
from tests.factories import (
    ExperimentFactory,
    RunFactory,
    StopReviewFactory,
    guard_stop,
    refund_too_old_starter,
    refund_too_old_structured,
)
from tracer.models import Run
from tracer.reads import matrix as matrix_reads
from tracer.reads.matrix import Matrix, PolicyTotals, policy_matrix
from tracer.stats import beyond_noise, difference_interval, wilson_interval

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def runs(n: int, *, passes: int, **fields) -> list[Run]:
    """``n`` finished runs of which the first ``passes`` passed."""
    verdicts = [Run.Verdict.PASS] * passes + [Run.Verdict.FAIL] * (n - passes)
    return [RunFactory(verdict=v, **fields) for v in verdicts]


def totals(matrix: Matrix) -> dict[str, PolicyTotals]:
    return {t.policy: t for t in matrix.totals}


def get(client, url: str, data=None, **kwargs) -> Node:
    response = client.get(url, data, **kwargs)
    assert response.status_code == 200, url
    return page(response)


def totals_table(summary: Node) -> dict[str, dict[str, str]]:
    """The totals table as {policy: {column heading: cell text}}."""
    headings = summary.texts("table.totals thead th")
    table = {}
    for row in summary.select("table.totals tbody tr"):
        cells = [row.one("th").text, *row.texts("td")]
        table[cells[0].split()[0]] = dict(zip(headings, cells, strict=True))
    return table


# --- the statistics ------------------------------------------------------------------------------


def test_the_wilson_interval_matches_published_values():
    # Newcombe 1998, table I: 0/10 and 5/10 (rounded to four places there).
    zero, half = wilson_interval(0, 10), wilson_interval(5, 10)
    assert (round(zero.low, 4), round(zero.high, 4)) == (0.0, 0.2775)
    assert (round(half.low, 4), round(half.high, 4)) == (0.2366, 0.7634)
    assert (wilson_interval(9, 9).high_pct, wilson_interval(9, 9).low_pct) == (100, 70)  # 9/9 is not "certain"


def test_newcombes_interval_of_a_difference_matches_the_paper():
    # Newcombe 1998, table II, method 10: 56/70 vs 48/80 and 9/10 vs 3/10.
    a = difference_interval((56, 70), (48, 80))
    b = difference_interval((9, 10), (3, 10))
    assert (round(a.low, 4), round(a.high, 4)) == (0.0524, 0.3339)
    assert (round(b.low, 4), round(b.high, 4)) == (0.1705, 0.8090)


def test_a_gap_is_beyond_the_noise_only_when_the_counts_say_so():
    assert beyond_noise((17, 18), (9, 18))
    assert not beyond_noise((2, 3), (1, 3))  # the same rates at a small n
    assert not beyond_noise((3, 3), (0, 0))  # nothing to compare with


# --- what the matrix counts ----------------------------------------------------------------------


def test_totals_sum_each_policys_runs_over_every_scenario():
    start = timezone.now()
    # a run's duration is its steps' measured time, as its page says, not its wall time (which holds its pace)
    refund_too_old_starter(started_at=start, finished_at=start + timedelta(seconds=9), measured_ms=3000)
    refund_too_old_starter(scenario="lookup-flaky", verdict=Run.Verdict.PASS, retry_count=1, wasted_retry_count=0)
    refund_too_old_structured(started_at=start, finished_at=start + timedelta(seconds=5), measured_ms=2000)
    guard_stop(scenario="lookup-flaky", input_tokens=50, output_tokens=10, started_at=None)

    matrix = policy_matrix()
    starter, structured = totals(matrix)["starter"], totals(matrix)["structured"]

    assert (starter.runs, starter.passes, starter.tool_calls) == (2, 1, 2)
    assert (starter.retries, starter.wasted_retries) == (3, 2)
    assert (starter.tokens, starter.mean_tokens, starter.scenarios) == (980, 490, {"refund-too-old", "lookup-flaky"})
    assert (structured.runs, structured.passes, structured.guard_stops, structured.max_steps_stops) == (2, 1, 1, 0)
    assert structured.tokens == 380 + 60
    assert structured.mean_duration_s == 2.0  # the guard stop recorded no timing: not timed
    assert (structured.mean_duration_text, starter.duration_s) == ("2.00 s", pytest.approx(3.0, abs=0.01))


def test_max_steps_stops_and_guard_stops_are_counted_apart():
    guard_stop()
    guard_stop(stop_reason=Run.StopReason.MAX_STEPS, guard="")
    guard_stop(stop_reason=Run.StopReason.MAX_STEPS, guard="")
    [cell] = policy_matrix().rows[0].cells
    assert (cell.guard_stops, cell.max_steps_stops) == (1, 2)
    assert (totals(policy_matrix())["structured"].guard_stops, cell.runs) == (1, 3)


def test_an_interrupted_run_that_was_re_run_counts_once_as_its_re_run():
    interrupted = RunFactory(stop_reason=Run.StopReason.INTERRUPTED, verdict="")
    rerun = RunFactory(rerun_of=interrupted, status=Run.Status.QUEUED, stop_reason="", verdict="")
    assert policy_matrix().rows == []  # the re-run is on its way: nothing counted twice meanwhile

    Run.objects.filter(pk=rerun.pk).update(status=Run.Status.FINISHED, stop_reason="final_answer", verdict="pass")
    [cell] = policy_matrix().rows[0].cells
    assert (cell.runs, cell.passes, cell.interrupted) == (1, 1, 0)

    RunFactory(stop_reason=Run.StopReason.INTERRUPTED, verdict="")  # no re-run: it stays, said to be interrupted
    [cell] = policy_matrix().rows[0].cells
    assert (cell.runs, cell.passes, cell.interrupted) == (2, 1, 1)


def test_a_reviewers_verdict_override_counts_instead_of_the_judges():
    judged_fail = refund_too_old_starter()
    refund_too_old_starter()
    StopReviewFactory(run=judged_fail, verdict="", verdict_override=Run.Verdict.PASS, override_reason="judge missed it")
    StopReviewFactory(run=refund_too_old_structured(), verdict="", verdict_override=Run.Verdict.FAIL)
    StopReviewFactory(run=refund_too_old_structured(), verdict="", note="fine as judged")
    t = totals(policy_matrix())
    assert (t["starter"].passes, t["starter"].overridden) == (1, 1)
    assert (t["structured"].passes, t["structured"].overridden) == (1, 1)


def test_the_matrix_narrows_to_chosen_experiments_and_a_model_backend():
    one, two, other = ExperimentFactory(), ExperimentFactory(), ExperimentFactory()
    refund_too_old_starter(experiment=one)
    refund_too_old_structured(experiment=two)
    refund_too_old_structured(experiment=other)
    refund_too_old_structured(model_backend="claude", model_name="claude-haiku-4-5")

    both = policy_matrix(experiment_ids=[one.pk, two.pk])
    assert ({t.policy: t.runs for t in both.totals}, both.experiments, both.outside) == (
        {"starter": 1, "structured": 1},
        2,
        0,
    )
    everything = policy_matrix()
    assert (everything.backends, everything.experiments, everything.outside) == ({"simulated": 3, "claude": 1}, 3, 1)
    claude = policy_matrix(model_backend="claude")
    assert [(t.policy, t.runs, t.simulated) for t in claude.totals] == [("structured", 1, 0)]


def test_the_verdict_compares_the_best_policy_with_each_other_one():
    runs(18, passes=17, policy_name="structured")
    runs(18, passes=9, policy_name="starter")
    runs(3, passes=2, policy_name="message")
    verdicts = policy_matrix().verdicts
    assert [(v.best.policy, v.other.policy, v.beyond_noise) for v in verdicts] == [
        ("structured", "starter", True),  # starter's 9/18 (29–71 %) ranks above message's 2/3 (20–94 %)
        ("structured", "message", False),
    ]


# --- unjudged runs --------------------------------------------------------------------------------


def unjudged(n: int, **fields) -> list[Run]:
    """``n`` finished runs recorded elsewhere that sent no verdict."""
    return [RunFactory(verdict="", source=Run.Source.OTLP, model_backend="imported", **fields) for _ in range(n)]


def test_runs_with_no_verdict_are_unjudged_neither_passes_nor_fails():
    runs(19, passes=19, policy_name="structured")
    runs(3, passes=1, policy_name="starter")
    unjudged(2, policy_name="starter")
    unjudged(2, policy_name="oi-agent")
    t = totals(policy_matrix())
    assert (t["starter"].runs, t["starter"].unjudged, t["starter"].judged, t["starter"].passes) == (5, 2, 3, 1)
    assert t["starter"].pass_pct == 33  # 1 of the 3 judged, not 1 of 5
    assert t["starter"].pass_interval == wilson_interval(1, 3)
    assert (t["oi-agent"].runs, t["oi-agent"].judged, t["oi-agent"].pass_pct) == (2, 0, 0)
    [cell] = [c for row in policy_matrix().rows for c in row.cells if c and c.policy == "oi-agent"]
    assert (cell.runs, cell.unjudged) == (2, 2)


def test_a_policy_with_only_unjudged_runs_is_compared_with_nothing():
    runs(19, passes=19, policy_name="structured")
    runs(6, passes=1, policy_name="starter")
    unjudged(2, policy_name="oi-agent")
    matrix = policy_matrix()
    assert [(v.best.policy, v.other.policy) for v in matrix.verdicts] == [("structured", "starter")]
    assert [t.policy for t in matrix.unjudged_policies] == ["oi-agent"]
    assert policy_matrix(policies=["structured", "oi-agent"]).verdicts == []  # nothing judged to compare it with


def test_the_headline_ranks_by_the_lower_bound_of_the_interval_so_one_lucky_run_never_outranks_many():
    runs(33, passes=33, policy_name="structured")
    runs(1, passes=1, policy_name="oi-agent")
    runs(10, passes=9, policy_name="starter")
    [first, second] = policy_matrix().verdicts
    assert (first.best.policy, first.other.policy, second.other.policy) == ("structured", "starter", "oi-agent")
    assert not second.beyond_noise


def test_a_reviewers_verdict_on_an_unjudged_run_judges_it():
    runs(2, passes=1, policy_name="oi-agent")
    a, b, _ = unjudged(3, policy_name="oi-agent")
    StopReviewFactory(run=a, verdict="", verdict_override=Run.Verdict.PASS, override_reason="refund refused right")
    StopReviewFactory(run=b, verdict="", verdict_override=Run.Verdict.FAIL, override_reason="leaked a name")
    t = totals(policy_matrix())["oi-agent"]
    assert (t.runs, t.judged, t.unjudged, t.passes, t.overridden) == (5, 4, 1, 2, 2)


# --- the page ------------------------------------------------------------------------------------


def test_the_policies_page_counts_passes_among_judged_runs_and_never_compares_an_unjudged_policy(admin_client):
    runs(19, passes=19, policy_name="structured")
    runs(4, passes=1, policy_name="starter")
    unjudged(1, policy_name="starter")
    unjudged(2, policy_name="oi-agent")
    doc = get(admin_client, reverse("tracer:policies"))
    summary = doc.one("#policy-summary")
    lines = summary.texts(".verdict-line")
    assert lines[0].startswith(
        "structured passed 19/19 vs starter 1/4 (judged runs only; 1 of starter unjudged left out); the difference "
    )
    assert not any("vs oi-agent" in line or "0/2" in line for line in lines)
    assert "oi-agent is not compared: its 2 runs have no verdict (unjudged, recorded elsewhere without one)" in (
        summary.text
    )
    rows = totals_table(summary)
    assert (rows["oi-agent"]["Runs"], rows["oi-agent"]["Unjudged"]) == ("2", "2")
    assert rows["oi-agent"]["Passed of judged (95 % interval)"] == "unjudged (no verdicts)"
    assert rows["starter"]["Passed of judged (95 % interval)"] == "1/4 · 25 % (4–70 %)"
    chart = summary.one("svg.policy-chart")
    assert "oi-agent: 2 runs, none judged" in [g.get("aria-label").split(";")[0] for g in chart.select("g.row")]
    assert "unjudged · 2 runs" in chart.texts("text.figure")
    cells = {a.get("title").split(":")[0]: a for a in doc.select("#policy-matrix a.heat")}
    oi = cells["refund-too-old under oi-agent"]
    assert oi.text == "?" and "unjudged" in oi.get("class") and "h0" not in oi.get("class")
    assert oi.get("title").startswith("refund-too-old under oi-agent: no verdict, unjudged; 2 runs; 2 imported")
    assert "0/2" not in oi.get("title")
    doc = get(admin_client, reverse("tracer:policies"), {"cells": "detail"})
    cells = {a.get("title"): a.text for a in doc.select("#policy-matrix a.cell-link")}
    oi = cells["2 runs of refund-too-old under oi-agent"]
    assert "pass unjudged" in " ".join(oi.split()) and "2 unjudged" in oi and "0/2" not in oi


def test_the_policies_page_says_which_policy_is_better_in_words_a_table_and_a_chart(admin_client):
    runs(18, passes=17, policy_name="structured", wasted_retry_count=0)
    runs(18, passes=9, policy_name="starter", wasted_retry_count=2, stop_reason=Run.StopReason.MAX_STEPS)
    summary = get(admin_client, reverse("tracer:policies")).one("#policy-summary")

    assert "structured passed 17/18 vs starter 9/18; the difference is beyond the noise at this n" in summary.text
    rows = totals_table(summary)
    assert (rows["starter"]["Runs"], rows["starter"]["Passed of judged (95 % interval)"]) == (
        "18",
        "9/18 · 50 % (29–71 %)",
    )
    assert rows["starter"]["Wasted retries"] == "36 (2.0/run)"
    assert (rows["starter"]["Guard stops"], rows["starter"]["Max-steps stops"]) == ("0", "18")
    assert rows["structured"]["Passed of judged (95 % interval)"] == "17/18 · 94 % (74–100 %)"
    assert "Wilson score interval" in summary.one(".legend").text

    chart = summary.one("svg.policy-chart")
    labels = [g.get("aria-label") for g in chart.select("g.row")]
    assert labels == [  # in the matrix's column order
        "starter: passed 9 of 18 judged runs (50 %, 95 % interval 29–71 %); 2.0 wasted retries per run (36 in all)",
        "structured: passed 17 of 18 judged runs (94 %, 95 % interval 74–100 %); 0.0 wasted retries per run (0 in all)",
    ]
    assert chart.texts("text.figure") == ["50 % · 9/18 (29–71 %)", "2.0/run", "94 % · 17/18 (74–100 %)", "0.0/run"]
    assert not chart.select("[style], script")  # the CSP allows no inline style or script


def test_a_small_gap_is_called_noise_and_mixed_backends_are_named(admin_client):
    runs(3, passes=2, policy_name="structured")
    runs(3, passes=1, policy_name="starter", model_backend="claude")
    summary = get(admin_client, reverse("tracer:policies")).one("#policy-summary")
    assert "structured passed 2/3 vs starter 1/3; the difference isn't beyond the noise at this n" in summary.text
    assert "mix model backends (claude 3, simulated 3)" in summary.text


def test_the_pickers_narrow_the_page_to_experiments_and_a_backend(admin_client):
    kept, dropped = ExperimentFactory(name="retry study"), ExperimentFactory(name="old demo")
    runs(2, passes=2, policy_name="structured", experiment=kept)
    runs(4, passes=0, policy_name="starter", experiment=dropped)
    runs(5, passes=5, policy_name="structured", model_backend="claude")

    doc = get(admin_client, reverse("tracer:policies"), {"experiment": kept.pk})
    assert doc.one(f'.matrix-runs input[name="experiment"][value="{kept.pk}"]').get("checked") is not None
    assert doc.one(f'.matrix-runs input[name="experiment"][value="{dropped.pk}"]').get("checked") is None
    assert doc.texts("#policy-summary table.totals tbody th") == ["structured simulated"]
    assert doc.texts("#policy-matrix thead th") == ["Scenario", "structured"]
    # the columns form keeps the narrowing, and a cell's runs are the experiment's
    assert doc.one(f'form.columns input[name="experiment"][value="{kept.pk}"]')
    assert doc.one("#policy-matrix a.heat").get("href").endswith(f"&experiment={kept.pk}")

    doc = get(admin_client, reverse("tracer:policies"), {"model_backend": "claude"})
    rows = totals_table(doc.one("#policy-summary"))
    assert list(rows) == ["structured"] and rows["structured"]["Runs"] == "5"
    assert rows["structured"]["Passed of judged (95 % interval)"] == "5/5 · 100 % (56–100 %)"
    [row] = doc.select("#policy-summary table.totals tbody tr")
    assert "simulated" not in row.text


def test_a_bad_backend_or_an_unknown_experiment_is_named_and_all_runs_are_shown(admin_client):
    refund_too_old_starter()
    doc = get(admin_client, reverse("tracer:policies"), {"model_backend": "gpt<b>", "experiment": "987654"})
    errors = doc.texts("p.error")
    backends = "one of simulated, claude, replay, imported"
    assert f"Model backend: gpt<b> is not a model backend: {backends} (showing every backend)" in errors
    assert "Experiment: there is no experiment 987654 (showing all runs)." in errors
    assert not doc.select("#policy-summary table.totals tbody b")  # escaped, never markup
    assert doc.texts("#policy-summary table.totals tbody th") == ["starter simulated"]


def test_an_unknown_experiment_beside_a_known_one_is_named_and_left_out(admin_client):
    kept = ExperimentFactory()
    runs(2, passes=1, policy_name="structured", experiment=kept)
    refund_too_old_starter()  # of no experiment: not counted

    doc = get(admin_client, reverse("tracer:policies"), {"experiment": [kept.pk, 987654]})

    assert "Experiment: there is no experiment 987654 (left out)." in doc.texts("p.error")
    assert doc.texts("#policy-summary table.totals tbody th") == ["structured simulated"]
    assert doc.select('form.columns input[name="experiment"]')[0]["value"] == str(kept.pk)


def test_the_policy_names_from_a_trace_are_escaped_in_the_summary_and_chart(admin_client):
    RunFactory(policy_name="<script>x</script>")
    RunFactory(policy_name="structured", verdict=Run.Verdict.FAIL)
    response = admin_client.get(reverse("tracer:policies"))
    assert b"<script>x</script>" not in response.content
    summary = page(response).one("#policy-summary")
    assert "<script>x</script> passed 1/1" in summary.text
    label = summary.select("svg.policy-chart g.row")[0].get("aria-label")
    assert label.startswith("<script>x</script>: passed 1 of 1 judged")


def test_a_scenario_key_holding_html_is_shown_as_text_in_the_heat_map(admin_client):
    # scenario keys are validated on the way in; an older install may hold one that is not
    scenario, policy = "<script>alert(1)</script>", '"><b id=pwn>'
    RunFactory(scenario=scenario, policy_name=policy)
    response = admin_client.get(reverse("tracer:policies"))
    html = response.content.decode()
    assert "<script>alert" not in html and "<b id=pwn>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&quot;&gt;&lt;b id=pwn&gt;" in html
    [row] = page(response).select("table.heatmap tbody tr")
    assert row.one("th").text == scenario
    square = row.one("a.heat")
    assert square["title"].startswith(f"{scenario} under {policy}: 1/1 judged passed")
    assert square["href"] == "/?scenario=%3Cscript%3Ealert%281%29%3C/script%3E&policy=%22%3E%3Cb%20id%3Dpwn%3E"


def test_the_policies_page_shows_a_page_of_scenarios_and_totals_over_all_of_them(admin_client):
    # traces from outside name their own scenarios: thousands of rows would make the page megabytes
    per_page = matrix_reads.SCENARIOS_PER_PAGE
    n = 2 * per_page + 7
    Run.objects.bulk_create(
        [Run(scenario=f"otlp-{k:04d}", policy_name="svc", status=Run.Status.FINISHED) for k in range(n)]
    )
    url = reverse("tracer:policies")

    first = get(admin_client, url)
    assert len(first.select("#policy-matrix tbody tr")) == per_page
    assert first.texts("#policy-matrix tbody th")[:2] == ["otlp-0000", "otlp-0001"]
    assert totals_table(first.one("#policy-summary"))["svc"]["Runs"] == str(n)  # every scenario counted
    assert "page 1 of 3 · 107 scenarios" in first.one("#policy-matrix nav.pager").text
    assert first.one("#policy-matrix nav.pager a").get("href") == "?page=2"

    last = get(admin_client, url, {"page": 3}, headers={**HTMX, "HX-Target": "policy-matrix"})
    assert last.texts("#policy-matrix tbody th") == [f"otlp-{k:04d}" for k in range(2 * per_page, n)]
    assert [a.text for a in last.select("#policy-matrix nav.pager a")] == ["← previous"]
    # past the end or not a number: the last page, the first
    assert get(admin_client, url, {"page": 999}).texts("#policy-matrix tbody th") == last.texts(
        "#policy-matrix tbody th"
    )
    assert get(admin_client, url, {"page": "x<b>"}).texts("#policy-matrix tbody th")[0] == "otlp-0000"


def test_the_policies_page_shows_at_most_the_column_limit_the_most_run_first(admin_client):
    limit = matrix_reads.COLUMNS_MAX
    Run.objects.bulk_create(
        [
            Run(scenario="s", policy_name=f"p{k:02d}", status=Run.Status.FINISHED)
            for k in range(limit + 3)
            for _ in range(1 + (k >= 3))  # p00 to p02 have one run, the rest two
        ]
    )
    doc = get(admin_client, reverse("tracer:policies"))
    assert doc.texts("#policy-matrix thead th")[1:] == [f"p{k:02d}" for k in range(3, limit + 3)]
    assert "3 more policies not shown (at most 12 columns)" in doc.one("#policy-matrix").text
    asked = [f"p{k:02d}" for k in range(limit + 3)]
    doc = get(admin_client, reverse("tracer:policies"), {"policy": asked})
    assert doc.texts("#policy-matrix thead th")[1:] == asked[:limit]  # the ones asked for, first first


def test_the_experiment_page_shows_the_summary_and_one_compare_link_per_scenario(admin_client):
    exp = ExperimentFactory(
        scenarios=["refund-too-old", "lookup-flaky"], policies=["starter", "structured"], repeats=3, total_runs=12
    )
    for scenario in exp.scenarios:
        for _ in range(3):
            refund_too_old_starter(experiment=exp, scenario=scenario)
            refund_too_old_structured(experiment=exp, scenario=scenario)
    exp.finished_runs = 12
    exp.save()
    doc = get(admin_client, reverse("tracer:experiment", args=[exp.pk]))

    assert "structured passed 6/6 vs starter 0/6; the difference is beyond the noise at this n" in doc.text
    assert doc.texts("#policy-summary table.totals tbody th") == ["starter simulated", "structured simulated"]
    assert len(doc.select("#policy-summary svg.policy-chart g.row")) == 2
    compares = [text for text, href in doc.links if href.startswith("/compare/?")]
    assert sorted(compares) == ["lookup-flaky", "refund-too-old"]  # not 6 pairs


def test_a_running_experiment_shows_the_summary_so_far(admin_client):
    exp = ExperimentFactory(total_runs=3, finished_runs=1)
    refund_too_old_structured(experiment=exp)
    RunFactory(experiment=exp, policy_name="starter", status=Run.Status.RUNNING, stop_reason="", verdict="")
    doc = get(admin_client, reverse("tracer:experiment", args=[exp.pk]), headers=HTMX)
    assert "The summary so far" in doc.text
    assert "Only structured has runs here" in doc.one("#policy-summary").text


# --- query counts --------------------------------------------------------------------------------


def queries(client, url: str, data=None, **kwargs) -> int:
    client.get(url, data, **kwargs)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, data, **kwargs)
    assert response.status_code == 200, url
    return len(ctx.captured_queries)


def add_runs(exp, n: int) -> None:
    """``n`` runs over three scenarios and policies, with stops, reviews, re-runs and a second backend."""
    for i in range(n):
        run = RunFactory(
            experiment=exp,
            scenario=("refund-too-old", "lookup-flaky", "booking")[i % 3],
            policy_name=("starter", "structured", "message")[(i // 3) % 3],
            stop_reason=(Run.StopReason.FINAL_ANSWER, Run.StopReason.MAX_STEPS, Run.StopReason.INTERRUPTED)[i % 3],
            model_backend=("simulated", "claude")[i % 2],
        )
        if i % 4 == 0:
            StopReviewFactory(run=run, verdict="", verdict_override=Run.Verdict.FAIL)
        if i % 3 == 2:
            RunFactory(experiment=exp, scenario=run.scenario, policy_name=run.policy_name, rerun_of=run)


@pytest.mark.parametrize("params", [{}, {"model_backend": "simulated"}, {"policy": ["starter", "structured"]}])
def test_the_policies_page_costs_the_same_for_n_and_3n_runs(admin_client, params):
    exp = ExperimentFactory()
    add_runs(exp, 12)
    url = reverse("tracer:policies")
    data = {**params, "experiment": [exp.pk, ExperimentFactory().pk]}
    n = queries(admin_client, url, data)
    add_runs(exp, 24)
    assert queries(admin_client, url, data) == n
    assert queries(admin_client, url, data, headers={**HTMX, "HX-Target": "policy-matrix"}) <= n


def test_the_experiment_summary_costs_the_same_for_n_and_3n_runs(admin_client):
    exp = ExperimentFactory(total_runs=0)
    add_runs(exp, 12)
    url = reverse("tracer:experiment", args=[exp.pk])
    n = queries(admin_client, url)
    add_runs(exp, 24)
    assert queries(admin_client, url) == n
