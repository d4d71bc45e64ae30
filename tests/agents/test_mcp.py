"""Tools over a real MCP server: the harness is an MCP client of ``agents.mcp_server``.

One test starts the server as a real subprocess over stdio; the rest use the SDK's memory streams,
which carry the same JSON-RPC messages in this process. Over MCP or in process, a scenario must get
the same verdict and the same step outcomes: the transport changes how a tool is reached, not what
the harness or the model do with its result.
"""

import subprocess
import sys

import pytest
from mcp import types

from agents.loop import format_result
from agents.mcp_client import mcp_toolbox, outcome_of
from agents.mcp_server import call_tool_result
from agents.policies import PolicyError, get_policy
from agents.run import run_scenario
from agents.runner import Outcome
from agents.scenarios import get_scenario
from agents.vocabulary import ErrorCategory, ToolTransport

SCENARIOS = ["refund-too-old", "room-date-format", "lookup-flaky"]
POLICIES = ["starter", "message", "structured"]


def over_mcp(policy: str) -> dict:
    return {"base": policy, "tool_transport": "mcp"}


def outcomes(run):
    return [(s.kind, s.tool_name, s.is_error, s.category, s.retry_count, s.result_content) for s in run.steps]


def test_the_transport_is_a_policy_setting_validated_like_the_others():
    assert get_policy("structured").tool_transport == ToolTransport.IN_PROCESS
    assert get_policy(over_mcp("structured")).settings()["tool_transport"] == "mcp"
    with pytest.raises(PolicyError) as caught:
        get_policy({"base": "structured", "tool_transport": "carrier-pigeon"})
    assert "tool_transport" in caught.value.errors


def test_a_scenario_over_a_stdio_mcp_server_subprocess_gets_the_in_process_verdict():
    here = run_scenario("refund-too-old", "structured")
    there = run_scenario("refund-too-old", over_mcp("structured"))  # python -m agents.mcp_server, over stdio
    assert there.end.verdict.passed == here.end.verdict.passed
    assert there.end.verdict.reason == here.end.verdict.reason
    assert outcomes(there) == outcomes(here)
    attempt = there.steps[0].attempts[0]
    assert attempt.transport == "mcp" and here.steps[0].attempts[0].transport == "in_process"
    # Both spellings recorded: the CallToolResult as the wire had it, and the API tool_result's flag.
    assert attempt.mcp_result["isError"] is True and "is_error" not in attempt.mcp_result
    assert attempt.is_error is True and there.steps[0].is_error is True
    assert (attempt.category, attempt.retryable) == (ErrorCategory.BUSINESS, False)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_over_mcp_and_in_process_the_verdict_and_the_step_outcomes_are_the_same(scenario, policy):
    here = run_scenario(scenario, policy)
    there = run_scenario(scenario, over_mcp(policy), mcp_server="memory")
    assert (there.end.stop_reason, there.end.verdict.passed) == (here.end.stop_reason, here.end.verdict.passed)
    assert there.end.verdict.reason == here.end.verdict.reason
    assert there.end.final_answer == here.end.final_answer
    assert outcomes(there) == outcomes(here)
    assert [len(s.attempts) for s in there.steps] == [len(s.attempts) for s in here.steps]
    for step in there.steps:
        for attempt in step.attempts:
            assert attempt.transport == "mcp"
            assert attempt.mcp_result["isError"] is (not attempt.ok)


def test_the_model_is_offered_the_tools_the_server_lists_with_the_in_process_schemas():
    scenario = get_scenario("room-date-format")
    with mcp_toolbox(scenario, server="memory") as toolbox:
        assert toolbox.schemas() == scenario.prepare().toolbox.schemas()
        unknown = toolbox.call("rlt/judge", {})  # the server's judge is not a tool the model can reach
    assert not unknown.ok and unknown.category == ErrorCategory.VALIDATION and "unknown tool" in unknown.message


def test_an_is_error_call_tool_result_becomes_an_is_error_tool_result():
    failed = Outcome(ok=False, content="x", category="transient", retryable=True, message="payments timed out")
    sent = call_tool_result(failed)
    wire = sent.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert wire["isError"] is True
    read = outcome_of(types.CallToolResult.model_validate(wire))
    assert (read.ok, read.category, read.retryable, read.message) == (False, "transient", True, "payments timed out")
    content, is_error = format_result(get_policy("structured"), read, attempts=1, tool="refund")
    assert is_error is True
    assert content["error"] == {"errorCategory": "transient", "isRetryable": True, "message": "payments timed out"}
    # A server that is not ours, failing in plain text, is still a failure the policy reports.
    plain = outcome_of(types.CallToolResult(content=[types.TextContent(text="boom")], is_error=True))
    assert (plain.ok, plain.message) == (False, "boom")
    assert format_result(get_policy("message"), plain, attempts=1, tool="t") == ("boom", True)
    ok = outcome_of(call_tool_result(Outcome(ok=True, content={"orders": []}, empty=True)))
    assert ok.ok and ok.empty and ok.mcp_result["isError"] is False


def test_a_scenario_that_starts_sub_agents_is_refused_over_mcp():
    with pytest.raises(ValueError, match="in_process"):
        run_scenario("coordinator-partial", over_mcp("structured"), mcp_server="memory")


def test_the_server_command_names_an_unknown_scenario_and_exits_2_when_the_client_goes():
    done = subprocess.run(
        [sys.executable, "-m", "agents.mcp_server", "--scenario", "no-such-scenario"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "unknown scenario 'no-such-scenario'" in done.stderr
