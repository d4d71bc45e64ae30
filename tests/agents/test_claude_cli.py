"""``python -m agents run --model claude`` against the fake Messages API (tests/fake_messages_api.py), as a
person at a shell runs it: a real process, the SDK pointed at the fake by ANTHROPIC_BASE_URL."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import subprocess_env
from tests.fake_messages_api import (
    error,
    hang,
    malformed,
    pause_turn,
    refusal,
    truncated_text,
    truncated_tool_use,
    unknown_block,
)

ROOT = Path(__file__).resolve().parents[2]
AGENTS_RUN = [sys.executable, "-m", "agents", "run"]


def agents_run(scenario="refund-too-old", *extra, **env):
    done = subprocess.run(
        [*AGENTS_RUN, "--scenario", scenario, "--policy", "structured", "--model", "claude", *extra],
        cwd=ROOT,
        env=subprocess_env(env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, done.stdout, done.stderr


def test_a_reply_cut_off_by_max_tokens_ends_the_run_max_tokens_not_with_its_text_as_the_answer(fake_api):
    fake_api.script(truncated_text("The value st"))
    code, out, _ = agents_run()
    assert code == 0
    assert "step 1: the model stopped (stop_reason max_tokens): The value st" in out
    assert "final answer:" not in out and "stop reason: max_tokens" in out
    assert "answer gives the 30-day window (within 12%) ✗ (no answer: it ended max_tokens)" in out


def test_a_tool_use_cut_off_by_max_tokens_is_shown_not_executed(fake_api):
    fake_api.script(truncated_tool_use("process_refund"))
    code, out, _ = agents_run()
    assert code == 0 and "step 1: process_refund({}) -> NOT EXECUTED" in out
    assert "refund asked for once ✗ (asked 0 times)" in out


def test_a_refusal_ends_the_run_as_a_refusal(fake_api):
    fake_api.script(refusal("I won't."))
    code, out, _ = agents_run()
    assert code == 0 and "stop reason: refusal" in out and "the model declined to go on" in out


def test_a_paused_turn_is_continued_to_the_answer(fake_api):
    fake_api.script(pause_turn("Looking."))
    code, out, _ = agents_run()
    assert code == 0 and "stop reason: final_answer" in out and f"final answer: {fake_api.answer}" in out
    assert fake_api.bodies()[1]["messages"][-1]["role"] == "assistant"


@pytest.mark.parametrize(
    "behaviour, said",
    [
        (error(401), "401"),
        (malformed(), "answered 200 with a body that is not JSON"),
        (malformed(b'{"type": "message", "content": "hi"}'), "answered 200 with a body that is not a message"),
        (error(400, "messages: roles must alternate"), "roles must alternate"),
    ],
    ids=["401", "malformed-200", "not-a-message-200", "400"],
)
def test_a_crashed_run_exits_1_and_says_why(fake_api, behaviour, said):
    fake_api.script(behaviour)
    code, out, err = agents_run()
    assert code == 1, out + err
    assert "stop reason: crashed" in out and said in out
    assert "the run crashed" in err and "Traceback" not in err


def test_a_wrong_key_crashes_the_run_with_401(fake_api):
    code, out, _ = agents_run(ANTHROPIC_API_KEY="not-the-key")
    assert code == 1 and "401" in out and "not-the-key" not in out


def test_an_unknown_content_block_does_not_flood_stderr(fake_api):
    fake_api.script(unknown_block(then="All done."))
    code, out, err = agents_run()
    assert code == 0 and "final answer: All done." in out
    assert "Pydantic" not in err and "serializ" not in err, err


def test_a_model_call_that_never_answers_ends_the_run_at_its_time_limit(fake_api):
    fake_api.script(hang(300))
    began = time.monotonic()
    code, out, err = agents_run(RLT_RUN_TIME_LIMIT_S="3")
    # far short of the 300 s the call hangs for; the margin is the process's own start, which a
    # loaded machine can stretch past ten seconds
    assert time.monotonic() - began < 3 + 60
    assert code == 1 and "the run crashed" in err
    assert "gave no answer within" in out and "the run's time limit (3 s, RLT_RUN_TIME_LIMIT_S) was reached" in out


def test_a_time_limit_that_is_not_a_number_is_refused_naming_it(fake_api):
    code, _, err = agents_run("refund-too-old", "--time-limit", "soon")
    assert code == 2 and "--time-limit must be a number of seconds above 0; it is 'soon'" in err
    code, _, err = agents_run(RLT_RUN_TIME_LIMIT_S="0")
    assert code == 2 and "RLT_RUN_TIME_LIMIT_S must be a number of seconds above 0" in err
    assert not fake_api.bodies()  # refused before the model was asked
