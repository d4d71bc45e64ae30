from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from tracer.execution import run_interrupt_stale


class Command(BaseCommand):
    help = "Finish, as interrupted, runs left running by a worker that died."

    def add_arguments(self, parser):
        parser.add_argument("--worker", help="runs claimed by exactly this worker name (e.g. celery@host)")
        parser.add_argument(
            "--older-than",
            type=float,
            help=f"runs started more than this many minutes ago (default {settings.RLT_STALE_AFTER_S // 60})",
        )

    def handle(self, *args, **opts):
        minutes = opts["older_than"]
        if minutes is not None and minutes < 0:
            raise CommandError("--older-than: expected a number of minutes, 0 or more")
        worker = opts["worker"]
        if worker is None and minutes is None:
            minutes = settings.RLT_STALE_AFTER_S / 60
        older_than = timedelta(minutes=minutes) if minutes is not None else None
        count = run_interrupt_stale(worker_name=worker, older_than=older_than)
        self.stdout.write(f"{count} run(s) marked interrupted")
