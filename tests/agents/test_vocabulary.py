"""One vocabulary, spelled in ``agents.vocabulary``, and imports that stay light.

The tracer's side (model choices, form choices, divergence) is checked in tests/tracer/test_vocabulary.py.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agents.llm.registry import BUILDERS, make_backend
from agents.policies import Policy, policy_from_dict
from agents.run import run_scenario
from agents.vocabulary import ErrorCategory, ErrorFormat, ModelBackendName, RetryRule, StepKind, StopReason

ROOT = Path(__file__).resolve().parents[2]

# What recorded runs, policy snapshots and cassettes already hold: renaming one orphans them.
STORED_VALUES = {
    StopReason: [
        "final_answer",
        "consecutive_errors",
        "max_steps",
        "fatal_error",
        "crashed",
        "interrupted",
        "max_tokens",
        "refusal",
    ],
    StepKind: ["tool_use", "final_answer", "model_stop"],
    ErrorCategory: ["validation", "transient", "permission", "business", "fatal"],
    ErrorFormat: ["raise", "bare", "message", "structured"],
    RetryRule: ["all", "transient", "none"],
    ModelBackendName: ["simulated", "claude", "replay"],
}


def loaded_after(statement: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``statement`` (sys.modules starts clean)."""
    probe = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(done.stdout))


def test_importing_the_events_policies_and_vocabulary_loads_neither_the_sdk_nor_the_scenarios():
    light = "import agents.events, agents.policies, agents.errors, agents.trace, agents.vocabulary, agents.llm.registry"
    loaded = loaded_after(light)
    assert "agents.events" in loaded and "agents.policies" in loaded
    assert not {m for m in loaded if m == "anthropic" or m.startswith("anthropic.")}
    assert not {"agents.scenarios", "agents.loop", "agents.run", "agents.llm.base"} & loaded


def test_run_scenario_loads_the_sdk_it_needs():
    assert "anthropic" in loaded_after("from agents.run import run_scenario")


@pytest.mark.parametrize("vocabulary", list(STORED_VALUES), ids=lambda v: v.__name__)
def test_the_vocabulary_keeps_the_values_stored_runs_hold(vocabulary):
    assert [m.value for m in vocabulary] == STORED_VALUES[vocabulary]
    assert all(m == m.value and json.dumps(m) == json.dumps(m.value) for m in vocabulary)


def test_a_stop_reason_and_a_step_kind_of_the_same_spelling_are_different_terms():
    assert StopReason.FINAL_ANSWER.value == StepKind.FINAL_ANSWER.value
    assert type(StopReason.FINAL_ANSWER) is not type(StepKind.FINAL_ANSWER)


def test_the_registry_builds_every_backend_the_vocabulary_names_as_that_backend(tmp_path, monkeypatch):
    assert set(BUILDERS) == set(ModelBackendName)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    cassette = tmp_path / "run.json"
    run_scenario("lookup-empty", "structured", record_to=cassette)
    for name in ModelBackendName:
        backend = make_backend(name.value, cassette=cassette)
        assert backend.kind == name


def test_an_unknown_backend_is_named_with_the_ones_there_are():
    with pytest.raises(ValueError, match="unknown model backend 'gpt'; expected one of simulated, claude, replay"):
        make_backend("gpt")


def test_a_policy_takes_every_error_format_and_retry_rule_and_stores_plain_strings():
    for error_format in ErrorFormat:
        for retry_on in RetryRule:
            policy = policy_from_dict({"name": "v", "error_format": error_format.value, "retry_on": retry_on.value})
            assert json.loads(json.dumps(policy.settings()))["error_format"] == error_format.value
            assert type(policy.retry_on) is str
    assert type(Policy(name="defaults").error_format) is str
