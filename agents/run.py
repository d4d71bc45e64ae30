"""``run_scenario``: what the tracer and the command line call to run one scenario, start to end.

It runs one scenario (a registered name, or a ``Scenario`` object) under one policy with one model
backend and reports the run to a recorder as it happens. Importing this module loads the loop and the
model backends' SDK.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from .events import ListRecorder, ModelVerdict, Recorder
from .llm.base import ModelBackend, ReplayBackend
from .llm.registry import make_backend
from .loop import AgentSpec, RunResult, Session, run_agent
from .packs import Scenario
from .persona import Persona
from .policies import Policy, get_policy
from .scenarios import get_scenario
from .vocabulary import JUDGES, ModelBackendName, ToolTransport


def run_scenario(
    scenario: str | Scenario,
    policy: Policy | str | dict[str, Any],
    *,
    model: str | ModelBackend = ModelBackendName.SIMULATED,
    recorder: Recorder | None = None,
    cassette: str | Path | None = None,
    record_to: str | Path | None = None,
    seed: int = 0,
    mcp_server: str = "stdio",
    time_limit_s: float | None = None,
    deadline: float | None = None,
    judge: str = "rules",
) -> RunResult:
    """Run ``scenario`` under ``policy`` with the ``model`` backend, reporting to ``recorder`` as it goes.

    Raises ``ValueError`` (``PolicyError`` for a policy) for an unknown scenario, policy or model, or an
    unreadable cassette; anything that goes wrong inside the run ends it with a stop reason instead.

    Under a policy whose ``tool_transport`` is ``mcp`` the tools are served by an MCP server
    (``agents.mcp_client``): a subprocess over stdio, or with ``mcp_server="memory"`` the same server
    in this process over the SDK's memory streams. A scenario that cannot be served over MCP is a
    ``ValueError``.

    ``time_limit_s`` bounds the run's model calls: none is given longer than what is left of it
    (from ``deadline``, a ``time.monotonic()`` value, when given), and a call still failing then ends
    the run ``crashed`` saying so. A replay runs with the seed its cassette was recorded with, so the
    harness's backoff jitter comes out the same.

    ``judge="claude"`` asks the model judge (``agents.model_judge``) as well as the scenario's rules; its
    verdict goes on the run's end beside theirs. Any other value than ``rules`` or ``claude`` is a
    ``ValueError``.
    """
    if judge not in JUDGES:
        raise ValueError(f"judge: expected one of {', '.join(JUDGES)}; got {judge!r}")
    found = scenario if isinstance(scenario, Scenario) else get_scenario(scenario)
    chosen = policy if isinstance(policy, Policy) else get_policy(policy)
    backend = model if isinstance(model, ModelBackend) else make_backend(model, cassette=cassette, record_to=record_to)
    recorder = recorder if recorder is not None else ListRecorder()
    if isinstance(backend, ReplayBackend) and isinstance(backend.cassette.meta.get("seed"), int):
        seed = backend.cassette.meta["seed"]
    session = Session(
        backend=backend, policy=chosen, recorder=recorder, seed=seed, deadline=deadline, time_limit_s=time_limit_s
    )
    second = None
    if judge == "claude":
        from .model_judge import model_judge

        def second(result: RunResult) -> ModelVerdict:
            return model_judge(found, result)

    try:
        if chosen.tool_transport == ToolTransport.MCP:
            return _run_over_mcp(found, chosen, session, recorder, mcp_server, second)
        prepared = found.prepare(session)
        spec = AgentSpec(
            scenario=found.name,
            task=found.task,
            system=prepared.system,
            toolbox=prepared.toolbox,
            persona=prepared.persona,
        )
        return run_agent(
            spec, policy=chosen, session=session, recorder=recorder, judge=prepared.judge, model_judge=second
        )
    finally:
        backend.close(scenario=found.name, policy=chosen.name, seed=seed)


def _run_over_mcp(
    scenario: Scenario, policy: Policy, session: Session, recorder: Recorder, server: str, model_judge: Any = None
) -> RunResult:
    """The run with its tools on an MCP server: the world, and so the judge, live in the server."""
    from .mcp_client import mcp_toolbox  # loads the mcp SDK only for a run that uses it

    with mcp_toolbox(scenario, server=server) as toolbox:  # type: ignore[arg-type]
        spec = AgentSpec(
            scenario=scenario.name,
            task=scenario.task,
            system=scenario.system,
            toolbox=toolbox,
            persona=replace(scenario.persona or Persona(), opening=scenario.opening),
        )
        return run_agent(
            spec, policy=policy, session=session, recorder=recorder, judge=toolbox.judge, model_judge=model_judge
        )
