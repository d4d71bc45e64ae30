"""Redaction (agents.redaction): each built-in pattern, what it leaves alone, configured patterns and
secret values, the log filter, and cassettes that keep no key yet still replay."""

from __future__ import annotations

import io
import json
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.events import ListRecorder
from agents.llm.claude import ClaudeBackend
from agents.redaction import (
    MIN_SECRET_LENGTH,
    NotJSON,
    RedactingLogFilter,
    RedactionConfigError,
    Redactor,
    env_names,
    patterns_from_text,
    secret_name,
)
from agents.run import run_scenario
from agents.scenarios import scenario_names
from agents.tools.billing import BILLING_KEY
from tests.agents.test_backends import ScriptedClaude

ANTHROPIC = "sk-ant-api03-" + "Zx9_Qw8-Er7tY6uI5oP4aS3dF2gH1jK0lZ" * 3
redact = Redactor()


@pytest.mark.parametrize(
    ("text", "secret", "marker"),
    [
        (f"key {ANTHROPIC} end", ANTHROPIC, "[redacted: anthropic key]"),
        ("key=sk-ant-admin01-AbC123dEf456 end", "sk-ant-admin01-AbC123dEf456", "[redacted:"),
        (
            "OPENAI sk-proj-abcdEFGH1234ijklMNOP5678qrst",
            "sk-proj-abcdEFGH1234ijklMNOP5678qrst",
            "[redacted: openai key]",
        ),
        ("old style sk-abcdefghij0123456789ABCDEFGHIJ", "sk-abcdefghij0123456789ABCDEFGHIJ", "[redacted: openai key]"),
        ("aws AKIAIOSFODNN7EXAMPLE,", "AKIAIOSFODNN7EXAMPLE", "[redacted: aws access key]"),
        (
            "gh ghp_16C7e42F292c6912E7710c838347Ae178B4a!",
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "[redacted: github token]",
        ),
        (
            "fine-grained github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
            "[redacted: github token]",
        ),
        (
            "slack xoxb-1234567890-0987654321-AbCdEfGhIj",
            "xoxb-1234567890-0987654321-AbCdEfGhIj",
            "[redacted: slack token]",
        ),
        ("rlt_" + "a1B2c3D4e5" * 4 + "xyz", "rlt_" + "a1B2c3D4e5" * 4 + "xyz", "[redacted: rlt api token]"),
        (
            "Authorization: Bearer abc.DEF-123_ghi~jkl",
            "abc.DEF-123_ghi~jkl",
            "Authorization: Bearer [redacted: bearer token]",
        ),
        ("authorization: bearer 0123456789abcdef==", "0123456789abcdef", "bearer [redacted: bearer token]"),
        (
            "Authorization: Basic dXNlcjpwYXNzd29yZA==",
            "dXNlcjpwYXNzd29yZA",
            "Authorization: Basic [redacted: credentials]",
        ),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
            "jwt [redacted: jwt]",
        ),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----\nafter",
            "MIIEowIBAAKCAQEA7",
            "[redacted: private key]\nafter",
        ),
        (
            "cut short -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk",
            "b3BlbnNzaC1rZXk",
            "[redacted: private key]",
        ),
        (
            "postgres://rlt:hunter2hunter@db:5432/rlt",
            "hunter2hunter",
            "postgres://rlt:[redacted: password]@db:5432/rlt",
        ),
        ("redis://:s3cr3t@cache:6379/0", "s3cr3t", "redis://:[redacted: password]@cache"),
        ('{"api_key": "abc123", "n": 1}', "abc123", '{"api_key": "[redacted: secret value]", "n": 1}'),
        ("{'password': 'pa ss', 'x-api-key': 'k1'}", "pa ss", "{'password': '[redacted: secret value]', 'x-api-key'"),
        ("{'password': 'pa ss', 'x-api-key': 'k1'}", "'k1'", "'x-api-key': '[redacted: secret value]'"),
        ("client(api_key='abc def', timeout=3)", "abc def", "api_key='[redacted: secret value]', timeout=3"),
        ("GET /x?access_token=abc123&page=2", "abc123", "access_token=[redacted: secret value]&page=2"),
        ("DB_PASSWORD=hunter2\nOTHER=1", "hunter2", "DB_PASSWORD=[redacted: secret value]\nOTHER=1"),
    ],
)
def test_each_built_in_pattern_replaces_the_secret_with_a_marker_saying_what_it_was(text, secret, marker):
    redacted = redact.text(text)
    assert secret not in redacted
    assert marker in redacted
    assert redact.text(redacted) == redacted  # idempotent: markers are never redacted again


@pytest.mark.parametrize(
    "text",
    [
        "risk-free desk-top task-sk-ant sk- sk-short",
        "sk-this-is-a-long-hyphenated-phrase-without-digits",  # sk-… needs a digit to be a key
        "Order 0871 was placed 239 days ago; refunds close after 30 days.",
        "order ids ORD-2024-000871, AK-47, AKIA-short, AKIAIOSFODNN7 (too short)",
        "ghp_ is a prefix; xoxb- alone; rlt_abcd1234 is a token's shown prefix",
        "Send a Bearer token in the header; Bearer authentication is described in RFC 6750.",
        "the password is wrong; check your api key; token expired; secret ingredient",
        '{"max_tokens": 1024, "input_tokens": 12, "token_type": "bearer", "key": "answer"}',
        "max_tokens=1024 input_tokens=5 https://example.com:8443/a@b mailto:someone@example.com",
        "eyJ is how base64 JSON starts; a.b.c",
        "-----BEGIN CERTIFICATE----- is public",
        "",
        "short",
    ],
)
def test_ordinary_text_is_left_alone(text):
    assert redact.text(text) == text


def test_values_of_keys_named_like_secrets_are_redacted_wherever_they_are_in_a_structure():
    value = {
        "password": "hunter2",
        "apiKey": "k",
        "X-API-Key": "k2",
        "client_secret": "s",
        "Authorization": "Bearer abcdefgh1",
        "nested": [{"access_token": "t", "refresh_token": "", "db_password": None}],
        "input_tokens": 12,
        "max_tokens": 1024,
        "token_type": "bearer",
        "is_secret": True,
        "tool": ("process_refund", {"order_id": "0871"}),
        ANTHROPIC: "a key used as a dict key",
    }
    assert redact(value) == {
        "password": "[redacted: secret value]",
        "apiKey": "[redacted: secret value]",
        "X-API-Key": "[redacted: secret value]",
        "client_secret": "[redacted: secret value]",
        "Authorization": "[redacted: secret value]",
        "nested": [{"access_token": "[redacted: secret value]", "refresh_token": "", "db_password": None}],
        "input_tokens": 12,
        "max_tokens": 1024,
        "token_type": "bearer",
        "is_secret": True,
        "tool": ["process_refund", {"order_id": "0871"}],
        "[redacted: anthropic key]": "a key used as a dict key",
    }
    assert redact(redact(value)) == redact(value)
    assert [secret_name(k) for k in ("passwd", "PASSPHRASE", "private_key", "tokens", "secretary", "key")] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]


def test_a_string_seen_again_is_redacted_the_same_from_the_cache_long_ones_and_those_inside_structures_too():
    r = Redactor()
    long = "ok " * 500 + ANTHROPIC  # longer than the old 200-character limit, shorter than the new one
    secret_in_list = ["plain", 3, None, True, 1.5, ANTHROPIC, ("x", ANTHROPIC)]
    for _ in range(2):  # the first time fills the cache, the second reads it
        assert r.text(long) == "ok " * 500 + "[redacted: anthropic key]"
        assert r({"k": long, ANTHROPIC: ANTHROPIC, "n": 1}) == {
            "k": "ok " * 500 + "[redacted: anthropic key]",
            "[redacted: anthropic key]": "[redacted: anthropic key]",
            "n": 1,
        }
        assert r.json({"a": [ANTHROPIC, {"password": "p", "n": 2}]}) == r({"a": [ANTHROPIC, {"password": "p", "n": 2}]})
        for not_json in ((1,), {1: "x"}, [{"at": object()}]):
            with pytest.raises(NotJSON):
                r.json(not_json)
        assert r(secret_in_list) == [
            "plain",
            3,
            None,
            True,
            1.5,
            "[redacted: anthropic key]",
            ["x", "[redacted: anthropic key]"],
        ]


# Text made of the pieces secrets and their triggers are made of, so examples often hold one
_PIECES = st.sampled_from(
    [
        "sk-ant-",
        "AbCdEf123456",
        "Bearer ",
        "token",
        "Password",
        "api_key",
        "=",
        '"',
        ":",
        " ",
        "é",
        "\u212a",
        "KEY",
        "://u:p@h",
        "plain",
        "\n",
        "\\",
        "rlt_",
        "x" * 12,
        "secret-env-value",
    ]
)
_TEXTS = st.lists(_PIECES, max_size=6).map("".join)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXTS, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(value=_JSON)
def test_a_value_whose_json_text_is_called_clean_comes_back_from_the_redactor_unchanged(value):
    """``clean_json`` lets the recording path skip the walk: it may never call a value clean that the
    walk would change (a false alarm only costs the walk)."""
    for r in (redact, Redactor(secrets={"DJANGO_SECRET_KEY": "secret-env-value"})):
        if r.clean_json(json.dumps(value)):
            assert r(value) == value
    assert not Redactor(patterns=["plain"]).clean_json(json.dumps(value))  # extra patterns: always walked


@settings(max_examples=400, deadline=None)
@given(texts=st.lists(_TEXTS, max_size=5))
def test_strings_whose_joined_text_is_called_clean_come_back_from_the_redactor_unchanged(texts):
    """``clean_text`` lets the OTLP receiver skip the walk of a span: strings joined by NUL that it calls
    clean are each left as they are by the redactor (a false alarm only costs the walk)."""
    for r in (redact, Redactor(secrets={"DJANGO_SECRET_KEY": "secret-env-value"})):
        if r.clean_text("\x00".join(texts)):
            assert [r.text(t) for t in texts] == texts
    assert not Redactor(patterns=["plain"]).clean_text("\x00".join(texts))  # extra patterns: always walked


def test_literal_secret_values_are_redacted_naming_their_variable_but_short_ones_are_not():
    r = Redactor(secrets={"ANTHROPIC_API_KEY": "plain-looking-key-42", "SHORT": "x" * (MIN_SECRET_LENGTH - 1)})
    assert r.text("sent plain-looking-key-42 and xxxxxxx") == "sent [redacted: ANTHROPIC_API_KEY] and xxxxxxx"
    from_env = Redactor.from_environ(
        {"ANTHROPIC_API_KEY": "env-key-0123456789", "VENDOR_PW": "vendor-pass-1", "RLT_REDACT_ENV": "VENDOR_PW"}
    )
    assert from_env.text("env-key-0123456789 / vendor-pass-1") == (
        "[redacted: ANTHROPIC_API_KEY] / [redacted: VENDOR_PW]"
    )
    assert env_names("A, B C,,A") == ["ANTHROPIC_API_KEY", "DJANGO_SECRET_KEY", "A", "B", "C"]


def test_configured_patterns_come_as_a_json_list_or_one_per_line_and_add_to_the_built_ins():
    assert patterns_from_text("") == []
    assert patterns_from_text("LUMEN-[0-9]{6}\n\n  cust_[a-z]{8}  \n") == [
        ("custom pattern 1", "LUMEN-[0-9]{6}"),
        ("custom pattern 2", "cust_[a-z]{8}"),
    ]
    configured = patterns_from_text('["LUMEN-[0-9]{6}", {"name": "customer ref", "pattern": "cust_[a-z]{8}"}]')
    assert configured == [("custom pattern 1", "LUMEN-[0-9]{6}"), ("customer ref", "cust_[a-z]{8}")]
    r = Redactor(patterns=configured)
    assert r.text(f"LUMEN-123456 cust_abcdefgh {ANTHROPIC}") == (
        "[redacted: custom pattern 1] [redacted: customer ref] [redacted: anthropic key]"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ok-[0-9]+\nsk_live_[", "RLT_REDACT_PATTERNS: pattern 2 'sk_live_[' is not a valid regular expression"),
        ('["a+", "(unclosed"]', "pattern 2 '(unclosed' is not a valid regular expression"),
        ("x*", "pattern 1 'x*' matches the empty string"),
        ("[1, 2", "starts with '[' but is not a JSON list"),
        ('[{"name": "n"}]', 'item 1 ({"name": "n"}) is neither'),
    ],
)
def test_an_unusable_configured_pattern_is_refused_naming_it(text, message):
    with pytest.raises(RedactionConfigError) as caught:
        patterns_from_text(text)
    assert message in str(caught.value)


def test_no_scenario_run_by_the_simulated_model_has_anything_redacted_but_the_key_one_leaks_on_purpose():
    """The built-ins never touch this project's own data: every scenario's steps and transcript stay as they
    are, except invoice-internal-error's, whose billing error carries an API key: only that key is redacted."""
    for name in scenario_names():
        for policy in ("starter", "structured"):
            recorder = ListRecorder()
            run_scenario(name, policy, recorder=recorder)
            recorders = [recorder, *recorder.children]
            for rec in recorders:
                stored = json.loads(
                    json.dumps(
                        {"steps": [s.to_dict() for s in rec.steps], "end": rec.end.to_dict(), "task": rec.start.task},
                        default=str,
                    )
                )
                if name == "invoice-internal-error":
                    text = json.dumps(stored)
                    assert BILLING_KEY in text  # the tool's own message, kept on its attempts
                    assert json.dumps(redact(stored)) == text.replace(BILLING_KEY, "[redacted: openai key]")
                    continue
                assert redact(stored) == stored, (name, policy)


def test_the_log_filter_redacts_the_message_its_arguments_and_the_traceback():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingLogFilter(lambda: Redactor(secrets={"ANTHROPIC_API_KEY": "configured-key-77"})))
    logger = logging.getLogger("tests.redaction.filter")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("tool input %s with header %s", {"api_key": "plain-value"}, "Authorization: Bearer abcdef123456")
        try:
            raise RuntimeError("the SDK said: invalid x-api-key configured-key-77")
        except RuntimeError:
            logger.exception("a call failed")
    finally:
        logger.removeHandler(handler)
    written = stream.getvalue()
    assert "plain-value" not in written and "abcdef123456" not in written and "configured-key-77" not in written
    assert "{'api_key': '[redacted: secret value]'}" in written
    assert "Bearer [redacted: bearer token]" in written
    assert "invalid x-api-key [redacted: ANTHROPIC_API_KEY]" in written
    assert "Traceback" in written


def test_a_recorded_cassette_keeps_no_key_and_still_replays_to_the_same_trace(tmp_path):
    def scripted():
        return ScriptedClaude(
            [
                [{"type": "text", "text": f"I will use {ANTHROPIC}."}, _use("toolu_A", "USD")],
                [{"type": "text", "text": "100 USD is about 92.0 EUR."}],
            ]
        )

    cassette = tmp_path / "claude.json"
    fake = scripted()
    backend = ClaudeBackend(transport=fake, record_to=cassette, environ={"ANTHROPIC_API_KEY": ANTHROPIC})
    recorded = ListRecorder()
    run_scenario("currency-unsupported", "structured", model=backend, recorder=recorded)
    assert fake.requests[0]["headers"]["authorization"] == f"Bearer {ANTHROPIC}"  # the key did go to the API
    text = cassette.read_text()
    assert ANTHROPIC not in text and ANTHROPIC[:20] not in text
    assert "authorization" not in text.lower() and "x-api-key" not in text.lower()
    assert "[redacted: ANTHROPIC_API_KEY]" in text  # the model's text quoting it, in the response and the next request

    replayed = ListRecorder()
    run_scenario("currency-unsupported", "structured", model="replay", cassette=cassette, recorder=replayed)
    assert replayed.end.stop_reason == recorded.end.stop_reason == "final_answer"
    assert [s.tool_name for s in replayed.steps] == [s.tool_name for s in recorded.steps]


def _use(id_, to_currency):
    return {
        "type": "tool_use",
        "id": id_,
        "name": "convert_currency",
        "input": {"amount": 100, "from_currency": to_currency, "to_currency": "EUR"},
    }
