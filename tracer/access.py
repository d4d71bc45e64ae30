"""Who may do what on the dashboard, checked in the views; and the page a locked-out login gets.

- Any logged-in user browses runs, compares them and reads the policy matrix and the stop queue.
- Reviewing a run (a guard stop or any other: ``REVIEW``) needs the ``reviewer`` group (created by a data
  migration) or those permissions.
- Creating a policy variant (``CREATE_POLICY``) and launching an experiment (``LAUNCH``) change what
  the workers run: superusers only, unless an administrator gives those permissions to a group.
- Importing runs (``IMPORT``: the upload page) adds runs everyone sees and the matrix aggregates:
  superusers, and any user or group an administrator gives ``tracer.add_run``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.functional import SimpleLazyObject

from .reads.prepared import Prepared

REVIEWER_GROUP = "reviewer"

REVIEW = ("tracer.add_stopreview", "tracer.change_stopreview")
CREATE_POLICY = ("tracer.add_policyvariant",)
LAUNCH = ("tracer.add_experiment",)
IMPORT = ("tracer.add_run",)

# A login locked out by django-axes answers 429 with the login page and this message.
LOCKED_OUT_STATUS = 429


def permission_require(*, user: Any, perms: tuple[str, ...], action: str) -> None:
    """Raise ``PermissionDenied`` (a 403 page that says why) unless ``user`` has every one of ``perms``."""
    if not user.has_perms(perms):
        raise PermissionDenied(
            f"Your account can browse and compare runs but not {action}. An administrator can give you that permission."
        )


class UserBackend(ModelBackend):
    """Django's model backend, reading the user a session names by a query compiled once per process
    (``reads.prepared``): every page reads it, and the ORM's ``get`` costs more to build than to run.
    Django's own ``get_user`` still checks the session's hash against the user's password."""

    def get_user(self, user_id: Any) -> Any:
        found = _user_read()(pk=int(user_id))
        return found[0] if found and self.user_can_authenticate(found[0]) else None


@cache
def _user_read() -> Prepared:
    return Prepared(lambda pk: get_user_model()._default_manager.filter(pk=pk))


@dataclass
class Abilities:
    """What the current user may do, for templates to show only the controls that work for them."""

    review: bool
    create_policy: bool
    launch: bool
    import_runs: bool


def user_permissions_load(user: Any) -> None:
    """Read the permissions ``user`` holds, directly and through groups, in one query, into the cache
    ``ModelBackend.get_all_permissions`` reads first (``_perm_cache``), so ``has_perms`` asks nothing
    more during this request. ModelBackend asks two ORM queries for them, which cost far more to build
    than to run. Read afresh each request: a permission revoked
    counts from the next request on, whichever process serves it. Superusers, inactive and anonymous
    users need no query (``has_perm`` answers them without the cache)."""
    if not user.is_active or user.is_anonymous or user.is_superuser or hasattr(user, "_perm_cache"):
        return
    with connection.cursor() as cursor:
        cursor.execute(_permissions_sql(), [user.pk, user.pk])
        user._perm_cache = {f"{app_label}.{codename}" for app_label, codename in cursor.fetchall()}


@cache
def _permissions_sql() -> str:
    """The query of ``user_permissions_load``, on the tables of the user model and its relations."""
    user_perms = get_user_model()._meta.get_field("user_permissions").remote_field.through._meta
    user_groups = get_user_model()._meta.get_field("groups").remote_field.through._meta
    group_perms = Group._meta.get_field("permissions").remote_field.through._meta
    q = connection.ops.quote_name
    return f"""
SELECT ct.app_label, p.codename FROM {q(Permission._meta.db_table)} p
JOIN {q(Permission._meta.get_field("content_type").related_model._meta.db_table)} ct ON ct.id = p.content_type_id
WHERE p.id IN (SELECT permission_id FROM {q(user_perms.db_table)} WHERE {q(user_perms.get_field("user").column)} = %s)
   OR p.id IN (
       SELECT gp.permission_id FROM {q(group_perms.db_table)} gp
       JOIN {q(user_groups.db_table)} ug ON ug.group_id = gp.group_id
       WHERE ug.{q(user_groups.get_field("user").column)} = %s)
"""


def abilities(request: HttpRequest) -> dict[str, Any]:
    """Context processor: ``can.review``, ``can.create_policy``, ``can.launch``, ``can.import_runs``
    (looked up when first read, the user's permissions in one query: ``user_permissions_load``)."""

    def read() -> Abilities:
        user = request.user
        user_permissions_load(user)
        return Abilities(
            review=user.has_perms(REVIEW),
            create_policy=user.has_perms(CREATE_POLICY),
            launch=user.has_perms(LAUNCH),
            import_runs=user.has_perms(IMPORT),
        )

    return {"can": SimpleLazyObject(read)}


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
