"""``manage.py findings``: stored findings for a shell or CI, and ``--recompute`` after a rule change."""

from __future__ import annotations

import json
import sys
import time

from django.core.management.base import BaseCommand, CommandError

from agents.diagnosis.kinds import BY_KEY, KEYS, RULE_SET
from agents.prices import format_money
from tracer.diagnosis import findings_recompute
from tracer.reads.findings import FindingFilterError, finding_cost, finding_json, findings_filter, findings_query

from ._progress import progress_bar

FOUND = 1


class Command(BaseCommand):
    help = (
        "Print the findings stored for runs (the lessons' mistakes, agents/diagnosis), as text or JSON Lines "
        "(a finding a line: kind, run, tool, steps, message, fix, …); --fail-on KIND,… exits 1 when any of "
        f"those is found. --recompute diagnoses every finished run again with rule set {RULE_SET}. "
        f"Kinds: {', '.join(KEYS)}."
    )

    def add_arguments(self, parser):
        parser.add_argument("--run", type=int, help="only this run's findings (its id)")
        parser.add_argument("--since", default="", help="only runs created since: YYYY-MM-DD or an ISO 8601 time")
        parser.add_argument("--kind", action="append", default=[], help="only this kind (repeat, or KIND,KIND)")
        parser.add_argument("--tool", default="", help="only findings about this tool")
        parser.add_argument("--format", choices=("text", "json"), default="text", help="text, or JSON Lines")
        parser.add_argument("--fail-on", default="", metavar="KIND,…", help="exit 1 when any of these kinds is found")
        parser.add_argument("--recompute", action="store_true", help="diagnose every finished run again")
        parser.add_argument("--batch", type=int, default=500, help="--recompute: runs per transaction")

    def handle(self, *args, **opts):
        if opts["recompute"]:
            return self._recompute(batch=max(1, opts["batch"]))
        try:
            wanted = findings_filter(kind=opts["kind"], tool=opts["tool"], since=opts["since"], run_id=opts["run"])
            fail_on = findings_filter(kind=opts["fail_on"]).kinds if opts["fail_on"] else ()
        except FindingFilterError as exc:
            option = "--fail-on" if exc.field == "kind" and opts["fail_on"] and not opts["kind"] else f"--{exc.field}"
            raise CommandError(f"{option}: {exc.message}") from None
        hit = False
        count = 0
        for finding in findings_query(wanted).iterator(chunk_size=2000):
            count += 1
            hit = hit or finding.kind in fail_on
            if opts["format"] == "json":
                self.stdout.write(json.dumps(finding_json(finding), ensure_ascii=False))
            else:
                self.stdout.write(self._text(finding))
        if opts["format"] == "text":
            self.stdout.write(f"{count} finding{'s' if count != 1 else ''}")
        if hit:
            self.stderr.write(f"found {', '.join(fail_on)} (--fail-on): exit code {FOUND}")
            sys.exit(FOUND)

    def _text(self, f) -> str:
        cost, basis = finding_cost(f)
        steps = ", ".join(str(s) for s in f.steps)
        lines = [
            f"run {f.run_id} [{f.kind}] {BY_KEY[f.kind].title} · {f.tool} · steps {steps}",
            f"    {f.message}",
            f"    evidence: {f.evidence}",
            f"    fix: {f.fix}",
        ]
        if f.rewrite:
            lines.append(f"    rewrite: {f.rewrite!r}")
        if f.wasted_input_tokens or f.wasted_output_tokens:
            lines.append(f"    cost: {format_money(cost)} ({basis})")
        return "\n".join(lines)

    def _recompute(self, *, batch: int) -> None:
        tty = (hasattr(self.stdout, "isatty") and self.stdout.isatty()) or sys.stdout.isatty()
        began = time.monotonic()
        last = ""

        def progress(done: int, total: int) -> None:
            nonlocal last
            rate = done / max(time.monotonic() - began, 1e-9)
            line = progress_bar(done, total, what=f"runs diagnosed, {rate:,.0f} runs/s")
            if tty:
                self.stdout.write("\r" + line, ending="")
                self.stdout.flush()
            elif line.split(" runs diagnosed")[0] != last:
                self.stdout.write(line)
            last = line.split(" runs diagnosed")[0]

        done = findings_recompute(batch=batch, progress=progress)
        if tty:
            self.stdout.write("")
        took = time.monotonic() - began
        self.stdout.write(
            f"{done} runs diagnosed with rule set {RULE_SET} in {took:.1f} s ({done / max(took, 1e-9):,.0f} runs/s)"
        )
