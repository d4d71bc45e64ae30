"""Scenario packs: loading them from RLT_SCENARIO_PACKS, the example pack under every preset, and the
simulated model's generic rules on a pack that has no persona."""

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agents import lessons
from agents.__main__ import main
from agents.judges import Judge, answered, gives
from agents.packs import Pack, PackError, Scenario, call, tool
from agents.policies import PRESETS
from agents.run import run_scenario
from agents.scenarios import ENV_VAR, get_scenario, registry, registry_load, registry_reset, scenario_names
from agents.trace import format_step
from agents.vocabulary import StepKind
from examples import inventory_pack
from examples.inventory_pack import PACK as INVENTORY
from examples.inventory_pack import Stockroom, check_stock, reserve_stock

ROOT = Path(__file__).resolve().parents[2]
P, F = True, False
# scenario: verdict under fragile, starter, message, structured, model-retries, nested-flag-bug,
# swallowed-errors
EXPECTED = {
    "inventory-warehouse-name": (F, F, P, P, P, P, F),
    "inventory-short-stock": (F, F, P, P, P, P, F),
    "inventory-flaky-scanner": (F, P, P, P, F, F, F),
}


@pytest.fixture
def packs_env(monkeypatch):
    """Set RLT_SCENARIO_PACKS for this test; the registry is loaded again from it, and forgotten after."""

    def set_packs(value: str) -> None:
        monkeypatch.setenv(ENV_VAR, value)
        registry_reset()

    yield set_packs
    monkeypatch.delenv(ENV_VAR, raising=False)
    registry_reset()


@pytest.fixture
def pack_dir(tmp_path, monkeypatch):
    """A folder on sys.path to write pack modules into."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(module: str, source: str) -> str:
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
        return module

    return write


def tool_steps(result):
    return [s for s in result.steps if s.kind == StepKind.TOOL_USE]


# --- loading ------------------------------------------------------------------------------------


def test_the_lessons_are_the_first_pack_and_a_module_named_in_the_environment_follows(packs_env):
    packs_env("examples.inventory_pack")
    assert [(p.name, p.module) for p in registry().packs] == [
        ("lessons", "agents.lessons"),
        ("inventory", "examples.inventory_pack"),
    ]
    assert scenario_names()[-3:] == list(EXPECTED)
    assert get_scenario("inventory-short-stock") is INVENTORY.scenarios[1]


def test_without_the_variable_only_the_lessons_are_loaded(packs_env):
    packs_env("")
    assert [p.name for p in registry().packs] == ["lessons"] and "inventory-short-stock" not in scenario_names()


def test_a_module_that_cannot_be_imported_is_named():
    with pytest.raises(PackError) as caught:
        registry_load("examples.inventory_pack, mypkg.nope")
    assert str(caught.value) == (
        f"{ENV_VAR}: could not import 'mypkg.nope': ModuleNotFoundError: No module named 'mypkg'"
    )


def test_a_module_without_a_pack_or_a_malformed_path_is_named():
    with pytest.raises(PackError, match=f"{ENV_VAR}: module 'agents.errors' defines no PACK"):
        registry_load("agents.errors")
    with pytest.raises(PackError, match=f"{ENV_VAR}: 'my-pack.py' is not a Python module path"):
        registry_load("my-pack.py")


def test_a_scenario_that_is_wrong_at_import_names_the_module_and_the_scenario(pack_dir):
    pack_dir(
        "half_pack",
        """
        from pydantic import BaseModel
        from agents.packs import Judge, Pack, Scenario, answered, tool

        class In(BaseModel):
            sku: str

        @tool(In)
        def check(world, sku):
            "Check a product."
            return {}

        PACK = Pack("half", "Half a pack", [Scenario("half-done", "Half", "Check LMP-001.", tools=[check],
                                                     world=dict, judge=Judge(answered()))])
        """,
    )
    with pytest.raises(PackError) as caught:
        registry_load("half_pack")
    assert str(caught.value).startswith(
        f"{ENV_VAR}: could not import 'half_pack': PackError: scenario 'half-done': declare the simulated "
        "model's opening call(s)"
    )


def test_a_scenario_name_another_pack_uses_is_refused_naming_both_modules(pack_dir):
    pack_dir(
        "copycat_pack",
        """
        from dataclasses import replace

        from agents.packs import Pack
        from examples.inventory_pack import PACK as INVENTORY

        PACK = Pack("copycat", "Copycat", [replace(INVENTORY.scenarios[0], name="refund-too-old")])
        """,
    )
    with pytest.raises(PackError) as caught:
        registry_load("copycat_pack")
    assert str(caught.value) == (
        f"{ENV_VAR}: scenario 'refund-too-old' of pack 'copycat' (module 'copycat_pack') is already defined by "
        "pack 'lessons' (module 'agents.lessons'); rename one of them"
    )


def test_two_packs_with_a_scenario_of_the_same_name_are_refused(pack_dir):
    pack_dir(
        "twin_pack",
        """
        from agents.packs import Pack
        from examples.inventory_pack import PACK as INVENTORY

        PACK = Pack("inventory-twin", "Twin", INVENTORY.scenarios[:1])
        """,
    )
    with pytest.raises(PackError) as caught:
        registry_load("examples.inventory_pack,twin_pack")
    assert str(caught.value) == (
        f"{ENV_VAR}: scenario 'inventory-warehouse-name' of pack 'inventory-twin' (module 'twin_pack') is already "
        "defined by pack 'inventory' (module 'examples.inventory_pack'); rename one of them"
    )


def test_a_pack_name_that_is_taken_is_refused(pack_dir):
    pack_dir(
        "lessons_again",
        "from examples.inventory_pack import PACK as _P\nfrom agents.packs import Pack\n"
        "PACK = Pack('lessons', 'Lessons again', _P.scenarios)\n",
    )
    with pytest.raises(PackError, match="pack 'lessons' in module 'lessons_again' has the name of the pack in module"):
        registry_load("lessons_again")


def test_the_command_line_says_which_pack_failed_and_exits_2(packs_env):
    packs_env("examples.inventory_pack,mypkg.nope")
    out, err = io.StringIO(), io.StringIO()
    assert main(["list"], out, err) == 2
    assert err.getvalue() == (
        f"error: {ENV_VAR}: could not import 'mypkg.nope': ModuleNotFoundError: No module named 'mypkg'\n"
    )


def test_the_command_line_lists_scenarios_by_pack(packs_env):
    packs_env("examples.inventory_pack")
    out = io.StringIO()
    assert main(["list"], out, io.StringIO()) == 0
    listed = out.getvalue()
    assert "scenarios in pack inventory (Inventory (example pack); module examples.inventory_pack):" in listed
    assert listed.index("pack lessons") < listed.index("  refund-too-old ") < listed.index("pack inventory")
    assert listed.index("pack inventory") < listed.index("  inventory-short-stock ")


def test_listing_the_scenarios_of_every_pack_loads_neither_the_sdk_nor_the_loop():
    probe = (
        "import json, os, sys\n"
        f"os.environ[{ENV_VAR!r}] = 'examples.inventory_pack'\n"
        "from agents.scenarios import scenario_names\n"
        "names = scenario_names()\n"
        "print(json.dumps([len(names), sorted(sys.modules)]))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    count, loaded = json.loads(done.stdout)
    assert count == len(lessons.SCENARIOS) + len(inventory_pack.PACK.scenarios)
    heavy = {"anthropic", "httpx2", "agents.loop", "agents.run", "agents.llm.base", "agents.llm.simulated"}
    assert not {m for m in loaded if m.split(".")[0] in heavy or m in heavy}


# --- the example pack under the presets -----------------------------------------------------------


def test_the_example_pack_is_written_only_against_the_documented_interface():
    source = Path(inventory_pack.__file__).read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert [i for i in imports if "agents" in i] == ["from agents.packs import ("]


@pytest.mark.parametrize("policy", list(PRESETS))
@pytest.mark.parametrize("scenario", list(EXPECTED))
def test_the_example_pack_gets_its_expected_verdict_under_each_preset(scenario, policy):
    result = run_scenario(INVENTORY.scenarios[list(EXPECTED).index(scenario)], policy)
    verdict = result.end.verdict
    assert verdict.passed is EXPECTED[scenario][list(PRESETS).index(policy)], verdict.reason
    assert [c["name"] for c in verdict.checks] == get_scenario_checks(scenario)
    assert verdict.reason == "; ".join(
        f"{c['name']} ✓" + (f" ({c['found']})" if c["found"] else "")
        if c["passed"]
        else f"{c['name']} ✗" + (f" ({c['detail']})" if c["detail"] else "")
        for c in verdict.checks
    )


def get_scenario_checks(name):
    return next(s for s in INVENTORY.scenarios if s.name == name).judge_checks


def test_short_stock_under_starter_fails_naming_each_check_with_what_was_found():
    result = run_scenario(INVENTORY.scenarios[1], "starter")
    assert result.end.verdict.reason == (
        "answered ✓; nothing reserved ✓; reservation asked for once ✗ (asked 6 times); "
        "answer gives the 3 units in stock ✗"
    )


# --- the generic rules, on a pack with no persona -------------------------------------------------


def test_the_model_repairs_an_input_when_the_error_names_the_field_and_the_allowed_values():
    result = run_scenario(INVENTORY.scenarios[0], "message")
    first, second = tool_steps(result)
    assert first.result_content == "Invalid input -> warehouse: Input should be 'north' or 'south'"
    assert second.input == {"sku": "LMP-001", "warehouse": "north", "quantity": 5} and not second.is_error
    assert "R-0001" in result.end.final_answer


def test_the_model_repairs_an_unknown_value_from_the_values_the_error_lists():
    scenario = Scenario(
        "inventory-unknown-sku",
        "An unknown product code",
        "How many LMP-003 does the south warehouse have?",
        tools=[check_stock],
        world=Stockroom,
        judge=Judge(answered()),
        opening=[call("check_stock", sku="LMP-003", warehouse="south")],
    )
    first, second = tool_steps(run_scenario(scenario, "structured"))
    assert first.result_content["error"]["message"] == "unknown sku 'LMP-003'; known skus: LMP-001, LMP-002"
    assert second.input == {"sku": "LMP-001", "warehouse": "south"} and not second.is_error


def test_the_model_explains_a_refusal_that_no_retry_changes_using_its_message():
    result = run_scenario(INVENTORY.scenarios[1], "structured")
    (step,) = tool_steps(result)
    assert (step.category, step.retryable, len(step.attempts)) == ("business", False, 1)
    answer = result.end.final_answer
    assert "only 3 units of LMP-002 are in the north warehouse" in answer and "whether 3 will do" in answer


def test_the_model_sends_the_same_call_again_once_when_told_only_error_then_gives_up():
    result = run_scenario(INVENTORY.scenarios[1], "starter")
    first, second = tool_steps(result)
    assert first.input == second.input and first.result_content == second.result_content == {
        "error": {"message": "Error"}
    }
    assert "generic error" in result.end.final_answer


def test_the_model_retries_a_retryable_failure_once_when_the_system_prompt_asks_it_to():
    scenario = Scenario(
        "inventory-one-timeout",
        "One timeout",
        "How many LMP-001 are in the north warehouse?",
        tools=[check_stock],
        world=lambda: Stockroom(scanner_timeouts=1),
        judge=Judge(answered(), gives(7)),
        opening=[call("check_stock", sku="LMP-001", warehouse="north")],
    )
    result = run_scenario(scenario, "model-retries")
    first, second = tool_steps(result)
    assert first.result_content["error"]["isRetryable"] is True and len(first.attempts) == 1
    assert second.input == first.input and not second.is_error
    assert result.end.verdict.passed
    # The same harness without the prompt's line: the model is not told to retry, and does not.
    unasked = run_scenario(scenario, {"base": "model-retries", "name": "unprompted", "ask_model_to_retry": False})
    assert len(tool_steps(unasked)) == 1 and not unasked.end.verdict.passed


def test_the_model_does_not_retry_what_the_harness_already_retried_to_exhaustion():
    scenario = Scenario(
        "inventory-scanner-down",
        "The scanner stays down",
        "How many LMP-001 are in the north warehouse?",
        tools=[check_stock],
        world=lambda: Stockroom(scanner_timeouts=9),
        judge=Judge(answered()),
        opening=[call("check_stock", sku="LMP-001", warehouse="north")],
    )
    result = run_scenario(scenario, "structured")
    (step,) = tool_steps(result)
    assert len(step.attempts) == 3 and "still failing after 3 attempts" in step.result_content["error"]["message"]
    assert result.end.final_answer.endswith("Please try again later or use another source.")


def test_the_models_moves_do_not_depend_on_what_a_packs_tools_are_called():
    def renamed(spec, name):
        return tool(spec.input_model, name=name, description=spec.description)(spec.fn)

    original = INVENTORY.scenarios[0]
    other = Scenario(
        "renamed-tools",
        original.title,
        original.task,
        tools=[renamed(check_stock, "stock_level"), renamed(reserve_stock, "hold_units")],
        world=original.world,
        judge=original.judge,
        opening=[call("hold_units", **original.opening[0].input)],
    )
    for policy in PRESETS:
        a, b = run_scenario(original, policy), run_scenario(other, policy)
        assert [(s.input, s.is_error) for s in a.steps] == [(s.input, s.is_error) for s in b.steps]
        assert (a.end.final_answer or "") == (b.end.final_answer or "").replace("hold_units", "reserve_stock")
        assert a.end.verdict.passed is b.end.verdict.passed


# --- recorded, replayed, and through the claude backend ---------------------------------------------


def test_a_pack_run_records_a_cassette_that_replays_offline(packs_env, tmp_path):
    packs_env("examples.inventory_pack")
    cassette = tmp_path / "inventory.json"
    out = io.StringIO()
    args = ["run", "--scenario", "inventory-warehouse-name", "--policy", "structured"]
    assert main([*args, "--record", str(cassette)], out, io.StringIO()) == 0
    replayed = io.StringIO()
    assert main([*args, "--model", "replay", "--cassette", str(cassette)], replayed, io.StringIO()) == 0
    assert out.getvalue().splitlines()[1:-1] == replayed.getvalue().splitlines()[1:]
    assert "verdict: PASS" in replayed.getvalue()


def test_claude_gets_the_packs_tool_schemas_and_is_judged_on_the_outcome_not_its_words():
    from agents.llm.claude import ClaudeBackend
    from tests.agents.test_backends import ScriptedClaude

    def use(id_, **args):
        return {"type": "tool_use", "id": id_, "name": "reserve_stock", "input": args}

    fake = ScriptedClaude(
        [
            [use("toolu_1", sku="LMP-001", warehouse="North", quantity=5)],
            [
                {"type": "text", "text": "Lowercase it is."},
                use("toolu_2", sku="LMP-001", warehouse="north", quantity=5),
            ],
            [{"type": "text", "text": "All set: five lamps are held for you (reservation r-0001), two remain."}],
        ]
    )
    backend = ClaudeBackend(transport=fake, environ={"ANTHROPIC_API_KEY": "sk-test"})
    result = run_scenario(INVENTORY.scenarios[0], "structured", model=backend)
    first = fake.requests[0]["body"]
    assert [t["name"] for t in first["tools"]] == ["check_stock", "reserve_stock"]
    assert first["tools"][1]["input_schema"]["properties"]["warehouse"]["enum"] == ["north", "south"]
    sent = fake.requests[1]["body"]["messages"][-1]["content"][0]
    assert sent["is_error"] is True and "warehouse: Input should be 'north' or 'south'" in sent["content"]
    assert format_step(result.steps[1]).startswith("step 2: reserve_stock(")
    assert result.end.verdict.passed, result.end.verdict.reason


def test_every_built_in_scenario_is_in_the_lessons_pack_with_a_judge_of_named_checks():
    lessons = registry_load("").packs[0]
    assert lessons.module == "agents.lessons"
    for scenario in lessons.scenarios:
        assert scenario.judge_checks, scenario.name
        assert scenario.opening, scenario.name


def test_a_pack_refuses_two_scenarios_of_one_name():
    with pytest.raises(PackError, match="pack 'twice': two scenarios are named 'inventory-short-stock'"):
        Pack("twice", "Twice", [INVENTORY.scenarios[1], INVENTORY.scenarios[1]])
