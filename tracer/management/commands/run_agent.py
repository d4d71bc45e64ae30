from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from agents.__main__ import _policy_arg
from agents.llm.replay import Cassette
from agents.policies import Policy, PolicyError, get_policy
from agents.trace import PrintRecorder
from agents.vocabulary import JUDGES, MODEL_JUDGE_LABEL, ModelBackendName
from tracer.execution import run_execute
from tracer.experiments import model_backend_errors, policy_variant_create, run_create
from tracer.models import PolicyVariant, Run


class _Text:
    """A text stream over a command's ``stdout`` that writes exactly what it is given."""

    def __init__(self, wrapper) -> None:
        self.wrapper = wrapper

    def write(self, text: str) -> int:
        self.wrapper.write(text, ending="")
        return len(text)

    def flush(self) -> None:
        self.wrapper.flush()


class TracePrinter(PrintRecorder):
    """``python -m agents run``'s printer, with the same header for the top-level run."""

    def run_started(self, start) -> None:
        if not self.indent:
            model = start.model_backend
            if model == ModelBackendName.SIMULATED:
                model += " (deterministic rules, not Claude)"
            print(f"model: {model} [{start.model_name}]", file=self.out)
            print(f"scenario: {start.scenario}", file=self.out)
            print(f"policy: {start.policy_name}", file=self.out)
            print(f"task: {start.task}\n", file=self.out, flush=True)
        super().run_started(start)


def policy_of(value: str) -> tuple[PolicyVariant | None, Policy | None, str]:
    """The variant ``--policy`` names: a row by name, or a JSON object of settings (``agents.__main__``'s
    reading of it), which is the row of that name when its settings are the same, or a new variant to
    make (returned as its ``Policy``, not yet written). The third item says what is wrong, else ""."""
    if not value.lstrip().startswith("{"):
        found = PolicyVariant.objects.filter(name=value).first()
        if found is None:
            names = ", ".join(PolicyVariant.objects.values_list("name", flat=True))
            return None, None, f"unknown policy {value!r}; expected one of: {names}, or a JSON object of settings"
        return found, None, ""
    try:
        variant = get_policy(_policy_arg(value))
    except PolicyError as exc:
        return None, None, str(exc)
    found = PolicyVariant.objects.filter(name=variant.name).first()
    if found is None:
        return None, variant, ""
    if found.settings != variant.settings():
        return (
            None,
            None,
            (
                f"a policy named {variant.name!r} already exists with other settings; give the variant its own "
                '"name" (lowercase letters, digits, - and _)'
            ),
        )
    return found, None, ""


class Command(BaseCommand):
    help = "Execute one recorded run in this process and print its trace (like `python -m agents run`)."

    def add_arguments(self, parser):
        parser.add_argument("--scenario", required=True)
        parser.add_argument(
            "--policy",
            required=True,
            help="a policy variant's name (starter, structured…) or a JSON object of settings with an optional "
            'base, as python -m agents run takes it: \'{"base": "structured", "name": "s5", "max_attempts": 5}\'',
        )
        parser.add_argument("--model", default=ModelBackendName.SIMULATED, help=", ".join(ModelBackendName))
        parser.add_argument("--cassette", help="the recorded cassette to replay (with --model replay)")
        parser.add_argument("--record", help="also record the model exchange to this cassette file")
        parser.add_argument(
            "--judge",
            choices=JUDGES,
            default="rules",
            help=f"the scenario's rules (default), or claude: the rules and the {MODEL_JUDGE_LABEL} beside them",
        )

    def handle(self, *args, **opts):
        from agents.scenarios import scenario_names

        errors = []
        scenarios = list(scenario_names())
        if opts["scenario"] not in scenarios:
            errors.append(f"--scenario: unknown scenario {opts['scenario']!r}; expected one of: {', '.join(scenarios)}")
        policy, variant, policy_error = policy_of(opts["policy"])
        if policy_error:
            errors.append(f"--policy: {policy_error}")
        errors += [
            f"--model: {m}" for m in model_backend_errors(model_backend=opts["model"], allowed=tuple(ModelBackendName))
        ]
        if opts["model"] == ModelBackendName.REPLAY and not opts["cassette"]:
            errors.append("--cassette: the replay backend needs a cassette file recorded with --record")
        elif opts["cassette"] and opts["model"] != ModelBackendName.REPLAY:
            errors.append("--cassette: only read with --model replay")
        elif opts["cassette"]:
            try:
                Cassette.load(opts["cassette"])
            except ValueError as exc:
                errors.append(f"--cassette: {exc}")
        if errors:
            raise CommandError("\n".join(errors))

        if policy is None:  # a JSON variant no row holds yet: made now, after every option checked out
            policy = policy_variant_create(name=variant.name, settings=variant.settings())
            self.stdout.write(f"policy variant {policy.name!r} created: {policy.description}")
        run = run_create(scenario=opts["scenario"], policy=policy, model_backend=opts["model"], judge=opts["judge"])
        run = run_execute(
            run_id=run.pk,
            cassette=opts["cassette"],
            record_to=opts["record"],
            observer=TracePrinter(_Text(self.stdout)),
        )
        if run is None:
            raise CommandError("the run was claimed by another process before this one could execute it")
        if opts["record"]:
            self.stdout.write(f"recorded to {opts['record']}")
        self.stdout.write(f"run {run.pk}: {reverse('tracer:run', args=[run.pk])}")
        if run.stop_reason == Run.StopReason.CRASHED:  # exit code 1, as a script or CI expects of a failure
            steps = f"{run.step_count} step{'s' if run.step_count != 1 else ''}"
            when = f"after {steps}" if run.step_count else "before its first step"
            raise CommandError(f"run {run.pk} crashed {when}: {(run.error.splitlines() or ['no reason'])[0]}")
