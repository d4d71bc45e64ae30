"""Policy code: a module's fail() and should_retry() run by the harness in place of the settings."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from agents.policies import PolicyError, code_policy, get_policy, policy_from_dict
from agents.policy_code import ENV_VAR, policy_code_reset
from agents.run import run_scenario

START = "examples.policies.errors_start"
FIXED = "examples.policies.errors_fixed"


@pytest.fixture(autouse=True)
def fresh_modules():
    policy_code_reset()
    yield
    policy_code_reset()


@pytest.fixture
def listed(monkeypatch):
    monkeypatch.setenv(ENV_VAR, f"{START}, {FIXED}")


@pytest.fixture
def write_module(tmp_path, monkeypatch):
    """Write a policy module under a fresh name and make it importable; returns its name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name: str, source: str) -> str:
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        sys.modules.pop(name, None)
        return name

    return write


def test_the_fixed_module_tries_a_refusal_once_and_sends_its_structured_error(listed):
    run = run_scenario("refund-too-old", get_policy(FIXED))
    step = run.steps[0]
    assert len(step.attempts) == 1 and step.is_error
    assert step.result_content == {
        "isError": True,
        "error": {
            "errorCategory": "business",
            "isRetryable": False,
            "message": "Refunds close after 30 days. This order is 239 days old.",
        },
    }
    assert run.end.verdict.passed
    settings = run.start.policy_settings
    assert settings["code"] == FIXED and len(settings["code_sha256"]) == 64


def test_the_starting_module_retries_the_refusal_three_times_with_a_bare_error(listed):
    run = run_scenario("refund-too-old", get_policy(START))
    step = run.steps[0]
    assert len(step.attempts) == 3
    assert [a.result_content for a in step.attempts] == [{"error": {"message": "Error"}}] * 3
    assert "generic error" in run.end.final_answer


def test_nothing_found_goes_through_fail_empty(listed):
    fixed = run_scenario("lookup-empty", get_policy(FIXED)).steps[0]
    assert not fixed.is_error and len(fixed.attempts) == 1 and fixed.result_content["orders"] == []
    start = run_scenario("lookup-empty", get_policy(START)).steps[0]
    assert start.is_error and len(start.attempts) == 3


def test_a_variant_names_its_module_in_code_and_the_hash_is_the_code_that_ran(listed):
    variant = policy_from_dict({"base": "structured", "name": "mine", "code": FIXED, "code_sha256": "0" * 64})
    assert variant.code == FIXED and variant.code_sha256 == get_policy(FIXED).code_sha256 != "0" * 64
    # The worker builds the policy again from the run's stored settings: the same module, its current hash.
    again = policy_from_dict(variant.settings())
    assert again.settings() == variant.settings()


def test_a_module_not_named_in_the_variable_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv(ENV_VAR, START)
    with pytest.raises(PolicyError) as caught:
        policy_from_dict({"base": "structured", "name": "mine", "code": FIXED})
    assert caught.value.errors["code"] == (
        f"policy module {FIXED!r} is not named in {ENV_VAR} (it names {START}); add it there in the web process "
        "and every worker"
    )
    with pytest.raises(PolicyError, match=f"unknown policy {FIXED!r}; expected one of .*{START}"):
        get_policy(FIXED)


def test_a_module_that_cannot_be_used_is_named_with_what_is_missing(write_module):
    write_module("half_policy", "def fail(category, message):\n    return {}\n")
    write_module("odd_policy", "def fail(message):\n    return {}\ndef should_retry(error):\n    return False\n")
    with pytest.raises(PolicyError) as caught:
        code_policy("half_policy", listed=False)
    assert caught.value.errors["code"] == (
        "policy module 'half_policy' defines no should_retry(); a policy module defines fail(category, message) "
        "and should_retry(error)"
    )
    with pytest.raises(PolicyError, match=r"'odd_policy': fail\(\) must take 2 arguments \(category, message\)"):
        code_policy("odd_policy", listed=False)
    with pytest.raises(PolicyError, match="could not import policy module 'no_such_policy': ModuleNotFoundError"):
        code_policy("no_such_policy", listed=False)


def test_the_modules_guard_replaces_the_consecutive_error_limit(write_module):
    write_module(
        "guarded_policy",
        """
        from examples.policies.errors_fixed import fail, should_retry


        def too_many_errors(limit=3):
            def guard(state):
                recent = [m for m in state["messages"] if m["role"] == "tool"][-limit:]
                if len(recent) == limit and all('"error"' in m["content"] for m in recent):
                    return f"{limit} tool errors in a row"
            return guard


        guard = too_many_errors(2)
        """,
    )
    run = run_scenario("stuck-model", code_policy("guarded_policy", listed=False))
    assert (run.end.stop_reason, run.end.guard, len(run.steps)) == ("consecutive_errors", "2 tool errors in a row", 2)


def test_a_fail_that_raises_or_returns_no_json_crashes_the_run_saying_so(write_module):
    write_module(
        "raising_policy",
        "def fail(category, message):\n    raise KeyError(category)\ndef should_retry(error):\n    return False\n",
    )
    write_module(
        "setful_policy",
        "def fail(category, message):\n    return {category}\ndef should_retry(error):\n    return False\n",
    )
    raised = run_scenario("refund-too-old", code_policy("raising_policy", listed=False))
    assert raised.end.stop_reason == "crashed"
    assert "policy code raising_policy: fail('business', …) raised KeyError: 'business'" in raised.end.error
    setful = run_scenario("refund-too-old", code_policy("setful_policy", listed=False))
    assert "fail('business', …) returned set, which is not JSON" in setful.end.error


def test_the_snapshot_round_trips_through_json(listed):
    settings = get_policy(FIXED).settings()
    assert json.loads(json.dumps(settings)) == settings


def test_a_finding_under_policy_code_says_which_function_to_fix(listed):
    from agents.diagnosis.rules import diagnose

    run = run_scenario("refund-too-old", get_policy(START))
    findings = {f.kind: f for f in diagnose(start=run.start, steps=run.steps, end=run.end)}
    assert findings["retried-refusal"].fix.startswith(f"`should_retry` in `{START}` (this run's policy code)")
    assert findings["vague-error"].fix.startswith(f"`fail` in `{START}` (this run's policy code)")
