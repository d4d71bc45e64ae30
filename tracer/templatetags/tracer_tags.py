"""Display helpers. Everything from a trace goes through autoescaping: no helper marks trace data safe."""

from __future__ import annotations

import json
from typing import Any

from django import template
from django.utils.html import format_html

from agents.vocabulary import ErrorFormat, ModelBackendName
from tracer.divergence import attempt_outcome

register = template.Library()
SIMULATED_TITLE = "deterministic simulated model, not Claude"


@register.filter
def as_json(value: Any) -> str:
    """Indented JSON as plain text (escaped by the template like any other string)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@register.filter
def outcome(attempt: dict, policy_settings: dict | None = None) -> str:
    """An attempt's outcome as the harness saw it under the run's policy: ok, empty result, bare
    "Error", the message, or category · retryable."""
    settings = policy_settings or {}
    error_format = settings.get("error_format", "")
    label = attempt_outcome(
        attempt, error_format=error_format, empty_is_error=bool(settings.get("empty_is_error"))
    ).label
    # The message format's label repeats the message, which the row shows beside it.
    return "error" if error_format == ErrorFormat.MESSAGE and label.startswith("error: ") else label


# How the badge names the path an imported run came by (``Run.Source``, ``agent`` aside).
IMPORTED_VIA = {"import": "file", "otlp": "OTLP", "api": "API"}


@register.simple_tag
def backend_badge(run: Any) -> str:
    """The model backend; a simulated run says so wherever it is shown, and so does an imported one
    (with the path it came by and the model it names): it was not executed here."""
    if run.source != "agent" or run.model_backend == "imported":
        via = IMPORTED_VIA.get(run.source, run.source)
        detail = f" ({run.source_detail})" if run.source_detail else ""
        title = f"imported by {via}{detail}: recorded elsewhere, not executed here"
        label = f"imported · {via}" + (f" · {run.model_name}" if run.model_name else "")
        return format_html('<span class="badge imported" title="{}">{}</span>', title, label)
    if run.model_backend == ModelBackendName.SIMULATED:
        return format_html('<span class="badge sim" title="{}">simulated</span>', SIMULATED_TITLE)
    label = f"{run.model_backend} · {run.model_name}" if run.model_name else run.model_backend
    return format_html('<span class="badge model">{}</span>', label)


@register.simple_tag
def bar(pct: int, tone: str = "") -> str:
    """A small inline SVG bar, ``pct`` of its width filled."""
    width = max(0, min(100, int(pct or 0)))
    return format_html(
        '<svg class="bar {}" viewBox="0 0 100 6" preserveAspectRatio="none" aria-hidden="true">'
        '<rect class="track" width="100" height="6" rx="2"/><rect class="fill" width="{}" height="6" rx="2"/></svg>',
        tone,
        width,
    )


@register.filter
def inline_json(value: Any) -> str:
    """One-line JSON as plain text, for a call's input next to its tool name."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
