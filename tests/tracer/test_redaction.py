"""Secrets never stored: a run whose tool input, output, error message, answer and transcript carried an
Anthropic key, an Authorization header, the configured ANTHROPIC_API_KEY and a value matching a pattern
from RLT_REDACT_PATTERNS stores none of them and no page shows them; logs of the web process and of a
real worker are redacted too; an unusable pattern stops the settings from loading."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.test import override_settings
from django.urls import reverse

from agents.events import Attempt, RunEnd, RunStart, StepEvent, Verdict
from agents.vocabulary import StepKind
from tests.conftest import WorkerProcess, purge_test_queue
from tracer import redaction
from tracer.experiments import run_create
from tracer.models import PolicyVariant, Run, Step
from tracer.recording import DbRecorder
from tracer.tasks import run_execute_task

ROOT = Path(__file__).resolve().parent.parent.parent

ANTHROPIC = "sk-ant-api03-Qw8Er7tY6uI5oP4aS3dF2gH1jK0lZx9_Cv8-Bn7Mm6"
BEARER = "tok.9f8e7d6c5b4a3210-live"
CONFIGURED = "configured-key-4f1d9a77e2"  # matches no built-in pattern: only the literal value catches it
CUSTOM = "LUMEN-TOK-884213"
SECRETS = (ANTHROPIC, BEARER, CONFIGURED, CUSTOM)
CONFIG = {"ANTHROPIC_API_KEY": CONFIGURED, "RLT_REDACT_PATTERNS": [("lumen token", r"LUMEN-TOK-[0-9]{6}")]}


def assert_no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} in {where}"
        assert secret[:16] not in text, f"the start of {secret!r} in {where}"


def record_a_run_full_of_secrets(run: Run) -> None:
    header = f"Authorization: Bearer {BEARER}"
    recorder = DbRecorder(run, worker_name="w1", worker_pid=1)
    recorder.run_started(
        RunStart(
            scenario=run.scenario,
            policy_name=run.policy_name,
            policy_settings=run.policy_settings,
            model_backend="simulated",
            model_name="simulated-rules",
            task=f"Refund order 0871 (ticket {CUSTOM}).",
        )
    )
    failure = Attempt(
        number=1,
        ok=False,
        content={"status": 401, "request_headers": header, "echo": ANTHROPIC},
        category="permission",
        retryable=False,
        message=f"payments refused {header}: key {CONFIGURED} revoked",
        result_content={"error": {"message": f"payments refused {header}"}},
    )
    recorder.step_recorded(
        StepEvent(
            index=1,
            kind=StepKind.TOOL_USE,
            tool_name="process_refund",
            tool_use_id="toolu_01",
            input={"order_id": "0871", "api_key": ANTHROPIC, "note": f"{header} {CUSTOM}"},
            attempts=[failure],
            result_content={"error": {"message": f"payments refused {header}"}},
            is_error=True,
            category="permission",
            retryable=False,
            text=f"Trying with {CONFIGURED}.",
        )
    )
    child = recorder.child(label=f"lookup with {ANTHROPIC}")
    child.run_started(RunStart("refund-too-old", "starter", {}, "simulated", "simulated-rules", task=CONFIGURED))
    child.run_finished(RunEnd(stop_reason="final_answer", final_answer=f"done {CUSTOM}"))
    recorder.step_recorded(
        StepEvent(index=2, kind=StepKind.FINAL_ANSWER, text=f"I could not refund: {header}, key {CONFIGURED}.")
    )
    recorder.run_finished(
        RunEnd(
            stop_reason="final_answer",
            final_answer=f"I could not refund it; the payment service refused key {CONFIGURED}.",
            verdict=Verdict(passed=False, reason=f"answer quoted {ANTHROPIC}"),
            error=f"ModelError: the model API answered 401: invalid x-api-key {CONFIGURED}",
            guard=f"stopped by {CUSTOM}",
            transcript=[
                {"role": "user", "content": f"Refund order 0871 (ticket {CUSTOM})."},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": f"Using {ANTHROPIC}"},
                        {"type": "tool_use", "id": "toolu_01", "name": "process_refund", "input": {"key": ANTHROPIC}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_01",
                            "content": json.dumps({"error": {"message": f"{header} refused", "token": BEARER}}),
                            "is_error": True,
                        }
                    ],
                },
            ],
        )
    )


@pytest.mark.django_db
@override_settings(**CONFIG)
def test_a_run_full_of_secrets_stores_none_of_them_and_no_page_shows_them(admin_client):
    run = run_create(scenario="refund-too-old", policy=PolicyVariant.objects.get(name="starter"))
    record_a_run_full_of_secrets(run)

    runs = list(Run.objects.filter(pk=run.pk).values()) + list(Run.objects.filter(parent=run).values())
    steps = list(Step.objects.filter(run__in=[r["id"] for r in runs]).values())
    stored = json.dumps([runs, steps], default=str, ensure_ascii=False)
    assert_no_secret(stored, "the database rows")
    for marker in (
        "[redacted: anthropic key]",
        "Bearer [redacted: bearer token]",
        "[redacted: ANTHROPIC_API_KEY]",
        "[redacted: lumen token]",
        "[redacted: secret value]",
    ):
        assert marker in stored, marker
    row = Run.objects.get(pk=run.pk)
    assert row.task == "Refund order 0871 (ticket [redacted: lumen token])."
    assert row.error == "ModelError: the model API answered 401: invalid x-api-key [redacted: ANTHROPIC_API_KEY]"
    assert "[redacted: ANTHROPIC_API_KEY]" in row.search_text and "[redacted: secret value]" in row.search_text
    step = Step.objects.get(run=run, index=1)
    assert step.input == {
        "order_id": "0871",
        "api_key": "[redacted: secret value]",
        "note": "Authorization: Bearer [redacted: bearer token] [redacted: lumen token]",
    }
    assert step.attempts[0]["content"]["echo"] == "[redacted: anthropic key]"

    child = Run.objects.get(parent=run)
    for url in (
        reverse("tracer:run", args=[run.pk]),
        reverse("tracer:run", args=[child.pk]),
        reverse("tracer:runs"),
        reverse("tracer:runs") + "?q=0871",
    ):
        page = admin_client.get(url)
        assert page.status_code == 200, url
        assert_no_secret(page.content.decode(), url)
    page = admin_client.get(reverse("tracer:run", args=[run.pk])).content.decode()
    assert "[redacted: anthropic key]" in page and "[redacted: ANTHROPIC_API_KEY]" in page
    assert "Raw Messages API transcript" in page


@pytest.mark.django_db
def test_the_redactor_follows_the_settings():
    assert redaction.redact_text(f"x {CONFIGURED} {CUSTOM}") == f"x {CONFIGURED} {CUSTOM}"
    with override_settings(**CONFIG):
        assert redaction.redact_text(f"x {CONFIGURED} {CUSTOM}") == (
            "x [redacted: ANTHROPIC_API_KEY] [redacted: lumen token]"
        )
    assert redaction.redact_text(f"x {CONFIGURED}") == f"x {CONFIGURED}"


def test_the_web_process_log_redacts_messages_arguments_and_tracebacks():
    """LOGGING's console handler (what ./rlt up writes to var/log/web.log) carries the redaction filter."""
    import io

    (console,) = [
        h for h in logging.getLogger().handlers if any(isinstance(f, redaction.RedactLogFilter) for f in h.filters)
    ]
    stream = io.StringIO()
    previous = console.setStream(stream)
    try:
        with override_settings(**CONFIG):
            log = logging.getLogger("tracer.execution")
            log.warning("run 7 could not start: tool input %s", {"api_key": ANTHROPIC, "note": CUSTOM})
            try:
                raise RuntimeError(f"the model API answered 401: Authorization: Bearer {BEARER} ({CONFIGURED})")
            except RuntimeError:
                log.exception("run 7 failed outside the agent loop")
    finally:
        console.setStream(previous)
    written = stream.getvalue()
    assert_no_secret(written, "the web log")
    assert "run 7 could not start" in written and "[redacted: lumen token]" in written
    assert "Bearer [redacted: bearer token] ([redacted: ANTHROPIC_API_KEY])" in written


@pytest.mark.django_db(transaction=True)
def test_a_real_workers_log_and_the_run_it_ends_show_no_secret():
    """Celery replaces the root logger's handlers in a worker; config.celery gives them the filter."""
    purge_test_queue()
    worker = WorkerProcess(
        concurrency=1,
        env={"ANTHROPIC_API_KEY": CONFIGURED, "RLT_REDACT_PATTERNS": r"LUMEN-TOK-[0-9]{6}"},
    )
    try:
        worker.wait_ready()
        # An unknown scenario (an import, a hand-made row) is logged by the worker with its name.
        run = run_create(
            scenario=f"{ANTHROPIC} {CONFIGURED} {CUSTOM}", policy=PolicyVariant.objects.get(name="starter")
        )
        run_execute_task.delay(run.pk)
        deadline = time.monotonic() + 60
        while not Run.objects.filter(pk=run.pk, status=Run.Status.FINISHED).exists():
            assert time.monotonic() < deadline, worker.log()[-3000:]
            time.sleep(0.1)
        while "could not start" not in worker.log():
            assert time.monotonic() < deadline, worker.log()[-3000:]
            time.sleep(0.1)
    finally:
        worker.stop()
    log = worker.log()
    assert_no_secret(log, "the worker log")
    (line,) = [line for line in log.splitlines() if "could not start" in line]
    assert "[redacted: anthropic key] [redacted: ANTHROPIC_API_KEY]" in line  # the scenario's name, quoted
    assert "[redacted: custom pattern 1]" in log
    run.refresh_from_db()
    assert run.stop_reason == Run.StopReason.CRASHED
    assert_no_secret(run.error, "the run's error")


def load_settings(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", "import config.settings"],
        cwd=ROOT,
        env={**os.environ, "RLT_VAR_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_settings_refuse_to_start_with_an_invalid_pattern_and_name_it(tmp_path):
    result = load_settings(tmp_path, RLT_REDACT_PATTERNS="LUMEN-TOK-[0-9]{6}\nsk_live_[")
    assert result.returncode != 0
    assert "ImproperlyConfigured: RLT_REDACT_PATTERNS: pattern 2 'sk_live_[' is not a valid regular expression" in (
        result.stderr
    )
    assert load_settings(tmp_path, RLT_REDACT_PATTERNS='["LUMEN-TOK-[0-9]{6}"]').returncode == 0


def test_gunicorns_access_and_error_logs_are_redacted(tmp_path):
    """./rlt up's var/log/access.log and web.log: a request line quoting a key shows a marker instead."""
    import runpy

    from gunicorn.config import Config

    cfg = Config()
    cfg.set("accesslog", str(tmp_path / "access.log"))
    cfg.set("errorlog", str(tmp_path / "error.log"))
    logger = runpy.run_path(str(ROOT / "config" / "gunicorn.py"))["logger_class"](cfg)
    logger.access_log.info("%(r)s %(s)s", {"r": f"GET /runs/?q={ANTHROPIC} HTTP/1.1", "s": "200"})
    logger.error_log.error("Error handling request /runs/?token=%s", BEARER)
    for handler in (*logger.access_log.handlers, *logger.error_log.handlers):
        handler.close()
    access, error = (tmp_path / "access.log").read_text(), (tmp_path / "error.log").read_text()
    assert access.strip() == "GET /runs/?q=[redacted: anthropic key] HTTP/1.1 200"
    assert_no_secret(access + error, "gunicorn's logs")
    assert "?token=[redacted: secret value]" in error


@override_settings(DEBUG=True, **CONFIG)
def test_djangos_error_page_shows_no_secret(rf):
    """With DEBUG on, the error page lists the exception, each frame's local variables and the settings."""
    from django.views.debug import technical_500_response

    def call_the_api(api_request):
        header = f"Authorization: Bearer {BEARER}"  # noqa: F841 - a local variable the page would list
        raise RuntimeError(f"the model API answered 401 for {CONFIGURED} ({CUSTOM})")

    request = rf.get("/runs/", {"q": ANTHROPIC})
    try:
        call_the_api({"key": ANTHROPIC})
    except RuntimeError:
        page = technical_500_response(request, *sys.exc_info()).content.decode()
    assert_no_secret(page, "the error page")
    assert "the model API answered 401 for [redacted: ANTHROPIC_API_KEY] ([redacted: lumen token])" in page
    assert "call_the_api" in page and "[redacted: bearer token]" in page
