"""Findings stored when a run ends, whatever its source, with the rollups the Tools and Findings pages sum."""

from __future__ import annotations

import pytest

from agents.diagnosis.kinds import RULE_SET
from tracer import diagnosis
from tracer.execution import run_execute
from tracer.experiments import run_create
from tracer.intake import files
from tracer.models import Finding, FindingDay, MessageTemplate, PatternDay, PolicyVariant, Run, TemplateDay, ToolDay

pytestmark = pytest.mark.django_db


def execute(scenario: str, policy: str) -> Run:
    run = run_create(scenario=scenario, policy=PolicyVariant.objects.get(name=policy))
    return run_execute(run_id=run.pk)


def test_a_run_executed_here_stores_its_findings_when_it_ends_with_its_rule_set():
    run = execute("refund-too-old", "starter")
    run.refresh_from_db()
    assert run.finding_kinds == "retried-refusal,vague-error" and run.rule_set == RULE_SET
    found = list(run.findings.values_list("kind", "tool", "steps", "rule_set"))
    assert found == [
        ("retried-refusal", "process_refund", [1], RULE_SET),
        ("vague-error", "process_refund", [1], RULE_SET),
    ]
    assert run.tools and run.tools[0]["name"] in ("lookup_orders", "process_refund")


def test_the_tool_rollup_counts_calls_failures_by_category_retries_and_wasted_retries():
    execute("refund-too-old", "starter")
    execute("refund-too-old", "structured")
    rows = {r.policy_name: r for r in ToolDay.objects.filter(tool="process_refund")}
    assert (rows["starter"].calls, rows["starter"].failed, rows["starter"].failed_business) == (1, 1, 1)
    assert (rows["starter"].retries, rows["starter"].wasted, rows["starter"].refusals_retried) == (2, 2, 1)
    assert (rows["structured"].retries, rows["structured"].wasted) == (0, 0)
    assert FindingDay.objects.get(kind="retried-refusal").findings == 1
    assert MessageTemplate.objects.get(tool="process_refund", template="Error").score == 1
    assert TemplateDay.objects.filter(template__template="Error").get().sent == 1
    (pattern,) = PatternDay.objects.filter(policy_name="starter")
    assert (pattern.tool, pattern.category, pattern.template) == ("process_refund", "business", "Error")


REFUSED_THRICE = {
    "format": "rlt.run/1",
    "run": {"model": "claude-haiku-4-5"},
    "steps": [
        {
            "kind": "tool_use",
            "tool_name": "process_refund",
            "input": {"order_id": "0871"},
            "attempts": [
                {"number": n, "ok": False, "category": "business", "retryable": False, "message": "Error"}
                for n in (1, 2, 3)
            ],
            "result_content": {"error": {"message": "Error"}},
        },
        {"kind": "final_answer", "text": "The system returned an error."},
    ],
}


def test_an_imported_run_is_diagnosed_from_what_it_carries():
    document = REFUSED_THRICE
    run = files.run_import(arrival=files.item_arrival(data=document))
    run.refresh_from_db()
    assert run.finding_kinds == "retried-refusal,vague-error"


def test_diagnosing_a_run_again_takes_back_what_it_added_first():
    run = execute("stuck-model", "starter")
    before = list(ToolDay.objects.values_list("calls", "failed", "wasted"))
    diagnosis.runs_diagnose(run_ids=[run.pk])
    assert list(ToolDay.objects.values_list("calls", "failed", "wasted")) == before
    assert Finding.objects.filter(run=run).count() == 3


def test_recompute_rebuilds_the_same_rollups_from_nothing():
    for policy in ("starter", "structured"):
        execute("lookup-empty", policy)
        execute("refund-bad-id", policy)
    tables = (ToolDay, FindingDay, PatternDay)
    before = [sorted(m.objects.values_list(*[f.attname for f in m._meta.concrete_fields][1:])) for m in tables]
    seen = []
    assert diagnosis.findings_recompute(batch=2, progress=lambda done, total: seen.append((done, total))) == 4
    after = [sorted(m.objects.values_list(*[f.attname for f in m._meta.concrete_fields][1:])) for m in tables]
    assert after == before and seen == [(2, 4), (4, 4)]
    assert Finding.objects.count() == 3  # starter: empty-as-error; retried-refusal, vague-error; structured: none


def test_diagnosing_runs_together_takes_the_same_statements_for_two_runs_as_for_twelve():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    runs = [execute(s, p) for s in ("refund-too-old", "lookup-empty", "stuck-model") for p in ("starter", "message")]
    runs += [execute(s, "starter") for s in ("refund-bad-id", "room-book-permission", "fatal-credentials")]
    runs += [execute("refund-too-old", "starter") for _ in range(3)]
    counts = []
    for chosen in (runs[:2], runs):
        with CaptureQueriesContext(connection) as seen:
            diagnosis.runs_diagnose(run_ids=[r.pk for r in chosen])
        counts.append(len(seen.captured_queries))
    # every template already known, each rollup one multi-row statement, and so is taking back what
    # each run's first diagnosis added
    assert _take_back_rows(runs) > _take_back_rows(runs[:2]) > 0
    assert counts[1] == counts[0]


def _take_back_rows(runs) -> int:
    from tracer.diagnosis import Contribution

    total = 0
    for run in runs:
        run.refresh_from_db()
        c = Contribution.from_dict(run.rolled_up)
        total += len(c.tools) + len(c.findings) + len(c.templates) + bool(c.pattern)
    return total


LEAKED_KEY = "sk-ant-api03-Qw8Er7tY6uI5oP4aS3dF2gH1jK0lZx9_Cv8-Bn7Mm6"
LEAKY = {
    "format": "rlt.run/1",
    "run": {"model": "claude-haiku-4-5"},
    "steps": [
        {
            "kind": "tool_use",
            "tool_name": "lookup_order",
            "input": {"order_id": "0871"},
            "latency_ms": 12,
            "attempts": [
                {
                    "number": 1,
                    "ok": False,
                    "message": f"Traceback (most recent call last): api_key={LEAKED_KEY} at db-7.internal:5432",
                }
            ],
            "result_content": {"error": {"message": f"Traceback (most recent call last): api_key={LEAKED_KEY}"}},
        },
        {
            "kind": "tool_use",
            "tool_name": "lookup_order",
            "input": {"order_id": "0871"},
            "attempts": [{"number": 1, "ok": True, "content": []}],
            "result_content": [],
        },
        {"kind": "final_answer", "text": "No such order."},
    ],
}


def _diagnosed() -> list:
    """Every finding and rollup row as stored (ids left out; a template by its key)."""
    keys = dict(MessageTemplate.objects.values_list("id", "key"))
    tables = [
        sorted(m.objects.values_list(*[f.attname for f in m._meta.concrete_fields][1:]))
        for m in (Finding, ToolDay, FindingDay, PatternDay, MessageTemplate)
    ]
    days = TemplateDay.objects.values_list("template_id", "day", "source", "scenario", "policy_name", "sent")
    tables.append(sorted((keys[t], *rest) for t, *rest in days))
    tables.append(sorted(Run.objects.values_list("id", "finding_kinds", "rule_set", "rolled_up", "stop_signature")))
    return tables


def test_runs_written_together_are_diagnosed_from_the_values_written_as_a_recompute_reads_them_back():
    from tracer.intake.record import runs_record

    runs = runs_record(arrivals=[files.item_arrival(data=d) for d in (REFUSED_THRICE, LEAKY, LEAKY)])
    assert Run.objects.get(pk=runs[1].pk).finding_kinds == "internal-detail-leak"
    leaks = Finding.objects.filter(run_id=runs[1].pk, kind="internal-detail-leak").values_list("evidence", flat=True)
    assert leaks and all(LEAKED_KEY not in text for text in leaks)  # what was written: redacted
    at_ingest = _diagnosed()
    diagnosis.findings_recompute()
    assert _diagnosed() == at_ingest


def test_a_run_written_again_is_diagnosed_from_the_values_written_as_reading_it_back_would():
    """A run sent again (a trace whose late spans changed it) is diagnosed from what was just written
    of it, its kept steps as stored and its new ones as written: diagnosing it again from the database
    then takes back exactly what that added and adds the same."""
    from dataclasses import replace

    from tracer.intake.record import runs_record

    (run,) = runs_record(arrivals=[files.item_arrival(data=LEAKY)])
    retried = {**REFUSED_THRICE["steps"][0], "input": {"order_id": "0872"}}
    longer = {**LEAKY, "steps": [*LEAKY["steps"][:2], retried, REFUSED_THRICE["steps"][1]]}
    runs_record(arrivals=[replace(files.item_arrival(data=longer), run_id=run.pk)])
    stored = Run.objects.get(pk=run.pk)
    assert stored.finding_kinds == "internal-detail-leak,retried-refusal,vague-error"
    assert stored.steps.count() == 4 and Finding.objects.filter(run=run).count() == 3
    assert ToolDay.objects.get(tool="process_refund").failed == 1
    written = _diagnosed()
    diagnosis.runs_diagnose(run_ids=[run.pk])
    assert _diagnosed() == written
