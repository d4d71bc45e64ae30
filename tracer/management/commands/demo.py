from __future__ import annotations

from django.core.management.base import BaseCommand

from tracer.models import Experiment

from ._progress import launch, summary_table

DEMO_NAME = "demo: every scenario under starter and structured"
DEMO_POLICIES = ["starter", "structured"]


class Command(BaseCommand):
    help = "Launch the demo experiment (every scenario under starter and structured) unless it is already recorded."

    def add_arguments(self, parser):
        parser.add_argument("--wait", action="store_true", help="wait with a progress bar, then print a summary table")
        parser.add_argument("--again", action="store_true", help="launch it even if a finished demo exists")
        parser.add_argument("--timeout", type=float, default=900)

    def handle(self, *args, **opts):
        from agents.scenarios import scenario_names

        scenarios = list(scenario_names())
        existing = None
        if not opts["again"]:
            earlier = Experiment.objects.filter(name=DEMO_NAME, scenarios=scenarios, policies=DEMO_POLICIES)
            existing = next((e for e in earlier if e.is_done), None)
        if existing is not None:
            self.stdout.write(f"demo experiment {existing.pk} is already recorded ({existing.total_runs} runs)")
            if opts["wait"]:
                self.stdout.write(summary_table(existing))
            return
        launch(
            stdout=self.stdout,
            wait=opts["wait"],
            timeout=opts["timeout"],
            scenarios=scenarios,
            policies=DEMO_POLICIES,
            name=DEMO_NAME,
        )
