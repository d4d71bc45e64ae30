"""Recorded traces: experiments, runs, steps, policy variants and reviews of runs.

Runs may also come from outside (imported transcripts, OpenTelemetry spans), where scenario, policy
or verdict are unknown: those fields are blank, never required. Counters live on ``Run`` so list
pages never aggregate steps; the recorder keeps them consistent with the steps it writes.
Stop reasons, step kinds, error categories and model backends are ``agents.vocabulary``'s: the
choices here are built from those enums, never spelled again.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum

from django.conf import settings as django_settings
from django.db import models
from django.utils import timezone

from agents import prices, vocabulary


def run_cost(model_name: str, created_at: datetime | None, input_tokens: int, output_tokens: int) -> Decimal | None:
    """What a run's tokens cost: ``model_name``'s price on the (UTC) day it started, as every page
    and the list's stored ``cost_usd`` price it; no tokens cost nothing; None: the model has no price."""
    if not (input_tokens or output_tokens):
        return Decimal(0)
    if not model_name:
        return None
    day = (created_at or timezone.now()).astimezone(UTC).date()
    return prices.cost(model_name, input_tokens, output_tokens, on=day)


def vocabulary_choices(
    qualname: str, terms: type[StrEnum], *, extra: dict[str, str] | None = None, plain_labels: bool = False
) -> type[models.TextChoices]:
    """``TextChoices`` with the members of an ``agents.vocabulary`` enum: the same names and values.

    Labels are ``vocabulary.in_words`` (``final_answer``: "Final answer"), the one wording every page
    uses, or the values themselves with ``plain_labels``. ``extra`` adds values that only the tracer
    knows (name: value).
    """
    members = [(m.name, m.value) for m in terms] + list((extra or {}).items())
    members = [(name, (value, value if plain_labels else vocabulary.in_words(value))) for name, value in members]
    return models.TextChoices(qualname.rpartition(".")[2], members, module=__name__, qualname=qualname)


class PolicyVariant(models.Model):
    """A named harness policy. Presets come from a data migration; users add variants."""

    name = models.CharField(max_length=40, unique=True)
    description = models.TextField(blank=True)
    settings = models.JSONField()  # agents.policies.Policy.settings()
    is_preset = models.BooleanField(default=False)
    created_by = models.ForeignKey(django_settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    # Archived: left out of the launch form and the Policies page's matrix unless asked for; its runs
    # are kept as they are.
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-is_preset", "name"]

    def __str__(self) -> str:
        return self.name


class Experiment(models.Model):
    """Scenarios × policies × repeats launched together with one model backend."""

    ModelBackend = vocabulary_choices("Experiment.ModelBackend", vocabulary.ModelBackendName, plain_labels=True)

    name = models.CharField(max_length=200, blank=True)
    scenarios = models.JSONField(default=list)
    policies = models.JSONField(default=list)  # policy names
    repeats = models.PositiveIntegerField(default=1)
    model_backend = models.CharField(max_length=20, choices=ModelBackend.choices, default=ModelBackend.SIMULATED)
    model_name = models.CharField(max_length=100, blank=True)
    total_runs = models.PositiveIntegerField(default=0)
    finished_runs = models.PositiveIntegerField(default=0)  # kept by the recorder
    # The pace: seconds a worker pauses after each recorded step of these runs, so a person can watch
    # them arrive; null: the worker's RLT_STEP_DELAY_S (experiments.STEP_DELAY_MAX_S is the most).
    step_delay_s = models.FloatField(null=True, blank=True)
    created_by = models.ForeignKey(django_settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # Archived (the admin's action): its runs are kept, out of the runs list, the matrix, the stop
    # queue and the pickers unless it is asked for by name. Nothing deletes an experiment but retention.
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        # the few archived ones, which every default view leaves out (reads.common.not_archived)
        indexes = [
            models.Index(
                fields=["archived_at"], condition=models.Q(archived_at__isnull=False), name="experiment_archived_idx"
            )
        ]

    def __str__(self) -> str:
        return self.name or f"experiment {self.pk}"

    @property
    def is_done(self) -> bool:
        return self.total_runs > 0 and self.finished_runs >= self.total_runs


# Stop reasons that mean a guard of the harness stopped the run.
GUARD_STOP_REASONS = (vocabulary.StopReason.CONSECUTIVE_ERRORS.value, vocabulary.StopReason.MAX_STEPS.value)
# The review queue: guard stops, and runs whose two judges disagree.
IN_REVIEW_QUEUE = models.Q(stop_reason__in=GUARD_STOP_REASONS) | models.Q(judges_disagree=True)


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        FINISHED = "finished"

    StopReason = vocabulary_choices("Run.StopReason", vocabulary.StopReason)
    GUARD_STOPS = (StopReason.CONSECUTIVE_ERRORS, StopReason.MAX_STEPS)  # a guard of the harness stopped it
    # Runs that arrived from outside (transcripts, spans) were not run by any backend here.
    ModelBackend = vocabulary_choices(
        "Run.ModelBackend", vocabulary.ModelBackendName, extra={"IMPORTED": "imported"}, plain_labels=True
    )

    class Verdict(models.TextChoices):
        PASS = "pass"
        FAIL = "fail"

    class Source(models.TextChoices):
        """Where a run came from. Only ``agent`` runs were executed here; the others arrived from
        outside (``tracer/intake/``) and are labelled "imported" wherever a run is shown."""

        AGENT = "agent"  # executed here by a worker
        IMPORT = "import"  # a run document, JSON Lines batch or Messages transcript (upload, import_traces)
        OTLP = "otlp"  # OpenTelemetry spans sent to /v1/traces
        API = "api"  # the live step API

    experiment = models.ForeignKey(Experiment, null=True, blank=True, on_delete=models.CASCADE, related_name="runs")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    label = models.CharField(max_length=200, blank=True)  # a sub-agent's job, e.g. "lookup order 1050"
    # A sub-agent's: the index of its parent's step that started it (the tool call it ran inside);
    # null for top-level runs and for sub-agents recorded before this was kept.
    parent_step = models.PositiveIntegerField(null=True, blank=True)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.AGENT)
    # For runs from outside: the file name, the OTLP service.name, the SDK that sent it…
    source_detail = models.CharField(max_length=200, blank=True)
    # The sender's id for the run (a trace id, a document's external_id): sending it again updates or
    # dedupes instead of adding a run. Unique per source and owner where set (constraints below).
    external_id = models.CharField(max_length=200, blank=True)
    # Who sent an imported run (the API and OTLP answer only their owner's runs); null for runs
    # executed here and for files imported without --user.
    owner = models.ForeignKey(
        django_settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="owned_runs"
    )
    labels = models.JSONField(default=dict, blank=True)  # the sender's free-form labels (name: text)

    scenario = models.CharField(max_length=100, blank=True)
    policy_name = models.CharField(max_length=40, blank=True)
    policy = models.ForeignKey(PolicyVariant, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    policy_settings = models.JSONField(default=dict, blank=True)  # snapshot at launch
    model_backend = models.CharField(max_length=20, choices=ModelBackend.choices, default=ModelBackend.SIMULATED)
    model_name = models.CharField(max_length=100, blank=True)
    task = models.TextField(blank=True)
    # The tools the run could call, as its start said (Messages API schemas, with MCP annotations or a
    # pack's flags where known): what diagnosis reads a tool's input schema and effects from.
    tools = models.JSONField(default=list, blank=True)

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    stop_reason = models.CharField(max_length=20, choices=StopReason.choices, blank=True)
    # The Messages API's stop_reason of the run's last model response (end_turn, max_tokens, refusal…);
    # blank when the run never got one or came from elsewhere without it.
    api_stop_reason = models.CharField(max_length=40, blank=True)
    guard = models.CharField(max_length=200, blank=True)  # which guard stopped it, e.g. "3 tool errors in a row"
    verdict = models.CharField(max_length=4, choices=Verdict.choices, blank=True)  # blank: unjudged
    verdict_reason = models.TextField(blank=True)
    # The optional model judge (``agents.model_judge``, asked with ``--judge claude``), beside the rules'
    # verdict, never instead of it. ``judge`` is who was asked to judge (NULL or "rules": the rules alone;
    # "claude": the model judge too); ``model_verdict`` its pass or fail (blank: it could not judge, and
    # ``model_verdict_reason`` says why), ``model_verdict_reason`` its one-line rationale with the model;
    # ``judges_disagree`` both judged and differ, which puts the run in the review queue. Nullable
    # without defaults so that SQLite adds them without rebuilding tracer_run.
    judge = models.CharField(max_length=10, null=True, blank=True)  # noqa: DJ001 (NULL: the rules alone)
    model_verdict = models.CharField(max_length=4, null=True, blank=True)  # noqa: DJ001 (NULL: not asked)
    model_verdict_reason = models.TextField(null=True, blank=True)  # noqa: DJ001 (NULL: not asked)
    judges_disagree = models.BooleanField(null=True, blank=True)
    final_answer = models.TextField(blank=True)
    error = models.TextField(blank=True)  # exception (crashed) or fatal error message
    transcript = models.JSONField(default=list, blank=True)  # raw Messages API exchange
    search_text = models.TextField(blank=True)  # tool inputs + final answer, for the list search

    # Counters kept by the recorder, so list and matrix pages never count steps.
    step_count = models.PositiveIntegerField(default=0)
    tool_call_count = models.PositiveIntegerField(default=0)
    error_count = models.PositiveIntegerField(default=0)  # steps whose tool_result had is_error
    # tool attempts that failed, a retry that then worked or not: a retried 503 that came back is one here
    # and none in error_count (the failed steps)
    failed_attempt_count = models.PositiveIntegerField(default=0)
    retry_count = models.PositiveIntegerField(default=0)  # harness retries, all steps
    # retries and model repeats after a non-retryable failure (or, for a repeat, after nothing found)
    wasted_retry_count = models.PositiveIntegerField(default=0)
    model_retry_count = models.PositiveIntegerField(default=0)  # retries of model API calls, all steps and the end
    # The attempts of the model call that ended the run, when one failed (agents.events.ModelAttempt each).
    failed_model_call = models.JSONField(default=list, blank=True)
    # False for a run whose source cannot carry a tool_result's is_error (GenAI's gen_ai.input.messages,
    # OpenInference's llm.input_messages drop it): a failure is known there only where the result says
    # so (a structured isError) or a tool span marks it, and the run page says so.
    is_error_carried = models.BooleanField(default=True)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    # Its duration: what its steps measured (``waterfall.step_time_s`` summed), model and tool latencies
    # and the waits before retries, in milliseconds, and the part of it spent waiting. Not the wall
    # clock: a pace between steps or a busy worker adds nothing. 0: no step recorded a timing.
    measured_ms = models.FloatField(default=0)
    waited_ms = models.FloatField(default=0)
    # What its tokens cost in dollars (``Run.cost``), written when it ends, for the list's sort; NULL
    # while it runs and when its model has no price.
    cost_usd = models.FloatField(null=True, blank=True)
    # Its findings' kinds (agents.diagnosis), comma-separated in step order, written with the findings
    # when it ends (tracer/diagnosis.py), so the runs list shows them from the row; and the rule set
    # that made them, blank until it has been diagnosed.
    finding_kinds = models.CharField(max_length=400, blank=True)
    rule_set = models.CharField(max_length=20, blank=True)
    # What its diagnosis added to the rollups (tracer/diagnosis.py), so diagnosing it again takes
    # exactly that back first.
    rolled_up = models.JSONField(default=dict, blank=True)
    # A guard stop's signature (tracer/signatures.py), written with its findings: the stop queue counts
    # the unreviewed stops identical to each through it. NULL for other runs and until diagnosed;
    # nullable without a default so that SQLite adds it without rebuilding tracer_run.
    stop_signature = models.CharField(max_length=16, null=True, blank=True)  # noqa: DJ001 (NULL: none yet)

    # Who claimed it: the Celery worker's name (``celery@host``; the host name outside a worker) and
    # the pid of the process that executes it there. Matched by equality, never parsed from text.
    worker_name = models.CharField(max_length=200, blank=True)
    worker_pid = models.PositiveIntegerField(null=True, blank=True)
    # The database, not the broker, says what must execute (docs/recording.md, "Leases"). Each claim
    # writes a new token; only the holder of the current token may record the run's steps and end.
    # The holder renews the lease with each step and from a heartbeat; once it lapses, the sweep ends
    # the run ``interrupted`` and queues one re-run of it.
    claim_token = models.CharField(max_length=32, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    enqueued_at = models.DateTimeField(null=True, blank=True)  # when its task message was last sent
    send_count = models.PositiveIntegerField(default=0)  # task messages sent for it; 0: never sent to workers
    rerun_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        # Each list query is "equal on some columns, newest first": the equality columns lead and
        # (created_at, id) follow, so a page reads 50 index entries instead of sorting every match.
        # SQLite's planner (no ANALYZE) takes an equality index over an ordering one.
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="run_created_idx"),
            models.Index(fields=["parent", "-created_at", "-id"], name="run_top_created_idx"),
            models.Index(
                fields=["scenario", "policy_name", "parent", "-created_at", "-id"], name="run_scen_pol_created_idx"
            ),
            models.Index(fields=["policy_name"], name="run_policy_idx"),
            # Covers the policy matrix (``reads.matrix.matrix_groups``: its filter, then its GROUP BY
            # columns in order, then every column it sums) and the stop queue's "latest finished run per
            # scenario × policy" (id included: SQLite's indexes hold it anyway, PostgreSQL's need it to
            # skip the table).
            models.Index(
                fields=[
                    "status",
                    "parent",
                    "scenario",
                    "policy_name",
                    "model_backend",
                    "experiment",
                    "verdict",
                    "stop_reason",
                    "source",
                    "tool_call_count",
                    "retry_count",
                    "wasted_retry_count",
                    "model_retry_count",
                    "input_tokens",
                    "output_tokens",
                    "started_at",
                    "finished_at",
                    "id",
                ],
                name="run_matrix_cover_idx",
            ),
            # The list filtered on one of these columns, newest first: a page reads 50 entries (on
            # "stop_reason" alone, SQLite would sort every run of that reason); the stop queue's
            # stop_reason IN (...) reads the first.
            models.Index(fields=["stop_reason", "-created_at", "-id"], name="run_stop_created_idx"),
            # The stop queue's identical stops (id included: PostgreSQL counts them from the index alone),
            # and the guard stops not yet given a signature, by the kinds a page asks for (PostgreSQL
            # otherwise reads every guard stop through the queue's indexes to find these few).
            models.Index(
                fields=["stop_signature", "id"],
                condition=models.Q(stop_signature__isnull=False),
                name="run_stop_signature_idx",
            ),
            models.Index(
                fields=["stop_reason", "scenario", "policy_name"],
                condition=models.Q(stop_signature__isnull=True, stop_reason__in=["consecutive_errors", "max_steps"]),
                name="run_stop_unsigned_idx",
            ),
            # The review queue (``reads.stops_page``: guard stops, and runs whose two judges disagree), a few
            # percent of the runs: its pages newest first, and its tabs' counts and filter choices read
            # from these alone (policy and experiment in them, so no run is read to count it).
            models.Index(
                fields=["-created_at", "-id", "policy_name", "experiment"],
                condition=IN_REVIEW_QUEUE,
                name="run_queue_created_idx",
            ),
            models.Index(
                fields=["policy_name", "-created_at", "-id", "experiment"],
                condition=IN_REVIEW_QUEUE,
                name="run_queue_policy_idx",
            ),
            models.Index(fields=["verdict", "-created_at", "-id"], name="run_verdict_created_idx"),
            # The review queue's runs whose two judges disagree (few).
            models.Index(
                fields=["-created_at", "-id"], condition=models.Q(judges_disagree=True), name="run_disagree_idx"
            ),
            models.Index(fields=["model_backend", "-created_at", "-id"], name="run_backend_created_idx"),
            models.Index(fields=["status", "-created_at", "-id"], name="run_status_created_idx"),
            # A starting worker and ``interrupt_stale --worker`` look for one name's running runs.
            models.Index(fields=["worker_name", "status"], name="run_worker_idx"),
            # The sweep: running runs whose lease lapsed, queued runs whose message is due again.
            models.Index(fields=["status", "lease_expires_at"], name="run_lease_idx"),
            models.Index(fields=["status", "enqueued_at"], name="run_enqueued_idx"),
            # The list's source filter; and a sender's run found again by its id (a re-sent trace).
            models.Index(fields=["source", "-created_at", "-id"], name="run_source_created_idx"),
            models.Index(fields=["external_id"], name="run_external_id_idx"),
            # The runs list's column sorts (``reads.runs_list.RUN_SORTS``): top-level runs by one column, ties
            # by id in the same direction, so a page reads 50 entries of one index either way. SQLite
            # reads these; PostgreSQL cannot read an order after "parent_id IS NULL" and reads partial
            # indexes of (column, id) instead, made for it alone by migration 0022.
            *(
                models.Index(fields=["parent", column, "id"], name=f"run_sort_{name}_idx")
                for name, column in (
                    ("scenario", "scenario"),
                    ("policy", "policy_name"),
                    ("status", "status"),
                    ("steps", "step_count"),
                    ("errors", "error_count"),
                    ("retries", "retry_count"),
                    ("verdict", "verdict"),
                    ("stop", "stop_reason"),
                    ("duration", "measured_ms"),
                    ("cost", "cost_usd"),
                )
            ),
        ]
        # One run per sender's id, per source and owner. Two constraints, because NULLs are distinct
        # in a unique index (``nulls_distinct`` is PostgreSQL 15+ only): one for owned runs, one for
        # runs imported without an owner.
        constraints = [
            models.UniqueConstraint(
                fields=["source", "owner", "external_id"],
                condition=models.Q(owner__isnull=False) & ~models.Q(external_id=""),
                name="run_owner_external_id_unique",
            ),
            models.UniqueConstraint(
                fields=["source", "external_id"],
                condition=models.Q(owner__isnull=True) & ~models.Q(external_id=""),
                name="run_unowned_external_id_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} {self.scenario or '?'} / {self.policy_name or '?'}"

    @property
    def is_active(self) -> bool:
        return self.status != self.Status.FINISHED

    @property
    def is_simulated(self) -> bool:
        return self.model_backend == self.ModelBackend.SIMULATED

    @property
    def is_imported(self) -> bool:
        """Arrived from outside (a file, OTLP spans, the API): never executed here."""
        return self.source != self.Source.AGENT

    @property
    def is_guard_stop(self) -> bool:
        return self.stop_reason in self.GUARD_STOPS

    @property
    def model_judged(self) -> bool:
        """The model judge was asked (whether or not it came to a verdict)."""
        return self.model_verdict is not None

    @property
    def duration_s(self) -> float | None:
        """Seconds from its start to its end, or to now while it runs; None when it never started."""
        if self.started_at is None:
            return None
        end = self.finished_at or (timezone.now() if self.is_active else None)
        return max((end - self.started_at).total_seconds(), 0.0) if end else None

    @property
    def duration_recorded(self) -> bool:
        return self.measured_ms > 0

    @property
    def cost(self):
        """What its tokens cost (``agents.prices.cost`` at its model's price on its day), None: unknown."""
        return run_cost(self.model_name, self.started_at or self.created_at, self.input_tokens, self.output_tokens)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def spec(self) -> dict:
        """What this run executes: its scenario, policy (with the settings snapshot) and model. A re-run
        and a sub-agent's run are created with the same."""
        return {
            "scenario": self.scenario,
            "policy_id": self.policy_id,
            "policy_name": self.policy_name,
            "policy_settings": self.policy_settings,
            "model_backend": self.model_backend,
            "model_name": self.model_name,
        }


class Step(models.Model):
    """One tool_use with its attempts, or the final answer."""

    Kind = vocabulary_choices("Step.Kind", vocabulary.StepKind)
    Category = vocabulary_choices("Step.Category", vocabulary.ErrorCategory, plain_labels=True)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField()  # 1-based
    kind = models.CharField(max_length=12, choices=Kind.choices)
    tool_name = models.CharField(max_length=100, blank=True)
    tool_use_id = models.CharField(max_length=100, blank=True)
    input = models.JSONField(null=True, blank=True)
    attempts = models.JSONField(default=list, blank=True)  # agents.events.Attempt.to_dict() each
    result_content = models.JSONField(null=True, blank=True)  # the tool_result content sent to the model
    is_error = models.BooleanField(default=False)
    category = models.CharField(max_length=12, choices=Category.choices, blank=True)  # blank when it succeeded
    retryable = models.BooleanField(null=True, blank=True)
    retry_count = models.PositiveIntegerField(default=0)
    latency_ms = models.FloatField(default=0)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    text = models.TextField(blank=True)  # final answer, or assistant text with the tool_use
    api_stop_reason = models.CharField(max_length=40, blank=True)  # of the model response that produced it
    # The attempts of the model call whose response produced this step (agents.events.ModelAttempt each).
    model_attempts = models.JSONField(default=list, blank=True)
    # The index of the earlier step this one's call repeats: the model sent the same call again right
    # after that one failed or found nothing (a model repeat, as the Tools page counts them).
    repeat_of = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="step_run_index_unique")]

    def __str__(self) -> str:
        return f"step {self.index} of run {self.run_id}"


class StopReview(models.Model):
    """A reviewer's annotation of one run (``tracer/reviews.py`` writes it): for any run a verdict
    override with its reason, a note and tags; for a run a guard stopped, also why it stopped
    (``verdict``). The judge's verdict stays on ``Run.verdict``: an override sits beside it, never over it.

    The model keeps its first name (reviews began with guard stops) so its permissions, which the
    ``reviewer`` group holds, keep theirs.
    """

    class Verdict(models.TextChoices):
        """Why a guard stopped the run, as the reviewer sees it."""

        UNHELPFUL_ERROR = "unhelpful_error", "unhelpful error message"
        MODEL_STUCK = "model_stuck", "model stuck"
        EXPECTED = "expected", "expected"
        OTHER = "other", "other"

    run = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="review")
    verdict = models.CharField(max_length=20, choices=Verdict.choices, blank=True)  # guard stops only
    # The reviewer's pass or fail where the judge got it wrong; blank: the judge's verdict stands.
    verdict_override = models.CharField(max_length=4, choices=Run.Verdict.choices, blank=True)
    override_reason = models.TextField(blank=True)
    note = models.TextField(blank=True)
    reviewer = models.ForeignKey(django_settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    reviewed_at = models.DateTimeField(auto_now=True)

    class Meta:
        # The runs list's "verdict overridden" filter and the matrix's effective verdict.
        indexes = [models.Index(fields=["verdict_override"], name="review_override_idx")]

    def __str__(self) -> str:
        return f"review of run {self.run_id}: {self.verdict or self.verdict_override or 'note'}"

    @property
    def effective_verdict(self) -> str:
        """What the run counts as: the reviewer's override, else the judge's verdict."""
        return self.verdict_override or self.run.verdict


class ReviewTag(models.Model):
    """One tag a reviewer put on a run's review (lowercase words: ``flaky-judge``, ``needs-prompt``)."""

    review = models.ForeignKey(StopReview, on_delete=models.CASCADE, related_name="tags")
    name = models.CharField(max_length=40)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["review", "name"], name="reviewtag_review_name_unique")]
        indexes = [models.Index(fields=["name", "review"], name="reviewtag_name_idx")]

    def __str__(self) -> str:
        return self.name


class BulkReview(models.Model):
    """One review given to several identical stops at once (``tracer/reviews.py``), kept so it can be
    undone for ``reviews.UNDO_WINDOW`` after: each run's review as it was before (``before``: a run id
    and its review's fields and tags, or null where the run had none)."""

    user = models.ForeignKey(django_settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField()
    summary = models.CharField(max_length=400)  # what the review said, for "Reviewed 7 runs as …"
    before = models.JSONField()
    undone_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["user", "-created_at"], name="bulkreview_user_idx")]

    def __str__(self) -> str:
        return f"bulk review of {len(self.before)} runs at {self.created_at:%Y-%m-%d %H:%M}"

    @property
    def run_ids(self) -> list[int]:
        return [entry["run"] for entry in self.before]


class ApiToken(models.Model):
    """A user's key to the API and the OTLP receiver (``tracer/tokens.py``): stored hashed, shown once.

    The secret itself is never stored: ``prefix`` (its first characters, shown in lists) finds the row
    and ``digest`` (SHA-256 of the whole secret) proves it. A revoked token stays, for the record.
    """

    PREFIX_LENGTH = 12  # "rlt_" and 8 random characters

    user = models.ForeignKey(django_settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=PREFIX_LENGTH, db_index=True)
    digest = models.CharField(max_length=64, unique=True)  # hex SHA-256 of the secret
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "-created_at", "-id"], name="apitoken_user_created_idx")]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class OtlpTrace(models.Model):
    """A trace received at ``/v1/traces`` (``tracer/intake/otlp/receiver.py``): its sender, the run it is,
    and how many of its spans are stored."""

    owner = models.ForeignKey(django_settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="otlp_traces")
    trace_id = models.CharField(max_length=32)  # 32 lowercase hex digits
    # set in the transaction that creates the row; the row comes first, so two requests that start
    # the same trace at once collide on (owner, trace_id) before either writes a run
    run = models.OneToOneField(Run, null=True, blank=True, on_delete=models.CASCADE, related_name="otlp_trace")
    span_count = models.PositiveIntegerField(default=0)  # spans stored; each write checks it did not move
    # How many of them its run was last written from: fewer while a request that stored spans is still
    # to write the run (it answers first, then writes), or after it died; the sweep writes those.
    recorded_spans = models.PositiveIntegerField(default=0)
    complete = models.BooleanField(default=False)  # its root span has arrived
    updated_at = models.DateTimeField(auto_now=True)  # when spans were last stored

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "trace_id"], name="otlptrace_owner_trace_unique")]
        # the sweep's traces whose run is behind their spans (few, or none), oldest first
        indexes = [
            models.Index(
                fields=["updated_at"],
                name="otlptrace_unrecorded_idx",
                condition=models.Q(recorded_spans__lt=models.F("span_count")),
            )
        ]

    def __str__(self) -> str:
        return f"trace {self.trace_id} (run {self.run_id})"


class OtlpSpanBatch(models.Model):
    """The spans of one trace that came in one request, as received (``tracer.intake.otlp.wire.Span``), kept
    so the trace can be read again when more of its spans arrive. A row per trace per request rather
    than per span: a request of 512 spans writes a few dozen rows. A span id sent again is taken once
    (the receiver compares ids while the trace's ``span_count`` guards the write)."""

    trace = models.ForeignKey(OtlpTrace, on_delete=models.CASCADE, related_name="span_batches")
    # zlib-compressed JSON list of Span.to_dict(): span attributes are large (a model call's whole
    # request), and stored as jsonb they cost PostgreSQL 15× the time of these bytes
    data = models.BinaryField()
    span_count = models.PositiveIntegerField(default=0)
    received_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.span_count} spans of trace {self.trace_id}"


class Finding(models.Model):
    """One of the lessons' mistakes seen in one run (``agents.diagnosis``), written when the run ends
    (``tracer/diagnosis.py``). The run's scope (its start, source, scenario, policy, model) is copied
    here so the Findings page filters and pages findings by index without joining the runs."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="findings")
    kind = models.CharField(max_length=40)  # an agents.diagnosis.kinds key
    tool = models.CharField(max_length=200, blank=True)
    steps = models.JSONField(default=list)  # the step indexes that show it
    message = models.TextField()
    evidence = models.TextField(blank=True)
    fix = models.TextField(blank=True)
    setting = models.JSONField(default=dict, blank=True)  # the policy setting(s) the fix names
    rewrite = models.TextField(blank=True)
    basis = models.TextField(blank=True)
    template = models.CharField(max_length=300, blank=True)
    wasted_calls = models.PositiveIntegerField(default=0)
    wasted_input_tokens = models.PositiveIntegerField(default=0)
    wasted_output_tokens = models.PositiveIntegerField(default=0)
    wasted_ms = models.FloatField(default=0)
    rule_set = models.CharField(max_length=20)
    position = models.PositiveSmallIntegerField(default=0)  # its place among the run's findings
    run_created_at = models.DateTimeField()
    source = models.CharField(max_length=10)
    scenario = models.CharField(max_length=100, blank=True)
    policy_name = models.CharField(max_length=40, blank=True)
    model_name = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["run", "position"]
        indexes = [
            models.Index(fields=["kind", "-run_created_at", "-id"], name="finding_kind_created_idx"),
            models.Index(fields=["tool", "kind"], name="finding_tool_kind_idx"),
            models.Index(fields=["-run_created_at", "-id"], name="finding_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} in run {self.run_id}"


class Scoped(models.Model):
    """A rollup row's scope: the day its runs started, and the runs list's filters the pages take."""

    day = models.DateField()
    source = models.CharField(max_length=10)
    scenario = models.CharField(max_length=100, blank=True)
    policy_name = models.CharField(max_length=40, blank=True)
    model_name = models.CharField(max_length=100, blank=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{type(self).__name__} {self.day} {self.source}/{self.scenario or '-'}/{self.policy_name or '-'}"


class ToolDay(Scoped):
    """A tool's calls in one scope and day, summed over its runs when each ends (the Tools page sums these)."""

    tool = models.CharField(max_length=200)
    runs = models.PositiveIntegerField(default=0)
    calls = models.PositiveIntegerField(default=0)  # calls the model made
    failed = models.PositiveIntegerField(default=0)  # calls whose tool_result was an error
    # the calls' attempts that failed, whether or not a retry then worked (agents.events.failed_attempts)
    failed_attempts = models.PositiveIntegerField(default=0)
    failed_validation = models.PositiveIntegerField(default=0)
    failed_transient = models.PositiveIntegerField(default=0)
    failed_permission = models.PositiveIntegerField(default=0)
    failed_business = models.PositiveIntegerField(default=0)
    failed_fatal = models.PositiveIntegerField(default=0)
    failed_unknown = models.PositiveIntegerField(default=0)  # no category known
    empty = models.PositiveIntegerField(default=0)  # calls that found nothing
    retries = models.PositiveIntegerField(default=0)  # harness retries
    repeats = models.PositiveIntegerField(default=0)  # the model sending the same call again after a failure
    wasted = models.PositiveIntegerField(default=0)  # retries and repeats after a failure no retry can fix
    wasted_input_tokens = models.PositiveIntegerField(default=0)
    wasted_output_tokens = models.PositiveIntegerField(default=0)
    # Outcomes of transient failures by attempt: tried a 2nd time / succeeded then; a 3rd time / succeeded.
    transient_first = models.PositiveIntegerField(default=0)  # calls whose first attempt failed transient
    second_tries = models.PositiveIntegerField(default=0)
    second_ok = models.PositiveIntegerField(default=0)
    third_tries = models.PositiveIntegerField(default=0)
    third_ok = models.PositiveIntegerField(default=0)
    refusals_retried = models.PositiveIntegerField(default=0)  # calls retried after a refusal
    refusals = models.PositiveIntegerField(default=0)  # calls that failed with a refusal

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tool", "day", "source", "scenario", "policy_name", "model_name"], name="toolday_unique"
            )
        ]
        indexes = [
            models.Index(fields=["day", "tool"], name="toolday_day_idx"),
            # the few rows with wasted tokens, which the Tools page prices by model and day
            models.Index(
                fields=["tool", "model_name", "day"],
                condition=models.Q(wasted_input_tokens__gt=0) | models.Q(wasted_output_tokens__gt=0),
                name="toolday_wasted_idx",
            ),
        ]


class FindingDay(Scoped):
    """Findings of one kind and tool in one scope and day (the Findings page's counts and trend)."""

    kind = models.CharField(max_length=40)
    tool = models.CharField(max_length=200, blank=True)
    findings = models.PositiveIntegerField(default=0)
    runs = models.PositiveIntegerField(default=0)
    wasted_calls = models.PositiveIntegerField(default=0)
    wasted_input_tokens = models.PositiveIntegerField(default=0)
    wasted_output_tokens = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "tool", "day", "source", "scenario", "policy_name", "model_name"],
                name="findingday_unique",
            )
        ]
        indexes = [models.Index(fields=["day", "kind"], name="findingday_day_idx")]


class MessageTemplate(models.Model):
    """One failure message template a tool sent the model (ids and numbers masked), with its lint
    and a rewrite, from the first run that sent it."""

    key = models.CharField(max_length=16, unique=True)  # agents.diagnosis.lint.template_key
    tool = models.CharField(max_length=200)
    template = models.CharField(max_length=300)
    example = models.TextField()  # the message as one run sent it
    example_run = models.ForeignKey(Run, null=True, on_delete=models.SET_NULL, related_name="+")
    example_step = models.PositiveIntegerField(default=0)
    category = models.CharField(max_length=12, blank=True)
    what = models.BooleanField(default=False)
    why = models.BooleanField(default=False)
    instead = models.BooleanField(default=False)
    internals = models.CharField(max_length=200, blank=True)  # what internal details it holds, if any
    score = models.PositiveSmallIntegerField(default=0)
    rewrite = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"{self.tool}: {self.template}"


class TemplateDay(Scoped):
    """How often a message template was sent in one scope and day."""

    template = models.ForeignKey(MessageTemplate, on_delete=models.CASCADE, related_name="days")
    sent = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["template", "day", "source", "scenario", "policy_name", "model_name"], name="templateday_unique"
            )
        ]
        indexes = [models.Index(fields=["day", "template"], name="templateday_day_idx")]


class PatternDay(Scoped):
    """Failing runs of one signature (tool, category, message template, stop reason) in one scope and day."""

    signature = models.CharField(max_length=16)
    tool = models.CharField(max_length=200, blank=True)
    category = models.CharField(max_length=12, blank=True)
    template = models.CharField(max_length=300, blank=True)
    stop_reason = models.CharField(max_length=20, blank=True)
    runs = models.PositiveIntegerField(default=0)
    example_run = models.ForeignKey(Run, null=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["signature", "day", "source", "scenario", "policy_name", "model_name"], name="patternday_unique"
            )
        ]
        indexes = [
            models.Index(fields=["day", "signature"], name="patternday_day_idx"),
            # The Findings page sums the runs of every signature over all days: this index holds what it
            # reads, in signature order, so the sum never reads the table's rows.
            models.Index(fields=["signature", "runs", "example_run"], name="patternday_signature_idx"),
        ]


class MatrixTally(models.Model):
    """The policy matrix's sums over the runs it counts, one row per scenario, policy, model backend and
    experiment (0: none), kept by the database itself: triggers on ``tracer_run`` add a run as it
    becomes counted and take it back as it changes or goes (``tracer/tallies.py``), so the matrix
    reads a few rows whatever the number of runs."""

    scenario = models.CharField(max_length=100)
    policy_name = models.CharField(max_length=40)
    model_backend = models.CharField(max_length=20)
    experiment = models.BigIntegerField()  # the experiment's id; 0 for runs of no experiment
    runs = models.BigIntegerField(default=0)
    passes = models.BigIntegerField(default=0)
    unjudged = models.BigIntegerField(default=0)  # runs with no verdict: neither passes nor fails
    tool_calls = models.BigIntegerField(default=0)
    retries = models.BigIntegerField(default=0)
    wasted_retries = models.BigIntegerField(default=0)
    model_retries = models.BigIntegerField(default=0)
    guard_stops = models.BigIntegerField(default=0)
    max_steps_stops = models.BigIntegerField(default=0)
    cut_off = models.BigIntegerField(default=0)
    refusals = models.BigIntegerField(default=0)
    crashes = models.BigIntegerField(default=0)
    interrupted = models.BigIntegerField(default=0)
    imported = models.BigIntegerField(default=0)
    tokens = models.BigIntegerField(default=0)
    duration_us = models.BigIntegerField(default=0)  # microseconds from start to end, summed over the timed runs
    timed = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["scenario", "policy_name", "model_backend", "experiment"], name="matrixtally_key_unique"
            )
        ]
        indexes = [models.Index(fields=["experiment"], name="matrixtally_experiment_idx")]  # an experiment's page

    def __str__(self) -> str:
        return f"tally {self.scenario}/{self.policy_name}/{self.model_backend}/{self.experiment}: {self.runs} runs"
