"""``manage.py check_policy MODULE``: lesson 002's workshop checks on a policy module of your own.

Runs every built-in scenario with the simulated model under the module's ``fail`` and
``should_retry`` (``agents.policy_check``) and prints each check that holds or fails, and for a
failing one the scenario, step and tool that showed it and why. Exits 1 when any check fails, and
when the module cannot be imported or lacks ``fail`` or ``should_retry`` (saying which). The module
need not be in ``RLT_POLICY_PACKS`` to be checked; to run it from the dashboard it must be.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from agents.policies import PolicyError
from agents.policy_check import check_policy, report_lines


class Command(BaseCommand):
    help = "Run every built-in scenario under a policy module (fail, should_retry) and print lesson 002's checks."

    def add_arguments(self, parser):
        parser.add_argument("module", help="the policy module's import path, e.g. examples.policies.errors_fixed")

    def handle(self, *args, **options):
        try:
            report = check_policy(options["module"])
        except PolicyError as exc:
            raise CommandError("; ".join(exc.errors.values())) from None
        for line in report_lines(report):
            self.stdout.write(line)
        if not report.holds:
            raise CommandError(f"{options['module']} fails lesson 002's checks (above)")
