"""Reviews of runs, written here: a reviewer's annotation of any run, and one review given to every
identical guard stop at once.

A review holds a verdict override (pass or fail) with the reason the judge was wrong, a note and tags;
a run a guard stopped may also say why it stopped (``StopReview.verdict``); any one of them is a
review. The judge's verdict stays on ``Run.verdict``: pages show both ("judge: fail · reviewer: pass
— reason"), and what a run counts as (``StopReview.effective_verdict``; the policy matrix's passes) is
the override where there is one.

Identical stops (``stops_page.stop_signature``): the same scenario, policy and stop reason, and the same
failing tool and error at the end. Such a bulk review is kept (``BulkReview``) with each run's review
as it was before, and for ``UNDO_WINDOW`` after it may be undone: each run gets back exactly that review,
or none. Every write checks every field first and raises one ``ValidationError`` naming each bad one;
then nothing is written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from .models import BulkReview, ReviewTag, Run, StopReview
from .reads import stops_page

TAG_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")
MAX_TAGS = 10
MAX_TEXT = 2000  # a note's and a reason's longest
UNDO_WINDOW = timedelta(minutes=10)  # how long after a bulk review it may be undone


def review_tags_parse(text: str) -> tuple[list[str], list[str]]:
    """Tags from what a reviewer typed (commas or spaces between them, any case): the tags, in order
    and once each, and a message for each one that is not a tag."""
    tags: list[str] = []
    bad: list[str] = []
    for word in re.split(r"[\s,]+", text or ""):
        tag = word.strip().lower()
        if not tag:
            continue
        if not TAG_PATTERN.fullmatch(tag):
            bad.append(
                f"{word[:60]!r} is not a tag: use up to 40 lowercase letters, digits, - and _, "
                "starting with a letter or digit"
            )
        elif tag not in tags:
            tags.append(tag)
    if len(tags) > MAX_TAGS:
        bad.append(f"at most {MAX_TAGS} tags; got {len(tags)}")
    return tags, bad


def run_review_check(
    *, run: Run, verdict: str, verdict_override: str, override_reason: str, note: str, tags: list[str]
) -> dict[str, list[str]]:
    """What is wrong with this review of ``run``, per field (empty: nothing)."""
    errors: dict[str, list[str]] = {}
    guard_stop = run.is_guard_stop
    if run.is_active:
        errors["run"] = [f"run {run.pk} is still {run.status}: review it once it has ended"]
    if verdict and verdict not in StopReview.Verdict.values:
        errors["verdict"] = [f"expected one of: {', '.join(StopReview.Verdict.values)}"]
    elif verdict and not guard_stop:
        errors["verdict"] = [
            f"only a run a guard stopped has a stop verdict; run {run.pk} ended with {run.stop_reason}"
        ]
    if verdict_override and verdict_override not in Run.Verdict.values:
        errors["verdict_override"] = [f"expected one of: {', '.join(Run.Verdict.values)}, or blank"]
    elif verdict_override and verdict_override == run.verdict:
        errors["verdict_override"] = [f"the judge already said {run.verdict}: an override must differ from it"]
    if verdict_override and not override_reason.strip():
        errors["override_reason"] = ["say why the judge was wrong: an override needs a reason"]
    elif override_reason.strip() and not verdict_override:
        errors["override_reason"] = ["a reason goes with a verdict override: pick pass or fail, or clear the reason"]
    for name, text in (("override_reason", override_reason), ("note", note)):
        if len(text) > MAX_TEXT:
            errors.setdefault(name, []).append(f"at most {MAX_TEXT} characters; got {len(text)}")
    if not (verdict or verdict_override or note.strip() or tags):
        why = "why it stopped, " if guard_stop else ""
        errors["__all__"] = [f"nothing to save: give {why}a verdict override with its reason, a note or tags"]
    return errors


def run_review_save(
    *,
    run: Run,
    verdict: str = "",
    verdict_override: str = "",
    override_reason: str = "",
    note: str = "",
    tags: Iterable[str] | str = (),
    identical: bool = False,
    user: Any = None,
) -> list[StopReview]:
    """Record (or change) a reviewer's review of ``run``; with ``identical``, of every unreviewed guard
    stop identical to it too, all in one transaction. ``tags`` replace the review's tags (a string is
    parsed as a reviewer types it). Returns the reviews written, ``run``'s first.

    Raises ``ValidationError`` naming each bad field; then nothing is written.
    """
    if isinstance(tags, str):
        tags, bad_tags = review_tags_parse(tags)
    else:
        tags, bad_tags = review_tags_parse(" ".join(tags))
    errors = run_review_check(
        run=run,
        verdict=verdict,
        verdict_override=verdict_override,
        override_reason=override_reason,
        note=note,
        tags=tags,
    )
    if bad_tags:
        errors["tags"] = bad_tags
    if identical and not run.is_guard_stop:
        errors.setdefault("identical", []).append(f"run {run.pk} was not stopped by a guard: it has no identical stops")
    others: list[Run] = []
    if identical and not errors:
        others = stops_page.stops_identical(run=run)
        for other in others:  # an override must differ from each run's own judge
            if verdict_override and verdict_override == other.verdict:
                errors.setdefault("verdict_override", []).append(
                    f"the judge already said {other.verdict} for identical run {other.pk}: review it on its own"
                )
    if errors:
        raise ValidationError(errors)
    fields = {
        "verdict": verdict,
        "verdict_override": verdict_override,
        "override_reason": override_reason.strip(),
        "note": note.strip(),
        "reviewer": user if user is not None and getattr(user, "is_authenticated", False) else None,
    }
    with transaction.atomic():
        before = _reviews_before([run, *others]) if others else []
        saved = [_review_write(run=r, fields=fields, tags=tags) for r in [run, *others]]
        if others:
            BulkReview.objects.create(
                user=fields["reviewer"], created_at=timezone.now(), summary=_review_summary(fields, tags), before=before
            )
        return saved


def _review_write(*, run: Run, fields: dict[str, Any], tags: list[str]) -> StopReview:
    review, _ = StopReview.objects.update_or_create(run=run, defaults=fields)
    review.tags.exclude(name__in=tags).delete()
    ReviewTag.objects.bulk_create([ReviewTag(review=review, name=t) for t in tags], ignore_conflicts=True)
    run.review = review
    return review


def _reviews_before(runs: list[Run]) -> list[dict[str, Any]]:
    """Each run's review as it is now (its fields and tags), or None where it has none: what an undo
    puts back. Two queries."""
    current = {r.run_id: r for r in StopReview.objects.filter(run__in=runs).prefetch_related("tags")}
    out = []
    for run in runs:
        review = current.get(run.pk)
        state = None
        if review is not None:
            state = {
                "verdict": review.verdict,
                "verdict_override": review.verdict_override,
                "override_reason": review.override_reason,
                "note": review.note,
                "reviewer": review.reviewer_id,
                "reviewed_at": review.reviewed_at.isoformat(),
                "tags": [t.name for t in review.tags.all()],
            }
        out.append({"run": run.pk, "review": state})
    return out


def _review_summary(fields: dict[str, Any], tags: list[str]) -> str:
    """What a review says, in the words the pages use: "model stuck · reviewer: pass · note · tags: ids"."""
    parts = []
    if fields["verdict"]:
        parts.append(StopReview.Verdict(fields["verdict"]).label)
    if fields["verdict_override"]:
        parts.append(f"reviewer: {fields['verdict_override']}")
    if fields["note"]:
        parts.append("a note")
    if tags:
        parts.append(f"tags: {', '.join(tags)}")
    return " · ".join(parts)[:400]


def bulk_review_message(bulk: BulkReview) -> str:
    """ "Reviewed 7 runs as model stuck · tags: ids" (a run's own review and its identical stops')."""
    return f"Reviewed {len(bulk.before)} runs as {bulk.summary}"


def bulk_review_undo_until(bulk: BulkReview) -> datetime:
    return bulk.created_at + UNDO_WINDOW


def bulk_review_undoable(*, user: Any, now: datetime | None = None) -> BulkReview | None:
    """``user``'s latest bulk review while it may still be undone (one query), or None."""
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    now = now or timezone.now()
    return (
        BulkReview.objects.filter(user=user, undone_at__isnull=True, created_at__gt=now - UNDO_WINDOW)
        .order_by("-created_at")
        .first()
    )


def bulk_review_undo(*, bulk_id: int, now: datetime | None = None) -> BulkReview:
    """Put back each run's review as it was before bulk review ``bulk_id`` (none where there was none),
    in one transaction. Raises ``ValidationError`` saying why, and changes nothing, when the window has
    passed, it was undone already, or one of its runs' reviews was changed since (undoing would lose
    that change)."""
    now = now or timezone.now()
    with transaction.atomic():
        bulk = BulkReview.objects.select_for_update().filter(pk=bulk_id).first()
        if bulk is None:
            raise ValidationError(f"there is no bulk review {bulk_id} to undo")
        until = bulk_review_undo_until(bulk)
        if bulk.undone_at is not None:
            raise ValidationError(
                f"the review of runs {_ids(bulk.run_ids)} was undone already, at {bulk.undone_at:%H:%M} UTC"
            )
        if now > until:
            minutes = int(UNDO_WINDOW.total_seconds() // 60)
            raise ValidationError(
                f"the review of runs {_ids(bulk.run_ids)} can no longer be undone: undo lasts {minutes} minutes "
                f"after a review and ended at {until:%H:%M} UTC; change each run's review on its own"
            )
        current = {r.run_id: r for r in StopReview.objects.filter(run__in=bulk.run_ids)}
        changed = [
            run_id for run_id in bulk.run_ids if run_id not in current or current[run_id].reviewed_at > bulk.created_at
        ]
        if changed:
            raise ValidationError(
                f"the review of runs {_ids(changed)} was changed after this bulk review: undoing it would lose "
                "that change; change each run's review on its own"
            )
        for entry in bulk.before:
            _review_restore(run_id=entry["run"], state=entry["review"])
        bulk.undone_at = now
        bulk.save(update_fields=["undone_at"])
    return bulk


def _review_restore(*, run_id: int, state: dict[str, Any] | None) -> None:
    if state is None:
        StopReview.objects.filter(run_id=run_id).delete()  # its tags go with it
        return
    fields = {k: v for k, v in state.items() if k not in ("tags", "reviewer", "reviewed_at")}
    # update(), not save(): the review's time is put back too, which save() would set to now
    StopReview.objects.filter(run_id=run_id).update(
        **fields, reviewer_id=state["reviewer"], reviewed_at=datetime.fromisoformat(state["reviewed_at"])
    )
    review_id = StopReview.objects.values_list("pk", flat=True).get(run_id=run_id)
    ReviewTag.objects.filter(review_id=review_id).delete()
    ReviewTag.objects.bulk_create([ReviewTag(review_id=review_id, name=t) for t in state["tags"]])


def _ids(run_ids: list[int]) -> str:
    return ", ".join(f"#{i}" for i in run_ids)
