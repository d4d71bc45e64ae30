"""Schemathesis fuzzes the API from its own OpenAPI description, with a valid token: valid and
invalid bodies, parameters and headers for every operation. No answer may be a 5xx, and every
answer must be what the description promises (status codes, content types, body schemas).

Bounded so it finishes well under a minute: ``RLT_FUZZ_EXAMPLES`` (15 by default) examples per
operation and phase, about 2,000 requests in all, the same ones every run (``derandomize``). A
larger value hunts further: ``RLT_FUZZ_EXAMPLES=200 ./rlt test tests/tracer/test_api_fuzz.py``.
"""

from __future__ import annotations

import json
import os

import pytest
import schemathesis
from django.contrib.auth.models import Permission
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings

from tracer.models import Run
from tracer.tokens import token_create

pytestmark = pytest.mark.django_db

MAX_EXAMPLES = int(os.environ.get("RLT_FUZZ_EXAMPLES") or 15)
# Two checks judge the description's strictness rather than the API's behaviour, and are left out:
# - negative_data_rejection: pydantic reads some values a JSON Schema would refuse (0 as a date and
#   time, i.e. 1970-01-01), as tracer.intake.schema's document schema chose to;
# - positive_data_acceptance: the document's rules across fields (a tool_use names its tool, steps
#   are numbered 1, 2, 3…) cannot be said in JSON Schema, so some schema-valid bodies are 400s.
# Every other check runs: no 5xx, only documented status codes and content types, answers that
# match their schemas.
EXCLUDED = [schemathesis.checks.negative_data_rejection, schemathesis.checks.positive_data_acceptance]


# The description as a client reads it: /api/openapi.json through Django's WSGI application.
APP = get_wsgi_application()
schema = schemathesis.openapi.from_wsgi("/api/openapi.json", APP)


@schemathesis.serializer("application/x-ndjson")
def json_lines(ctx, value) -> bytes:
    """A generated list of documents as JSON Lines, one per line (anything else as one line)."""
    items = value if isinstance(value, list) else [value]
    return "\n".join(json.dumps(item) for item in items).encode()


@pytest.fixture(autouse=True)
def requests_keep_the_test_transaction():
    """The WSGI application must not close the test's database connection at the end of each
    request (Django's own test client disconnects the same signal handlers)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def token_headers(django_user_model):
    user = django_user_model.objects.create_user("fuzzer")
    user.user_permissions.add(Permission.objects.get(codename="add_run", content_type__app_label="tracer"))
    _, secret = token_create(user=user, name="schemathesis")
    # Runs 1 and 2 are the fuzzer's own (one open, one finished), so ids it tries hit real rows too.
    Run.objects.create(pk=1, owner=user, source=Run.Source.API, status=Run.Status.RUNNING)
    Run.objects.create(pk=2, owner=user, source=Run.Source.API, status=Run.Status.FINISHED)
    # The answers uncompressed: schemathesis calls the WSGI application directly and reads the body
    # as it comes, where an HTTP client would undo the gzip Django adds for clients that accept it.
    return {"Authorization": f"Bearer {secret}", "Accept-Encoding": "identity"}


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_the_api_answers_every_generated_request_without_a_server_error(case, token_headers):
    case.call_and_validate(headers=token_headers, excluded_checks=EXCLUDED)
