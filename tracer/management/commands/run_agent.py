from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from tracer.models import PolicyVariant
from tracer.services import EXPERIMENT_BACKENDS, run_create, run_execute


class TracePrinter:
    """Prints each step as the loop reports it, in the format of ``python -m agents run``."""

    def __init__(self, write, indent: str = "") -> None:
        self.write = write
        self.indent = indent

    def run_started(self, start) -> None:
        if self.indent:
            return
        self.write(f"{start.scenario} under {start.policy_name} ({start.model_backend})")

    def step_recorded(self, step) -> None:
        from agents import format_step

        for line in format_step(step).splitlines():
            self.write(self.indent + line)

    def run_finished(self, end) -> None:
        from agents import format_end

        for line in format_end(end).splitlines():
            self.write(self.indent + line)

    def child(self, *, label: str) -> "TracePrinter":
        self.write(f"{self.indent}sub-agent: {label}")
        return TracePrinter(self.write, self.indent + "    ")


class Command(BaseCommand):
    help = "Execute one recorded run in this process and print its trace (like `python -m agents run`)."

    def add_arguments(self, parser):
        parser.add_argument("--scenario", required=True)
        parser.add_argument("--policy", required=True, help="policy variant name, e.g. starter or structured")
        parser.add_argument("--model", default="simulated", help="simulated, claude or replay")
        parser.add_argument("--cassette", help="the recorded cassette to replay (with --model replay)")
        parser.add_argument("--record", help="also record the model exchange to this cassette file")

    def handle(self, *args, **opts):
        from agents import MODEL_BACKENDS, scenario_names

        errors = []
        scenarios = list(scenario_names())
        if opts["scenario"] not in scenarios:
            errors.append(f"--scenario: unknown scenario {opts['scenario']!r}; expected one of: {', '.join(scenarios)}")
        policy = PolicyVariant.objects.filter(name=opts["policy"]).first()
        if policy is None:
            names = ", ".join(PolicyVariant.objects.values_list("name", flat=True))
            errors.append(f"--policy: unknown policy {opts['policy']!r}; expected one of: {names}")
        backends = list(MODEL_BACKENDS)
        if opts["model"] not in backends:
            errors.append(f"--model: unknown model backend {opts['model']!r}; expected one of: {', '.join(backends)}")
        elif opts["model"] == "replay" and not opts["cassette"]:
            errors.append("--cassette: the replay backend needs a cassette file recorded with --record")
        elif opts["model"] not in (*EXPERIMENT_BACKENDS, "replay"):
            errors.append(f"--model: expected one of: {', '.join((*EXPERIMENT_BACKENDS, 'replay'))}")
        if errors:
            raise CommandError("\n".join(errors))

        run = run_create(scenario=opts["scenario"], policy=policy, model_backend=opts["model"])
        run = run_execute(
            run_id=run.pk,
            cassette=opts["cassette"],
            record_to=opts["record"],
            observer=TracePrinter(self.stdout.write),
        )
        if run is None:
            raise CommandError("the run was claimed by another process before this one could execute it")
        if run.error and run.stop_reason == "crashed" and not run.steps.exists():
            self.stderr.write(f"the run could not start: {run.error.splitlines()[0]}")
        verdict = f"{run.verdict} ({run.verdict_reason})" if run.verdict else "unknown"
        self.stdout.write(f"verdict: {verdict}")
        self.stdout.write(f"recorded as run {run.pk}: /runs/{run.pk}/")
