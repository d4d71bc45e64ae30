"""The matrix's tallies the database keeps (tracer/tallies.py) equal what summing the runs gives, through
every way runs are written: created finished, finished later, changed, re-parented, moved to an
experiment, deleted one by one and in bulk; and they are put back after a migration drops them."""

import random
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from tests.factories import ExperimentFactory, RunFactory
from tracer import tallies
from tracer.models import MatrixTally, Run
from tracer.reads.matrix import MATRIX_KEYS, STORED_FIELDS, matrix_groups, matrix_scope, stored_tallies

pytestmark = pytest.mark.django_db


def summed() -> dict[tuple, dict]:
    """The runs in the matrix's scope summed by the ORM, the matrix's own definition."""
    out = {}
    for g in matrix_groups(Run.objects.filter(matrix_scope())):
        out[tuple(g[k] for k in MATRIX_KEYS)] = {n: g.get(n) or 0 for n in (*STORED_FIELDS, "duration_s")}
    return out


def kept() -> dict[tuple, dict]:
    out = {}
    for key, tally in stored_tallies().items():
        out[key] = {n: getattr(tally, n) for n in (*STORED_FIELDS, "duration_s")}
    return out


def assert_same() -> None:
    want, got = summed(), kept()
    assert want.keys() == got.keys()
    for key, figures in want.items():
        assert figures["duration_s"] == pytest.approx(got[key]["duration_s"], abs=1e-3), key
        assert {**figures, "duration_s": 0} == {**got[key], "duration_s": 0}, key


def random_fields(rng: random.Random, experiments: list) -> dict:
    started = timezone.now() - timedelta(seconds=rng.uniform(0, 5000))
    return dict(
        scenario=rng.choice(["refund-too-old", "lookup-flaky", ""]),
        policy_name=rng.choice(["starter", "structured"]),
        model_backend=rng.choice([Run.ModelBackend.SIMULATED, Run.ModelBackend.IMPORTED]),
        experiment=rng.choice([None, *experiments]),
        status=rng.choice([Run.Status.FINISHED, Run.Status.FINISHED, Run.Status.RUNNING]),
        stop_reason=rng.choice(Run.StopReason.values),
        verdict=rng.choice(["", *Run.Verdict.values]),
        source=rng.choice(Run.Source.values),
        tool_call_count=rng.randrange(20),
        retry_count=rng.randrange(5),
        wasted_retry_count=rng.randrange(3),
        model_retry_count=rng.randrange(2),
        input_tokens=rng.randrange(5000),
        output_tokens=rng.randrange(900),
        started_at=rng.choice([None, started]),
        finished_at=rng.choice([None, started + timedelta(seconds=rng.uniform(0, 90))]),
    )


def test_the_kept_tallies_equal_the_runs_summed_through_inserts_updates_and_deletes():
    rng = random.Random(5)
    experiments = [ExperimentFactory(), ExperimentFactory()]
    made = [RunFactory(**random_fields(rng, experiments)) for _ in range(60)]
    Run.objects.bulk_create([Run(**random_fields(rng, experiments)) for _ in range(60)])
    assert_same()
    for run in made[:20]:  # each of the fields the matrix reads, changed one save at a time
        for name, value in random_fields(rng, experiments).items():
            setattr(run, name, value)
            run.save(update_fields=[name])
    assert_same()
    Run.objects.filter(status=Run.Status.RUNNING).update(status=Run.Status.FINISHED, verdict=Run.Verdict.PASS)
    Run.objects.filter(pk__in=[r.pk for r in made[20:30]]).update(parent=made[0])  # sub-agents count not
    Run.objects.filter(pk__in=[r.pk for r in made[30:35]]).update(search_text="nothing the matrix reads")
    assert_same()
    made[40].delete()
    Run.objects.filter(pk__in=[r.pk for r in made[41:50]]).delete()
    Run.objects.filter(scenario="lookup-flaky").delete()
    assert_same()
    assert MatrixTally.objects.filter(runs__lt=0).count() == 0


def test_a_run_counts_once_it_finishes_and_not_while_it_runs():
    run = RunFactory(status=Run.Status.RUNNING, verdict="", finished_at=None)
    assert stored_tallies() == {}
    for steps in range(1, 4):  # what the recorder does a step at a time
        Run.objects.filter(pk=run.pk).update(step_count=steps, tool_call_count=steps)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.FINISHED, verdict=Run.Verdict.PASS, finished_at=timezone.now()
    )
    (tally,) = stored_tallies().values()
    assert (tally.runs, tally.passes, tally.tool_calls) == (1, 1, 3)


def test_tallies_dropped_by_a_migration_are_put_back_and_rebuilt_by_the_next_migrate():
    RunFactory()
    tallies.tallies_drop(connection)
    MatrixTally.objects.all().delete()
    RunFactory(policy_name="starter")  # written while no trigger kept count
    assert not tallies.tallies_current(connection)
    call_command("migrate", verbosity=0, interactive=False)
    assert tallies.tallies_current(connection)
    assert_same()
    assert sum(t.runs for t in stored_tallies().values()) == 2
