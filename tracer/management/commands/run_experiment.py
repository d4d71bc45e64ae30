from __future__ import annotations

from agents.vocabulary import ModelBackendName
from tracer.experiments import EXPERIMENT_BACKENDS
from tracer.models import PolicyVariant

from ._progress import LaunchCommand


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


class Command(LaunchCommand):
    help = "Launch scenarios × policies × repeats as queued runs for the workers; --wait shows progress and a summary."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--scenario", action="append", help='scenario name (repeat, comma-separate, or "all")')
        parser.add_argument("--policy", action="append", help='policy variant name (repeat, comma-separate, or "all")')
        parser.add_argument("--repeats", type=int, default=1)
        parser.add_argument(
            "--model", default=ModelBackendName.SIMULATED, help=f"model backend: {' or '.join(EXPERIMENT_BACKENDS)}"
        )
        parser.add_argument("--name", default="")
        parser.add_argument(
            "--pace",
            type=float,
            default=None,
            metavar="SECONDS",
            help="seconds a worker waits after each step of these runs, to watch them arrive (default: the worker's "
            "RLT_STEP_DELAY_S)",
        )

    def handle(self, *args, **opts):
        from agents.scenarios import scenario_names

        scenarios = expand(opts["scenario"], list(scenario_names()))
        policies = expand(opts["policy"], list(PolicyVariant.objects.values_list("name", flat=True)))
        self.launch(
            opts,
            scenarios=scenarios,
            policies=policies,
            model_backend=opts["model"],
            repeats=opts["repeats"],
            name=opts["name"],
            step_delay_s=opts["pace"],
        )
