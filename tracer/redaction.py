"""Secrets are never stored: the redactor every write of a run goes through, and the log filter.

``redact(value)`` is ``agents.redaction.Redactor`` configured by the settings: the built-in patterns,
``RLT_REDACT_PATTERNS`` (checked when the settings load: an invalid pattern stops the process with a
message naming it), and the values of ``ANTHROPIC_API_KEY`` and of the environment variables named
in ``RLT_REDACT_ENV`` (``DJANGO_SECRET_KEY`` among them). ``recording`` applies it to every text it
writes, so pages, the admin and exports, which show only what is stored, never see a secret.
``RedactLogFilter`` is installed on the log handlers (``LOGGING`` in the settings; the Celery
worker's own handlers in ``config.celery``), and ``RedactingExceptionReporter`` redacts Django's
error page (``DEBUG`` on). The redactor is built once, on first use, and again
when a test changes one of those settings.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.views.debug import ExceptionReporter

from agents.redaction import RedactingLogFilter, Redactor

_SETTINGS = {"RLT_REDACT_PATTERNS", "RLT_REDACT_ENV", "ANTHROPIC_API_KEY"}
_lock = threading.Lock()
_redactor: Redactor | None = None


def redactor() -> Redactor:
    """The redactor the settings configure, built on first use."""
    global _redactor
    built = _redactor
    if built is None:
        with _lock:
            if _redactor is None:
                secrets = {name: os.environ.get(name) for name in settings.RLT_REDACT_ENV}
                if settings.ANTHROPIC_API_KEY:
                    secrets["ANTHROPIC_API_KEY"] = settings.ANTHROPIC_API_KEY
                _redactor = Redactor(patterns=settings.RLT_REDACT_PATTERNS, secrets=secrets)
            built = _redactor
    return built


def redact(value: Any) -> Any:
    """``value`` (a string, or a JSON-able dict or list) with every secret replaced by a marker."""
    return redactor()(value)


def redact_text(text: str) -> str:
    return redactor().text(text)


class RedactLogFilter(RedactingLogFilter):
    """Redacts log records with the settings' redactor (``LOGGING``'s ``redact`` filter)."""

    def redactor(self) -> Redactor:
        return redactor()


class RedactingExceptionReporter(ExceptionReporter):
    """Django's error page (``DEBUG`` on) and error report, redacted: the exception's message, each
    frame's local variables, the request's data and the settings (``DEFAULT_EXCEPTION_REPORTER``)."""

    def get_traceback_data(self):
        data = super().get_traceback_data()
        for key in [k for k in data if k.endswith("_items")]:  # the request's GET, POST, FILES, COOKIES
            data[key] = list(data[key])
        return redact(data)


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    global _redactor
    if setting in _SETTINGS:
        with _lock:
            _redactor = None


setting_changed.connect(_settings_changed)
