"""PostgreSQL stopped under a running web server: every path that meets it says so with a 503.

The test owns the cluster (``own_postgres``), so it runs in both CI passes: a migrated database, a
login and an API token made in it, and gunicorn (``Served``) serving it. Then ``pg_ctl stop``: a
login, pages, the admin, the API and OTLP must each answer 503 with ``Retry-After`` (never 500), and
a management command must say which database it could not reach, without a traceback. An OTLP
export begun during the outage, through the real OpenTelemetry exporter, must end stored once the
database is back: the exporter sends a batch again after a 503, and drops it after a 500.
"""

from __future__ import annotations

import re
import threading
import time

import httpx2
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.conftest import wait_until
from tests.tracer.intake.otlp.test_receiver import bench_runs, bench_spans

from .conftest import Served, manage

pytestmark = pytest.mark.faults

DOWN_S = 4  # longer than one Retry-After, shorter than the exporter's 10 s export timeout

SITE_SETUP = """
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from tracer.tokens import token_create
user = get_user_model().objects.create_user(username="operator", password="outage-pass-1")
user.user_permissions.add(Permission.objects.get(codename="add_run", content_type__app_label="tracer"))
print(token_create(user=user, name="exporter")[1])
"""


@pytest.fixture
def site(own_postgres, tmp_path):
    """A served dashboard on the test's own PostgreSQL: (server, env, API token, logged-in session)."""
    env = {"DATABASE_URL": own_postgres.create_database("rlt_outage"), "RLT_VAR_DIR": str(tmp_path)}
    manage("migrate", "--no-input", "-v0", env=env)
    manage("collectstatic", "--no-input", "-v0", env=env)  # DEBUG off names static files from its manifest
    secret = manage("shell", "-c", SITE_SETUP, env=env).stdout.strip().splitlines()[-1]
    server = Served(env=env)
    browser = httpx2.Client(follow_redirects=True)
    browser.get(f"{server.url}/login/", timeout=10)
    answer = browser.post(
        f"{server.url}/login/",
        data={
            "username": "operator",
            "password": "outage-pass-1",
            "csrfmiddlewaretoken": browser.cookies["csrftoken"],
        },
        timeout=10,
    )
    assert answer.status_code == 200 and "sessionid" in browser.cookies, answer.text[:500]
    try:
        yield server, env, secret, browser
    finally:
        server.stop()


def _answers_503(response: httpx2.Response, *, what: str) -> None:
    assert response.status_code == 503, f"{what}: {response.status_code} {response.text[:400]}"
    assert int(response.headers["Retry-After"]) > 0, what
    assert "database" in response.text, what


def test_every_path_answers_503_with_retry_after_while_postgresql_is_down_and_no_span_is_lost(own_postgres, site):
    server, env, secret, browser = site
    assert browser.get(f"{server.url}/", timeout=10).status_code == 200
    runs = bench_runs(6)
    spans = [span for run in runs for span in bench_spans(run)]

    own_postgres.stop(mode="fast")
    down_at = time.monotonic()
    try:
        for path in ("/", "/policies/", "/tokens/", "/admin/", "/admin/tracer/experiment/"):
            _answers_503(browser.get(f"{server.url}{path}", timeout=10), what=f"GET {path} logged in")
        anonymous = httpx2.Client(follow_redirects=True)
        anonymous.get(f"{server.url}/login/", timeout=10)
        _answers_503(
            anonymous.post(
                f"{server.url}/login/",
                data={"username": "operator", "password": "x", "csrfmiddlewaretoken": anonymous.cookies["csrftoken"]},
                timeout=10,
            ),
            what="POST /login/",
        )
        api = httpx2.post(
            f"{server.url}/api/runs",
            json={"scenario": "outage", "policy": "starter"},
            headers={"Authorization": f"Bearer {secret}"},
            timeout=10,
        )
        _answers_503(api, what="POST /api/runs")
        assert api.json()["errors"][0]["message"].startswith("the database (postgresql://127.0.0.1:")

        command = manage_failing("run_experiment", "--scenario", "refund-too-old", "--policy", "starter", env=env)
        assert command.returncode == 1
        assert "Traceback" not in command.stderr, command.stderr
        assert re.search(
            r"run_experiment: stopped, the database \(postgresql://127\.0\.0\.1:\d+/rlt_outage\)", command.stderr
        )
        assert "everything recorded before is kept" in command.stderr

        # An export begun during the outage: its first tries are answered 503 (the token cannot be checked).
        exporter = OTLPSpanExporter(
            endpoint=f"{server.url}/v1/traces", headers={"Authorization": f"Bearer {secret}"}
        )  # the SDK's defaults: a 10 s export timeout, Retry-After honoured
        result: dict = {}
        thread = threading.Thread(target=lambda: result.update(outcome=exporter.export(spans)))
        thread.start()
        wait_until(
            lambda: re.search(r'"POST /v1/traces HTTP/1\.1" 503', server.log()), timeout=10, what="a 503 for the export"
        )
        time.sleep(max(0.0, DOWN_S - (time.monotonic() - down_at)))  # the outage lasts DOWN_S
    finally:
        own_postgres.start()
    back_at = time.monotonic()
    thread.join(30)
    exporter.shutdown()
    assert result.get("outcome") == SpanExportResult.SUCCESS, server.log()[-3000:]
    assert not re.search(r'" 500 ', server.log()), server.log()[-3000:]

    with own_postgres.connect("rlt_outage") as conn:
        stored = conn.execute("SELECT coalesce(sum(span_count), 0) FROM tracer_otlptrace").fetchone()[0]
        finished = conn.execute("SELECT count(*) FROM tracer_run WHERE status = 'finished'").fetchone()[0]
    assert stored == len(spans)
    assert finished == len(runs)
    print(
        f"\n[faults] PostgreSQL down {back_at - down_at:.1f} s under gunicorn: pages, login, admin, API and OTLP "
        f"answered 503 with Retry-After, the CLI said so; {len(spans)} spans exported during the outage, all stored, "
        f"{finished} runs written"
    )


def manage_failing(*args: str, env: dict):
    """``manage.py ARGS`` expected to fail: its CompletedProcess, whatever it exits with."""
    import subprocess
    import sys

    from tests.conftest import BASE_DIR, subprocess_env

    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=subprocess_env(env),
        capture_output=True,
        text=True,
        timeout=120,
    )
