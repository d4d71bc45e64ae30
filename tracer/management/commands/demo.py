from __future__ import annotations

from django.core.management.base import BaseCommand

from tracer.models import Experiment
from tracer.services import experiment_launch

from ._progress import summary_table, wait_for

DEMO_NAME = "demo: every scenario under starter and structured"
DEMO_POLICIES = ["starter", "structured"]


class Command(BaseCommand):
    help = "Launch the demo experiment (every scenario under starter and structured) unless it is already recorded."

    def add_arguments(self, parser):
        parser.add_argument("--wait", action="store_true", help="wait with a progress bar, then print a summary table")
        parser.add_argument("--again", action="store_true", help="launch it even if a finished demo exists")
        parser.add_argument("--timeout", type=float, default=900)

    def handle(self, *args, **opts):
        from agents import scenario_names

        scenarios = list(scenario_names())
        existing = next(
            (
                e
                for e in Experiment.objects.filter(name=DEMO_NAME, scenarios=scenarios, policies=DEMO_POLICIES)
                if e.is_done
            ),
            None,
        ) if not opts["again"] else None
        if existing is not None:
            self.stdout.write(f"demo experiment {existing.pk} is already recorded ({existing.total_runs} runs)")
            experiment = existing
        else:
            experiment = experiment_launch(scenarios=scenarios, policies=DEMO_POLICIES, name=DEMO_NAME)
            self.stdout.write(f"demo experiment {experiment.pk}: {experiment.total_runs} runs queued for the worker")
            if opts["wait"]:
                wait_for(experiment, timeout=opts["timeout"], stdout=self.stdout)
        if opts["wait"]:
            self.stdout.write(summary_table(experiment))
