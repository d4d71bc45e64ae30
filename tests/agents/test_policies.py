import random
import re
from pathlib import Path

import pytest

from agents.policies import PRESETS, PolicyError, get_policy, policy_from_dict

ROOT = Path(__file__).resolve().parents[2]


def test_the_presets_are_the_lessons_harnesses():
    assert PRESETS["fragile"].error_format == "raise"
    starter = PRESETS["starter"]
    assert (starter.error_format, starter.retry_on, starter.max_attempts, starter.empty_is_error) == (
        "bare",
        "all",
        3,
        True,
    )
    structured = PRESETS["structured"]
    assert (structured.error_format, structured.retry_on, structured.consecutive_error_limit) == (
        "structured",
        "transient",
        3,
    )
    assert structured.stop_on_fatal and structured.backoff_jitter > 0


def test_a_variant_names_every_invalid_field_and_what_is_expected():
    with pytest.raises(PolicyError) as caught:
        policy_from_dict(
            {"base": "structured", "name": "Bad Name", "max_attempts": 0, "retry_on": "sometimes", "colour": "blue"}
        )
    errors = caught.value.errors
    assert set(errors) == {"name", "max_attempts", "retry_on", "colour"}
    assert "greater than or equal to 1" in errors["max_attempts"]
    assert "'all', 'transient' or 'none'" in errors["retry_on"]
    assert "unknown setting" in errors["colour"]


def test_an_unknown_base_preset_is_refused_naming_the_presets():
    with pytest.raises(PolicyError, match="fragile, starter, message, structured"):
        policy_from_dict({"base": "sturdy", "name": "x"})


def test_a_variant_describes_what_it_changed_instead_of_keeping_the_presets_description():
    variant = policy_from_dict({"base": "structured", "name": "no-guard", "consecutive_error_limit": 0})
    assert variant.consecutive_error_limit is None
    assert variant.description == "structured with consecutive_error_limit=0"
    named = policy_from_dict({"base": "structured", "name": "mine", "description": "my own words"})
    assert named.description == "my own words"


def test_backoff_doubles_stays_under_its_bound_and_jitters_the_same_way_for_the_same_seed():
    policy = policy_from_dict({"base": "structured", "name": "b", "backoff_jitter": 0, "backoff_max_s": 0.5})
    delays = [policy.backoff(attempt=n, rng=random.Random(1)) for n in (1, 2, 3, 4)]
    assert delays == [0.2, 0.4, 0.5, 0.5]
    jittered = PRESETS["structured"]
    first = [jittered.backoff(attempt=1, rng=random.Random(7)) for _ in range(2)]
    assert first[0] == first[1] and 0.2 <= first[0] <= 0.3


def test_the_retry_rule_reads_the_tool_result_the_harness_built():
    structured, starter = PRESETS["structured"], PRESETS["starter"]
    timeout = {"isError": True, "error": {"errorCategory": "transient", "isRetryable": True, "message": "503"}}
    refusal = {"isError": True, "error": {"errorCategory": "business", "isRetryable": False, "message": "no"}}
    assert structured.should_retry(result=timeout, is_error=True, category="transient", attempt=1)
    assert not structured.should_retry(result=refusal, is_error=True, category="business", attempt=1)
    assert not structured.should_retry(result=timeout, is_error=True, category="transient", attempt=3)
    # The flag decides under structured, not the harness's own record of the category.
    assert not structured.should_retry(result=refusal, is_error=True, category="transient", attempt=1)
    assert starter.should_retry(result={"error": {"message": "Error"}}, is_error=True, category="business", attempt=2)
    nested_bug = policy_from_dict({"base": "structured", "name": "nested", "retry_flag_path": "isRetryable"})
    assert not nested_bug.should_retry(result=timeout, is_error=True, category="transient", attempt=1)


def test_the_nested_flag_setting_is_validated_naming_the_allowed_paths():
    with pytest.raises(PolicyError) as caught:
        policy_from_dict({"base": "structured", "name": "v", "retry_flag_path": "error.retryable"})
    assert "'error.isRetryable' or 'isRetryable'" in caught.value.errors["retry_flag_path"]


def test_an_unknown_policy_name_lists_the_presets():
    with pytest.raises(PolicyError, match="unknown policy 'strict'"):
        get_policy("strict")


def test_the_lessons_mistakes_are_structured_with_one_setting_changed():
    structured = PRESETS["structured"].settings()
    for name, setting, value in (
        ("nested-flag-bug", "retry_flag_path", "isRetryable"),
        ("swallowed-errors", "swallow_errors", True),
    ):
        differs = {k for k, v in PRESETS[name].settings().items() if structured[k] != v}
        assert differs == {"name", "description", setting} and PRESETS[name].settings()[setting] == value


def test_the_presets_table_in_docs_agents_md_is_every_preset_with_its_description():
    docs = (ROOT / "docs" / "agents.md").read_text()
    found = re.search(r"<!-- presets:start -->\n(.*?)\n<!-- presets:end -->", docs, re.S)
    assert found, "docs/agents.md lost its <!-- presets:start --> … <!-- presets:end --> block"
    rows = found.group(1).splitlines()[2:]
    assert rows == [f"| `{p.name}` | {p.description} |" for p in PRESETS.values()]
