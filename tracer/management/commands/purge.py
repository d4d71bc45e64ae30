from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from tracer.retention import RetentionError, retention_parse, retention_rules, runs_purge


class Command(BaseCommand):
    help = (
        "Remove the runs the retention rule says have expired (RLT_RETENTION_DAYS, or --days here), in batches, "
        "as beat does every RLT_RETENTION_EVERY_S; --dry-run says what would go and removes nothing."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="count what would go; delete nothing")
        parser.add_argument(
            "--days",
            metavar="RULE",
            help="the rule to apply instead of RLT_RETENTION_DAYS, in the same form: 90, or otlp=7,api=30,90",
        )

    def handle(self, *args, dry_run: bool = False, days: str | None = None, **opts):
        try:
            rules = retention_parse(days) if days is not None else retention_rules()
        except RetentionError as exc:
            raise CommandError(str(exc)) from None
        if not rules:
            raise CommandError(
                "no retention rule: set RLT_RETENTION_DAYS (e.g. 90, or otlp=7,api=30,90) or pass --days"
            )
        report = runs_purge(rules=rules, dry_run=dry_run)
        self.stdout.write(report.summary())
        if dry_run:
            self.stdout.write("dry run: nothing was removed")
