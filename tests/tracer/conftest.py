"""Fixtures of the tracer tests: the starter preset as stored, a queued run under it, and clients logged in
as a reviewer and as a plain user."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from tracer import access
from tracer.experiments import run_create
from tracer.models import PolicyVariant, Run


@pytest.fixture
def starter() -> PolicyVariant:
    return PolicyVariant.objects.get(name="starter")


@pytest.fixture
def run(starter) -> Run:
    """A queued run of refund-too-old under starter, as a launch creates it."""
    return run_create(scenario="refund-too-old", policy=starter)


@pytest.fixture
def reviewer(client, django_user_model):
    """A client logged in as ``rita``, of the reviewer group: browses, compares and reviews runs."""
    user = django_user_model.objects.create_user("rita", password="a-long-test-password")
    user.groups.add(Group.objects.get(name=access.REVIEWER_GROUP))
    client.force_login(user)
    return client


@pytest.fixture
def plain_user(client, django_user_model):
    """A client logged in as ``paul``, in no group: browses only."""
    client.force_login(django_user_model.objects.create_user("paul", password="a-long-test-password"))
    return client
