"""A tool call that ran sub-agents measured at least what they measured, on runs recorded before the
call's time was read on the run's clock: offline, a sub-agent's waits pass on a virtual clock without
sleeping, so the call's wall time left them out and the sub-agent outlasted the step that ran it.

Each attempt of such a step is raised to the time of the sub-agents it ran (the i-th sub-agent by the
i-th attempt, as the picture nests them; any beyond the attempts by the last one), then the step's
latency and its run's duration are counted again from the steps, as the recorder counts them. Parents
are done after their sub-agents (a sub-agent's id is above its parent's), so a sub-agent's own
sub-agents are in its figure first.
"""

import importlib

from django.db import migrations

DURATION = importlib.import_module("tracer.migrations.0035_run_duration_and_cost")


def _raised(attempts, children_ms):
    """``attempts`` with each at least as long as the sub-agents it ran; None when none changes."""
    if not isinstance(attempts, list) or not attempts or not all(isinstance(a, dict) for a in attempts):
        return None
    need = [0.0] * len(attempts)
    for i, ms in enumerate(children_ms):
        need[min(i, len(attempts) - 1)] += ms
    raised, changed = [], False
    for attempt, ms in zip(attempts, need, strict=True):
        latency = DURATION._number(attempt.get("latency_ms"))
        if ms > latency:
            attempt = {**attempt, "latency_ms": round(ms, 3)}
            changed = True
        raised.append(attempt)
    return raised if changed else None


def measure_again(apps, schema_editor):
    Run = apps.get_model("tracer", "Run")
    Step = apps.get_model("tracer", "Step")
    parents = (
        Run.objects.filter(children__isnull=False).order_by("-id").values_list("id", flat=True).distinct().iterator()
    )
    for parent_id in parents:
        children: dict[int, list[float]] = {}
        for step_index, ms in (
            Run.objects.filter(parent_id=parent_id).order_by("id").values_list("parent_step", "measured_ms")
        ):
            if step_index:
                children.setdefault(step_index, []).append(ms)
        changed = []
        for step in Step.objects.filter(run_id=parent_id, index__in=list(children)).only("id", "index", "attempts"):
            attempts = _raised(step.attempts, children[step.index])
            if attempts is not None:
                step.attempts = attempts
                step.latency_ms = round(
                    sum(
                        DURATION._number(a.get("latency_ms")) + DURATION._number(a.get("backoff_s")) * 1000
                        for a in attempts
                    ),
                    3,
                )
                changed.append(step)
        if not changed:
            continue
        Step.objects.bulk_update(changed, ["attempts", "latency_ms"])
        total = waited = 0.0
        for model_attempts, attempts in Step.objects.filter(run_id=parent_id).values_list("model_attempts", "attempts"):
            ms, wait = DURATION._step_ms(model_attempts, attempts)
            total += ms
            waited += wait
        Run.objects.filter(pk=parent_id).update(measured_ms=round(total, 3), waited_ms=round(waited, 3))


class Migration(migrations.Migration):
    dependencies = [
        ("tracer", "0038_policyvariant_archived"),
    ]

    operations = [
        migrations.RunPython(measure_again, migrations.RunPython.noop),
    ]
