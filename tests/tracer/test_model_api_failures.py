"""Model-API failures as a user sees them, against the fake Messages API: each attempt and
wait on the run page apart from tool retries, a readable crash reason that says what was done, model
retries counted in the matrix, record then replay through the command line, and a call that never
answers bounded by the run's time limit through the command line and a real worker."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.core.management.base import OutputWrapper
from django.urls import reverse
from django.utils import timezone

from tests.conftest import WorkerProcess, purge_test_queue, wait_until
from tests.dom import page
from tests.factories import ExperimentFactory, RunFactory
from tests.fake_messages_api import error, hang, malformed, reply, tool_use
from tracer.execution import run_execute
from tracer.experiments import experiment_launch, run_create
from tracer.management.commands._progress import wait_for
from tracer.models import PolicyVariant, Run, Step
from tracer.tokens import token_create


@pytest.fixture
def claude(fake_api, settings):
    """The fake API, with the web process's settings allowing the claude backend."""
    settings.ANTHROPIC_API_KEY = fake_api.key
    return fake_api


def executed(scenario: str = "lookup-flaky", policy: str = "structured") -> Run:
    run = run_create(scenario=scenario, policy=PolicyVariant.objects.get(name=policy), model_backend="claude")
    return run_execute(run_id=run.pk)


def crashed_on_the_api(claude) -> Run:
    """A run whose model call after its first step is overloaded three times: it crashes on the API."""
    claude.script(reply(tool_use("lookup", {"key": "answer"})), *[error(529, retry_after=0.01)] * 3)
    return executed()


def run_page(client, run: Run):
    response = client.get(reverse("tracer:run", args=[run.pk]))
    assert response.status_code == 200
    return page(response)


@pytest.mark.django_db
def test_a_retried_model_call_shows_each_attempt_and_wait_on_its_step(claude, admin_client):
    claude.script(error(529, retry_after=0.05), error(429, retry_after=0.1))
    run = executed()
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER and run.model_retry_count == 2
    assert run.retry_count == run.steps.get(index=1).retry_count  # the tool's own retries, counted apart
    doc = run_page(admin_client, run)
    call = doc.one("#step-1 .model-call")
    assert call.texts(".attempt .badge") == ["529", "429", "200"]
    assert "was overloaded (529)" in call.text and "was rate-limited (429)" in call.text
    assert "waited 0.05 s" in call.text and "waited 0.1 s" in call.text
    assert call.texts(".request-id") == ["req_fake000001", "req_fake000002", "req_fake000003"]
    assert "Model retries 2" in doc.one("#run-status").text


@pytest.mark.django_db
def test_a_wait_says_capped_only_when_the_api_asked_for_longer_before_it(claude, admin_client, monkeypatch):
    monkeypatch.setenv("RLT_MODEL_RETRY_AFTER_CAP_S", "0.2")
    claude.script(error(529, retry_after=0.05), error(429, retry_after=3600))
    run = executed()
    waits = run_page(admin_client, run).one("#step-1 .model-call").texts(".attempt .backoff")
    assert [" ".join(w.split()) for w in waits] == [
        "waited 0.05 s (retry-after), then tried again",  # the 529 asked 0.05 s: waited as asked
        "waited 0.2 s (the API asked 3600.0 s: capped), then tried again",  # the 429 asked an hour
    ]


@pytest.mark.django_db
def test_a_run_that_crashes_on_the_api_says_why_in_words_and_what_was_already_done(claude, admin_client):
    run = crashed_on_the_api(claude)
    assert run.stop_reason == Run.StopReason.CRASHED and run.model_retry_count == 2
    assert [a["status"] for a in run.failed_model_call] == [529, 529, 529]
    banner = run_page(admin_client, run).one("#run-status .banner")
    reason = banner.one(".error-text").text
    assert reason.startswith("the model API was overloaded (529) three times")
    assert "Done before it stopped: step 1 lookup succeeded" in reason
    assert "OverloadedError" not in reason and "APIStatusError" not in reason
    assert banner.texts(".model-call .attempt .badge") == ["529", "529", "529"]


@pytest.mark.django_db
def test_what_the_api_says_in_an_error_is_shown_escaped(claude, admin_client):
    claude.script(error(400, message="<script>alert('x')</script> bad request"))
    run = executed()
    doc = run_page(admin_client, run)
    assert not [s for s in doc.select("script") if "alert" in s.text]
    assert "<script>alert('x')</script> bad request" in doc.one("#run-status .error-text").text


JOB = "Look up order 1042 for Ana Ruiz."


@pytest.mark.django_db
def test_a_coordinator_whose_sub_agents_model_call_fails_says_so_and_keeps_that_call(claude, admin_client):
    claude.script(reply(tool_use("run_subagent", {"task": JOB})), *[error(529, retry_after=0.01)] * 3)
    run = executed(scenario="coordinator-partial")
    (child,) = run.children.all()
    assert child.stop_reason == Run.StopReason.CRASHED and child.model_retry_count == 2
    assert run.stop_reason == Run.StopReason.CRASHED
    assert run.error.startswith(
        f"its sub-agent's model call failed (sub-agent 1: {JOB}): the model API was overloaded (529) three times"
    )
    assert run.error.endswith("No tool call had finished yet; the call that started the sub-agent was under way.")
    assert [a["status"] for a in run.failed_model_call] == [529, 529, 529]
    assert run.model_retry_count == 2  # the sub-agent's, counted once
    banner = run_page(admin_client, run).one("#run-status .banner")
    assert "its sub-agent's model call failed" in banner.text
    assert banner.texts(".model-call .attempt .badge") == ["529", "529", "529"]


@pytest.mark.django_db
def test_a_coordinators_model_retries_include_its_sub_agents(claude, admin_client):
    claude.script(reply(tool_use("run_subagent", {"task": JOB})), error(529, retry_after=0.01))
    run = executed(scenario="coordinator-partial")
    (child,) = run.children.all()
    assert child.status == Run.Status.FINISHED and child.model_retry_count == 1
    assert run.stop_reason == Run.StopReason.FINAL_ANSWER and run.model_retry_count == 1
    assert "Model retries 1" in run_page(admin_client, run).one("#run-status").text


@pytest.mark.django_db
def test_model_attempts_go_out_as_otlp_and_come_back_on_the_same_steps(claude, admin_client, admin_user, client):
    claude.script(error(529, retry_after=0.01), error(429, retry_after=0.02), None, error(500, retry_after=0.01))
    original = executed()
    download = admin_client.get(reverse("tracer:run-otlp", args=[original.pk]))
    _, secret = token_create(user=admin_user, name="otlp")
    sent = client.post(
        "/v1/traces", data=download.content, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}"
    )
    assert sent.status_code == 200, sent.content
    back = Run.objects.get(source=Run.Source.OTLP)

    def attempts(run):
        return [s.model_attempts for s in Step.objects.filter(run=run).order_by("index")]

    assert attempts(back) == attempts(original)
    assert [len(a) for a in attempts(back)] == [3, 2]
    assert back.model_retry_count == original.model_retry_count == 3
    call = run_page(admin_client, back).one("#step-1 .model-call")
    assert call.texts(".attempt .badge") == ["529", "429", "200"] and "waited 0.02 s" in call.text


def sent_back(admin_client, client, admin_user, run: Run, *, as_otlp: bool) -> Run:
    """``run`` downloaded as a run page offers it (its run document, or its OTLP trace) and sent back:
    the document through the import page, the trace to ``/v1/traces``."""
    if not as_otlp:
        download = admin_client.get(reverse("tracer:run-export", args=[run.pk]))
        assert download.status_code == 200
        upload = SimpleUploadedFile("run.json", download.content, content_type="application/json")
        assert admin_client.post(reverse("tracer:import"), {"files": [upload]}).status_code == 200
        return Run.objects.get(source=Run.Source.IMPORT)
    download = admin_client.get(reverse("tracer:run-otlp", args=[run.pk]))
    _, secret = token_create(user=admin_user, name="otlp")
    sent = client.post(
        "/v1/traces", data=download.content, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}"
    )
    assert sent.status_code == 200, sent.content
    return Run.objects.get(source=Run.Source.OTLP)


@pytest.mark.django_db
@pytest.mark.parametrize("as_otlp", [False, True], ids=["run document", "OTLP"])
def test_a_run_the_api_crashed_comes_back_from_its_export_with_the_call_that_ended_it(
    claude, admin_client, admin_user, client, as_otlp
):
    original = crashed_on_the_api(claude)
    back = sent_back(admin_client, client, admin_user, original, as_otlp=as_otlp)
    assert back.stop_reason == Run.StopReason.CRASHED and back.error == original.error
    assert back.failed_model_call == original.failed_model_call
    assert [a["status"] for a in back.failed_model_call] == [529, 529, 529]
    assert back.model_retry_count == original.model_retry_count == 2
    banner = run_page(admin_client, back).one("#run-status .banner")
    assert banner.texts(".model-call .attempt .badge") == ["529", "529", "529"]
    assert "the call that ended the run" in banner.text


@pytest.mark.django_db
def test_the_otlp_export_shows_the_failed_call_as_an_erroring_chat_span_other_tools_read(claude, admin_client):
    run = crashed_on_the_api(claude)
    spans = admin_client.get(reverse("tracer:run-otlp", args=[run.pk])).json()["resourceSpans"][0]["scopeSpans"][0]
    root, *_, last = spans["spans"]

    def attrs(span):
        return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}

    assert attrs(root)["rlt.model_retry_count"] == "2"  # an intValue, as OTLP JSON writes int64
    assert attrs(last)["gen_ai.operation.name"] == "chat" and attrs(last)["error.type"] == "overloaded_error"
    assert last["status"]["code"] == 2 and last["status"]["message"] == "the model API was overloaded (529)"
    events = [(e["name"], {a["key"]: a["value"]["stringValue"] for a in e["attributes"]}) for e in last["events"]]
    assert (
        events
        == [("exception", {"exception.type": "overloaded_error", "exception.message": "was overloaded (529)"})] * 3
    )
    assert int(last["endTimeUnixNano"]) <= int(root["endTimeUnixNano"])


@pytest.mark.django_db
@pytest.mark.parametrize("as_otlp", [False, True], ids=["run document", "OTLP"])
def test_a_coordinators_model_retries_come_back_from_its_export_with_its_sub_agents(
    claude, admin_client, admin_user, client, as_otlp
):
    claude.script(reply(tool_use("run_subagent", {"task": JOB})), error(529, retry_after=0.01))
    original = executed(scenario="coordinator-partial")
    assert original.model_retry_count == 1 and not any(s.model_attempts[1:] for s in original.steps.all())
    back = sent_back(admin_client, client, admin_user, original, as_otlp=as_otlp)
    # the sub-agent's retry is in no step of the coordinator's export, only in its count
    assert back.model_retry_count == 1
    assert "Model retries 1" in run_page(admin_client, back).one("#run-status").text


@pytest.mark.django_db
def test_the_compare_page_shows_each_runs_model_retries_and_the_call_that_crashed_one(claude, admin_client):
    claude.script(error(529, retry_after=0.01), error(429, retry_after=0.02))
    retried = executed()
    crashed = crashed_on_the_api(claude)
    response = admin_client.get(reverse("tracer:compare"), {"a": retried.pk, "b": crashed.pk})
    assert response.status_code == 200
    doc = page(response)
    first = doc.select(".pair")[0]
    left, right = first.select(".line.head .cell")
    assert left.texts(".model-call .attempt .badge") == ["529", "429", "200"] and "waited 0.02 s" in left.text
    assert not right.select(".model-call")  # its first call went through at once
    card_a, card_b = doc.select(".compare-heads .run-card")
    assert not card_a.select(".model-call")
    assert card_b.texts(".model-call .attempt .badge") == ["529", "529", "529"]
    assert "the call that ended the run" in card_b.text


@pytest.mark.django_db
def test_a_retry_after_cap_that_is_not_a_number_ends_the_run_at_its_start_naming_it(claude, monkeypatch):
    monkeypatch.setenv("RLT_MODEL_RETRY_AFTER_CAP_S", "a minute")
    run = executed()
    assert run.status == Run.Status.FINISHED and run.stop_reason == Run.StopReason.CRASHED
    assert "RLT_MODEL_RETRY_AFTER_CAP_S must be a number of seconds, 0 or more; it is 'a minute'" in run.error
    assert run.step_count == 0 and not claude.bodies()  # the model was never asked


@pytest.mark.django_db
def test_the_matrix_counts_model_retries_per_policy(claude, admin_client):
    claude.script(error(529, retry_after=0.01), error(529, retry_after=0.01))
    executed(policy="structured")
    executed(policy="starter")
    response = admin_client.get(reverse("tracer:policies"))
    table = page(response).one("table.totals")
    column = table.texts("thead th").index("Model retries")
    rows = {row.texts("th")[0].split()[0]: row.texts("td") for row in table.select("tbody tr")}
    assert rows["structured"][column - 1] == "2" and rows["starter"][column - 1] == "0"


@pytest.mark.django_db
def test_the_command_line_records_then_replays_api_errors_to_the_same_steps_waits_and_stop(claude, tmp_path):
    cassette = tmp_path / "errors.json"
    claude.script(error(529), error(429, retry_after=0.2), reply(tool_use("lookup", {"key": "answer"})))
    claude.script(error(529, retry_after=0.01), error(529, retry_after=0.01), error(529, retry_after=0.01))
    common = ["run_agent", "--scenario", "lookup-flaky", "--policy", "structured"]
    with pytest.raises(CommandError, match="crashed after 1 step"):  # the crash is the command's failure
        call_command(*common, "--model", "claude", "--record", str(cassette), stdout=StringIO())
    with pytest.raises(CommandError, match="the model API was overloaded \\(529\\) three times"):
        call_command(*common, "--model", "replay", "--cassette", str(cassette), stdout=StringIO())
    recorded, replayed = Run.objects.order_by("pk")

    def seen(run: Run):
        steps = [
            (s.kind, [(a["status"], a["wait_s"], a["request_id"]) for a in s.model_attempts])
            for s in run.steps.order_by("index")
        ]
        return steps, run.stop_reason, run.error, [(a["status"], a["wait_s"]) for a in run.failed_model_call]

    assert seen(replayed) == seen(recorded)
    assert (
        recorded.stop_reason == Run.StopReason.CRASHED and recorded.model_retry_count == replayed.model_retry_count == 4
    )
    assert len(json.loads(cassette.read_text())["interactions"]) == 6  # the five errors are in it too


@pytest.mark.django_db
def test_the_command_line_ends_a_run_whose_model_never_answers_at_its_time_limit(claude, settings):
    settings.RLT_RUN_TIME_LIMIT_S = 3
    claude.script(hang(300))
    began = time.monotonic()
    with pytest.raises(CommandError, match="gave no answer within"):
        call_command(
            "run_agent", "--scenario", "lookup-flaky", "--policy", "structured", "--model", "claude",
            stdout=StringIO(),
        )  # fmt: skip
    assert time.monotonic() - began < 3 + 5
    run = Run.objects.get()
    assert run.status == Run.Status.FINISHED and run.stop_reason == Run.StopReason.CRASHED
    assert "the run's time limit (3 s, RLT_RUN_TIME_LIMIT_S) was reached" in run.error


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_shows_api_waits_and_ends_a_hanging_call_within_the_time_limit(claude, admin_client):
    """Acceptance: a 300 s hang with RLT_RUN_TIME_LIMIT_S=10 ends within the limit plus a few seconds."""
    purge_test_queue()
    worker = WorkerProcess(env={**claude.env, "RLT_RUN_TIME_LIMIT_S": "10"})
    try:
        worker.wait_ready()

        def finished(experiment):
            return lambda: Run.objects.filter(experiment=experiment, status=Run.Status.FINISHED).first()

        # The hang first: the worker's first run also loads the SDK, which on a loaded machine can take
        # seconds of a 10 s limit that the retried runs below would need.
        claude.script(hang(300))
        hanging = experiment_launch(scenarios=["lookup-flaky"], policies=["structured"], model_backend="claude")
        wait_until(
            lambda: Run.objects.filter(experiment=hanging, status=Run.Status.RUNNING).exists(),
            timeout=60, what="the hanging run to start", worker=worker,
        )  # fmt: skip
        began = time.monotonic()
        run = wait_until(finished(hanging), timeout=10 + 20, what="the hanging run to end", worker=worker)
        took = time.monotonic() - began
        assert took < 10 + 5, f"ended {took:.1f} s after it started"
        assert run.stop_reason == Run.StopReason.CRASHED
        assert "the run's time limit (10 s, RLT_RUN_TIME_LIMIT_S) was reached" in run.error
        assert run.failed_model_call[0]["error_type"] == "timeout"

        # The rest under a limit a loaded machine cannot reach: under 10 s their backoffs and retries
        # measured the machine's load, not the retries. The first worker's stuck call dies with it.
        worker.kill()
        worker = WorkerProcess(env={**claude.env, "RLT_RUN_TIME_LIMIT_S": "120"})
        worker.wait_ready()
        claude.script(error(529, retry_after=0.2), error(429, retry_after=0.3))
        retried = experiment_launch(scenarios=["lookup-flaky"], policies=["structured"], model_backend="claude")
        run = wait_until(finished(retried), timeout=60, what="the retried run to end", worker=worker)
        assert run.stop_reason == Run.StopReason.FINAL_ANSWER, run.error
        call = run_page(admin_client, run).one("#step-1 .model-call")
        assert "waited 0.2 s" in call.text and "waited 0.3 s" in call.text
        assert call.texts(".attempt .badge") == ["529", "429", "200"]

        # A 200 whose body is not a message: a crash that says so, not a worker's traceback.
        claude.script(malformed(b'{"type": "message", "content": "hi"}'))
        garbled = experiment_launch(scenarios=["lookup-flaky"], policies=["structured"], model_backend="claude")
        run = wait_until(finished(garbled), timeout=60, what="the garbled run to end", worker=worker)
        assert run.stop_reason == Run.StopReason.CRASHED
        assert run.error.startswith("the model API answered 200 with a body that is not a message"), run.error
        assert run.failed_model_call[0]["error_type"] == "malformed"

        # A sub-agent whose model call fails for good ends its coordinator saying so.
        claude.script(reply(tool_use("run_subagent", {"task": JOB})), *[error(529, retry_after=0.01)] * 3)
        coordinated = experiment_launch(
            scenarios=["coordinator-partial"], policies=["structured"], model_backend="claude"
        )
        run = wait_until(finished(coordinated), timeout=60, what="the coordinator to end", worker=worker)
        assert run.error.startswith("its sub-agent's model call failed (sub-agent 1:"), run.error
        assert run.model_retry_count == 2 and len(run.failed_model_call) == 3
    finally:
        worker.stop()


@pytest.mark.django_db
def test_waiting_on_runs_a_busy_worker_holds_says_so_instead_of_asking_for_a_worker():
    experiment = ExperimentFactory(total_runs=2)
    started = timezone.now() - timedelta(seconds=40)
    held = RunFactory(experiment=experiment, status=Run.Status.RUNNING, stop_reason="", worker_name="w1@host",
                      started_at=started, finished_at=None)  # fmt: skip
    RunFactory(experiment=experiment, status=Run.Status.QUEUED, stop_reason="", started_at=None, finished_at=None)
    with pytest.raises(CommandError) as raised:
        wait_for(experiment, timeout=0, stdout=OutputWrapper(StringIO()))
    said = str(raised.value)
    assert f"1 run still running (run {held.pk} on w1@host for 40s with 0 steps)" in said
    assert "each ends by its time limit" in said
    assert "1 run queued, waiting for a free worker" in said and "start a worker" not in said


@pytest.mark.django_db
def test_waiting_on_runs_no_worker_took_asks_for_a_worker():
    experiment = ExperimentFactory(total_runs=1)
    RunFactory(experiment=experiment, status=Run.Status.QUEUED, stop_reason="", started_at=None, finished_at=None)
    with pytest.raises(CommandError, match=r"1 run queued and none running: start a worker \(celery -A config"):
        wait_for(experiment, timeout=0, stdout=OutputWrapper(StringIO()))
