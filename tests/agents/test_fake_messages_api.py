"""The fake Messages API answers as the real one does, through the official SDK (tests/fake_messages_api.py)."""

import anthropic
import pytest

from agents.run import run_scenario
from tests.fake_messages_api import error, reply, text, tool_use


def client(api, key=None):
    return anthropic.Anthropic(api_key=key or api.key, base_url=api.url, max_retries=0)


def ask(api, messages, key=None):
    return client(api, key).messages.create(model="claude-haiku-4-5", max_tokens=64, messages=messages)


def test_an_error_has_the_real_status_body_and_headers(fake_api):
    fake_api.script(error(529, retry_after=3, should_retry=False))
    with pytest.raises(anthropic.APIStatusError) as caught:
        ask(fake_api, [{"role": "user", "content": "hi"}])
    exc = caught.value
    assert exc.status_code == 529 and exc.body["error"]["type"] == "overloaded_error"
    assert exc.response.headers["retry-after"] == "3" and exc.response.headers["x-should-retry"] == "false"
    assert exc.request_id == exc.body["request_id"] and exc.request_id.startswith("req_")


def test_a_wrong_key_is_refused_with_401(fake_api):
    with pytest.raises(anthropic.AuthenticationError):
        ask(fake_api, [{"role": "user", "content": "hi"}], key="not-the-key")


def test_a_tool_use_without_its_tool_result_is_refused_with_400_naming_it(fake_api):
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [tool_use("lookup", {}, id="toolu_X")]},
        {"role": "user", "content": "and?"},
    ]
    with pytest.raises(anthropic.BadRequestError, match="toolu_X"):
        ask(fake_api, messages)


def test_a_scripted_reply_comes_back_as_a_message_with_usage(fake_api):
    fake_api.script(reply(text("The value st"), stop_reason="max_tokens", usage=(12, 3)))
    message = ask(fake_api, [{"role": "user", "content": "hi"}])
    assert message.stop_reason == "max_tokens" and message.content[0].text == "The value st"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (12, 3)
    assert fake_api.bodies()[0]["messages"] == [{"role": "user", "content": "hi"}]


def test_once_the_script_is_used_up_it_calls_the_first_tool_then_answers(fake_api):
    result = run_scenario("lookup-flaky", "structured", model="claude")
    assert result.end.stop_reason == "final_answer" and result.end.final_answer == fake_api.answer
    assert [s.tool_name for s in result.steps if s.tool_name] == [fake_api.bodies()[0]["tools"][0]["name"]]
    assert len(fake_api.bodies()) == 2
