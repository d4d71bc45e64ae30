"""``manage.py import_traces FILE…``: run documents, JSON Lines batches and Messages transcripts."""

from __future__ import annotations

import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from tracer.intake.files import FileReport, ItemReport, file_import

from ._progress import progress_bar


class Command(BaseCommand):
    help = (
        "Import runs recorded elsewhere: run documents (rlt.run/1), JSON Lines batches of them, or Anthropic "
        "Messages transcripts. Each document is one transaction; a refused one names the path of the bad field. "
        "Exits 1 when any document was refused."
    )

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", metavar="FILE", help='a .json or .jsonl file; "-" reads standard input')
        parser.add_argument("--scenario", default="", help="scenario key for every run (blank: as each document says)")
        parser.add_argument("--policy", default="", help="policy label for every run (blank: as each document says)")
        parser.add_argument("--user", default="", help="the user who owns the imported runs (default: none)")

    def handle(self, *args, **opts):
        user = None
        if opts["user"]:
            user = get_user_model().objects.filter(**{get_user_model().USERNAME_FIELD: opts["user"]}).first()
            if user is None:
                raise CommandError(f"--user: no user named {opts['user']!r}")
        if len(opts["scenario"]) > 100:
            raise CommandError("--scenario: at most 100 characters")
        if len(opts["policy"]) > 40:
            raise CommandError("--policy: at most 40 characters")
        tty = (hasattr(self.stdout, "isatty") and self.stdout.isatty()) or sys.stdout.isatty()
        imported = refused = 0
        for name in opts["files"]:
            report = self._import(name, user=user, scenario=opts["scenario"], policy=opts["policy"], tty=tty)
            imported += report.imported
            refused += report.refused
            self._report(report, verbosity=opts["verbosity"])
        total = imported + refused
        if refused:
            raise CommandError(f"{refused} of {total} document{'s' if total != 1 else ''} refused; the rest imported")
        self.stdout.write(f"{imported} document{'s' if imported != 1 else ''} imported")

    def _import(self, name: str, *, user, scenario: str, policy: str, tty: bool) -> FileReport:
        try:
            data = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
        except OSError as exc:
            unreadable = ItemReport(where="", errors=[{"path": "", "message": f"cannot read: {exc.strerror}"}])
            return FileReport(name=name, items=[unreadable])
        label = "standard input" if name == "-" else Path(name).name

        def progress(done: int, total: int) -> None:
            if tty:
                self.stdout.write("\r" + progress_bar(done, total, what=f"documents of {label}"), ending="")
                self.stdout.flush()

        report = file_import(name=label, data=data, user=user, scenario=scenario, policy=policy, progress=progress)
        if tty and report.items:
            self.stdout.write("")
        return report

    def _report(self, report: FileReport, *, verbosity: int) -> None:
        self.stdout.write(
            progress_bar(len(report.items), len(report.items), what=f"documents of {report.name}")
            + f": {report.imported} imported, {report.refused} refused"
        )
        for item in report.items:
            where = item.where or "the file"
            if item.ok:
                if verbosity >= 2:
                    url = reverse("tracer:run", args=[item.run_id])
                    self.stdout.write(f"  {where}: run {item.run_id} {item.action} ({item.steps} steps) {url}")
                continue
            for error in item.errors:
                path = f"{error['path']}: " if error["path"] else ""
                self.stderr.write(f"  {where}: {path}{error['message']}")
