from __future__ import annotations

from django.core.management.base import BaseCommand

from tracer.execution import runs_sweep


class Command(BaseCommand):
    help = (
        "Sweep once, as beat does every RLT_SWEEP_S: interrupt and re-run runs whose lease lapsed, send again "
        "the tasks of queued runs no worker took, give up on queued runs when no worker is working."
    )

    def handle(self, *args, **opts):
        report = runs_sweep()
        for i in report.interrupted:
            rerun = f"re-run as run {i.rerun_id}" if i.rerun_id else "not re-run"
            self.stdout.write(f"run {i.run_id}: {i.error}; {rerun}")
        self.stdout.write(str(report))
