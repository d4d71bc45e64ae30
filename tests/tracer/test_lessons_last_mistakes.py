"""The lessons' last mistakes executed here: what a recorded run stores and what its page shows."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from agents.tools.billing import BILLING_HOST, BILLING_KEY
from tests.dom import page
from tracer.models import PolicyVariant, Run

pytestmark = pytest.mark.django_db


def run_agent(scenario: str, policy: str) -> tuple[Run, str]:
    out = StringIO()
    call_command("run_agent", "--scenario", scenario, "--policy", policy, stdout=out, stderr=StringIO())
    return Run.objects.latest("pk"), out.getvalue()


def test_the_presets_say_whether_they_clean_error_text():
    cleaning = dict(PolicyVariant.objects.filter(is_preset=True).values_list("name", "settings__clean_error_text"))
    assert cleaning == {
        "fragile": False,
        "starter": False,
        "message": False,
        "structured": True,
        "model-retries": True,
        "nested-flag-bug": True,
        "swallowed-errors": True,
    }


def test_a_cleaned_error_is_stored_with_what_was_removed_and_the_run_page_names_it(admin_client):
    run, out = run_agent("invoice-internal-error", "structured")
    assert "removed from the error before the model read it: a stack trace, SQL" in out
    assert run.verdict == Run.Verdict.PASS
    step = run.steps.get(index=1)
    assert step.attempts[0]["removed"] == [
        "a stack trace",
        "SQL",
        "a hostname or private address",
        "a file path",
        "a secret",
    ]
    assert BILLING_HOST not in str(step.result_content)
    doc = page(admin_client.get(reverse("tracer:run", args=[run.pk])))
    badges = doc.one("#step-1").texts(".badge.removed")
    assert (
        badges
        == [
            "removed before the model read it: a stack trace, SQL, a hostname or private address, a file path, a secret"
        ]
        * 3
    )


def test_under_message_the_stored_run_holds_the_leak_but_never_the_key():
    run, out = run_agent("invoice-internal-error", "message")
    assert BILLING_KEY not in out
    assert run.verdict == Run.Verdict.FAIL
    assert BILLING_HOST in run.final_answer and BILLING_KEY not in run.final_answer
    assert "[redacted: openai key]" in run.final_answer
    assert BILLING_KEY not in str(list(run.steps.values_list("attempts", "result_content")))
    assert "internal-detail-leak" in set(run.findings.values_list("kind", flat=True))


def test_the_presets_say_how_they_retry_a_write_not_safe_to_repeat():
    modes = dict(PolicyVariant.objects.filter(is_preset=True).values_list("name", "settings__write_retries"))
    assert modes == {
        "fragile": "blind",
        "starter": "blind",
        "message": "never",
        "structured": "idempotency_key",
        "model-retries": "idempotency_key",
        "nested-flag-bug": "idempotency_key",
        "swallowed-errors": "idempotency_key",
    }


def test_starter_charges_twice_and_structured_once_as_stored_and_diagnosed():
    starter, out = run_agent("charge-timeout-after-charge", "starter")
    assert "card charged exactly once ✗ (charged 2 times)" in out
    assert starter.verdict == Run.Verdict.FAIL
    assert list(starter.findings.values_list("kind", flat=True)) == ["unsafe-write-retry"]
    structured, out = run_agent("charge-timeout-after-charge", "structured")
    assert structured.verdict == Run.Verdict.PASS and not structured.findings.exists()
    assert structured.steps.get(index=1).input["idempotency_key"].startswith("rlt-")


def test_run_agent_takes_a_json_variant_as_python_m_agents_run_does_and_reuses_it():
    variant = '{"base": "structured", "name": "blind-writes", "write_retries": "blind"}'
    run, out = run_agent("charge-timeout-after-charge", variant)
    assert "policy variant 'blind-writes' created: structured with write_retries='blind'" in out
    assert "card charged exactly once ✗ (charged 2 times)" in out
    made = PolicyVariant.objects.get(name="blind-writes")
    assert not made.is_preset and made.settings["write_retries"] == "blind" and run.policy == made
    again, out = run_agent("charge-timeout-after-charge", variant)
    assert "created" not in out and again.policy == made


def test_run_agent_names_a_bad_json_variant_and_writes_nothing():
    from django.core.management import CommandError

    for value, said in (
        ('{"base": "structured", "max_attempts": 99}', "max_attempts: Input should be less than or equal to 10"),
        ('{"base": "nope"}', "base: unknown preset 'nope'"),
        ("{not json", "not valid JSON"),
        ('{"base": "starter", "name": "structured"}', "a policy named 'structured' already exists with other"),
    ):
        before = PolicyVariant.objects.count()
        with pytest.raises(CommandError) as caught:
            run_agent("charge-timeout-after-charge", value)
        assert said in str(caught.value), str(caught.value)
        assert PolicyVariant.objects.count() == before and not Run.objects.exists()
