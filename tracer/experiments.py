"""Experiments: launching them, and the dashboard's other writes about what runs and how it is judged.

``experiment_launch`` validates every input and checks that the task broker answers, creates one
queued run per scenario × policy × repeat in one transaction and sends their tasks once it commits
(through ``delivery``); ``run_create`` makes one queued run with a snapshot of its policy. Policy
variants (``policy_variant_create``) are written here too. Executing a run is ``execution``'s,
recording it ``recording``'s, reviewing it ``reviews``'.

HackSoft style: keyword-only typed arguments, ``<entity>_<action>`` names; each raises
``ValidationError`` naming every invalid field, and then writes nothing.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents import names
from agents.policies import PolicyError, policy_from_dict
from agents.vocabulary import JUDGES, ModelBackendName

from . import delivery
from .models import Experiment, PolicyVariant, Run

MAX_REPEATS = 50
# The slowest pace a launch may ask for: seconds a worker pauses after each recorded step.
STEP_DELAY_MAX_S = 10.0
MAX_EXPERIMENT_RUNS = 2000
# Backends an experiment can use. ``replay`` needs a cassette per run: use ``run_agent --cassette``.
EXPERIMENT_BACKENDS = (ModelBackendName.SIMULATED, ModelBackendName.CLAUDE)


def _scenario_names() -> list[str]:
    from agents.scenarios import scenario_names  # the built-in and RLT_SCENARIO_PACKS packs; no SDK

    return list(scenario_names())


# --- validation ------------------------------------------------------------------------------


def _check_names(*, values: Any, known: list[str], what: str) -> tuple[list[str], list[str]]:
    """Return (clean values, errors) for a list of names that must each be one of ``known``."""
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        return [], [f"expected a list of {what} names, got {type(values).__name__}"]
    if not values:
        return [], [f"choose at least one {what}; expected one or more of: {', '.join(known)}"]
    errors = []
    clean: list[str] = []
    for value in values:
        if value not in known:
            errors.append(f"unknown {what} {value!r}; expected one of: {', '.join(known)}")
        elif value not in clean:
            clean.append(value)
    return clean, errors


def model_backend_errors(*, model_backend: Any, allowed: tuple[str, ...]) -> list[str]:
    """What is wrong with choosing ``model_backend`` here (empty when it can run)."""
    known = [b for b in ModelBackendName if b in allowed] or list(allowed)
    if model_backend not in known:
        if model_backend == ModelBackendName.REPLAY:
            return [
                "replay needs a recorded cassette for each run; replay one run with "
                "`manage.py run_agent --model replay --cassette FILE`"
            ]
        return [f"unknown model backend {model_backend!r}; expected one of: {', '.join(known)}"]
    if model_backend == ModelBackendName.CLAUDE and not settings.ANTHROPIC_API_KEY:
        return [
            "the claude backend calls the Anthropic API: set ANTHROPIC_API_KEY in the environment of the "
            "web process and the workers, or choose simulated"
        ]
    return []


def _policy_variants(names: list[str]) -> dict[str, PolicyVariant]:
    return {v.name: v for v in PolicyVariant.objects.filter(name__in=names)}


# --- launching -------------------------------------------------------------------------------


def run_create(
    *,
    scenario: str,
    policy: PolicyVariant,
    model_backend: str = ModelBackendName.SIMULATED,
    experiment: Experiment | None = None,
    judge: str = "rules",
) -> Run:
    """A queued run of ``scenario`` under ``policy``, with a snapshot of the policy's settings; with
    ``judge="claude"`` the model judge judges it too (``agents.model_judge``)."""
    model_name = settings.ANTHROPIC_MODEL if model_backend == ModelBackendName.CLAUDE else ""
    return Run.objects.create(
        experiment=experiment,
        scenario=scenario,
        policy=policy,
        policy_name=policy.name,
        policy_settings=dict(policy.settings),
        model_backend=model_backend,
        model_name=model_name,
        status=Run.Status.QUEUED,
        judge=judge if judge != "rules" else None,
    )


def experiment_launch(
    *,
    scenarios: list[str],
    policies: list[str],
    model_backend: str = ModelBackendName.SIMULATED,
    repeats: int = 1,
    user=None,
    name: str = "",
    step_delay_s: float | None = None,
    judge: str = "rules",
) -> Experiment:
    """Create an experiment with one queued run per scenario × policy × repeat and enqueue them.

    ``step_delay_s`` is its pace: the seconds a worker pauses after each step of its runs, from 0 to
    ``STEP_DELAY_MAX_S``, so a person can watch steps arrive; None leaves it to the worker's
    ``RLT_STEP_DELAY_S``. ``judge``: ``rules`` (the scenarios' rules alone) or ``claude`` (the model judge
    too, beside them; its calls need ``ANTHROPIC_API_KEY`` in the workers' environment).

    Raises ``ValidationError`` whose ``message_dict`` names each invalid field and what is expected,
    or (under ``NON_FIELD_ERRORS``) that the task broker is not reachable; then nothing is written.
    Tasks are sent only once the transaction commits; if sending fails then, the runs stay queued
    and the sweep sends them again (``execution.runs_sweep``).
    """
    errors: dict[str, list[str]] = {}
    clean_scenarios, scenario_errors = _check_names(values=scenarios, known=_scenario_names(), what="scenario")
    if scenario_errors:
        errors["scenarios"] = scenario_errors
    variants = dict(PolicyVariant.objects.values_list("name", "archived_at"))
    known_policies = [name for name, archived_at in variants.items() if archived_at is None]
    listed = policies if isinstance(policies, (list, tuple)) else []
    archived = [p for p in listed if isinstance(p, str) and variants.get(p) is not None]
    clean_policies, policy_errors = _check_names(
        values=[p for p in policies if p not in archived] or policies if archived else policies,
        known=known_policies,
        what="policy",
    )
    if archived:  # named as archived, not as unknown
        policy_errors = [e for e in policy_errors if not any(repr(p) in e for p in archived)] + [
            f"the policy {p!r} is archived; unarchive it on the Policy variants page to launch it" for p in archived
        ]
    if policy_errors:
        errors["policies"] = policy_errors
    backend_errors = model_backend_errors(model_backend=model_backend, allowed=EXPERIMENT_BACKENDS)
    if backend_errors:
        errors["model_backend"] = backend_errors
    if judge not in JUDGES:
        errors["judge"] = [f"expected one of {', '.join(JUDGES)}, got {judge!r}"]
    if isinstance(repeats, bool) or not isinstance(repeats, int) or not 1 <= repeats <= MAX_REPEATS:
        errors["repeats"] = [f"expected a whole number from 1 to {MAX_REPEATS}, got {repeats!r}"]
    if not isinstance(name, str) or len(name) > 200:
        errors["name"] = ["expected text of at most 200 characters"]
    if step_delay_s is not None and (
        isinstance(step_delay_s, bool)
        or not isinstance(step_delay_s, int | float)
        or not 0 <= step_delay_s <= STEP_DELAY_MAX_S  # NaN fails this too
    ):
        errors["step_delay_s"] = [
            f"expected seconds between steps from 0 to {STEP_DELAY_MAX_S:g} (or none for the worker's own), "
            f"got {step_delay_s!r}"
        ]
    if not errors:
        total = len(clean_scenarios) * len(clean_policies) * repeats
        if total > MAX_EXPERIMENT_RUNS:
            errors["repeats"] = [
                f"{len(clean_scenarios)} scenarios × {len(clean_policies)} policies × {repeats} repeats is "
                f"{total} runs; expected at most {MAX_EXPERIMENT_RUNS}: choose fewer"
            ]
    if errors:
        raise ValidationError(errors)
    try:
        delivery.broker_check()
    except delivery.BrokerUnreachable as exc:
        raise ValidationError({NON_FIELD_ERRORS: [str(exc)]}) from None

    variants = _policy_variants(clean_policies)
    with transaction.atomic():
        experiment = Experiment.objects.create(
            name=name.strip(),
            scenarios=clean_scenarios,
            policies=clean_policies,
            repeats=repeats,
            model_backend=model_backend,
            model_name=settings.ANTHROPIC_MODEL if model_backend == ModelBackendName.CLAUDE else "",
            total_runs=len(clean_scenarios) * len(clean_policies) * repeats,
            step_delay_s=None if step_delay_s is None else float(step_delay_s),
            created_by=user if user is not None and getattr(user, "is_authenticated", False) else None,
        )
        runs = []
        for _ in range(repeats):
            for scenario in clean_scenarios:
                for policy_name in clean_policies:
                    runs.append(
                        run_create(
                            scenario=scenario,
                            policy=variants[policy_name],
                            model_backend=model_backend,
                            experiment=experiment,
                            judge=judge,
                        )
                    )
        # Sent once this commits: the sweep sends a run again if no worker has taken it a while later.
        Run.objects.filter(experiment=experiment).update(enqueued_at=timezone.now(), send_count=1)
        delivery.runs_send_on_commit(run_ids=[run.pk for run in runs])
    return experiment


def policy_settings_validate(*, data: dict[str, Any]) -> dict[str, Any]:
    """The settings of a policy variant built from ``data``; ``ValidationError`` per invalid field."""
    try:
        return policy_from_dict(data).settings()
    except PolicyError as exc:
        raise ValidationError({field: [message] for field, message in exc.errors.items()}) from None


# --- policy variants -----------------------------------------------------------------------


def policy_variant_create(*, name: str, settings: dict[str, Any], user=None) -> PolicyVariant:
    """A user's policy variant built from a preset (``settings["base"]``) and the settings that differ.

    Raises ``ValidationError`` whose ``message_dict`` names each invalid field (a taken name too);
    then nothing is written.
    """
    errors: dict[str, list[str]] = {}
    clean: dict[str, Any] = {}
    try:
        clean = policy_settings_validate(data={**settings, "name": name})
    except ValidationError as exc:
        errors = exc.message_dict
        if "name" in errors:
            errors["name"] = [names.name_problem(name, limit=names.POLICY_NAME_MAX)]
    taken = f"a policy named {name!r} already exists; choose another name"
    if PolicyVariant.objects.filter(name=name).exists():
        errors.setdefault("name", []).append(taken)
    if errors:
        raise ValidationError(errors)
    try:
        with transaction.atomic():  # a savepoint: the caller's transaction survives a lost race
            return PolicyVariant.objects.create(
                name=clean["name"],
                description=clean["description"],
                settings=clean,
                is_preset=False,
                created_by=user if user is not None and getattr(user, "is_authenticated", False) else None,
            )
    except IntegrityError:
        # Someone created the same name between the check above and this insert.
        if PolicyVariant.objects.filter(name=clean["name"]).exists():
            raise ValidationError({"name": [taken]}) from None
        raise


def policy_variant_archive(*, name: str, archived: bool) -> PolicyVariant:
    """Archive the variant named ``name`` (or bring it back): an archived one is left out of the launch
    form and of the Policies page's matrix unless asked for; its runs are not touched. Raises
    ``ValidationError`` naming the variant when there is none of that name."""
    variant = PolicyVariant.objects.filter(name=name).first()
    if variant is None:
        raise ValidationError({"name": [f"there is no policy variant named {name!r}"]})
    if archived != (variant.archived_at is not None):
        variant.archived_at = timezone.now() if archived else None
        variant.save(update_fields=["archived_at"])
    return variant
