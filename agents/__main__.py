"""Command line: ``python -m agents run --scenario NAME --policy NAME`` prints a run's trace, then its
findings (``agents.diagnosis``); ``list`` lists;
``verdicts`` runs every scenario under every preset (simulated) and prints the verdict table.

Scenario packs named in ``RLT_SCENARIO_PACKS`` are loaded first. Bad arguments, and a pack that cannot
be loaded, get a message naming what was wrong and what is expected, and exit code 2. A run that
crashed (the model API failed, a replay no longer matched, the harness raised, the run's time limit
ran out in a model call: ``--time-limit`` or ``RLT_RUN_TIME_LIMIT_S``) exits 1, after its trace, so a
script or CI notices; any other ending, a guard's or a refusal, is the run's result and exits 0.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any, TextIO

from .llm.base import TIME_LIMIT_ENV
from .llm.registry import make_backend
from .loop import RunResult
from .policies import PRESETS, PolicyError, get_policy
from .redaction import Redactor
from .run import run_scenario
from .scenarios import registry
from .trace import PrintRecorder
from .vocabulary import JUDGES, MODEL_JUDGE_LABEL, ModelBackendName, StopReason

USAGE_ERROR = 2
RUN_CRASHED = 1
DEFAULT_TIME_LIMIT_S = 900.0  # as a worker's RLT_RUN_TIME_LIMIT_S


def _policy_arg(value: str) -> Any:
    """A preset name, or a JSON object of settings (``{"base": "structured", "max_attempts": 5}``)."""
    if value.lstrip().startswith("{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise PolicyError(
                {"policy": f"not valid JSON ({exc.msg}); expected a preset name or a JSON object"}
            ) from None
    return value


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m agents", description="Run the repair-loop scenarios from a shell.")
    sub = top.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one scenario under one policy and print its trace")
    run.add_argument("--scenario", required=True, help="a scenario name (see: python -m agents list)")
    run.add_argument(
        "--policy",
        required=True,
        help=f"a preset ({', '.join(PRESETS)}) or a JSON object of settings with an optional base",
    )
    run.add_argument(
        "--model", default=ModelBackendName.SIMULATED, help=f"model backend: {', '.join(ModelBackendName)}"
    )
    run.add_argument("--cassette", help="a recorded cassette to replay (with --model replay)")
    run.add_argument("--record", help="write this run's model requests and responses to a cassette file")
    run.add_argument("--seed", type=int, default=0, help="seed for the backoff jitter")
    run.add_argument(
        "--judge",
        choices=JUDGES,
        default="rules",
        help=f"who judges the run: the scenario's rules (default), or claude: the rules and the {MODEL_JUDGE_LABEL} "
        "beside them (needs ANTHROPIC_API_KEY; model: RLT_JUDGE_MODEL, else ANTHROPIC_MODEL)",
    )
    run.add_argument(
        "--time-limit",
        help=f"seconds the run may take; no model call is given longer than what is left of it "
        f"(default: {TIME_LIMIT_ENV}, else {DEFAULT_TIME_LIMIT_S:g})",
    )
    sub.add_parser("list", help="list scenarios (by pack), policies and model backends")
    sub.add_parser(
        "verdicts", help="run every scenario under every preset with the simulated model; print the verdict table"
    )
    return top


def time_limit(value: str | None) -> float:
    """The run's time limit in seconds: ``--time-limit``, else ``RLT_RUN_TIME_LIMIT_S`` (as workers and
    ``manage.py run_agent`` read it), else 900; a value that is not a positive number is a ValueError."""
    named, raw = ("--time-limit", value) if value is not None else (TIME_LIMIT_ENV, os.environ.get(TIME_LIMIT_ENV))
    if raw is None or not raw.strip():
        return DEFAULT_TIME_LIMIT_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not (0 < seconds < math.inf):
        raise ValueError(f"{named} must be a number of seconds above 0; it is {raw!r}")
    return seconds


def list_all(out: TextIO) -> None:
    for loaded in registry().packs:
        print(f"scenarios in pack {loaded.name} ({loaded.title}; module {loaded.module}):", file=out)
        for s in loaded.scenarios:
            print(f"  {s.name:24} {s.title}", file=out)
    print("policies:", file=out)
    for p in PRESETS.values():
        print(f"  {p.name:24} {p.description}", file=out)
    print(f"model backends: {', '.join(ModelBackendName)} (simulated is deterministic rules, not Claude)", file=out)


def verdict_cell(verdict) -> str:
    """``pass``, or ``fail:`` and the checks that failed, for the verdict table."""
    if verdict.passed:
        return "pass"
    failed = [c for c in verdict.checks if not c["passed"]]
    short = [c["name"] + (f" ({c['detail']})" if 0 < len(c.get("detail") or "") <= 40 else "") for c in failed]
    return "fail: " + "; ".join(short)


def verdict_table() -> str:
    """Every registered scenario under every preset (simulated model), as the Markdown table in docs/agents.md."""
    lines = [
        "| scenario | " + " | ".join(PRESETS) + " |",
        "|---|" + "---|" * len(PRESETS),
    ]
    for name in registry().scenarios:
        cells = [verdict_cell(run_scenario(name, policy).end.verdict) for policy in PRESETS]
        lines.append(f"| {name} | " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    lines += ["", "What each judge checks:", "", "| scenario | pack | checks |", "|---|---|---|"]
    for name, scenario in registry().scenarios.items():
        checks = "; ".join(scenario.judge_checks) or "(a judge function)"
        lines.append(f"| {name} | {registry().pack_of[name].name} | {checks.replace('|', chr(92) + '|')} |")
    return "\n".join(lines)


def run(args: argparse.Namespace, out: TextIO) -> RunResult:
    known = registry().scenarios
    if args.scenario not in known:
        raise ValueError(f"unknown scenario {args.scenario!r}; expected one of: {', '.join(known)}")
    scenario = known[args.scenario]
    policy = get_policy(_policy_arg(args.policy))
    if args.cassette and args.model != ModelBackendName.REPLAY:
        raise ValueError("--cassette is only read by --model replay")
    backend = make_backend(args.model, cassette=args.cassette, record_to=args.record)
    print(f"model: {backend.label} [{backend.model}]", file=out)
    print(f"scenario: {scenario.name} ({scenario.title})", file=out)
    print(f"policy: {policy.name} ({policy.description or 'custom variant'})", file=out)
    print(f"task: {scenario.task}", file=out)
    print(file=out)
    limit = time_limit(args.time_limit)
    result = run_scenario(
        scenario.name,
        policy,
        model=backend,
        recorder=PrintRecorder(out),
        seed=args.seed,
        time_limit_s=limit,
        judge=args.judge,
    )
    print_findings(result, out)
    if args.record:
        print(f"recorded to {args.record}", file=out)
    return result


def print_findings(result: RunResult, out: TextIO, indent: str = "") -> None:
    """The run's findings (``agents.diagnosis``) after its verdict, and each sub-agent's under its label."""
    from .diagnosis.report import format_findings
    from .diagnosis.rules import diagnose

    print(file=out)
    text = format_findings(diagnose(start=result.start, steps=result.steps, end=result.end))
    text = Redactor.from_environ().text(text)  # a finding quotes what the tool said, secrets and all
    for line in text.splitlines():
        print(indent + line, file=out)
    for child in result.children:
        print(f"{indent}  [{child.label}]", file=out)
        print_findings(child, out, indent + "    ")


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        if args.command == "list":
            list_all(out)
        elif args.command == "verdicts":
            print(verdict_table(), file=out)
        elif run(args, out).end.stop_reason == StopReason.CRASHED:
            print(f"error: the run crashed (see its trace above); exit code {RUN_CRASHED}", file=err)
            return RUN_CRASHED
    except ValueError as exc:  # PolicyError is a ValueError too
        print(f"error: {exc}", file=err)
        return USAGE_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
