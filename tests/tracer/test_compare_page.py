"""The compare page explains a split by the policies' settings, and "other policy" links pair runs of the
same experiment and repeat. Runs are the simulated model's, recorded by the service a
worker calls; pages are read as a person reads them (``tests.dom``)."""

import pytest
from django.urls import reverse

from agents.events import StepEvent
from agents.vocabulary import StepKind
from tests.dom import page
from tests.factories import ExperimentFactory, RunFactory, failed_attempt, guard_stop, steps_add, tool_step
from tests.tracer.test_views_queries import queries
from tracer.execution import run_execute
from tracer.experiments import policy_variant_create, run_create
from tracer.models import PolicyVariant, Run, Step
from tracer.reads import experiment_page, run_page

pytestmark = pytest.mark.django_db
SCRIPT = "<script>alert('x')</script>"


def execute(scenario: str, policy: str, **settings) -> Run:
    """One simulated run, recorded; ``settings`` make a variant of structured named ``policy``."""
    if settings:
        policy_variant_create(name=policy, settings={"base": "structured", **settings})
    run = run_create(scenario=scenario, policy=PolicyVariant.objects.get(name=policy))
    return run_execute(run_id=run.pk)


def compare(client, a: Run, b: Run):
    response = client.get(reverse("tracer:compare"), {"a": a.pk, "b": b.pk})
    assert response.status_code == 200
    return page(response)


def test_a_guard_against_no_guard_names_the_guard_and_folds_the_repeats(admin_client):
    unguarded = execute("stuck-model", "unguarded", consecutive_error_limit=0)
    guarded = execute("stuck-model", "structured")

    doc = compare(admin_client, unguarded, guarded)

    summary = doc.one(".split-summary").text
    assert "Run B's consecutive-error guard stopped the run after 3 errors in a row; run A has no guard." in summary
    assert "the model or the policy chose differently" not in doc.text
    assert doc.texts("details.stretch > summary") == [
        "2 more identical failing calls of free_slots in both runs",
        "6 more identical failing calls of free_slots in run A; run B has no such steps",
    ]
    assert len(doc.select(".aligned > .pair")) == 2  # the first call and the split; the rest is folded
    assert doc.text.count("This is where the runs split") == 1
    settings = doc.one("table.settings")
    assert settings.texts("tr.differs th") == ["consecutive_error_limit made the difference"]
    assert [td.text for td in settings.one("tr.explains").select("td")] == ["off (no guard)", "3"]


def test_three_attempts_against_five_names_max_attempts(admin_client):
    three = execute("lookup-flaky-exhausted", "structured")
    five = execute("lookup-flaky-exhausted", "five-attempts", max_attempts=5)

    doc = compare(admin_client, three, five)

    assert "Run A gave up after 3 attempts (its max_attempts is 3); run B's max_attempts is 5." in doc.text
    assert doc.one("table.settings").texts("tr.differs th") == ["max_attempts made the difference"]


def test_starter_against_structured_gives_the_outcome_and_both_settings(admin_client):
    starter, structured = execute("refund-too-old", "starter"), execute("refund-too-old", "structured")
    doc = compare(admin_client, starter, structured)
    reasons = doc.texts(".split-summary .reason")
    assert reasons[0].startswith("retry_on Run A retries every failure (retry_on all)")
    assert reasons[1].startswith("error_format Run A's error_format is bare")
    assert 'Cause: attempt 1 of process_refund came back as bare "Error" in run A' in doc.text


def test_different_scenarios_say_what_compares_and_give_no_split(admin_client):
    a, b = execute("refund-too-old", "starter"), execute("lookup-empty", "structured")

    doc = compare(admin_client, a, b)

    warning = doc.one(".warning[role=alert]").text
    assert warning.startswith("These runs are of different scenarios (refund-too-old and lookup-empty)")
    assert "no split or cause is given" in warning and "the two policies' settings and the summary" in warning
    assert not doc.select(".split-summary") and "This is where the runs split" not in doc.text
    assert "chose differently" not in doc.text and "did the same thing at every step" not in doc.text
    assert doc.select("table.settings tr.differs")  # the settings still compare


def test_an_imported_run_with_only_a_policy_name_has_unknown_settings(admin_client):
    built_in = execute("stuck-model", "structured")
    imported = RunFactory(
        scenario="stuck-model",
        policy_name="their-harness",
        policy_settings={},
        source=Run.Source.IMPORT,
        model_backend=Run.ModelBackend.IMPORTED,
        stop_reason=Run.StopReason.MAX_STEPS,
    )
    first = built_in.steps.get(index=1)
    Step.objects.bulk_create(  # the same call and error, five times: only the settings are unknown
        Step(
            run=imported,
            index=i,
            kind=first.kind,
            tool_name=first.tool_name,
            input=first.input,
            attempts=first.attempts,
            is_error=True,
            category=first.category,
            retryable=first.retryable,
        )
        for i in range(1, 6)
    )

    doc = compare(admin_client, built_in, imported)

    assert "Run B carries only its policy's name (their-harness): its settings are unknown." in doc.text
    assert "The policy settings of run B are not known" in doc.one(".split-summary").text
    assert not doc.select("table.settings tr.differs")  # nothing is claimed to differ
    assert {row.select("td")[1].text for row in doc.select("table.settings tbody tr")} == {"unknown"}


def test_a_folded_stretch_escapes_what_the_trace_says(admin_client):
    a = RunFactory(scenario="stuck-model", stop_reason=Run.StopReason.CONSECUTIVE_ERRORS)
    b = RunFactory(scenario="stuck-model", policy_name="starter")
    steps = [
        tool_step(i, [failed_attempt(1, category="validation", message=SCRIPT)], tool=SCRIPT, input={"d": SCRIPT})
        for i in range(1, 5)
    ]
    steps_add(a, steps)
    steps_add(b, steps[:1])
    response = admin_client.get(reverse("tracer:compare"), {"a": a.pk, "b": b.pk})
    assert SCRIPT not in response.content.decode()
    assert f"2 more identical failing calls of {SCRIPT} in run A" in page(response).text


# --- pairing: the same experiment and repeat first ----------------------------------------------


def experiment_runs(repeats: int = 2) -> dict[tuple[str, int], Run]:
    """An experiment of refund-too-old × starter, structured × ``repeats``, created as a launch does."""
    exp = ExperimentFactory(policies=["starter", "structured"], repeats=repeats)
    return {
        (policy, repeat): RunFactory(experiment=exp, policy_name=policy)
        for repeat in range(repeats)
        for policy in ("starter", "structured")
    }


def test_the_run_page_pairs_the_same_experiment_and_repeat_not_the_newest_run(admin_client):
    runs = experiment_runs()
    RunFactory(policy_name="structured")  # newer, from no experiment
    message = RunFactory(policy_name="message")  # a policy the experiment did not run

    doc = page(admin_client.get(reverse("tracer:run", args=[runs["starter", 0].pk])))

    compare_url = reverse("tracer:compare")
    assert f"{compare_url}?a={runs['starter', 0].pk}&b={runs['structured', 0].pk}" in doc.hrefs
    assert f"{compare_url}?a={runs['starter', 0].pk}&b={message.pk}" in doc.hrefs  # newest anywhere
    peers = run_page.run_other_policies(run=runs["starter", 1])
    assert [(p.pk, p.pairing) for p in peers] == [
        (message.pk, "newest run"),
        (runs["structured", 1].pk, "same experiment and repeat"),
    ]


def test_the_run_page_says_how_each_other_policys_run_was_paired(admin_client):
    runs = experiment_runs(repeats=1)
    message = RunFactory(policy_name="message")  # a policy the experiment did not run

    doc = page(admin_client.get(reverse("tracer:run", args=[runs["starter", 0].pk])))

    shown = {mini.select("a")[0].text: mini.one(".pairing").text for mini in doc.select("aside .mini")}
    assert shown == {
        f"#{message.pk} message": "paired by: newest run",
        f"#{runs['structured', 0].pk} structured": "paired by: same experiment and repeat",
    }


def test_a_re_run_stands_in_for_its_repeat(admin_client):
    runs = experiment_runs()
    interrupted = runs["structured", 0]
    interrupted.stop_reason = Run.StopReason.INTERRUPTED
    interrupted.save()
    rerun = RunFactory(experiment=interrupted.experiment, policy_name="structured", rerun_of=interrupted)

    assert [p.pk for p in run_page.run_other_policies(run=runs["starter", 0])] == [rerun.pk]
    assert [p.pk for p in run_page.run_other_policies(run=runs["starter", 1])] == [runs["structured", 1].pk]
    assert [p.pk for p in run_page.run_other_policies(run=rerun)] == [runs["starter", 0].pk]


def test_the_stop_queue_links_the_same_experiment_and_repeat(admin_client):
    exp = ExperimentFactory(policies=["structured", "starter"], repeats=2, scenarios=["stuck-model"])
    stops, others = [], []
    for _ in range(2):
        stops.append(guard_stop(scenario="stuck-model", experiment=exp))
        others.append(RunFactory(scenario="stuck-model", policy_name="starter", experiment=exp))
    RunFactory(scenario="stuck-model", policy_name="starter")  # newest, elsewhere

    doc = page(admin_client.get(reverse("tracer:stops")))

    compare_url = reverse("tracer:compare")
    for stop, other in zip(stops, others, strict=True):
        assert f"{compare_url}?a={stop.pk}&b={other.pk}" in doc.hrefs
        beside = doc.one(f"#stop-{stop.pk} .beside")
        assert "paired by: same experiment and repeat" in beside.one(".pairing").text


def test_a_stop_of_no_experiment_says_its_other_policys_run_is_the_newest(admin_client):
    stop = guard_stop(scenario="stuck-model")
    RunFactory(scenario="stuck-model", policy_name="starter")

    doc = page(admin_client.get(reverse("tracer:stops")))

    assert doc.one(f"#stop-{stop.pk} .beside .pairing").text == "paired by: newest run"


def test_pairing_costs_the_same_for_2_and_20_runs(admin_client):
    runs = experiment_runs(repeats=1)
    run_url = reverse("tracer:run", args=[runs["starter", 0].pk])
    stops_url = reverse("tracer:stops")
    guard_stop(scenario="refund-too-old", experiment=runs["starter", 0].experiment)
    few = queries(admin_client, run_url), queries(admin_client, stops_url)
    more = experiment_runs(repeats=5)
    for repeat in range(5):
        guard_stop(scenario="refund-too-old", experiment=more["starter", 0].experiment)
        RunFactory(policy_name=f"variant-{repeat}")
    assert (queries(admin_client, run_url), queries(admin_client, stops_url)) == few


def test_a_fatal_stop_says_no_result_went_to_the_model_where_the_other_run_retried(admin_client):
    starter, structured = execute("fatal-credentials", "starter"), execute("fatal-credentials", "structured")

    doc = compare(admin_client, starter, structured)

    left, right = doc.one(".attempt-line.is-split").select(".cell")
    assert "Retry · attempt 2" in left.text
    assert "no retry: a fatal error ended the run here, and no result went to the model" in right.text
    assert "Run B stops the run on a fatal error (stop_on_fatal)" in doc.one(".split-summary").text


def test_the_experiment_pairs_a_re_run_in_the_repeat_of_the_run_it_re_ran():
    runs = experiment_runs()
    interrupted = runs["structured", 0]
    rerun = RunFactory(experiment=interrupted.experiment, policy_name="structured", rerun_of=interrupted)
    everything = list(Run.objects.filter(experiment=interrupted.experiment).order_by("id"))

    pairs = experiment_page.experiment_pairs(runs=everything, policies=["starter", "structured"])

    assert [(a.pk, b.pk) for a, b in pairs] == [
        (runs["starter", 0].pk, rerun.pk),
        (runs["starter", 1].pk, runs["structured", 1].pk),
    ]


def test_a_turn_the_api_cut_off_shows_its_stop_reason_and_that_nothing_ran(admin_client):
    a = RunFactory(stop_reason=Run.StopReason.MAX_TOKENS, verdict=Run.Verdict.FAIL)
    b = RunFactory()
    steps_add(a, [tool_step(1, [failed_attempt(1)]), cut_off(2)])
    steps_add(b, [tool_step(1, [failed_attempt(1)]), tool_step(2, [failed_attempt(1)], input={"order_id": "0872"})])

    doc = compare(admin_client, a, b)

    split = doc.one(".pair.is-split")
    assert "stop_reason max_tokens" in split.select(".cell")[0].text
    assert "nothing executed: the model's turn stopped the run" in split.text
    assert "Run A stopped with nothing executed (the API's stop_reason max_tokens)" in doc.one(".split-summary").text


def cut_off(index: int) -> StepEvent:
    return StepEvent(
        index=index,
        kind=StepKind.MODEL_STOP,
        tool_name="process_refund",
        input={"order_id": "08"},
        text="Let me try",
        api_stop_reason="max_tokens",
    )


def test_a_compare_costs_the_same_queries_for_10_and_500_repeated_steps(admin_client):
    def stuck(index: int) -> StepEvent:
        return tool_step(index, [failed_attempt(1, category="validation", message="bad date")], tool="free_slots")

    long = RunFactory(scenario="stuck-model", policy_name="unguarded", stop_reason=Run.StopReason.MAX_STEPS)
    short = RunFactory(scenario="stuck-model", stop_reason=Run.StopReason.CONSECUTIVE_ERRORS)
    steps_add(long, [stuck(i) for i in range(1, 11)])
    steps_add(short, [stuck(i) for i in range(1, 4)])
    url = f"{reverse('tracer:compare')}?a={long.pk}&b={short.pk}"
    ten = queries(admin_client, url)
    steps_add(long, [stuck(i) for i in range(11, 501)])

    assert queries(admin_client, url) == ten
    folds = page(admin_client.get(url)).texts("details.stretch > summary")
    assert folds[-1] == "496 more identical failing calls of free_slots in run A; run B has no such steps"
