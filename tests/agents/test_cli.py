"""``python -m agents``: what a person at a shell sees."""

import io
import subprocess
import sys
from pathlib import Path

from agents.__main__ import main
from tests.fake_messages_api import error, reply, tool_use

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_run_prints_the_backend_label_the_trace_the_verdict_and_then_the_findings():
    code, out, _ = run_cli("run", "--scenario", "refund-too-old", "--policy", "starter")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "model: simulated (deterministic rules, not Claude) [simulated-rules-1]"
    assert "step 1: process_refund({'order_id': '0871'}) -> ERROR (is_error): Error" in lines
    assert "    attempt 3 after 0.0s backoff: Error (tool knew: business, not retryable)" in lines
    assert any(line.startswith("final answer: I wasn't able to refund order 0871") for line in lines)
    assert "stop reason: final_answer" in lines
    verdict = lines.index(
        "verdict: FAIL: answered ✓; refund not applied ✓; refund asked for once ✗ (asked 3 times); "
        'answer does not claim a refund ✓ ("wasn\'t able to refund"); answer gives no reason the world contradicts ✓; '
        "answer gives the 30-day window (within 12%) ✗; answer gives the order's age, 239 days (within 12%) ✗"
    )
    # the harness tried the refund three times: one failed step, three failed attempts
    assert lines[verdict + 1] == "tool calls: 1 (1 failed step, 3 failed attempts)"
    assert lines[verdict + 3] == "findings: 2"


def test_sub_agent_runs_are_printed_indented_where_they_happen():
    _, out, _ = run_cli("run", "--scenario", "coordinator-partial", "--policy", "structured")
    assert "  [sub-agent 3: Look up order 1050 for Ana Ruiz.]" in out
    assert "    step 1: lookup_order({'order_id': '1050'}) -> ERROR (is_error): still failing after 2 attempts" in out
    assert "final answer: failed:  lookup for order 1050, timed out twice" in out


def test_a_policy_can_be_given_as_json_settings():
    code, out, _ = run_cli(
        "run",
        "--scenario",
        "stuck-model",
        "--policy",
        '{"base": "message", "name": "guarded", "consecutive_error_limit": 3}',
    )
    assert code == 0 and "stop reason: consecutive_errors (3 tool errors in a row)" in out


def test_run_records_a_cassette_that_replays(tmp_path):
    cassette = tmp_path / "run.json"
    code, recorded, _ = run_cli(
        "run", "--scenario", "lookup-empty", "--policy", "structured", "--record", str(cassette)
    )
    assert code == 0 and f"recorded to {cassette}" in recorded
    code, replayed, _ = run_cli(
        "run", "--scenario", "lookup-empty", "--policy", "structured", "--model", "replay", "--cassette", str(cassette)
    )
    assert code == 0 and replayed.splitlines()[0].startswith("model: replay of a recorded simulated run")
    assert recorded.splitlines()[1:-1] == replayed.splitlines()[1:]


def test_a_model_call_the_api_overloaded_once_shows_each_attempt_and_wait_before_the_step_it_made(fake_api):
    fake_api.script(error(529, retry_after=0.01), None, error(529, retry_after=0.02))
    code, out, _ = run_cli("run", "--scenario", "lookup-flaky", "--policy", "structured", "--model", "claude")
    assert code == 0
    lines = out.splitlines()
    step = lines.index("model call for step 1: 2 attempts")
    assert lines[step + 1 : step + 3] == [
        "    attempt 1: the model API was overloaded (529), retry-after 0.01s (request-id req_fake000001)",
        "    attempt 2 after 0.01s wait: ok (200)",
    ]
    assert lines[step + 3].startswith("step 1: lookup(")  # the step that call's response made
    answer = lines.index("model call for the final answer: 2 attempts")
    assert lines[answer + 1].startswith("    attempt 1: the model API was overloaded (529), retry-after 0.02s")
    assert lines[answer + 2] == "    attempt 2 after 0.02s wait: ok (200)"
    assert lines[answer + 3] == "final answer: Done."
    assert out.count("model call") == 2  # a call that went through at once is not shown


def test_a_model_call_that_failed_for_good_is_shown_at_the_end_before_the_crash(fake_api):
    fake_api.script(reply(tool_use("lookup", {"key": "answer"})), *[error(529, retry_after=0.01)] * 3)
    code, out, err = run_cli("run", "--scenario", "lookup-flaky", "--policy", "structured", "--model", "claude")
    assert code == 1 and "the run crashed" in err
    lines = out.splitlines()
    end = lines.index("model call that ended the run: 3 attempts")
    assert lines[end + 1 : end + 5] == [
        "    attempt 1: the model API was overloaded (529), retry-after 0.01s (request-id req_fake000002)",
        "    attempt 2 after 0.01s wait: the model API was overloaded (529), retry-after 0.01s "
        "(request-id req_fake000003)",
        "    attempt 3 after 0.01s wait: the model API was overloaded (529), retry-after 0.01s "
        "(request-id req_fake000004)",
        "stop reason: crashed",
    ]
    assert lines[end + 5].startswith("error: the model API was overloaded (529) three times")


def test_a_sub_agents_failed_model_call_is_shown_under_it_and_named_at_its_coordinators_end(fake_api):
    job = "Look up order 1042 for Ana Ruiz."
    fake_api.script(reply(tool_use("run_subagent", {"task": job})), *[error(529, retry_after=0.01)] * 3)
    code, out, _ = run_cli("run", "--scenario", "coordinator-partial", "--policy", "structured", "--model", "claude")
    assert code == 1
    lines = out.splitlines()
    assert "    model call that ended the run: 3 attempts" in lines  # indented: the sub-agent's own end
    assert out.count("attempt 1: the model API was overloaded (529)") == 1  # shown once, where it happened
    end = lines.index(f"model call that ended the run: in [sub-agent 1: {job}], above")
    assert lines[end + 1] == "stop reason: crashed"


def test_an_unknown_scenario_lists_the_valid_ones_and_exits_2():
    code, out, err = run_cli("run", "--scenario", "refund-everything", "--policy", "structured")
    assert code == 2 and out == ""
    assert err.startswith("error: unknown scenario 'refund-everything'; expected one of: currency-unsupported")


def test_bad_policy_settings_name_the_field_and_exit_2():
    code, _, err = run_cli("run", "--scenario", "lookup-flaky", "--policy", '{"base": "structured", "max_attempts": 0}')
    assert code == 2 and err == "error: max_attempts: Input should be greater than or equal to 1\n"


def test_a_cassette_without_the_replay_backend_is_refused():
    code, _, err = run_cli("run", "--scenario", "lookup-flaky", "--policy", "structured", "--cassette", "x.json")
    assert code == 2 and "--cassette is only read by --model replay" in err


def test_list_shows_scenarios_policies_and_backends():
    code, out, _ = run_cli("list")
    assert code == 0
    assert "  coordinator-partial      Four sub-agents, one lookup times out twice" in out
    assert "  structured " in out and "model backends: simulated, claude, replay" in out


def test_python_dash_m_agents_exits_2_on_a_missing_argument():
    done = subprocess.run(
        [sys.executable, "-m", "agents", "run", "--policy", "starter"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 2 and "--scenario" in done.stderr
