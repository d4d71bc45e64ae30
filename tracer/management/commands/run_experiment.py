from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from tracer.models import PolicyVariant
from tracer.services import experiment_launch

from ._progress import summary_table, wait_for


def expand(values: list[str] | None, every: list[str]) -> list[str]:
    """Names given with repeated options or commas; "all" means every one."""
    names: list[str] = []
    for value in values or []:
        for name in value.split(","):
            name = name.strip()
            if name == "all":
                names.extend(every)
            elif name:
                names.append(name)
    return list(dict.fromkeys(names))


OPTION_OF_FIELD = {"scenarios": "--scenario", "policies": "--policy", "model_backend": "--model"}


def validation_message(exc: ValidationError) -> str:
    """One line per message, each naming the command-line option it is about."""
    if hasattr(exc, "error_dict"):
        return "\n".join(
            f"{OPTION_OF_FIELD.get(field, '--' + field.replace('_', '-'))}: {message}"
            for field, messages in exc.message_dict.items()
            for message in messages
        )
    return "\n".join(exc.messages)


class Command(BaseCommand):
    help = "Launch scenarios × policies × repeats as queued runs for the workers; --wait shows progress and a summary."

    def add_arguments(self, parser):
        parser.add_argument("--scenario", action="append", help='scenario name (repeat, comma-separate, or "all")')
        parser.add_argument("--policy", action="append", help='policy variant name (repeat, comma-separate, or "all")')
        parser.add_argument("--repeats", type=int, default=1)
        parser.add_argument("--model", default="simulated", help="model backend: simulated or claude")
        parser.add_argument("--name", default="")
        parser.add_argument("--wait", action="store_true", help="wait with a progress bar, then print a summary table")
        parser.add_argument("--timeout", type=float, default=900, help="seconds --wait waits (default 900)")

    def handle(self, *args, **opts):
        from agents import scenario_names

        scenarios = expand(opts["scenario"], list(scenario_names()))
        policies = expand(opts["policy"], list(PolicyVariant.objects.values_list("name", flat=True)))
        try:
            experiment = experiment_launch(
                scenarios=scenarios,
                policies=policies,
                model_backend=opts["model"],
                repeats=opts["repeats"],
                name=opts["name"],
            )
        except ValidationError as exc:
            raise CommandError("cannot launch the experiment:\n" + validation_message(exc)) from None
        self.stdout.write(
            f"experiment {experiment.pk}: {experiment.total_runs} runs queued "
            f"({len(experiment.scenarios)} scenarios × {len(experiment.policies)} policies × {experiment.repeats})"
        )
        if opts["wait"]:
            wait_for(experiment, timeout=opts["timeout"], stdout=self.stdout)
            self.stdout.write(summary_table(experiment))
