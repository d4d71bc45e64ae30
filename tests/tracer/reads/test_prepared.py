"""Prepared queries: the SQL compiled once per process gives what the queryset itself gives."""

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext

from tests.factories import ExperimentFactory, RunFactory, StepFactory, StopReviewFactory
from tracer.models import Run, Step
from tracer.reads.prepared import LIST_MAX, Prepared

pytestmark = pytest.mark.django_db


def _fields(run: Run) -> dict:
    return {f.attname: getattr(run, f.attname) for f in Run._meta.concrete_fields if f.attname in run.__dict__}


def test_a_prepared_run_has_its_columns_its_joined_experiment_and_review_and_its_annotations():
    experiment = ExperimentFactory()
    review = StopReviewFactory(run=RunFactory(experiment=experiment, labels={"team": "ops"}), note="stuck on 0871")

    def build(pk):
        return (
            Run.objects.select_related("experiment", "review__reviewer")
            .defer("transcript")
            .annotate(doubled=F("step_count") * 2)
            .filter(pk=pk)
        )

    read = Prepared(build)
    for _ in range(2):  # the second call runs the SQL the first compiled
        [run] = read(pk=review.run_id)
        [expected] = build(review.run_id)
        assert _fields(run) == _fields(expected) and run.labels == {"team": "ops"}
        assert run.doubled == expected.doubled
        assert "transcript" not in run.__dict__  # deferred as asked
        with CaptureQueriesContext(connection) as queries:
            assert run.experiment == experiment and run.review.note == "stuck on 0871"
            assert run.review.reviewer is None
        assert len(queries) == 0


def test_a_prepared_values_list_gives_tuples_or_single_values_with_json_decoded():
    run = RunFactory()
    steps = [StepFactory(run=run, index=i) for i in (1, 2, 3)]
    tuples = Prepared(
        lambda run_id, first: (
            Step.objects.filter(run_id=run_id, index__gte=first).order_by("index").values_list("index", "input")
        )
    )
    flat = Prepared(
        lambda run_id: Step.objects.filter(run_id=run_id).order_by("-index").values_list("index", flat=True)[:2]
    )
    assert tuples(run_id=run.pk, first=2) == [(s.index, s.input) for s in steps[1:]]
    assert isinstance(tuples(run_id=run.pk, first=1)[0][1], dict)
    assert flat(run_id=run.pk) == [3, 2]


def test_a_prepared_list_of_ids_is_compiled_for_its_length_and_a_long_one_still_answers():
    runs = RunFactory.create_batch(3)
    read = Prepared(lambda ids: Run.objects.filter(id__in=ids).order_by("id").values_list("id", flat=True))
    ids = [r.pk for r in runs]
    assert read(ids=ids) == ids and read(ids=ids[:1]) == ids[:1]
    assert read(ids=[ids[0], ids[0]]) == ids[:1]  # a repeated id as the queryset takes it: once
    assert read(ids=ids + list(range(10**9, 10**9 + LIST_MAX))) == ids
    assert read(ids=[]) == []


def test_an_id_no_column_holds_is_answered_as_django_answers_it_without_a_query():
    read = Prepared(lambda pk: Run.objects.filter(pk=pk))
    RunFactory()
    with CaptureQueriesContext(connection) as queries:
        assert read(pk=2**63) == [] and read(pk=10**30) == []
    assert len(queries) == 0


def test_a_value_the_sql_does_not_hold_once_is_refused_when_compiled():
    read = Prepared(lambda pk: Run.objects.filter(pk=pk) | Run.objects.filter(parent_id=pk))
    with pytest.raises(ValueError, match="once"):
        read(pk=1)
