"""Security and data safety: the Content Security Policy, login lockout, read-only history in the
admin, experiment deletion, the reviewer role and a plain user, the deploy check over HTTPS."""

from __future__ import annotations

import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.urls import reverse

from tests.dom import page
from tests.factories import ExperimentFactory, RunFactory, guard_stop, refund_too_old_starter
from tracer import access
from tracer.models import Run

pytestmark = pytest.mark.django_db

BASE_DIR = Path(__file__).resolve().parents[2]
HTMX = {"HX-Request": "true"}


# --- Content Security Policy -----------------------------------------------------------------


class _InlineCode(HTMLParser):
    """Collects what a CSP without 'unsafe-inline' would block: inline scripts, on* handlers,
    hx-on attributes (they need eval), style attributes and <style> elements."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._in_inline_script = False

    def handle_starttag(self, tag, attrs):
        names = dict(attrs)
        if tag == "script" and not names.get("src"):
            self._in_inline_script = True
            self.found.append("<script> without src")
        if tag == "style":
            self.found.append("<style>")
        for name, _ in attrs:
            if name.startswith(("on", "hx-on")) or name == "style":
                self.found.append(f"<{tag} {name}=…>")

    def handle_endtag(self, tag):
        self._in_inline_script = False


def pages_to_check(client) -> list[str]:
    starter = refund_too_old_starter()
    stopped = guard_stop()
    experiment = ExperimentFactory()
    RunFactory(experiment=experiment, status=Run.Status.RUNNING)
    return [
        reverse("tracer:runs"),
        reverse("tracer:run", args=[starter.pk]),
        reverse("tracer:compare") + f"?a={starter.pk}&b={stopped.pk}",
        reverse("tracer:policies"),
        reverse("tracer:stops"),
        reverse("tracer:launch"),
        reverse("tracer:experiment", args=[experiment.pk]),
        reverse("tracer:tokens"),
    ]


def test_every_page_sends_a_csp_that_allows_no_inline_script_and_has_none(admin_client, client):
    for url in [*pages_to_check(admin_client), reverse("login")]:
        response = (client if url == reverse("login") else admin_client).get(url)
        assert response.status_code == 200, url
        policy = response["Content-Security-Policy"]
        directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
        assert directives["script-src"] == "'self'", policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        assert directives["object-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
        parser = _InlineCode()
        parser.feed(response.content.decode())
        assert parser.found == [], f"{url}: {parser.found}"


# --- login rate limiting ---------------------------------------------------------------------


def test_five_failed_logins_lock_the_username_out_with_a_message_on_the_login_page(client, django_user_model):
    django_user_model.objects.create_user("ana", password="the-right-password")
    django_user_model.objects.create_user("bob", password="bobs-right-password")
    for _ in range(4):
        response = client.post(reverse("login"), {"username": "ana", "password": "a-wrong-guess"})
        assert (
            response.status_code == 200 and "Please enter a correct username and password" in response.content.decode()
        )

    for password in ("a-wrong-guess", "the-right-password"):  # the fifth failure locks; then nothing is accepted
        response = client.post(reverse("login"), {"username": "ana", "password": password})
        html = response.content.decode()
        assert response.status_code == access.LOCKED_OUT_STATUS
        assert "Too many failed logins: this username is locked for 15 minutes from this address." in html
        assert page(response).select("input[name=username]")  # the login page, not a bare error page
    assert client.get(reverse("tracer:runs")).status_code == 302  # not logged in

    response = client.post(reverse("login"), {"username": "bob", "password": "bobs-right-password"})
    assert response.status_code == 302 and client.get(reverse("tracer:runs")).status_code == 200


def test_a_username_longer_than_any_account_is_still_counted_not_a_server_error(client):
    for _ in range(5):
        response = client.post(reverse("login"), {"username": "x" * 600, "password": "guess"})
    assert response.status_code == access.LOCKED_OUT_STATUS


# --- deployment ------------------------------------------------------------------------------


def test_the_deploy_check_finds_nothing_over_https_with_debug_off_and_a_long_secret(tmp_path):
    env = {
        **os.environ,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "k" + "".join(chr(33 + (i * 7) % 90) for i in range(60)),
        "DJANGO_HTTPS": "1",
        "RLT_VAR_DIR": str(tmp_path),
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # the browser tests' conftest sets it in this process
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (2 silenced)." in result.stdout


# --- Compression -------------------------------------------------------------------------------


def test_pages_are_gzipped_for_browsers_that_accept_it_with_random_padding_against_breach(admin_client):
    import gzip

    run = refund_too_old_starter()
    url = reverse("tracer:run", args=[run.pk])
    plain = admin_client.get(url)
    first = admin_client.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    second = admin_client.get(url, HTTP_ACCEPT_ENCODING="gzip")

    assert "Content-Encoding" not in plain
    assert first["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in first["Vary"]
    assert len(first.content) < len(plain.content) / 2
    # The page a browser unpacks is the page itself (its CSRF token and CSP nonce differ per request).
    assert "refund-too-old" in gzip.decompress(first.content).decode()
    # Heal the Breach: the same page compresses to a different length each time, so the length of a
    # response does not tell an attacker whether a guessed secret matched.
    sizes = {len(admin_client.get(url, HTTP_ACCEPT_ENCODING="gzip").content) for _ in range(6)}
    assert len(sizes | {len(second.content)}) > 1


def test_a_session_past_its_expiry_logs_nobody_in_and_a_live_one_does(client, django_user_model):
    from datetime import timedelta

    from django.contrib.sessions.models import Session
    from django.utils import timezone

    client.force_login(django_user_model.objects.create_user("someone"))
    assert client.get(reverse("tracer:runs")).status_code == 200
    Session.objects.update(expire_date=timezone.now() - timedelta(seconds=1))
    response = client.get(reverse("tracer:runs"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
