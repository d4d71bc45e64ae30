"""A database error met anywhere in a request is answered 503 with Retry-After; anything else stays a 500.

The database really stops in tests/faults/test_database_outage.py; here the session read raises the
error a stopped database raises, to check what each kind of client is answered.
"""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import OperationalError
from django.test import Client

from tracer.outage import RETRY_AFTER_S

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_of_a_lost_database(admin_user):
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    with mock.patch(
        "tracer.sessions.SessionStore._session_data_read",
        side_effect=OperationalError('connection to server at "127.0.0.1", port 5432 failed: Connection refused'),
    ):
        yield client


def test_a_page_answers_503_naming_the_database_when_the_session_cannot_be_read(client_of_a_lost_database):
    response = client_of_a_lost_database.get("/")
    assert response.status_code == 503
    assert response["Retry-After"] == str(RETRY_AFTER_S)
    text = response.content.decode()
    assert "The database is unavailable" in text and "cannot be reached" in text and "Connection refused" in text


def test_an_admin_page_answers_503_too(client_of_a_lost_database):
    assert client_of_a_lost_database.get("/admin/").status_code == 503


def test_a_disk_full_is_named_as_such():
    from tracer.outage import database_problem

    assert database_problem(OperationalError("database or disk is full")).startswith("the disk that holds the database")


def test_any_other_error_is_still_the_500_page(admin_user):
    client = Client(raise_request_exception=False)
    client.force_login(admin_user)
    with mock.patch("tracer.views.runs_list.run_list_page", side_effect=ValueError("a bug")):
        response = client.get("/")
    assert response.status_code == 500
    assert "Retry-After" not in response
    assert "Something went wrong" in response.content.decode()
