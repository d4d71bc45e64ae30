"""``manage.py findings``: text, JSON Lines, --fail-on for CI, filters that name what is valid, --recompute."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from agents.diagnosis.kinds import KEYS
from tracer.execution import run_execute
from tracer.experiments import run_create
from tracer.models import Finding, PolicyVariant

pytestmark = pytest.mark.django_db


def execute(scenario: str, policy: str):
    return run_execute(run_id=run_create(scenario=scenario, policy=PolicyVariant.objects.get(name=policy)).pk)


def findings(*args: str) -> str:
    out = io.StringIO()
    call_command("findings", *args, stdout=out)
    return out.getvalue()


def test_json_lines_give_a_finding_a_line_with_kind_run_tool_steps_message_and_fix():
    run = execute("refund-too-old", "starter")
    lines = [json.loads(line) for line in findings("--format", "json").splitlines()]
    assert [(d["kind"], d["run"], d["tool"], d["steps"]) for d in lines] == [
        ("retried-refusal", run.pk, "process_refund", [1]),
        ("vague-error", run.pk, "process_refund", [1]),
    ]
    assert all(d["message"] and d["fix"] for d in lines)


def test_text_names_each_finding_with_its_run_and_counts_them():
    execute("lookup-empty", "starter")
    text = findings("--kind", "empty-as-error")
    assert "[empty-as-error] Empty result as an error · lookup_orders · steps 1" in text
    assert "fix: `empty_is_error: false`" in text and text.rstrip().endswith("1 finding")


def test_fail_on_exits_1_when_a_kind_is_found_and_0_when_none_is():
    execute("refund-too-old", "starter")
    execute("refund-too-old", "structured")
    with pytest.raises(SystemExit) as stopped:
        findings("--fail-on", "retried-refusal,no-error-guard")
    assert stopped.value.code == 1
    findings("--fail-on", "no-error-guard")  # returns: nothing of that kind


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ("--kind", "error-rate-is-high"),
            "--kind: unknown finding kind 'error-rate-is-high'; expected one of " + ", ".join(KEYS),
        ),
        (("--fail-on", "nope"), "--fail-on: unknown finding kind 'nope'"),
        (("--tool", "no_such_tool"), "--tool: no run called a tool named 'no_such_tool'; tools seen: process_refund"),
        (("--since", "last tuesday"), "--since: 'last tuesday' is not a date; expected YYYY-MM-DD"),
    ],
)
def test_a_filter_that_names_nothing_known_says_what_is_valid(args, said):
    execute("refund-too-old", "starter")
    with pytest.raises(CommandError) as refused:
        findings(*args)
    assert str(refused.value).startswith(said)


def test_since_keeps_only_runs_created_since_then():
    execute("refund-too-old", "starter")
    assert findings("--since", "2999-01-01").strip() == "0 findings"


def test_recompute_rewrites_every_runs_findings_with_a_progress_bar_and_its_rate():
    execute("refund-too-old", "starter")
    Finding.objects.all().delete()
    out = findings("--recompute", "--batch", "1")
    assert "[##############################] 1/1 runs diagnosed" in out and "runs/s" in out
    assert Finding.objects.count() == 2
