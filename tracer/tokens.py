"""API tokens: made and revoked on the dashboard, presented as ``Authorization: Bearer <secret>``.

A secret is ``rlt_`` and 43 URL-safe random characters (256 bits). It is shown once, when made; the
database keeps only its first ``ApiToken.PREFIX_LENGTH`` characters (``prefix``, shown in lists and
used to find the row) and the SHA-256 of the whole secret (``digest``, compared in constant time).
A leaked database therefore gives no usable token, and a secret found in a log can be traced to its
row by its prefix. The API (``tracer/api.py``) and the OTLP receiver authenticate with
``token_user``; a missing, unknown or revoked token, or one whose user is inactive, is no user.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from .models import ApiToken

SECRET_PREFIX = "rlt_"
SECRET_SHAPE = re.compile(r"rlt_[A-Za-z0-9_-]{8,100}")
# ``last_used_at`` is written at most this often per token, so API calls do not each write it.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def token_create(*, user: Any, name: str) -> tuple[ApiToken, str]:
    """A new token for ``user`` and its secret, which is never stored and cannot be shown again."""
    name = name.strip()
    if not name:
        raise ValidationError({"name": "A token needs a name, e.g. the agent or machine that will use it."})
    limit = ApiToken._meta.get_field("name").max_length
    if len(name) > limit:
        raise ValidationError({"name": f"at most {limit} characters; got {len(name)}"})
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=secret[: ApiToken.PREFIX_LENGTH],
        digest=_digest(secret),
    )
    return token, secret


def token_revoke(*, user: Any, token_id: int) -> ApiToken:
    """Revoke one of ``user``'s own tokens (``ApiToken.DoesNotExist`` for anyone else's). Idempotent:
    a token revoked earlier keeps its first ``revoked_at``."""
    token = ApiToken.objects.get(pk=token_id, user=user)
    if token.revoked_at is None:
        now = timezone.now()
        ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now)
        token.refresh_from_db(fields=["revoked_at"])
    return token


def token_list(*, user: Any) -> QuerySet[ApiToken]:
    """``user``'s tokens, newest first, revoked ones included (the page shows when they were revoked)."""
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")


def token_authenticate(*, secret: str) -> ApiToken | None:
    """The active token whose secret this is, with its user, or None. Marks it used (once a minute)."""
    if not SECRET_SHAPE.fullmatch(secret):  # nothing else reaches the database (a NUL would fail there)
        return None
    digest = _digest(secret)
    candidates = ApiToken.objects.filter(prefix=secret[: ApiToken.PREFIX_LENGTH], revoked_at__isnull=True)
    for token in candidates.select_related("user"):
        if hmac.compare_digest(token.digest, digest):
            if not token.user.is_active:
                return None
            now = timezone.now()
            if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
                ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
                token.last_used_at = now
            return token
    return None


def bearer_secret(request: HttpRequest) -> str | None:
    """The secret of an ``Authorization: Bearer <secret>`` header, or None without one."""
    scheme, _, secret = request.headers.get("Authorization", "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return secret.strip() or None


def token_user(request: HttpRequest) -> Any | None:
    """The user whose active token the request presents as ``Authorization: Bearer``, or None.

    The token is left on ``request.api_token`` for views that want to name it.
    """
    secret = bearer_secret(request)
    if secret is None:
        return None
    token = token_authenticate(secret=secret)
    if token is None:
        return None
    request.api_token = token
    return token.user
