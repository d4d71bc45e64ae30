"""``manage.py check_policy``: lesson 002's workshop checks on a policy module, and a code policy's runs
in the dashboard (the policies page, the run page, compare)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from agents.policy_code import ENV_VAR, policy_code_reset
from tracer.execution import run_execute
from tracer.experiments import run_create
from tracer.models import PolicyVariant, Run

ROOT = Path(__file__).resolve().parents[2]
START = "examples.policies.errors_start"
FIXED = "examples.policies.errors_fixed"


def check(module: str) -> tuple[bool, str]:
    out = StringIO()
    try:
        call_command("check_policy", module, stdout=out, stderr=StringIO())
    except CommandError as exc:
        return False, out.getvalue() + f"\nCommandError: {exc}"
    return True, out.getvalue()


@pytest.fixture(autouse=True)
def fresh_modules():
    policy_code_reset()
    yield
    policy_code_reset()


def test_the_lessons_starting_errors_py_fails_with_the_reasons():
    ok, out = check(START)
    assert not ok
    lines = out.splitlines()
    assert lines[0].startswith(f"{START} (") and "built-in scenarios, simulated model" in lines[0]
    marks = {line[2:].split(" (")[0]: line[0] for line in lines if line[:1] and line[0] in "✓✗"}
    assert marks == {
        "every failure has isError, a category, a retry hint and the message": "✗",
        "only transient failures are retried": "✗",
        "a transient failure is retried": "✓",
        "an empty result is no error": "✗",
        "every scenario ran under it": "✓",
    }
    # The first few failing calls are listed, in the built-in scenarios' order, then "… and N more".
    assert (
        '    room-book-permission step 1 book_slot: {"error": {"message": "Error"}} has no isError: true; '
        "no errorCategory; no isRetryable (a retry hint); its message 'Error' is not the tool's "
        "('booking rooms requires manager approval; ask the user to book it themselves')"
    ) in lines
    assert "    refund-too-old step 1 process_refund: a business failure was tried 3 times" in lines
    assert (
        '    lookup-empty step 1 lookup_orders: nothing found became an error ({"error": {"message": "Error"}}), '
        "tried 3 times"
    ) in lines
    assert "3 of 5 checks fail." in lines
    assert f"CommandError: {START} fails lesson 002's checks (above)" in out


def test_the_lessons_fixed_errors_py_passes_every_check():
    ok, out = check(FIXED)
    assert ok, out
    lines = out.splitlines()
    assert [line[0] for line in lines if line[:1] and line[0] in "✓✗"] == ["✓"] * 5
    assert lines[-1] == "All checks hold."
    assert "the judge passed" in lines[0]


def test_the_nested_flag_read_wrong_is_caught_and_explained(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "nested_flag_policy.py").write_text(
        textwrap.dedent(
            """
            from examples.policies.errors_fixed import fail


            def should_retry(result):
                return bool(result.get("error", {}).get("isRetryable"))
            """
        )
    )
    ok, out = check("nested_flag_policy")
    assert not ok
    assert "✗ a transient failure is retried (isRetryable read inside the error) (0 of" in out
    assert (
        "lookup-flaky step 1 lookup: a transient failure was tried once: should_retry(result['error']) said no "
        "although that error says isRetryable: true; it reads the flag somewhere else"
    ) in out


def test_a_module_without_should_retry_exits_1_naming_what_is_missing(tmp_path):
    (tmp_path / "no_retry_policy.py").write_text("def fail(category, message):\n    return {}\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    env.pop("RLT_TEST_DB_FILE", None)
    done = subprocess.run(
        [sys.executable, "manage.py", "check_policy", "no_retry_policy"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "CommandError: policy module 'no_retry_policy' defines no should_retry(); a policy module defines "
        "fail(category, message) and should_retry(error)"
    )


@pytest.mark.django_db
def test_a_code_policys_runs_show_in_the_matrix_and_compare_with_its_source(admin_client, monkeypatch):
    monkeypatch.setenv(ENV_VAR, f"{START},{FIXED}")
    for name, module in (("lesson-start", START), ("lesson-fixed", FIXED)):
        response = admin_client.post(
            reverse("tracer:policy-create"), {"name": name, "base": "structured", "code": module}
        )
        assert response.status_code == 302, response.content.decode()[:2000]
    fixed = PolicyVariant.objects.get(name="lesson-fixed")
    assert fixed.settings["code"] == FIXED and len(fixed.settings["code_sha256"]) == 64
    runs = {
        name: run_execute(run_id=run_create(scenario="refund-too-old", policy=PolicyVariant.objects.get(name=name)).pk)
        for name in ("lesson-start", "lesson-fixed")
    }
    start, done = runs["lesson-start"], runs["lesson-fixed"]
    assert (start.retry_count, done.retry_count) == (2, 0)
    assert (start.verdict, done.verdict) == (Run.Verdict.FAIL, Run.Verdict.PASS)
    sha = fixed.settings["code_sha256"]

    page = admin_client.get(reverse("tracer:run", args=[done.pk])).content.decode()
    assert f"Policy code: <code>{FIXED}</code>" in page and f'title="{sha}">{sha[:12]}</code>' in page

    variants = admin_client.get(reverse("tracer:policy-variants")).content.decode()
    assert f"code: <code>{FIXED}</code>" in variants
    policies = admin_client.get(reverse("tracer:policies") + "?cells=detail").content.decode()
    for name in ("lesson-start", "lesson-fixed"):  # a column of the matrix each, like any variant
        assert f'title="1 run of refund-too-old under {name}"' in policies

    compare = admin_client.get(reverse("tracer:compare") + f"?a={start.pk}&b={done.pk}").content.decode()
    assert START in compare and FIXED in compare and sha in compare
    start_sha = PolicyVariant.objects.get(name="lesson-start").settings["code_sha256"]
    assert (
        f"Run B stopped after 1 attempt: its policy code&#x27;s should_retry() ({FIXED}, sha256 {sha[:12]}) said no; "
        f"run A&#x27;s retries follow its policy code&#x27;s should_retry() ({START}, sha256 {start_sha[:12]})."
    ) in compare


@pytest.mark.django_db
def test_the_policy_form_refuses_a_module_the_variable_does_not_name(admin_client, monkeypatch):
    monkeypatch.setenv(ENV_VAR, START)
    response = admin_client.post(
        reverse("tracer:policy-create"), {"name": "sneaky", "base": "structured", "code": "os"}
    )
    assert response.status_code == 200
    assert "Select a valid choice. os is not one of the available choices." in response.content.decode()
    assert not PolicyVariant.objects.filter(name="sneaky").exists()
