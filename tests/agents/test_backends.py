"""Model backends through the SDK: the claude request shape, record-then-replay, and a replay that differs."""

import json

import httpx2
import pytest

from agents.llm.claude import ClaudeBackend
from agents.run import run_scenario
from agents.tools.currency import ConvertCurrencyInput
from agents.trace import format_step


class ScriptedClaude(httpx2.BaseTransport):
    """Stands in for api.anthropic.com: keeps every request and answers from a script."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []

    def handle_request(self, request):
        self.requests.append(
            {"url": str(request.url), "headers": dict(request.headers), "body": json.loads(request.read())}
        )
        content = self.replies.pop(0)
        return httpx2.Response(
            200,
            json={
                "id": f"msg_{len(self.requests)}",
                "type": "message",
                "role": "assistant",
                "model": "claude-haiku-4-5",
                "content": content,
                "stop_reason": "tool_use" if content[-1]["type"] == "tool_use" else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 321, "output_tokens": 45},
            },
        )


def use(id_, **args):
    return {"type": "tool_use", "id": id_, "name": "convert_currency", "input": args}


def claude(transport, record_to=None, **env):
    return ClaudeBackend(transport=transport, record_to=record_to, environ={"ANTHROPIC_API_KEY": "sk-test", **env})


def test_the_claude_backend_sends_pydantic_tool_schemas_and_is_error_results_matched_by_id():
    fake = ScriptedClaude(
        [
            [use("toolu_A", amount=100, from_currency="GBP", to_currency="USD")],
            [
                {"type": "text", "text": "Trying USD."},
                use("toolu_B", amount=100, from_currency="USD", to_currency="EUR"),
            ],
            [{"type": "text", "text": "100 USD is about 92.0 EUR."}],
        ]
    )
    result = run_scenario("currency-unsupported", "structured", model=claude(fake))
    first, second, third = (r["body"] for r in fake.requests)
    assert fake.requests[0]["url"] == "https://api.anthropic.com/v1/messages"
    assert fake.requests[0]["headers"]["authorization"] == "Bearer sk-test"  # the SDK's own auth header
    assert first["model"] == "claude-haiku-4-5" and first["max_tokens"] > 0
    assert first["tools"] == [
        {
            "name": "convert_currency",
            "description": first["tools"][0]["description"],
            "input_schema": ConvertCurrencyInput.model_json_schema(),
        }
    ]
    assert first["messages"] == [{"role": "user", "content": result.start.task}]
    (sent,) = second["messages"][-1]["content"]
    assert sent["type"] == "tool_result" and sent["tool_use_id"] == "toolu_A" and sent["is_error"] is True
    assert json.loads(sent["content"])["error"]["message"].startswith("Invalid input -> from_currency")
    assert third["messages"][-1]["content"][0] | {"content": None} == {
        "type": "tool_result",
        "tool_use_id": "toolu_B",
        "is_error": False,
        "content": None,
    }
    assert result.end.final_answer == "100 USD is about 92.0 EUR." and result.end.verdict.passed
    assert result.start.model_backend == "claude" and result.start.model_name == "claude-haiku-4-5"
    assert result.steps[1].text == "Trying USD." and result.steps[0].input_tokens == 321


def test_the_claude_model_comes_from_anthropic_model():
    fake = ScriptedClaude([[{"type": "text", "text": "Sorry."}]])
    run_scenario("lookup-flaky", "structured", model=claude(fake, ANTHROPIC_MODEL="claude-test-model"))
    assert fake.requests[0]["body"]["model"] == "claude-test-model"


def test_the_claude_backend_without_a_key_says_what_to_set():
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        ClaudeBackend(environ={})


def test_a_run_recorded_from_the_simulated_model_replays_offline_to_the_same_trace(tmp_path):
    cassette = tmp_path / "too-old.json"
    recorded = run_scenario("refund-too-old", "structured", record_to=cassette)
    data = json.loads(cassette.read_text())
    assert len(data["interactions"]) == 2 and data["meta"]["policy"] == "structured"
    replayed = run_scenario("refund-too-old", "structured", model="replay", cassette=cassette)
    assert replayed.start.model_backend == "replay" and replayed.start.model_name == "simulated-rules-1"
    assert [format_step(s) for s in replayed.steps] == [format_step(s) for s in recorded.steps]
    assert [(s.category, s.retryable, s.result_content) for s in replayed.steps] == [
        (s.category, s.retryable, s.result_content) for s in recorded.steps
    ]
    assert replayed.end.final_answer == recorded.end.final_answer and replayed.end.verdict.passed


def test_a_claude_run_can_be_recorded_and_replayed_without_the_network(tmp_path):
    cassette = tmp_path / "claude.json"
    fake = ScriptedClaude(
        [
            [use("toolu_A", amount=100, from_currency="USD", to_currency="EUR")],
            [{"type": "text", "text": "About 92.0 EUR."}],
        ]
    )
    run_scenario("currency-unsupported", "structured", model=claude(fake, record_to=cassette))
    replayed = run_scenario("currency-unsupported", "structured", model="replay", cassette=cassette)
    assert replayed.end.final_answer == "About 92.0 EUR." and replayed.end.verdict.passed
    assert json.loads(cassette.read_text())["backend"] == "claude"


def test_a_replay_under_another_policy_stops_naming_the_first_differing_field(tmp_path):
    cassette = tmp_path / "starter.json"
    run_scenario("refund-too-old", "starter", record_to=cassette)
    result = run_scenario("refund-too-old", "structured", model="replay", cassette=cassette)
    assert result.end.stop_reason == "crashed"
    assert "request 2 differs from the cassette at messages[2].content[0].content" in result.end.error


def test_a_replay_mismatch_inside_a_sub_agent_stops_the_whole_run(tmp_path):
    cassette = tmp_path / "coordinator.json"
    run_scenario("coordinator-partial", "structured", record_to=cassette)
    result = run_scenario("coordinator-partial", "starter", model="replay", cassette=cassette)
    assert result.end.stop_reason == "crashed" and "ReplayMismatch" in result.end.error
    assert len(result.children) == 2  # the third sub-agent's mismatch ended the run


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"model": "gpt"}, "unknown model backend 'gpt'; expected one of simulated, claude, replay"),
        ({"model": "replay"}, "the replay backend needs a cassette"),
        ({"model": "replay", "cassette": "/no/such/file.json"}, "does not exist"),
    ],
)
def test_a_bad_model_or_cassette_is_refused_before_the_run_starts(kwargs, message):
    with pytest.raises(ValueError, match=message):
        run_scenario("lookup-flaky", "structured", **kwargs)


def test_a_file_that_is_not_a_cassette_is_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"interactions": []}')
    with pytest.raises(ValueError, match="is not a repair-loop-tracer cassette"):
        run_scenario("lookup-flaky", "structured", model="replay", cassette=bad)
