"""Fixtures of the tracer tests: the starter preset as stored, and a queued run under it."""

from __future__ import annotations

import pytest

from tracer.experiments import run_create
from tracer.models import PolicyVariant, Run


@pytest.fixture
def starter() -> PolicyVariant:
    return PolicyVariant.objects.get(name="starter")


@pytest.fixture
def run(starter) -> Run:
    """A queued run of refund-too-old under starter, as a launch creates it."""
    return run_create(scenario="refund-too-old", policy=starter)
