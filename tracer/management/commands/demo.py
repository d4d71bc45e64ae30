from __future__ import annotations

from tracer.models import Experiment

from ._progress import LaunchCommand, summary_table

DEMO_NAME = "demo: every scenario under starter and structured"
DEMO_POLICIES = ["starter", "structured"]


class Command(LaunchCommand):
    help = "Launch the demo experiment (every scenario under starter and structured) unless it is already recorded."

    def add_arguments(self, parser):
        super().add_arguments(parser)
        parser.add_argument("--again", action="store_true", help="launch it even if a finished demo exists")

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
        self.launch(opts, scenarios=scenarios, policies=DEMO_POLICIES, name=DEMO_NAME)
