"""``run_scenario``: what the tracer and the command line call to run one scenario, start to end.

It runs one scenario (a registered name, or a ``Scenario`` object) under one policy with one model
backend and reports the run to a recorder as it happens. Importing this module loads the loop and the
model backends' SDK.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .events import ListRecorder, Recorder
from .llm.base import ModelBackend
from .llm.registry import make_backend
from .loop import AgentSpec, RunResult, Session, run_agent
from .packs import Scenario
from .policies import Policy, get_policy
from .scenarios import get_scenario
from .vocabulary import ModelBackendName


def run_scenario(
    scenario: str | Scenario,
    policy: Policy | str | dict[str, Any],
    *,
    model: str | ModelBackend = ModelBackendName.SIMULATED,
    recorder: Recorder | None = None,
    cassette: str | Path | None = None,
    record_to: str | Path | None = None,
    seed: int = 0,
) -> RunResult:
    """Run ``scenario`` under ``policy`` with the ``model`` backend, reporting to ``recorder`` as it goes.

    Raises ``ValueError`` (``PolicyError`` for a policy) for an unknown scenario, policy or model, or an
    unreadable cassette; anything that goes wrong inside the run ends it with a stop reason instead.
    """
    found = scenario if isinstance(scenario, Scenario) else get_scenario(scenario)
    chosen = policy if isinstance(policy, Policy) else get_policy(policy)
    backend = model if isinstance(model, ModelBackend) else make_backend(model, cassette=cassette, record_to=record_to)
    recorder = recorder if recorder is not None else ListRecorder()
    session = Session(backend=backend, policy=chosen, recorder=recorder, seed=seed)
    try:
        prepared = found.prepare(session)
        spec = AgentSpec(
            scenario=found.name,
            task=found.task,
            system=prepared.system,
            toolbox=prepared.toolbox,
            persona=prepared.persona,
        )
        return run_agent(spec, policy=chosen, session=session, recorder=recorder, judge=prepared.judge)
    finally:
        backend.close(scenario=found.name, policy=chosen.name, seed=seed)
