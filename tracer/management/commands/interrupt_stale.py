from __future__ import annotations

from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from tracer.execution import run_interrupt_stale


class Command(BaseCommand):
    help = (
        "Finish, as interrupted, running runs whose lease has lapsed (their worker stopped renewing it), "
        "and queue one re-run of each. A run whose worker still renews its lease is never touched."
    )

    def add_arguments(self, parser):
        parser.add_argument("--worker", help="only runs claimed by exactly this worker name (e.g. celery@host)")
        parser.add_argument(
            "--older-than",
            type=float,
            metavar="MINUTES",
            help="only runs started more than this many minutes ago (their lease must have lapsed too)",
        )

    def handle(self, *args, **opts):
        minutes = opts["older_than"]
        if minutes is not None and minutes < 0:
            raise CommandError("--older-than: expected a number of minutes, 0 or more")
        started_before = timezone.now() - timedelta(minutes=minutes) if minutes is not None else None
        interrupted = run_interrupt_stale(worker_name=opts["worker"], started_before=started_before)
        for i in interrupted:
            rerun = f"re-run as run {i.rerun_id}" if i.rerun_id else "not re-run"
            self.stdout.write(f"run {i.run_id}: {i.error}; {rerun}")
        self.stdout.write(f"{len(interrupted)} run(s) marked interrupted")
