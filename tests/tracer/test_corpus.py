"""The diagnosis corpus: runs from outside, each sent through one of the product's ways in, each a test.

Every kind has at least three cases that show it and three that must not, from different sources
(a Messages transcript through the importer, OpenInference spans, GenAI spans, the step API, and the
lessons' built-in runs); three clean runs (a good repair, a structured refusal explained once, a true
empty result) get no finding from any source. How each source is made: ``corpus_agents``.
"""

from __future__ import annotations

import pytest

from agents.diagnosis.kinds import KEYS
from tests.tracer.corpus_agents import SOURCES, Call, Case, record, structured, tool
from tracer.execution import run_execute
from tracer.experiments import run_create
from tracer.models import PolicyVariant

pytestmark = pytest.mark.django_db

REFUND = tool("process_refund", "Refund an order to the card it was paid with", {"order_id": {"type": "string"}})
LOOKUP = tool("lookup_orders", "Look up a customer's orders", {"customer": {"type": "string"}}, readOnlyHint=True)
CONVERT = tool(
    "convert_currency",
    "Convert an amount between currencies",
    {
        "amount": {"type": "number"},
        "from_currency": {"type": "string", "enum": ["JPY", "USD", "EUR"]},
        "to_currency": {"type": "string", "enum": ["JPY", "USD", "EUR"]},
    },
)
CHARGE = tool(
    "charge_card",
    "Charge the customer's card",
    {"amount": {"type": "number"}, "idempotency_key": {"type": "string"}},
    readOnlyHint=False,
    destructiveHint=False,
)
SAFE_CHARGE = tool("charge_card", "Charge the customer's card", {"amount": {"type": "number"}}, idempotentHint=True)
BOOK = tool("book_slot", "Book a meeting room slot", {"date": {"type": "string"}, "time": {"type": "string"}})
TOOLS = [REFUND, LOOKUP, CONVERT, BOOK]

TOO_OLD = "Refunds close after 30 days. This order is 239 days old."
MANAGER = "booking rooms requires manager approval; ask the user to book it themselves"
TIMEOUT = "the orders service timed out after 10 s (HTTP 503); it is safe to try again in a few seconds"
CHARGE_TIMEOUT = "the payment service timed out after 10 s; the charge may or may not have gone through"
SQL_LEAK = 'psycopg2.errors.UndefinedColumn: column "cust" does not exist: SELECT * FROM orders WHERE cust = 7'
REVOKED = "credentials revoked: the API key for the payments service was revoked (401)"


def refund(*tries, order="0871"):
    return Call("process_refund", {"order_id": order}, list(tries))


def fail(content):
    return (False, content)


def ok(content):
    return (True, content)


def lookup(*tries, customer="c-7"):
    return Call("lookup_orders", {"customer": customer}, list(tries))


# --- the cases: (kind it shows or None, kinds it must not show, the case, the sources it goes through) --

REFUSED = fail(structured("business", TOO_OLD))
ORDERS = ok({"orders": [{"id": "0871", "total": 42.0}]})

CLEAN = [
    Case(
        "good-repair",
        "Convert 100 GBP to EUR.",
        [
            [
                Call(
                    "convert_currency",
                    {"amount": 100, "from_currency": "GBP", "to_currency": "EUR"},
                    [fail("Invalid input -> from_currency: Input should be 'JPY', 'USD' or 'EUR'")],
                )
            ],
            [Call("convert_currency", {"amount": 100, "from_currency": "USD", "to_currency": "EUR"}, [ok("92.0 EUR")])],
            "100 USD is about 92.0 EUR; GBP is not supported.",
        ],
        tools=TOOLS,
    ),
    Case(
        "refusal-explained-once",
        "Please refund order 0871, the laptop stand is wobbly.",
        [[refund(REFUSED)], "I couldn't refund order 0871: refunds close after 30 days and it is 239 days old."],
        tools=TOOLS,
    ),
    Case(
        "true-empty-result",
        "What orders does Dana have?",
        [[lookup(ok({"orders": []}), customer="dana")], "Dana has no orders."],
        tools=TOOLS,
    ),
]

BLIP = Case(
    "blip-sent-at-once",
    "Look up c-7.",
    [[lookup(fail(structured("transient", TIMEOUT)))], "The orders service is slow; please ask again later."],
    TOOLS,
)

POSITIVE: list[tuple[str, Case, tuple[str, ...]]] = [
    # retried-refusal: the model sends a refusal again; the harness retries one
    (
        "retried-refusal",
        Case(
            "model-repeats-refusal", "Refund order 0871.", [[refund(REFUSED)], [refund(REFUSED)], "No refund."], TOOLS
        ),
        ("transcript", "openinference"),
    ),
    (
        "retried-refusal",
        Case("harness-retries-refusal", "Refund order 0871.", [[refund(REFUSED, REFUSED, REFUSED)], "No."], TOOLS),
        ("genai", "api"),
    ),
    (
        "retried-refusal",
        Case(
            "model-repeats-permission",
            "Book the room on 2026-10-02 at 14:00.",
            [
                [Call("book_slot", {"date": "2026-10-02", "time": "14:00"}, [fail(MANAGER)])],
                [Call("book_slot", {"date": "2026-10-02", "time": "14:00"}, [fail(MANAGER)])],
                "I can't book it: it needs a manager's approval.",
            ],
            TOOLS,
        ),
        ("transcript", "api"),
    ),
    # vague-error
    (
        "vague-error",
        Case("bare-error", "Refund order 0871.", [[refund(fail("Error"))], "The system returned an error."], TOOLS),
        ("transcript", "openinference", "genai", "api"),
    ),
    (
        "vague-error",
        Case(
            "exception-name",
            "Convert 100 GBP.",
            [
                [
                    Call(
                        "convert_currency",
                        {"amount": 100, "from_currency": "GBP", "to_currency": "EUR"},
                        [fail("ValueError")],
                    )
                ],
                "I could not convert it.",
            ],
            TOOLS,
        ),
        ("openinference", "api"),
    ),
    (
        "vague-error",
        Case("invalid-input", "Look up c-7.", [[lookup(fail("invalid input"))], "That failed."], TOOLS),
        ("genai", "transcript"),
    ),
    # internal-detail-leak
    (
        "internal-detail-leak",
        Case(
            "stack-trace",
            "Refund order 0871.",
            [
                [
                    refund(
                        fail(
                            'Traceback (most recent call last):\n  File "/srv/app/refunds.py", line 88, in refund\n'
                            "KeyError: 'card_token'"
                        )
                    )
                ],
                "Something went wrong on our side.",
            ],
            TOOLS,
        ),
        ("transcript", "genai"),
    ),
    (
        "internal-detail-leak",
        Case(
            "sql-text",
            "Look up c-7.",
            [
                [lookup(fail(SQL_LEAK))],
                "The lookup failed.",
            ],
            TOOLS,
        ),
        ("openinference", "api"),
    ),
    (
        "internal-detail-leak",
        Case(
            "private-host",
            "Look up c-7.",
            [[lookup(fail("could not connect to orders-db.internal:5432 (10.0.3.17): connection refused"))], "Down."],
            TOOLS,
        ),
        ("api", "transcript"),
    ),
    # transient-to-model: the model retries a transient failure itself
    (
        "transient-to-model",
        Case(
            "model-retries-timeout",
            "Look up c-7.",
            [[lookup(fail(structured("transient", TIMEOUT)))], [lookup(ORDERS)], "c-7 has order 0871."],
            TOOLS,
        ),
        ("transcript", "openinference", "api"),
    ),
    (
        "transient-to-model",
        Case(
            "model-retries-503-text",
            "Look up c-7.",
            [
                [lookup(fail("HTTP 503: service unavailable"))],
                [lookup(fail("HTTP 503: service unavailable"))],
                [lookup(ORDERS)],
                "c-7 has order 0871.",
            ],
            TOOLS,
        ),
        ("genai",),
    ),
    # transient-not-retried: the harness sent a blip to the model at once (a source that shows its tries)
    ("transient-not-retried", BLIP, ("genai", "api")),
    (
        "transient-not-retried",
        Case(
            "rate-limited",
            "Look up c-7.",
            [[lookup(fail("429 Too Many Requests: rate limit exceeded"))], "Busy."],
            TOOLS,
        ),
        ("api",),
    ),
    # unsafe-write-retry: a write tried again after a timeout, no idempotency key
    (
        "unsafe-write-retry",
        Case(
            "harness-retries-charge",
            "Charge 42 USD.",
            [[Call("charge_card", {"amount": 42}, [fail(CHARGE_TIMEOUT), ok({"charged": 42})])], "Charged."],
            [CHARGE],
        ),
        ("genai", "api"),
    ),
    (
        "unsafe-write-retry",
        Case(
            "model-repeats-refund-after-timeout",
            "Refund order 0871.",
            [[refund(fail("refund request timed out"))], [refund(ok({"refunded": "0871"}))], "Refunded."],
            TOOLS,
        ),
        ("transcript", "openinference"),
    ),
    # no-error-guard: more failures in a row than a guard of 3 allows
    (
        "no-error-guard",
        Case(
            "five-failures",
            "Book a room on 02/10/2026.",
            [
                *[
                    [Call("book_slot", {"date": f"0{k}/10/2026", "time": "14:00"}, [fail("bad date")])]
                    for k in range(1, 6)
                ],
                "I could not book it.",
            ],
            TOOLS,
        ),
        ("transcript", "openinference", "genai", "api"),
    ),
    # empty-as-error
    (
        "empty-as-error",
        Case(
            "empty-sent-as-error",
            "What orders does Dana have?",
            [[lookup(fail("No orders found for Dana Whitfield"), customer="dana")], "The lookup failed."],
            TOOLS,
        ),
        ("transcript", "openinference", "api"),
    ),
    (
        "empty-as-error",
        Case(
            "empty-retried",
            "What orders does Dana have?",
            [[lookup(ok({"orders": []}), ok({"orders": []}), ok({"orders": []}), customer="dana")], "None."],
            TOOLS,
        ),
        ("genai",),
    ),
    # fatal-continued
    (
        "fatal-continued",
        Case(
            "revoked-then-more-calls",
            "Refund order 0871.",
            [[refund(fail(REVOKED))], [lookup(ORDERS)], [refund(fail(REVOKED), order="0872")], "I cannot refund now."],
            TOOLS,
        ),
        ("transcript", "openinference", "genai", "api"),
    ),
    # misleading-error: "not found" over a permission refusal
    (
        "misleading-error",
        Case(
            "not-found-over-permission",
            "Refund order 0912.",
            [[refund(fail(structured("permission", "Order 0912 was not found.")), order="0912")], "No such order."],
            TOOLS,
        ),
        ("transcript", "openinference", "api"),
    ),
    # crash-on-tool-error: the run died on a tool's failure the model never saw
    (
        "crash-on-tool-error",
        Case(
            "raised-through-the-loop",
            "Convert 100 GBP.",
            [[Call("convert_currency", {"amount": 100, "from_currency": "GBP"}, [(False, None)])]],
            TOOLS,
            stop_reason="crashed",
        ),
        ("api", "genai"),
    ),
]

NEGATIVE: list[tuple[tuple[str, ...], Case, tuple[str, ...]]] = [
    # a transient failure the harness retried until it worked: the model never saw it
    (
        ("retried-refusal", "transient-to-model", "transient-not-retried", "vague-error", "unsafe-write-retry"),
        Case(
            "harness-absorbs-blip",
            "Look up c-7.",
            [[lookup(fail(structured("transient", TIMEOUT)), ORDERS)], "0871."],
            TOOLS,
        ),
        ("genai", "api"),
    ),
    # retries ran out in code, then the model was told and explained
    (
        ("transient-to-model", "transient-not-retried", "retried-refusal"),
        Case(
            "retries-ran-out",
            "Look up c-7.",
            [
                [
                    lookup(
                        fail(structured("transient", TIMEOUT)),
                        fail(structured("transient", TIMEOUT)),
                        fail(structured("transient", "still failing after 3 attempts: " + TIMEOUT)),
                    )
                ],
                "The orders service is down; please try again later.",
            ],
            TOOLS,
        ),
        ("genai", "api", "transcript", "openinference"),
    ),
    # a write with an idempotency key, and one declared idempotent, retried after a timeout
    (
        ("unsafe-write-retry",),
        Case(
            "keyed-charge-retried",
            "Charge 42 USD.",
            [
                [
                    Call(
                        "charge_card",
                        {"amount": 42, "idempotency_key": "ord-0871-1"},
                        [fail(CHARGE_TIMEOUT), ok({"charged": 42})],
                    )
                ],
                "Charged.",
            ],
            [CHARGE],
        ),
        ("genai", "api", "transcript"),
    ),
    (
        ("unsafe-write-retry",),
        Case(
            "idempotent-charge-retried",
            "Charge 42 USD.",
            [
                [Call("charge_card", {"amount": 42}, [fail(CHARGE_TIMEOUT)])],
                [Call("charge_card", {"amount": 42}, [ok({"charged": 42})])],
                "Charged.",
            ],
            [SAFE_CHARGE],
        ),
        ("transcript", "openinference"),
    ),
    # three failures, then a fix: within a guard of 3
    (
        ("no-error-guard",),
        Case(
            "three-then-fixed",
            "Book a room on 02/10/2026.",
            [
                *[
                    [Call("book_slot", {"date": f"0{k}/10/2026", "time": "14:00"}, [fail("bad date")])]
                    for k in range(1, 4)
                ],
                [Call("book_slot", {"date": "2026-10-02", "time": "14:00"}, [ok({"booked": True})])],
                "Booked.",
            ],
            TOOLS,
        ),
        ("transcript", "genai", "api"),
    ),
    # a guard that stopped the run at three
    (
        ("no-error-guard",),
        Case(
            "guard-stopped",
            "Book a room on 02/10/2026.",
            [
                *[
                    [Call("book_slot", {"date": f"0{k}/10/2026", "time": "14:00"}, [fail("bad date")])]
                    for k in range(1, 4)
                ]
            ],
            TOOLS,
            stop_reason="consecutive_errors",
        ),
        ("api", "genai"),
    ),
    # a wrong id ("No order 0781 was found") is a validation failure, not nothing found
    (
        ("empty-as-error",),
        Case(
            "wrong-id-not-empty",
            "Refund order 0781.",
            [
                [
                    refund(
                        fail(
                            structured(
                                "validation",
                                "No order 0781 was found. Check the four-digit order number on the receipt.",
                            )
                        ),
                        order="0781",
                    )
                ],
                "I could not find order 0781; please check the number.",
            ],
            TOOLS,
        ),
        ("transcript", "openinference", "api"),
    ),
    # a fatal failure that stopped the run at once
    (
        ("fatal-continued", "crash-on-tool-error"),
        Case("fatal-stopped", "Refund order 0871.", [[refund(fail(REVOKED))]], TOOLS, stop_reason="fatal_error"),
        ("api", "genai", "transcript"),
    ),
    # a "not found" that is what it says, and a permission refusal that says so
    (
        ("misleading-error", "internal-detail-leak"),
        Case(
            "honest-messages",
            "Refund orders 0781 and 0912.",
            [
                [
                    refund(
                        fail(structured("validation", "Order 0781 was not found; check the number on the receipt")),
                        order="0781",
                    )
                ],
                [
                    refund(
                        fail(
                            structured("permission", "Order 0912 isn't on your account, so it can't be refunded here.")
                        ),
                        order="0912",
                    )
                ],
                "0781 does not exist and 0912 is not yours.",
            ],
            TOOLS,
        ),
        ("transcript", "openinference", "genai", "api"),
    ),
    # a message with times and a date in it is no private address
    (
        ("internal-detail-leak", "vague-error"),
        Case(
            "times-are-not-hosts",
            "Book 2026-10-02 at 12:00.",
            [
                [
                    Call(
                        "book_slot",
                        {"date": "2026-10-02", "time": "12:00"},
                        [fail("12:00 on 2026-10-02 is taken; free slots: 09:00, 14:00, 16:30")],
                    )
                ],
                [Call("book_slot", {"date": "2026-10-02", "time": "14:00"}, [ok({"booked": True})])],
                "Booked at 14:00.",
            ],
            TOOLS,
        ),
        ("transcript", "api", "openinference"),
    ),
    # a transcript holds what the model was sent, not the harness's tries before it: no telling
    (("transient-not-retried",), BLIP, ("transcript", "openinference")),
    # a run that crashed on the model API, not on a tool: its last tool call worked
    (
        ("crash-on-tool-error",),
        Case("model-api-crash", "Look up c-7.", [[lookup(ORDERS)]], TOOLS, stop_reason="crashed"),
        ("api", "genai"),
    ),
]


def kinds(run) -> list[str]:
    return list(run.findings.values_list("kind", flat=True))


def _ids(cases):
    return [f"{case.name}-{source}" for *_, case, sources in cases for source in sources]


@pytest.mark.parametrize(
    ("kind", "case", "source"),
    [(kind, case, source) for kind, case, sources in POSITIVE for source in sources],
    ids=[f"{kind}-{case.name}-{source}" for kind, case, sources in POSITIVE for source in sources],
)
def test_a_run_from_outside_that_shows_a_mistake_gets_its_finding(kind, case, source):
    run = record(case, source)
    assert run.rule_set, f"{case.name} through {source} was not diagnosed"
    assert kind in kinds(run), f"{case.name} through {source}: {kinds(run)}"


@pytest.mark.parametrize(
    ("absent", "case", "source"),
    [(absent, case, source) for absent, case, sources in NEGATIVE for source in sources],
    ids=[f"{case.name}-{source}" for _, case, sources in NEGATIVE for source in sources],
)
def test_a_run_from_outside_without_the_mistake_does_not_get_its_finding(absent, case, source):
    run = record(case, source)
    assert run.rule_set
    assert not set(absent) & set(kinds(run)), f"{case.name} through {source}: {kinds(run)}"


@pytest.mark.parametrize(
    ("case", "source"), [(c, s) for c in CLEAN for s in SOURCES], ids=[f"{c.name}-{s}" for c in CLEAN for s in SOURCES]
)
def test_a_clean_run_from_any_source_gets_no_finding(case, source):
    run = record(case, source)
    assert run.rule_set and kinds(run) == [], f"{case.name} through {source}: {kinds(run)}"


# --- built-in runs: the lessons' scenarios under the presets, stored as a worker stores them -----------

BUILT_IN_POSITIVE = [
    ("retried-refusal", "refund-too-old", "starter"),
    ("vague-error", "refund-bad-id", "starter"),
    ("transient-to-model", "lookup-flaky", "model-retries"),
    ("transient-not-retried", "lookup-flaky", {"base": "structured", "retry_flag_path": "isRetryable"}),
    ("unsafe-write-retry", "refund-flaky-payment", "starter"),
    ("no-error-guard", "stuck-model", "message"),
    ("empty-as-error", "lookup-empty", "starter"),
    ("fatal-continued", "fatal-credentials", "starter"),
    ("misleading-error", "refund-not-found-permission", "structured"),
    ("crash-on-tool-error", "currency-unsupported", "fragile"),
]
BUILT_IN_CLEAN = ["currency-unsupported", "room-date-format", "refund-too-old", "lookup-empty", "stuck-model"]


def executed(scenario: str, policy):
    if isinstance(policy, dict):
        from tracer.experiments import policy_variant_create

        variant = policy_variant_create(name="nested-flag", settings=policy)
    else:
        variant = PolicyVariant.objects.get(name=policy)
    return run_execute(run_id=run_create(scenario=scenario, policy=variant).pk)


@pytest.mark.parametrize(("kind", "scenario", "policy"), BUILT_IN_POSITIVE, ids=[k for k, *_ in BUILT_IN_POSITIVE])
def test_a_built_in_run_that_shows_a_mistake_gets_its_finding(kind, scenario, policy):
    assert kind in kinds(executed(scenario, policy))


@pytest.mark.parametrize("scenario", BUILT_IN_CLEAN)
def test_the_built_in_structured_runs_get_none(scenario):
    assert kinds(executed(scenario, "structured")) == []


def test_every_kind_has_three_positive_and_three_negative_cases_from_different_sources():
    shown: dict[str, set[str]] = {k: set() for k in KEYS}
    positives: dict[str, int] = dict.fromkeys(KEYS, 0)
    for kind, _, sources in POSITIVE:
        shown[kind] |= set(sources)
        positives[kind] += len(sources)
    for kind, *_ in BUILT_IN_POSITIVE:
        shown[kind].add("built-in")
        positives[kind] += 1
    negatives: dict[str, set[tuple[str, str]]] = {k: set() for k in KEYS}
    for absent, case, sources in NEGATIVE:
        for kind in absent:
            negatives[kind] |= {(case.name, s) for s in sources}
    for case in CLEAN:  # a clean run is a negative case of every kind
        for kind in KEYS:
            negatives[kind] |= {(case.name, s) for s in SOURCES}
    for kind in KEYS:
        assert positives[kind] >= 3 and len(shown[kind]) >= 3, (kind, positives[kind], shown[kind])
        assert len({s for _, s in negatives[kind]}) >= 3, kind
