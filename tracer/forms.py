"""Forms for the dashboard: they clean input and name the field that is wrong; writes go to services."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from agents import names
from agents.diagnosis.kinds import KINDS
from agents.policies import PRESETS, RETRY_FLAG_PATHS
from agents.policy_code import module_paths as policy_module_paths
from agents.vocabulary import MODEL_JUDGE_LABEL, ErrorFormat, ModelBackendName, RetryRule, ToolTransport

from .experiments import STEP_DELAY_MAX_S
from .json_input import BoundedJSONDecoder, JsonTooDeep, too_deep
from .models import Run, StopReview
from .reads.rollups import Scope
from .reads.runs_list import RUN_SORTS
from .search import SEARCH_MIN_CHARS

BLANK = [("", "any")]
INHERIT = [("", "as in the base preset")]
YES_NO = [("true", "yes"), ("false", "no")]
SHORT_NUMBER = forms.NumberInput(attrs={"class": "short"})


# The largest id a 64-bit primary key holds, on SQLite and PostgreSQL alike: a bigger number in a
# query string is a bad id, not a database error.
ID_MAX = 2**63 - 1


class TextField(forms.CharField):
    """A text field whose limit is checked here, not in the browser: an input's ``maxlength`` cuts what
    is typed or pasted without a word, so the input has none and over-long text is refused, naming the
    limit."""

    default_error_messages = {"max_length": "at most %(limit_value)d characters; got %(show_value)d"}

    def widget_attrs(self, widget: forms.Widget) -> dict[str, Any]:
        attrs = super().widget_attrs(widget)
        attrs.pop("maxlength", None)
        return attrs


def name_validator(limit: int):
    """A form field's check of a matrix name (``agents.names``): a scenario key or a policy label."""

    def check(value: str) -> None:
        try:
            names.name_checked(value, limit=limit)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None

    return check


class BoundedJSONField(forms.JSONField):
    """Django's JSON form field read with ``tracer.json_input``'s bounds; a document nested too deep is
    an error naming the limit, not a RecursionError."""

    def __init__(self, **kwargs) -> None:
        kwargs["decoder"] = BoundedJSONDecoder
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except ValidationError:
            if isinstance(value, str) and too_deep(value):
                raise ValidationError(f"This JSON is {JsonTooDeep()}.", code="invalid") from None
            raise


class IdField(forms.IntegerField):
    """A row's id from a query string: a whole number from 1 to ``ID_MAX``, else one message saying so
    (the pages show it after the field's label)."""

    def __init__(self, *, of: str = "a run", **kwargs: Any) -> None:
        expected = f"expected the id of {of}, a whole number from 1 to {ID_MAX}"
        messages = {"invalid": expected, "min_value": expected, "max_value": expected}
        super().__init__(min_value=1, max_value=ID_MAX, error_messages=messages, **kwargs)


def add_service_errors(form: forms.Form, exc: ValidationError) -> None:
    """Attach a service's per-field errors to the form's fields; others go to the whole form."""
    for field, messages in exc.message_dict.items():
        for message in messages:
            form.add_error(field if field in form.fields else None, message)


class RunFilterForm(forms.Form):
    q = TextField(
        required=False,
        label="search",
        max_length=200,
        min_length=SEARCH_MIN_CHARS,
        error_messages={"min_length": f"type {SEARCH_MIN_CHARS} or more characters (this has %(show_value)d)"},
        help_text="scenario, policy, tool, input, error or answer",
        widget=forms.TextInput(
            attrs={"data-slash-focus": "", "data-search-box": "", "title": "search (press / to get here)"}
        ),
    )
    scenario = forms.ChoiceField(required=False)
    policy = forms.ChoiceField(required=False)
    model_backend = forms.ChoiceField(
        required=False,
        label="model",
        choices=BLANK + Run.ModelBackend.choices,
    )
    source = forms.ChoiceField(
        required=False,
        label="from",
        choices=BLANK + [(v, "executed here" if v == "agent" else f"imported: {v}") for v in Run.Source.values],
    )
    status = forms.ChoiceField(required=False, choices=BLANK + Run.Status.choices)
    stop_reason = forms.ChoiceField(required=False, label="stop reason", choices=BLANK + Run.StopReason.choices)
    verdict = forms.ChoiceField(required=False, choices=BLANK + Run.Verdict.choices + [("unjudged", "unjudged")])
    min_steps = forms.IntegerField(required=False, min_value=0, label="steps ≥", widget=SHORT_NUMBER)
    min_errors = forms.IntegerField(required=False, min_value=0, label="errors ≥", widget=SHORT_NUMBER)
    min_retries = forms.IntegerField(required=False, min_value=0, label="retries ≥", widget=SHORT_NUMBER)
    started_from = forms.DateField(required=False, label="started from", widget=forms.DateInput(attrs={"type": "date"}))
    started_to = forms.DateField(required=False, label="started to", widget=forms.DateInput(attrs={"type": "date"}))
    reviewed = forms.ChoiceField(
        required=False,
        label="review",
        choices=[*BLANK, ("yes", "reviewed"), ("no", "not reviewed"), ("overridden", "verdict overridden")],
    )
    tag = forms.ChoiceField(required=False, label="tag")
    finding = forms.ChoiceField(
        required=False, label="finding", choices=BLANK + [(k.key, f"{k.key}: {k.title}") for k in KINDS]
    )
    experiment = IdField(required=False, label="experiment", of="an experiment", widget=forms.Select)
    # the column the list is sorted by (its headers' links set it; a filter keeps it)
    sort = forms.ChoiceField(
        required=False, choices=[(s, s) for name in RUN_SORTS for s in (name, f"-{name}")], widget=forms.HiddenInput
    )

    def __init__(
        self, *args: Any, scenarios: list[str], policies: list[str], tags: list[str] | None = None, **kwargs: Any
    ) -> None:
        """``tags``: the tags reviewers have used (the tag filter's choices). The fields come from
        ``run_filter_fields``, shared by every form of the same choices in this process: nothing changes
        a field once made but the experiment filter's options, so that one field is this form's own."""
        self.base_fields = {}  # Django deep-copies these into ``fields``: the shared ones are used instead
        super().__init__(*args, **kwargs)
        self.fields = dict(run_filter_fields(tuple(scenarios), tuple(policies), tuple(tags or ())))
        self.fields["experiment"] = copy.deepcopy(self.fields["experiment"])

    def offer_experiments(self, experiments: Sequence[Any]) -> None:
        """The experiment filter's choices (``reads.experiment_page.experiment_choices``); the filter takes any
        experiment's id, these are the ones offered."""
        self.fields["experiment"].widget.choices = BLANK + [(e.pk, f"#{e.pk} {e}") for e in experiments]

    def filters(self) -> dict[str, Any]:
        """The valid filters, under ``run_list``'s names; an invalid one is left out and shown as an error."""
        data = dict(self.cleaned_data)  # an invalid filter is absent here
        data["policy_name"] = data.pop("policy", "")
        data["experiment_id"] = data.pop("experiment", None)
        return data


@lru_cache(maxsize=8)
def run_filter_fields(scenarios: tuple[str, ...], policies: tuple[str, ...], tags: tuple[str, ...]) -> dict:
    """``RunFilterForm``'s fields offering these scenarios, policies and tags, made once per process
    for each set of them (a new scenario, policy or tag is a new set, so the choices follow the
    runs); copying every field and normalizing their choices for each request would cost the runs
    list more than its queries. Never changed once made: a form that changes a field copies it first."""
    fields = copy.deepcopy(RunFilterForm.base_fields)
    # a search too short is the server's to refuse, in words: the browser's own check would keep
    # htmx from asking, and the rows of the search before would stay under the new text
    fields["q"].widget.attrs.pop("minlength", None)
    fields["scenario"].choices = BLANK + [(s, s) for s in scenarios]
    fields["policy"].choices = BLANK + [(p, p) for p in policies]
    fields["tag"].choices = BLANK + [(t, t) for t in tags]
    return fields


def _naming_valid(field: forms.ChoiceField, what: str) -> None:
    """An unknown value's message names every valid one (a filter's 400 says what to send instead)."""
    valid = [str(v) for v, _ in field.choices if v != ""]
    shown = ", ".join(valid[:40]) + (" …" if len(valid) > 40 else "")
    field.error_messages["invalid_choice"] = f"unknown {what} %(value)r; expected one of: {shown or 'none yet'}"


class ScopeForm(forms.Form):
    """The runs the Tools and Findings pages sum: the runs list's source, scenario, policy and dates.
    A value that names nothing known is an error naming what is valid (the page answers 400)."""

    source = forms.ChoiceField(required=False, label="from", choices=RunFilterForm.base_fields["source"].choices)
    scenario = forms.ChoiceField(required=False)
    policy = forms.ChoiceField(required=False)
    started_from = forms.DateField(
        required=False,
        label="started from",
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"invalid": "expected a date as YYYY-MM-DD"},
    )
    started_to = forms.DateField(
        required=False,
        label="started to",
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"invalid": "expected a date as YYYY-MM-DD"},
    )

    def __init__(self, *args: Any, scenarios: list[str], policies: list[str], tools: list[str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        # a search too short is the server's to refuse, in words: the browser's own check would keep
        # htmx from asking, and the rows of the search before would stay under the new text
        if "q" in self.fields:  # the pages that take the list's filters without its search have none
            self.fields["q"].widget.attrs.pop("minlength", None)
        self.fields["scenario"].choices = BLANK + [(s, s) for s in scenarios]
        self.fields["policy"].choices = BLANK + [(p, p) for p in policies]
        if "tool" in self.fields:
            self.fields["tool"].choices = BLANK + [(t, t) for t in tools]
        for name, what in (("source", "source"), ("scenario", "scenario"), ("policy", "policy"), ("tool", "tool")):
            if name in self.fields:
                _naming_valid(self.fields[name], what)
        if "kind" in self.fields:
            _naming_valid(self.fields["kind"], "finding kind")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        start, end = cleaned.get("started_from"), cleaned.get("started_to")
        if start and end and start > end:
            self.add_error("started_to", f"this is before started from ({start}); expected {start} or later")
        return cleaned

    def scope(self) -> Scope:
        """The valid part as a ``reads.rollups.Scope`` (an invalid field is left out)."""
        data = self.cleaned_data if hasattr(self, "cleaned_data") else {}
        return Scope(
            source=data.get("source") or "",
            scenario=data.get("scenario") or "",
            policy=data.get("policy") or "",
            started_from=data.get("started_from"),
            started_to=data.get("started_to"),
        )


class ToolsFilterForm(ScopeForm):
    tool = forms.ChoiceField(required=False)


class FindingsFilterForm(ScopeForm):
    kind = forms.ChoiceField(
        required=False, label="finding", choices=BLANK + [(k.key, f"{k.key}: {k.title}") for k in KINDS]
    )
    tool = forms.ChoiceField(required=False)


class CompareForm(forms.Form):
    a = IdField(label="run A")
    b = IdField(label="run B")

    def __init__(self, data: Any, *args: Any, **kwargs: Any) -> None:
        """Accepts ``?a=&b=`` or the run list's two ticked ``run`` boxes (the older run, lower id, is A);
        ``None`` (no ids asked for yet) makes an unbound form, which shows no error."""
        picked = sorted(data.getlist("run"), key=lambda pk: pk.zfill(20)) if data is not None else []
        if len(picked) == 2 and "a" not in data:
            data = {"a": picked[0], "b": picked[1]}
        super().__init__(data, *args, **kwargs)
        for field in self.fields.values():
            field.error_messages["required"] = "pick a run"

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("a") and cleaned.get("a") == cleaned.get("b"):
            self.add_error("b", "pick a different run from run A")
        return cleaned


class IdListField(forms.Field):
    """Ids from a repeated query-string key (``?experiment=3&experiment=5``), each checked as ``IdField``
    checks one; duplicates dropped, in ascending order."""

    widget = forms.MultipleHiddenInput

    def __init__(self, *, of: str, **kwargs: Any) -> None:
        self.one = IdField(of=of)
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> list[int]:
        values = value if isinstance(value, list | tuple) else [value]
        return sorted({self.one.clean(v) for v in values if v not in (None, "")})


class MatrixFilterForm(forms.Form):
    """Which runs the policy matrix counts: experiments and a model backend (none given: all). A bad
    value is named on the page and that narrowing is dropped."""

    experiment = IdListField(required=False, label="experiment", of="an experiment")
    model_backend = forms.ChoiceField(
        required=False,
        label="model backend",
        choices=[("", "all"), *Run.ModelBackend.choices],
        error_messages={
            "invalid_choice": f"%(value)s is not a model backend: one of {', '.join(Run.ModelBackend.values)}"
        },
    )

    def filters(self) -> dict[str, Any]:
        """``policy_matrix``'s narrowing from the fields that are valid."""
        self.is_valid()
        cleaned = self.cleaned_data
        return {"experiment_ids": cleaned.get("experiment") or [], "model_backend": cleaned.get("model_backend") or ""}


class PolicyVariantForm(forms.Form):
    """A custom variant: a preset to start from and the settings that differ from it."""

    name = TextField(max_length=names.POLICY_NAME_MAX)
    base = forms.ChoiceField(choices=[(n, n) for n in PRESETS], initial="structured", label="base preset")
    description = TextField(required=False, max_length=500)
    tool_transport = forms.ChoiceField(
        required=False, label="tool transport", choices=INHERIT + [(v, v) for v in ToolTransport]
    )
    error_format = forms.ChoiceField(
        required=False,
        label="error format",
        choices=INHERIT + [(v, v) for v in ErrorFormat],
    )
    retry_on = forms.ChoiceField(required=False, label="retry", choices=INHERIT + [(v, v) for v in RetryRule])
    max_attempts = forms.IntegerField(required=False, label="max attempts")
    backoff_base_s = forms.FloatField(required=False, label="backoff base (s)")
    backoff_max_s = forms.FloatField(required=False, label="backoff max (s)")
    backoff_jitter = forms.FloatField(required=False, label="jitter (0–1)")
    empty_is_error = forms.ChoiceField(required=False, label="empty result is an error", choices=INHERIT + YES_NO)
    consecutive_error_limit = forms.IntegerField(required=False, label="consecutive-error limit (0: off)")
    stop_on_fatal = forms.ChoiceField(required=False, label="stop on fatal", choices=INHERIT + YES_NO)
    max_steps = forms.IntegerField(required=False, label="max steps")
    retry_flag_path = forms.ChoiceField(
        required=False,
        label="retry reads isRetryable at",
        choices=INHERIT + [(v, v) for v in RETRY_FLAG_PATHS],
        help_text="structured only; isRetryable (the top level) is lesson 002's nested-flag bug",
    )
    swallow_errors = forms.ChoiceField(
        required=False, label="swallow failures as empty results", choices=INHERIT + YES_NO
    )
    ask_model_to_retry = forms.ChoiceField(
        required=False, label="prompt asks the model to retry once", choices=INHERIT + YES_NO
    )
    clean_error_text = forms.ChoiceField(
        required=False,
        label="clean internal details out of error text",
        choices=INHERIT + YES_NO,
        help_text="stack traces, SQL, hostnames, file paths and secrets never reach the model",
    )
    write_retries = forms.ChoiceField(
        required=False,
        label="retrying a write not safe to repeat",
        choices=INHERIT + [(v, v) for v in ("idempotency_key", "never", "blind")],
        help_text="a tool that declares read_only and idempotent false: retried with one idempotency key, never, "
        "or blindly (a timeout after the charge went through charges twice)",
    )
    code = forms.ChoiceField(
        required=False,
        label="policy code",
        help_text="a module RLT_POLICY_PACKS names: its fail() and should_retry() replace the error format and retry",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["code"].choices = [("", "none: the settings above")] + [(m, m) for m in policy_module_paths()]

    @classmethod
    def base_values(cls, base: str) -> dict[str, Any]:
        """The preset ``base``'s settings as this form's fields show them (``base`` itself included),
        so a new variant's form starts from what it would inherit; an unknown name starts from the
        field's initial preset."""
        if base not in PRESETS:
            base = cls.base_fields["base"].initial
        values: dict[str, Any] = {"base": base}
        for name, value in PRESETS[base].settings().items():
            if name in cls.base_fields and name not in ("name", "description"):
                values[name] = ("true" if value else "false") if isinstance(value, bool) else value
        return values

    def settings(self) -> dict[str, Any]:
        """The base preset and every setting the user filled in, as ``policy_from_dict`` reads them."""
        out: dict[str, Any] = {}
        for name, value in self.cleaned_data.items():
            if name == "name" or value in (None, ""):
                continue
            if name in ("empty_is_error", "stop_on_fatal", "swallow_errors", "ask_model_to_retry", "clean_error_text"):
                value = value == "true"
            out[name] = value
        return out


class RunReviewForm(forms.Form):
    """A review of any run (``tracer/reviews.py`` checks what goes together); ``verdict`` is why a guard
    stopped the run, for guard stops only."""

    verdict = forms.ChoiceField(
        required=False, label="why it stopped", choices=StopReview.Verdict.choices, widget=forms.RadioSelect
    )
    verdict_override = forms.ChoiceField(
        required=False,
        label="verdict override",
        choices=[("", "the judge's verdict stands"), *Run.Verdict.choices],
    )
    override_reason = TextField(required=False, max_length=2000, label="why the judge was wrong")
    note = TextField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))
    tags = TextField(required=False, max_length=500, help_text="words separated by commas or spaces")
    identical = forms.BooleanField(required=False, label="also review the identical unreviewed stops")


class StopFilterForm(forms.Form):
    """The stop queue's narrowing: reviewed or not, a policy, an experiment, one kind of stop. A bad value
    is named on the page and that narrowing dropped."""

    state = forms.ChoiceField(
        required=False,
        choices=[("unreviewed", "unreviewed"), ("reviewed", "reviewed"), ("all", "all")],
        widget=forms.HiddenInput,
    )
    policy = forms.ChoiceField(required=False)
    experiment = forms.ChoiceField(required=False)
    stop_reason = forms.ChoiceField(
        required=False,
        label="stop",
        choices=BLANK
        + [(v, Run.StopReason(v).label) for v in (Run.StopReason.CONSECUTIVE_ERRORS, Run.StopReason.MAX_STEPS)]
        + [("judges_disagree", f"the rules and the {MODEL_JUDGE_LABEL} disagree")],
    )

    def __init__(self, *args: Any, policies: list[str], experiments: list[Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["policy"].choices = BLANK + [(p, p) for p in policies]
        self.fields["experiment"].choices = BLANK + [(str(e.pk), f"#{e.pk} {e}") for e in experiments]

    def filters(self) -> dict[str, Any]:
        """``stops_filtered``'s arguments from the fields that are valid."""
        self.is_valid()
        data = self.cleaned_data
        return {
            "policy": data.get("policy") or "",
            "experiment_id": int(data["experiment"]) if data.get("experiment") else None,
            "stop_reason": data.get("stop_reason") or "",
        }

    def queue_state(self) -> str:
        self.is_valid()
        return self.cleaned_data.get("state") or "unreviewed"


class ApiTokenForm(forms.Form):
    name = TextField(max_length=100, widget=forms.TextInput(attrs={"autocomplete": "off"}))


class LaunchForm(forms.Form):
    scenarios = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple)
    policies = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple)
    model_backend = forms.ChoiceField(label="model backend", initial=ModelBackendName.SIMULATED)
    repeats = forms.IntegerField(min_value=1, max_value=50, initial=1)
    name = TextField(required=False, max_length=200)
    step_delay_s = forms.FloatField(
        required=False,
        label="pace",
        min_value=0,
        max_value=STEP_DELAY_MAX_S,
        widget=forms.NumberInput(attrs={"class": "short", "step": "0.1", "placeholder": "0"}),
        error_messages={
            "invalid": f"expected seconds between steps, a number from 0 to {STEP_DELAY_MAX_S:g}",
            "min_value": f"expected seconds between steps, a number from 0 to {STEP_DELAY_MAX_S:g}",
            "max_value": f"expected seconds between steps, a number from 0 to {STEP_DELAY_MAX_S:g}",
        },
        help_text="seconds a worker waits after each step, to watch the runs arrive; empty: the worker's own",
    )
    judge = forms.ChoiceField(
        required=False,
        initial="rules",
        choices=[("rules", "the scenario's rules"), ("claude", f"the rules and the {MODEL_JUDGE_LABEL}")],
        help_text="the model judge asks Claude for a second verdict beside the rules' (needs ANTHROPIC_API_KEY); "
        "where the two disagree the run goes to the review queue",
    )

    def clean_judge(self) -> str:
        return self.cleaned_data.get("judge") or "rules"

    def __init__(
        self,
        *args: Any,
        scenarios: list[str],
        policies: list[str],
        backends: list[str],
        packs: list[tuple[str, str, list[str]]] | None = None,
        **kwargs: Any,
    ):
        """``packs``: (name, title, scenario names) of each scenario pack, to group the scenarios by."""
        super().__init__(*args, **kwargs)
        self.packs = packs if packs is not None else [("", "", list(scenarios))]
        self.fields["scenarios"].choices = [(s, s) for s in scenarios]
        self.fields["policies"].choices = [(p, p) for p in policies]
        self.fields["model_backend"].choices = [(b, b) for b in backends]

    def scenario_groups(self) -> list[dict[str, Any]]:
        """The scenario checkboxes grouped by pack, in the packs' order: name, title and the bound choices."""
        boxes = {box.data["value"]: box for box in self["scenarios"]}
        groups = []
        for name, title, pack in self.packs:
            choices = [boxes[n] for n in pack if n in boxes]
            if choices:
                groups.append({"name": name, "title": title, "choices": choices})
        return groups


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files from one ``<input type="file" multiple>``: a list of uploads."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[Any]:
        one = super().clean
        if isinstance(data, list | tuple):
            return [one(item, initial) for item in data] or [one(None, initial)]
        return [one(data, initial)]


IMPORT_MAX_FILE_MB = 50


class ImportForm(forms.Form):
    """Files to import (run documents, JSON Lines batches, Messages transcripts) and the labels that
    make their runs comparable with others of the same task."""

    # An empty file is taken (not refused by the field, which would refuse the whole upload): its
    # report says it is empty, and the other files import.
    files = MultipleFileField(
        label="files",
        allow_empty_file=True,
        help_text=f".json (a run document, a transcript, or a list of them) or .jsonl; at most {IMPORT_MAX_FILE_MB} MB",
        widget=MultipleFileInput(attrs={"accept": ".json,.jsonl,.ndjson,application/json"}),
    )
    scenario = TextField(
        label="scenario key",
        required=False,
        validators=[name_validator(names.SCENARIO_KEY_MAX)],  # names the limit too
        help_text="scenario key: runs with the same key compare and share a matrix row (blank: as each file says)",
    )
    policy = TextField(
        label="policy label",
        required=False,
        validators=[name_validator(names.POLICY_NAME_MAX)],
        help_text="policy label, a matrix column (blank: as each file says)",
    )

    def clean_files(self) -> list[Any]:
        files = self.cleaned_data["files"]
        for upload in files:
            if upload.size > IMPORT_MAX_FILE_MB * 1024 * 1024:
                raise ValidationError(
                    f"{upload.name} is {upload.size / 1024 / 1024:.0f} MB; the most one file may be is "
                    f"{IMPORT_MAX_FILE_MB} MB (split a JSON Lines batch, or use manage.py import_traces)"
                )
        return files
