"""The tracer speaks ``agents.vocabulary``: model choices, form choices and divergence agree with its enums.

A term added to or renamed in an enum shows up here, and in a missing migration, until the tracer follows.
"""

from io import StringIO

import pytest
from django.core.management import call_command

from agents.vocabulary import ErrorCategory, ErrorFormat, ModelBackendName, RetryRule, StepKind, StopReason
from tracer.divergence import attempt_outcome, run_divergence
from tracer.experiments import EXPERIMENT_BACKENDS
from tracer.forms import LaunchForm, PolicyVariantForm, RunFilterForm
from tracer.models import Experiment, Run, Step

IMPORTED = "imported"  # a run that arrived from outside: the one backend value only the tracer knows


def values(choices) -> list[str]:
    return [value for value, _ in choices if value != ""]


def as_pairs(enum) -> list[tuple[str, str]]:
    return [(m.name, m.value) for m in enum]


@pytest.mark.parametrize(
    ("choices", "vocabulary", "extra"),
    [
        (Run.StopReason, StopReason, []),
        (Step.Kind, StepKind, []),
        (Step.Category, ErrorCategory, []),
        (Run.ModelBackend, ModelBackendName, [("IMPORTED", IMPORTED)]),
        (Experiment.ModelBackend, ModelBackendName, []),
    ],
    ids=lambda x: getattr(x, "__qualname__", ""),
)
def test_model_choices_have_the_vocabularys_names_and_values(choices, vocabulary, extra):
    assert as_pairs(choices) == as_pairs(vocabulary) + extra


@pytest.mark.parametrize(
    ("model", "field", "choices"),
    [
        (Run, "stop_reason", Run.StopReason),
        (Run, "model_backend", Run.ModelBackend),
        (Experiment, "model_backend", Experiment.ModelBackend),
        (Step, "kind", Step.Kind),
        (Step, "category", Step.Category),
    ],
)
def test_model_fields_offer_those_choices(model, field, choices):
    assert model._meta.get_field(field).choices == choices.choices


def test_the_stop_reasons_are_labelled_in_words_as_every_page_says_them():
    assert dict(Run.StopReason.choices)[StopReason.CONSECUTIVE_ERRORS] == "Consecutive errors"
    assert dict(Run.StopReason.choices)[StopReason.FINAL_ANSWER] == "Final answer"
    assert Run.ModelBackend.SIMULATED.label == "simulated"


def test_the_run_filter_offers_every_stop_reason_and_backend():
    form = RunFilterForm(scenarios=[], policies=[])
    assert values(form.fields["stop_reason"].choices) == list(StopReason)
    assert values(form.fields["model_backend"].choices) == [*ModelBackendName, IMPORTED]


def test_a_policy_variant_offers_every_error_format_and_retry_rule():
    form = PolicyVariantForm()
    assert values(form.fields["error_format"].choices) == list(ErrorFormat)
    assert values(form.fields["retry_on"].choices) == list(RetryRule)


def test_an_experiment_offers_only_backends_the_agents_know():
    form = LaunchForm(scenarios=[], policies=[], backends=list(EXPERIMENT_BACKENDS))
    assert set(values(form.fields["model_backend"].choices)) <= set(ModelBackendName)


def test_divergence_tells_every_error_format_apart():
    failed = {"number": 1, "ok": False, "category": "business", "retryable": False, "message": "too old"}
    labels = {attempt_outcome(failed, error_format=f).label for f in ErrorFormat}
    assert len(labels) == len(ErrorFormat)


def test_divergence_reads_the_step_kinds_the_loop_records():
    tool = {"kind": StepKind.TOOL_USE, "tool_name": "lookup_orders", "input": {}, "attempts": []}
    final = {"kind": StepKind.FINAL_ANSWER, "text": "No orders."}
    split = run_divergence([final], [tool]).split
    assert split.summary == "Run A gave its final answer; run B called lookup_orders."
    other_answer = {"kind": StepKind.FINAL_ANSWER, "text": "Order 1042 was found."}
    assert run_divergence([final], [other_answer]).split.what == "final answer"


@pytest.mark.django_db
def test_the_migrations_hold_the_choices_the_vocabulary_gives():
    call_command("makemigrations", "tracer", "--check", "--dry-run", stdout=StringIO())
