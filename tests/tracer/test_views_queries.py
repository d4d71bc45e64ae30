"""A page's number of SQL queries does not grow with the steps or runs it shows."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.factories import ExperimentFactory, RunFactory, StopReviewFactory, guard_stop, run_with_steps, steps_grow
from tests.tracer.test_compare_window import parted
from tracer import tokens
from tracer.models import Experiment, Run

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


def queries(client, url: str, **kwargs) -> int:
    client.get(url, **kwargs)  # warm the session and the user
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, **kwargs)
    assert response.status_code == 200, url
    return len(ctx.captured_queries)


def test_the_run_page_costs_the_same_for_5_and_500_steps(admin_client):
    run = run_with_steps(5, status=Run.Status.RUNNING, stop_reason="", verdict="")
    RunFactory(scenario=run.scenario, policy_name="starter")
    RunFactory(parent=run, label="child")
    url = reverse("tracer:run", args=[run.pk])
    five = queries(admin_client, url)
    steps_grow(run, 500)
    assert run.steps.count() == 500
    assert queries(admin_client, url) == five


def test_the_run_page_costs_the_same_with_1_and_4_sub_agents_under_steps_after_them_and_running(admin_client):
    def sub_agents(run: Run, n: int) -> None:
        for i in range(n):
            placed = RunFactory(
                parent=run, parent_step=2 + i % 3, label="placed", step_count=3 + i * 40, stop_reason="max_steps"
            )
            steps_grow(placed, 3 + i * 40)  # nested steps, read with every other sub-agent's
            unplaced = RunFactory(parent=run, label="unplaced", source=Run.Source.OTLP, model_backend="imported")
            steps_grow(unplaced, 2 + i)
            running = RunFactory(
                parent=run,
                parent_step=6,
                label="running",
                status="running",
                stop_reason="",
                verdict="",
                step_count=1 + i * 30,
            )
            steps_grow(running, 1 + i * 30)

    run = run_with_steps(5, status=Run.Status.RUNNING, stop_reason="", verdict="")
    url = reverse("tracer:run", args=[run.pk])
    poll = reverse("tracer:run-steps", args=[run.pk]) + "?after=1"
    sub_agents(run, 1)
    one, one_poll = queries(admin_client, url), queries(admin_client, poll, headers=HTMX)
    sub_agents(run, 3)
    assert queries(admin_client, url) == one  # nothing read of a sub-agent one at a time
    assert queries(admin_client, poll, headers=HTMX) == one_poll


def test_the_compare_picker_costs_the_same_for_3_and_300_runs(admin_client):
    for _ in range(3):
        RunFactory()
    url = reverse("tracer:compare")
    three = queries(admin_client, url)
    Run.objects.bulk_create([Run(scenario=f"s{i % 7}", policy_name="starter") for i in range(297)])
    assert queries(admin_client, url) == three


def test_the_step_poll_costs_the_same_for_5_and_500_new_steps(admin_client):
    run = run_with_steps(5, status=Run.Status.RUNNING, stop_reason="", verdict="")
    url = reverse("tracer:run-steps", args=[run.pk]) + "?after=0"
    five = queries(admin_client, url, headers=HTMX)
    steps_grow(run, 500)
    assert queries(admin_client, url, headers=HTMX) == five


def test_a_guard_stopped_run_page_costs_the_same_for_5_and_500_steps(admin_client):
    run = run_with_steps(5, stop_reason=Run.StopReason.CONSECUTIVE_ERRORS, guard="3 tool errors in a row")
    url = reverse("tracer:run", args=[run.pk])
    five = queries(admin_client, url)
    steps_grow(run, 500)
    assert queries(admin_client, url) == five


def test_compare_costs_the_same_for_5_and_500_steps(admin_client):
    a = run_with_steps(5, policy_name="starter")
    b = run_with_steps(5, policy_name="structured")
    url = f"{reverse('tracer:compare')}?a={a.pk}&b={b.pk}"
    five = queries(admin_client, url)
    steps_grow(a, 500)
    steps_grow(b, 500)
    assert queries(admin_client, url) == five


def test_a_compare_gap_costs_the_same_for_100_and_1000_steps(admin_client):
    a, b = parted(steps=100, split_at=60)
    big_a, big_b = parted(steps=1000, split_at=60)
    headers = {**HTMX, "HX-Target": "row-gap-71"}
    url = reverse("tracer:compare") + "?a={}&b={}&after=70&before=1001"
    hundred = queries(admin_client, url.format(a.pk, b.pk), headers=headers)
    assert queries(admin_client, url.format(big_a.pk, big_b.pk), headers=headers) == hundred


def test_a_compare_split_far_down_costs_the_same_for_500_and_5000_steps(admin_client):
    url = reverse("tracer:compare") + "?a={}&b={}"
    five_hundred = queries(admin_client, url.format(*(r.pk for r in parted(steps=500, split_at=400))))
    assert queries(admin_client, url.format(*(r.pk for r in parted(steps=5000, split_at=4000)))) == five_hundred


def test_the_run_list_costs_the_same_for_5_and_50_runs_of_5_and_500_steps(admin_client):
    url = reverse("tracer:runs")
    runs = [run_with_steps(5, status=Run.Status.RUNNING, stop_reason="", verdict="") for _ in range(5)]
    five = queries(admin_client, url)
    for _ in range(45):
        RunFactory(scenario="lookup-empty", policy_name="message", model_backend="claude", model_name="claude-x")
    steps_grow(runs[0], 500)
    assert queries(admin_client, url) == five
    assert queries(admin_client, url, headers={**HTMX, "HX-Target": "run-rows"}) <= five


def test_the_policy_matrix_costs_the_same_for_5_and_50_runs(admin_client):
    url = reverse("tracer:policies")
    for i in range(5):
        RunFactory(scenario=f"s{i}", policy_name="starter")
    five = queries(admin_client, url)
    for i in range(45):
        RunFactory(
            scenario=f"s{i % 9}",
            policy_name=("starter", "structured", "message")[i % 3],
            stop_reason=Run.StopReason.CRASHED if i % 7 == 0 else Run.StopReason.FINAL_ANSWER,
        )
    assert queries(admin_client, url) == five


def test_the_stop_queue_costs_the_same_for_5_and_20_stops_of_5_and_500_steps(admin_client):
    url = reverse("tracer:stops") + "?state=all"
    stops = [guard_stop(scenario=f"s{i}") for i in range(5)]
    StopReviewFactory(run=stops[0])
    RunFactory(scenario="s1", policy_name="starter")
    five = queries(admin_client, url)
    for i in range(15):
        stop = guard_stop(scenario=f"s{i}")
        RunFactory(scenario=f"s{i}", policy_name="message")
        if i % 2:
            StopReviewFactory(run=stop)
    steps_grow(stops[1], 500)
    assert queries(admin_client, url) == five


def test_the_experiment_page_costs_the_same_for_5_and_50_runs(admin_client):
    exp = ExperimentFactory(total_runs=50, finished_runs=0)
    for _ in range(5):
        RunFactory(experiment=exp, status=Run.Status.RUNNING, stop_reason="", verdict="")
    url = reverse("tracer:experiment", args=[exp.pk])
    five = queries(admin_client, url)
    for i in range(45):
        RunFactory(experiment=exp, policy_name=("starter", "structured")[i % 2])
    assert queries(admin_client, url) == five


def test_a_done_experiments_page_costs_the_same_for_5_and_120_runs_on_its_first_and_last_page(admin_client):
    exp = ExperimentFactory(total_runs=5, finished_runs=5)
    for i in range(5):
        StopReviewFactory(run=RunFactory(experiment=exp, policy_name=("starter", "structured")[i % 2]))
    url = reverse("tracer:experiment", args=[exp.pk])
    five = queries(admin_client, url)
    for i in range(115):
        RunFactory(experiment=exp, policy_name=("starter", "structured")[i % 2])
    StopReviewFactory(run=Run.objects.filter(experiment=exp).latest("id"))
    Experiment.objects.filter(pk=exp.pk).update(total_runs=120, finished_runs=120)
    assert queries(admin_client, url) == five
    assert queries(admin_client, url + "?page=3") == five


def test_the_picture_of_a_run_costs_the_same_for_5_and_500_steps(admin_client):
    run = run_with_steps(5, status=Run.Status.RUNNING, stop_reason="", verdict="")
    url = reverse("tracer:run", args=[run.pk])
    fragment = {**HTMX, "HX-Target": "run-waterfall"}
    five = queries(admin_client, url, headers=fragment)
    steps_grow(run, 500)
    assert queries(admin_client, url, headers=fragment) == five


def test_the_experiment_progress_poll_costs_the_same_for_5_and_50_runs(admin_client):
    exp = ExperimentFactory(total_runs=50, finished_runs=0)
    for _ in range(5):
        RunFactory(experiment=exp, status=Run.Status.RUNNING, stop_reason="", verdict="")
    url = reverse("tracer:experiment", args=[exp.pk])
    fragment = {**HTMX, "HX-Target": "experiment-progress"}
    five = queries(admin_client, url, headers=fragment)
    for i in range(45):
        RunFactory(experiment=exp, policy_name=("starter", "structured")[i % 2])
    assert queries(admin_client, url, headers=fragment) == five


def test_the_launch_page_costs_the_same_for_1_and_12_experiments_of_many_runs(admin_client):
    url = reverse("tracer:launch")
    RunFactory(experiment=ExperimentFactory())
    one = queries(admin_client, url)
    for _ in range(11):
        exp = ExperimentFactory()
        for _ in range(4):
            RunFactory(experiment=exp)
    assert queries(admin_client, url) == one


def test_the_tokens_page_costs_the_same_for_1_and_10_tokens(admin_client, admin_user):
    url = reverse("tracer:tokens")
    tokens.token_create(user=admin_user, name="first")
    one = queries(admin_client, url)
    for i in range(9):
        tokens.token_create(user=admin_user, name=f"agent {i}")
    assert queries(admin_client, url) == one


def _executed(pairs):
    from tracer.execution import run_execute
    from tracer.experiments import run_create
    from tracer.models import PolicyVariant

    for scenario, policy in pairs:
        run_execute(run_id=run_create(scenario=scenario, policy=PolicyVariant.objects.get(name=policy)).pk)


MORE_RUNS = [
    (s, p)
    for s in ("refund-too-old", "lookup-empty", "stuck-model", "fatal-credentials", "refund-flaky-payment")
    for p in ("starter", "message", "structured")
]


@pytest.mark.parametrize("url", ["tracer:tools", "tracer:findings"])
def test_the_tools_and_findings_pages_cost_the_same_for_2_and_17_runs_of_more_tools_and_findings(admin_client, url):
    _executed([("refund-too-old", "starter"), ("refund-too-old", "structured")])
    few = queries(admin_client, reverse(url))
    _executed(MORE_RUNS)
    assert queries(admin_client, reverse(url)) == few
    assert queries(admin_client, reverse(url) + "?policy=starter&started_from=2020-01-01") == few
