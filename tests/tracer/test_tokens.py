"""API tokens: shown once, stored only as a digest and a prefix, revoked for good; the tokens page."""

from __future__ import annotations

import hashlib

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test import RequestFactory
from django.urls import reverse

from tests.dom import page
from tracer import access
from tracer.models import ApiToken
from tracer.tokens import token_create, token_list, token_revoke, token_user

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob")


def bearer(secret: str | None, *, scheme: str = "Bearer"):
    headers = {} if secret is None else {"Authorization": f"{scheme} {secret}"}
    return RequestFactory().get("/api/runs", headers=headers)


def every_stored_value() -> str:
    """Every value of every row of the token table, as the database holds them."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {ApiToken._meta.db_table}")
        return " ".join(str(value) for row in cursor.fetchall() for value in row)


# --- the service -----------------------------------------------------------------------------


def test_a_new_token_is_stored_as_a_digest_and_a_prefix_never_the_secret(alice):
    token, secret = token_create(user=alice, name="support bot")
    assert secret.startswith("rlt_") and len(secret) >= 40
    assert token.prefix == secret[:12]
    assert token.digest == hashlib.sha256(secret.encode()).hexdigest()
    stored = every_stored_value()
    assert secret not in stored and secret[12:] not in stored
    assert token.prefix in stored


def test_two_tokens_never_share_a_secret(alice):
    secrets_made = {token_create(user=alice, name=f"t{i}")[1] for i in range(20)}
    assert len(secrets_made) == 20


def test_a_token_without_a_name_is_refused(alice):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        token_create(user=alice, name="   ")
    assert not ApiToken.objects.exists()


def test_a_bearer_token_names_its_user_and_marks_it_used(alice):
    token, secret = token_create(user=alice, name="ci")
    assert token.last_used_at is None
    request = bearer(secret)
    assert token_user(request) == alice
    assert request.api_token.pk == token.pk
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_the_scheme_is_case_insensitive(alice):
    _, secret = token_create(user=alice, name="ci")
    assert token_user(bearer(secret, scheme="bearer")) == alice


@pytest.mark.parametrize(
    "header",
    [None, "", "rlt_nothing-like-a-token", "Basic YWxpY2U6cHc=", "rlt_", "x" * 5000, "Bearer rlt_abc\x00defghijk"],
    ids=["missing", "empty", "unknown", "basic-auth", "prefix-only", "huge", "nul"],
)
def test_a_missing_or_unknown_token_is_no_user(alice, header):
    token_create(user=alice, name="ci")
    request = RequestFactory().get("/api/runs", headers={"Authorization": header} if header is not None else {})
    assert token_user(request) is None


def test_a_wrong_secret_with_a_right_prefix_is_no_user(alice):
    _, secret = token_create(user=alice, name="ci")
    forged = secret[:12] + ("A" if secret[12] != "A" else "B") + secret[13:]
    assert token_user(bearer(forged)) is None


def test_a_revoked_token_is_no_user(alice):
    token, secret = token_create(user=alice, name="ci")
    revoked = token_revoke(user=alice, token_id=token.pk)
    assert revoked.revoked_at is not None
    assert token_user(bearer(secret)) is None
    again = token_revoke(user=alice, token_id=token.pk)
    assert again.revoked_at == revoked.revoked_at


def test_a_deactivated_users_token_is_no_user(alice):
    _, secret = token_create(user=alice, name="ci")
    alice.is_active = False
    alice.save()
    assert token_user(bearer(secret)) is None


def test_nobody_revokes_another_users_token(alice, bob):
    token, secret = token_create(user=alice, name="ci")
    with pytest.raises(ApiToken.DoesNotExist):
        token_revoke(user=bob, token_id=token.pk)
    assert token_user(bearer(secret)) == alice


def test_the_list_holds_only_the_users_own_tokens(alice, bob):
    token_create(user=alice, name="mine")
    token_create(user=bob, name="theirs")
    assert [t.name for t in token_list(user=alice)] == ["mine"]


# --- the API tokens page ------------------------------------------------------------------------


@pytest.fixture
def as_alice(client, alice):
    """Alice may add runs (the import permission), so she may make tokens."""
    alice.user_permissions.add(Permission.objects.get(codename="add_run", content_type__app_label="tracer"))
    client.force_login(alice)
    return client


def test_every_page_links_to_the_tokens_page(as_alice):
    assert ("API tokens", reverse("tracer:tokens")) in page(as_alice.get(reverse("tracer:runs"))).links


def test_a_token_made_on_the_page_is_shown_once_and_never_again(as_alice, alice):
    response = as_alice.post(reverse("tracer:token-create"), {"name": "support bot"})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    token = ApiToken.objects.get(user=alice)
    secret = page(response).one("#token-secret")["value"]
    assert secret.startswith(token.prefix) and token_user(bearer(secret)) == alice
    listing = as_alice.get(reverse("tracer:tokens")).content.decode()
    assert token.prefix in listing and "support bot" in listing
    assert secret not in listing and secret not in every_stored_value()


def test_the_htmx_form_answers_with_the_secret_and_tells_the_list_to_refresh(as_alice):
    response = as_alice.post(reverse("tracer:token-create"), {"name": "ci"}, headers=HTMX)
    assert response.status_code == 200
    assert "tokenCreated" in response["HX-Trigger"]
    doc = page(response)
    assert doc.one("#token-secret")["value"] and not doc.select("html, nav")  # the fragment, with the secret
    assert "shown only this once" in doc.text


def test_a_token_needs_a_name(as_alice):
    response = as_alice.post(reverse("tracer:token-create"), {"name": "  "})
    assert response.status_code == 200
    doc = page(response)
    assert not doc.select("#token-secret")
    assert doc.one("#error-name").text
    assert not ApiToken.objects.exists()


def test_revoking_on_the_page_ends_the_token_and_shows_when(as_alice, alice):
    token, secret = token_create(user=alice, name="old laptop")
    response = as_alice.post(reverse("tracer:token-revoke", args=[token.pk]))
    assert response.status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None and token_user(bearer(secret)) is None
    listing = as_alice.get(reverse("tracer:tokens")).content.decode()
    assert "old laptop" in listing and token.revoked_at.strftime("%Y-%m-%d") in listing


def test_nobody_revokes_anothers_token_on_the_page(as_alice, bob):
    token, secret = token_create(user=bob, name="bob's")
    assert as_alice.post(reverse("tracer:token-revoke", args=[token.pk])).status_code == 404
    assert token_user(bearer(secret)) == bob
    assert "bob's" not in as_alice.get(reverse("tracer:tokens")).content.decode()


@pytest.mark.parametrize("role", ["plain", "reviewer"])
def test_read_only_roles_see_their_tokens_but_may_not_make_one(client, django_user_model, role):
    user = django_user_model.objects.create_user(f"{role}-user")
    if role == "reviewer":
        user.groups.add(Group.objects.get(name=access.REVIEWER_GROUP))
    old, secret = token_create(user=user, name="granted before")
    client.force_login(user)
    doc = page(client.get(reverse("tracer:tokens")))
    assert old.prefix in doc.one("#token-list").text
    assert "cannot create tokens" in doc.one("#token-form").text and not doc.select("#token-form form")
    response = client.post(reverse("tracer:token-create"), {"name": "mine"})
    assert response.status_code == 403 and "create API tokens" in page(response).text
    assert ApiToken.objects.filter(user=user).count() == 1
    assert client.post(reverse("tracer:token-revoke", args=[old.pk])).status_code == 302
    assert token_user(bearer(secret)) is None


def test_a_group_given_the_import_permission_may_make_tokens(client, django_user_model):
    team = Group.objects.create(name="agents team")
    team.permissions.add(Permission.objects.get(codename="add_run", content_type__app_label="tracer"))
    user = django_user_model.objects.create_user("builder")
    user.groups.add(team)
    client.force_login(user)
    assert client.post(reverse("tracer:token-create"), {"name": "mine"}).status_code == 200
    assert ApiToken.objects.filter(user=user).count() == 1


def test_the_tokens_page_needs_a_login(client):
    response = client.get(reverse("tracer:tokens"))
    assert response.status_code == 302 and reverse("login") in response["Location"]
