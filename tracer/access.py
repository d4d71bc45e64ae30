"""Access to the dashboard: the page a login locked out by django-axes gets."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

# A login locked out by django-axes answers 429 with the login page and this message.
LOCKED_OUT_STATUS = 429


def login_username(request: HttpRequest, credentials: dict | None) -> str | None:
    """The username django-axes counts failures against, cut to the longest a username can be: a longer
    one (which matches no account) is still counted instead of failing to be stored."""
    username = (credentials or {}).get("username") or request.POST.get("username")
    if not username:
        return None
    longest = get_user_model()._meta.get_field(get_user_model().USERNAME_FIELD).max_length
    return str(username).replace("\x00", "")[:longest]


def login_locked_out(request: HttpRequest, original_response: Any = None, credentials: Any = None) -> HttpResponse:
    """django-axes' lockout answer: the login page saying why no password is accepted for now."""
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    message = (
        f"Too many failed logins: this username is locked for {minutes} minutes from this address. "
        "Try again later, or ask an administrator to unlock it (manage.py axes_reset_username)."
    )
    context = {"form": AuthenticationForm(request), "locked_out": message}
    return render(request, "registration/login.html", context, status=LOCKED_OUT_STATUS)
