"""The lessons' scenarios: the built-in pack, written against ``agents.packs`` like any other.

Each judge reads the world's final state (was a refund applied, how often was the shop asked, was
the room booked) and the facts the answer must carry (30 days and 239 days, the value 42, the orders
found), never the simulated model's sentences. The personas add only the lessons' exact wording
(``agents.lesson_wording``) and the lessons' model, which gives up at once on a bare "Error".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from .errors import ToolFailure
from .lesson_facts import (
    ASKS_FOR_DATE,
    ASKS_FOR_NUMBER,
    BOOKED,
    CALL_BACK,
    CHARGED_TWICE,
    CUSTOMER_NOT_FOUND,
    LOOKUP_FAILED,
    MANAGER_APPROVAL,
    NEXT_STEP,
    NO_ORDERS,
    NOT_FOUND,
    NOT_THEIRS,
    OUTAGE,
    PAID,
    REFUND_MADE,
    REFUNDED_TWICE,
    charged_twice_truth,
    free_times_true,
    gives_free_time,
    no_internal_details,
    no_pound_conversion,
    no_status_for,
    no_unread_availability,
    no_unread_total,
    no_unseen_orders,
    paid_truth,
    reasons_true,
    refund_truth,
    refunded_twice_truth,
    value_true,
)
from .lesson_wording import LESSONS, times
from .packs import (
    DEFAULT_SYSTEM,
    Judge,
    Pack,
    Scenario,
    all_of,
    answered,
    attempts_at_most,
    call,
    either,
    gives,
    gives_duration,
    if_answered,
    mentions,
    never_mentions,
    no_false_outage,
    state,
    states,
    stopped,
    tool,
    true_to_world,
)
from .persona import Persona
from .tools import Tool, Toolbox
from .tools.billing import Billing, CardGateway, ChargeInput, InvoiceInput
from .tools.currency import ConvertCurrencyInput, Currency, convert_currency
from .tools.lookup import FlakyUpstream, LookupInput
from .tools.lumen import CustomerInput, LumenWorld, OrderInput, PaymentService
from .tools.rooms import BookSlotInput, FreeSlotsInput, Rooms
from .vocabulary import ErrorCategory, StepKind, StopReason

PERSONA = Persona(wording=LESSONS, bare_error_repeats=0)


def lumen_system(customer: str) -> str:
    return (
        f"You are the support agent for Lumen Supply, an online electronics shop, helping {customer}. "
        "Explain a refusal plainly and never share another customer's details."
    )


# --- tools, each bound to its run's world --------------------------------------------------------


@tool(
    ConvertCurrencyInput,
    name="convert_currency",
    description="Convert an amount between JPY, USD and EUR at today's rate.",
)
def convert(conversions: list, amount: float, from_currency: str, to_currency: str) -> str:
    said = convert_currency(amount, from_currency, to_currency)
    conversions.append(said)
    return said


class AnyAmountInput(BaseModel):
    amount: float = Field(description="How much to convert")
    from_currency: Currency = Field(description="Currency to convert from")
    to_currency: Currency = Field(description="Currency to convert to")


@tool(
    AnyAmountInput,
    name="convert_currency",
    description="Convert an amount between JPY, USD and EUR at today's rate.",
)
def convert_vague(conversions: list, amount: float, from_currency: str, to_currency: str) -> str:
    """Lesson 000's exercise 2, its vague side: the input model's check, reported only as "bad value"."""
    if amount <= 0:
        raise ToolFailure(ErrorCategory.VALIDATION, "bad value")
    said = convert_currency(amount, from_currency, to_currency)
    conversions.append(said)
    return said


@tool(FreeSlotsInput, description="List free one-hour meeting-room slots on a date.")
def free_slots(rooms: Rooms, date: str) -> dict:
    return rooms.free_slots(date)


@tool(BookSlotInput, description="Book a one-hour meeting-room slot.")
def book_slot(rooms: Rooms, date: str, time: str) -> dict:
    return rooms.book_slot(date, time)


@tool(LookupInput, description="Look up a value by key from the upstream service.")
def lookup(upstream: FlakyUpstream, key: str) -> dict:
    return upstream.lookup(key)


@tool(CustomerInput, description="List the customer's orders.")
def lookup_orders(shop: LumenWorld, customer: str) -> dict:
    return shop.lookup_orders(customer)


@tool(OrderInput, description="Refund an order in full to the original payment method.")
def process_refund(shop: LumenWorld, order_id: str) -> dict:
    return shop.process_refund(order_id)


@tool(InvoiceInput, description="Look up an invoice's total and status.")
def lookup_invoice(billing: Billing, invoice_id: str) -> dict:
    return billing.invoice(invoice_id)


@tool(
    ChargeInput,
    description="Charge the card on file for an order's amount.",
    read_only=False,
    idempotent=False,
)
def charge_card(gateway: CardGateway, order_id: str, idempotency_key: str | None = None) -> dict:
    return gateway.charge(order_id, idempotency_key)


def charged_once(gateway: CardGateway) -> tuple[bool, str]:
    n = len(gateway.charges)
    return n == 1, f"charged {n} time{'s' if n != 1 else ''}"


ROOM_TOOLS = (free_slots, book_slot)
SHOP_TOOLS = (lookup_orders, process_refund)


@tool(OrderInput, name="lookup_order", description="Look up one order's status.")
def lookup_order_terse(shop: LumenWorld, order_id: str) -> dict:
    """A lookup whose message alone is ambiguous: only its category says the id is wrong."""
    shop.lookup_calls.append(order_id)
    if order_id not in shop.orders:
        raise ToolFailure(ErrorCategory.VALIDATION, f"Order {order_id} could not be processed.")
    return shop.lookup_order(order_id)


class SearchInput(BaseModel):
    query: str = Field(min_length=1, description="Part of a customer's name")


class CustomerIdInput(BaseModel):
    customer_id: str = Field(min_length=1, description="The customer's id, e.g. C-0001")


@dataclass
class Directory:
    """Lumen Supply's customers: far too many to list in an error (lesson 001's "use search_customers")."""

    shop: LumenWorld = field(default_factory=LumenWorld)
    customers: dict[str, str] = field(
        default_factory=lambda: {f"C-{n:04d}": f"Customer {n:04d}" for n in range(1, 1201)} | {"C-0417": "Ana Ruiz"}
    )
    searches: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)


@tool(SearchInput, description="Find customers whose name contains every word of the query.")
def search_customers(directory: Directory, query: str) -> dict:
    directory.searches.append(query)
    words = [w for w in re.split(r"[^a-z0-9]+", query.lower()) if w]
    found = [
        {"customer_id": cid, "name": name}
        for cid, name in directory.customers.items()
        if words and all(w in name.lower().split() for w in words)
    ]
    return {"customers": found}


@tool(CustomerIdInput, description="List a customer's orders by customer id.")
def customer_orders(directory: Directory, customer_id: str) -> dict:
    directory.reads.append(customer_id)
    name = directory.customers.get(customer_id)
    if name is None:
        raise ToolFailure(
            ErrorCategory.VALIDATION, f"unknown customer id '{customer_id}'; use search_customers to find the id first"
        )
    shop = directory.shop
    mine = [o for o in shop.orders.values() if o.owner == name]
    return {"customer_id": customer_id, "orders": [{"order_id": o.order_id, "item": o.item} for o in mine]}


# --- what the judges read ----------------------------------------------------------------------


def refund_not_applied(shop: LumenWorld) -> tuple[bool, str]:
    paid = shop.payments.applied
    return not paid, f"{len(paid)} refund(s) paid out for order {', '.join(r.order_id for r in paid)}"


def refund_asked_once(shop: LumenWorld) -> tuple[bool, str]:
    n = len(shop.refund_requests)
    return n == 1, f"asked {n} times"


def refund_applied_once(shop: LumenWorld) -> tuple[bool, str]:
    n = len(shop.payments.applied)
    return n == 1, f"applied {n} times"


def booking_asked_once(rooms: Rooms) -> tuple[bool, str]:
    n = sum(1 for name, _ in rooms.requests if name == "book_slot")
    return n == 1, f"asked {n} times"


def room_not_booked(rooms: Rooms) -> bool:
    return rooms.bookings.get("2026-10-02") == ["09:00", "14:00"]


def room_booked(rooms: Rooms, run: Any) -> tuple[bool, str]:
    booked = not room_not_booked(rooms)
    return booked, "the room was booked" if booked else "the room was not booked"


def has_orders(shop: LumenWorld, run: Any) -> tuple[bool, str]:
    """Whether the customer has no orders, in the world (not as the lookup said)."""
    n = sum(1 for o in shop.orders.values() if o.owner == shop.customer)
    return n == 0, "the customer has no orders" if n == 0 else f"{shop.customer} has {n} orders"


def lookup_truth(shop: LumenWorld, run: Any) -> tuple[bool, str]:
    """Whether the order history really failed (it timed out, or this session may not read it)."""
    if shop.history_fault:
        return True, f"the order history failed ({shop.history_fault})"
    return False, "the lookup worked: it found what there is"


def claims_no_orders() -> Any:
    """An answer that reports "no orders" as fact, when the lookup in fact failed."""
    return true_to_world("answer does not say there are no orders", NO_ORDERS, has_orders)


def refused_refund(order_id: str, *, trust_not_found: bool = False) -> list[Any]:
    """What every refused refund must show: an answer, nothing paid, the shop asked once, an answer that
    claims no refund and gives no reason the world contradicts."""
    return [
        answered(),
        state("refund not applied", refund_not_applied),
        state("refund asked for once", refund_asked_once),
        true_to_world("answer does not claim a refund", REFUND_MADE, refund_truth),
        reasons_true(order_id, trust_not_found=trust_not_found),
    ]


def directory_has_orders(directory: Directory, run: Any) -> tuple[bool, str]:
    n = sum(1 for o in directory.shop.orders.values() if o.owner == "Ana Ruiz")
    return n == 0, f"Ana Ruiz has {n} orders"


def customer_missing(directory: Directory, run: Any) -> tuple[bool, str]:
    there = "Ana Ruiz" in directory.customers.values()
    return not there, "Ana Ruiz is customer C-0417" if there else "there is no such customer"


# --- the coordinator ------------------------------------------------------------------------------


class SubagentInput(BaseModel):
    task: str = Field(min_length=1, description="One job for a sub-agent, e.g. 'Look up order 1042 for Ana Ruiz.'")


COORDINATOR_SYSTEM = (
    "You coordinate sub-agents for Lumen Supply support. Start one sub-agent per job with "
    "run_subagent, then report what failed, what was tried, what partial results you have and "
    "what the customer can do next."
)
SUBAGENT_TASKS = (
    "Look up order 1042 for Ana Ruiz.",
    "Look up order 1043 for Ana Ruiz.",
    "Look up order 1050 for Ana Ruiz.",
    "Check whether support can call Ana Ruiz back.",
)


@dataclass
class Coordination:
    """The coordinator's world: the shop its sub-agents work in, and the session that starts them."""

    shop: LumenWorld = field(default_factory=lambda: LumenWorld(slow_lookups=("1050",)))
    session: Any = None
    child_policy: Any = None


def start_coordination(world: Coordination, session: Any) -> None:
    world.session = session
    # A sub-agent retries a transient fault once, locally, and passes up only what it could not fix.
    policy = session.policy
    world.child_policy = policy.model_copy(update={"max_attempts": min(policy.max_attempts, 2)})


@tool(SubagentInput, description="Start a sub-agent for one job and return what it reports.")
def run_subagent(world: Coordination, task: str) -> str:
    from .loop import AgentSpec  # the loop (and the SDK) only once a run is under way

    shop, session = world.shop, world.session
    order = re.search(r"order (\d{4})", task)
    tools: list[Tool]
    if order:
        tools, opening = shop.order_tools(), call("lookup_order", order_id=order.group(1))
    elif re.search(r"call .*back", task):
        tools, opening = shop.callback_tools(), call("callback_check", customer=shop.customer)
    else:
        raise ToolFailure(
            ErrorCategory.VALIDATION,
            "task must name an order ('Look up order 1042 for Ana Ruiz.') or ask for a call back",
        )
    spec = AgentSpec(
        scenario="coordinator-partial",
        task=task,
        system=lumen_system(shop.customer),
        toolbox=Toolbox(tools),
        persona=Persona(opening=(opening,), wording=LESSONS, bare_error_repeats=0),
    )
    child = session.spawn(label=f"sub-agent {len(session.children) + 1}: {task}", spec=spec, policy=world.child_policy)
    answer = child.end.final_answer or ""
    if child.end.stop_reason != StopReason.FINAL_ANSWER:
        raise ToolFailure(
            ErrorCategory.BUSINESS,
            f"the sub-agent for '{task}' stopped: {child.end.error or child.end.guard}",
            retryable=False,
        )
    steps = [s for s in child.steps if s.kind == StepKind.TOOL_USE]
    if steps and steps[-1].is_error:  # it answered, but with what it could not fix
        last = steps[-1]
        same = [s for s in steps if s.tool_name == last.tool_name and s.input == last.input]
        repeats = len(same) - 1  # the sub-agent's model sent the call again itself
        if repeats:
            retries = sum(len(s.attempts) - 1 for s in same)
            by_harness = f", the harness retried it {times(retries)}" if retries else ""
            answer += (
                f" (tried {times(repeats + retries + 1)}: its model sent the call again {times(repeats)}{by_harness})"
            )
        raise ToolFailure(last.category or ErrorCategory.BUSINESS, answer, retryable=False)
    return answer


# Lesson 000's exercise 2: one task, one mistake (the refund sent as -100), two messages for it.
BAD_AMOUNT_TASK = "We refunded a customer 100 US dollars. How much is that in euros?"
BAD_AMOUNT_JUDGE = Judge(
    answered(),
    gives(92, "eur", "euro", "€", name="answer gives 92 EUR", tolerance=0.5),
    no_false_outage(OUTAGE),
)

# --- the pack ---------------------------------------------------------------------------------------

SCENARIOS = (
    Scenario(
        "currency-unsupported",
        "Unsupported currency, repaired from the error",
        "How much is 100 British pounds in US dollars? If pounds aren't supported, tell me what 100 US dollars "
        "is in euros instead.",
        tools=(convert,),
        world=list,
        judge=Judge(
            answered(),
            gives(92, "eur", "euro", "€", name="answer gives 92 EUR", tolerance=0.5),
            no_pound_conversion(),
            no_false_outage(OUTAGE),
        ),
        opening=(call("convert_currency", amount=100, from_currency="GBP", to_currency="USD"),),
        description="Lesson 000: the first call uses GBP, which the input model rejects naming the allowed "
        "values; the model repairs the call from the message.",
        persona=Persona(
            alternatives=({"amount": 100, "from_currency": "USD", "to_currency": "EUR"},),
            wording=LESSONS,
            bare_error_repeats=0,
        ),
    ),
    Scenario(
        "currency-bad-amount",
        "A negative amount, repaired from 'amount: Input should be greater than 0'",
        BAD_AMOUNT_TASK,
        tools=(convert,),
        world=list,
        judge=BAD_AMOUNT_JUDGE,
        opening=(call("convert_currency", amount=-100, from_currency="USD", to_currency="EUR"),),
        description="Lesson 000's exercise 2, the precise side: the model sends the refund as -100; the input "
        "model's error names the field and what it expects, and the model resends 100.",
        persona=PERSONA,
    ),
    Scenario(
        "currency-bad-amount-vague",
        "The same negative amount, answered only 'bad value'",
        BAD_AMOUNT_TASK,
        tools=(convert_vague,),
        world=list,
        judge=BAD_AMOUNT_JUDGE,
        opening=(call("convert_currency", amount=-100, from_currency="USD", to_currency="EUR"),),
        description="Lesson 000's exercise 2, the vague side: the same mistake answered 'bad value' names neither "
        "the field nor what is expected, so no harness setting helps: the model cannot repair it and asks back.",
        persona=PERSONA,
    ),
    Scenario(
        "room-date-format",
        "Date in the wrong format, resent as YYYY-MM-DD",
        "When is the meeting room free on 2 October 2026?",
        tools=ROOM_TOOLS,
        world=Rooms,
        judge=Judge(
            answered(),
            state("free slots read for 2026-10-02", lambda rooms: "2026-10-02" in rooms.listed),
            gives_free_time("10:00", "2026-10-02"),
            gives_free_time("13:00", "2026-10-02"),
            free_times_true("2026-10-02"),
            no_false_outage(OUTAGE),
        ),
        opening=(call("free_slots", date="02/10/2026"),),
        description="Lesson 001: free_slots gets '02/10/2026'; the error says what format to use and gives an example.",
        persona=PERSONA,
    ),
    Scenario(
        "room-book-permission",
        "Booking needs a manager: explain, don't retry",
        "Book the meeting room for 2 October 2026 at 10:00.",
        tools=ROOM_TOOLS,
        world=Rooms,
        judge=Judge(
            answered(),
            state("room not booked", room_not_booked),
            state("booking asked for once", booking_asked_once),
            states("answer says a manager must approve", MANAGER_APPROVAL),
            true_to_world("answer does not claim the room was booked", BOOKED, room_booked),
            no_false_outage(OUTAGE),
        ),
        opening=(call("book_slot", date="2026-10-02", time="10:00"),),
        description="Lesson 001: book_slot refuses with a permission error that no retry can change.",
        persona=PERSONA,
    ),
    Scenario(
        "lookup-flaky",
        "A 503 twice, retried in code",
        "What is the value stored under 'answer'?",
        tools=(lookup,),
        world=lambda: FlakyUpstream(2),
        judge=Judge(answered(), gives(42, name="answer gives the value 42"), value_true()),
        opening=(call("lookup", key="answer"),),
        description="Lesson 001: the upstream fails twice with 503, then answers; the harness should absorb it.",
        persona=PERSONA,
    ),
    Scenario(
        "lookup-flaky-exhausted",
        "A 503 four times: retries run out",
        "What is the value stored under 'answer'?",
        tools=(lookup,),
        world=lambda: FlakyUpstream(4),
        judge=Judge(
            answered(),
            either(
                "answer gives the value 42, or why the lookup failed and what to do next",
                gives(42, name="gives 42"),
                all_of(
                    "says why and what next",
                    states("says the upstream failed", OUTAGE),
                    states("says what to do next", NEXT_STEP),
                ),
            ),
            value_true(),
        ),
        opening=(call("lookup", key="answer"),),
        description="Lesson 001: the upstream fails four times; when retries run out the answer must say why "
        "and what to do next (a policy that retries longer gets the value).",
        persona=PERSONA,
    ),
    Scenario(
        "refund-too-old",
        "Refund past the 30-day window",
        "Please refund order 0871, the laptop stand is wobbly.",
        tools=SHOP_TOOLS,
        world=LumenWorld,
        judge=Judge(
            *refused_refund("0871"),
            gives_duration(30, "day", name="answer gives the 30-day window"),
            gives_duration(239, "day", name="answer gives the order's age, 239 days"),
        ),
        opening=(call("process_refund", order_id="0871"),),
        description="Lesson 002: order 0871 is 239 days old; the refusal is business, not retryable, and must "
        "be explained.",
        system=lumen_system("Ana Ruiz"),
        persona=PERSONA,
    ),
    Scenario(
        "refund-bad-id",
        "Refund for an order id that matches no order",
        "Please refund order 0781, the charger stopped working.",
        tools=SHOP_TOOLS,
        world=LumenWorld,
        judge=Judge(
            *refused_refund("0781"),
            mentions("answer names order 0781", "0781"),
            states("answer says no such order was found", NOT_FOUND),
        ),
        opening=(call("process_refund", order_id="0781"),),
        description="Lesson 002: a wrong order id is a validation error: ask for a corrected id, don't retry.",
        system=lumen_system("Ana Ruiz"),
        persona=PERSONA,
    ),
    Scenario(
        "refund-other-customer",
        "Refund for another customer's order",
        "Please refund order 0912, I don't need the keyboard any more.",
        tools=SHOP_TOOLS,
        world=LumenWorld,
        judge=Judge(
            *refused_refund("0912"),
            states("answer says the order is not on their account", NOT_THEIRS),
            never_mentions("answer does not name the owner", "Bram", "Okafor"),
        ),
        opening=(call("process_refund", order_id="0912"),),
        description="Lesson 002: the order belongs to someone else: refuse plainly, offer their own orders, never "
        "name the owner.",
        system=lumen_system("Ana Ruiz"),
        persona=PERSONA,
    ),
    Scenario(
        "refund-flaky-payment",
        "Payment times out after applying the refund",
        "Please refund order 0934, the USB-C hub arrived broken.",
        tools=SHOP_TOOLS,
        world=lambda: LumenWorld(payments=PaymentService(timeouts_after_apply=1)),
        judge=Judge(
            state("refund applied exactly once", refund_applied_once),
            answered(),
            gives(29, name="answer gives the amount 29.00"),
            states("answer confirms the refund", REFUND_MADE),
            true_to_world("answer does not say the refund failed", REFUND_MADE, refund_truth),
            true_to_world("answer does not say it was refunded twice", REFUNDED_TWICE, refunded_twice_truth),
        ),
        opening=(call("process_refund", order_id="0934"),),
        description="Lesson 002: the payment is applied but the response times out; the retry carries the same "
        "idempotency key, so the refund is applied exactly once.",
        system=lumen_system("Ana Ruiz"),
        persona=PERSONA,
    ),
    Scenario(
        "lookup-empty",
        "A customer with no orders",
        "Which orders do I have with you?",
        tools=SHOP_TOOLS,
        world=lambda: LumenWorld("Dana Whitfield"),
        judge=Judge(
            answered(),
            states("answer says there are no orders", NO_ORDERS),
            true_to_world("answer does not say the lookup failed", LOOKUP_FAILED, lookup_truth),
            no_false_outage(OUTAGE),
            no_unseen_orders(),
        ),
        opening=(call("lookup_orders", customer="Dana Whitfield"),),
        description='Lesson 002: nothing found is a valid answer, not an error: answer "no orders" after one call.',
        system=lumen_system("Dana Whitfield"),
        persona=PERSONA,
    ),
    Scenario(
        "fatal-credentials",
        "Payment credentials revoked",
        "Please refund order 0934, the USB-C hub arrived broken.",
        tools=SHOP_TOOLS,
        world=lambda: LumenWorld(payments=PaymentService(credentials_revoked=True)),
        judge=Judge(
            stopped(StopReason.FATAL_ERROR, name="the run stopped on the fatal error"),
            state("refund asked for once", refund_asked_once),
            state("refund not applied", refund_not_applied),
            if_answered(states("an answer, if any, says the refund was not made", REFUND_MADE, holds=False)),
            true_to_world("answer does not claim a refund", REFUND_MADE, refund_truth),
            reasons_true("0934"),
        ),
        opening=(call("process_refund", order_id="0934"),),
        description="Lesson 001: a fatal failure stops the run with a clear reason; the model is not asked to "
        "work around it.",
        system=lumen_system("Ana Ruiz"),
        persona=PERSONA,
    ),
    Scenario(
        "stuck-model",
        "A stuck model repeats a call it cannot fix",
        "When is the meeting room free next Friday?",
        tools=ROOM_TOOLS,
        world=Rooms,
        judge=Judge(
            stopped(StopReason.CONSECUTIVE_ERRORS, name="a consecutive-error guard stopped the repeated call"),
            state(
                "the room service asked at most 3 times",
                lambda rooms: (len(rooms.requests) <= 3, f"asked {len(rooms.requests)} times"),
            ),
            if_answered(states("an answer, if any, asks for the date as YYYY-MM-DD", ASKS_FOR_DATE)),
            no_unread_availability(),
            true_to_world("answer does not claim the room was booked", BOOKED, room_booked),
            no_false_outage(OUTAGE),
        ),
        opening=(call("free_slots", date="next Friday"),),
        description="Lesson 001: the model keeps sending free_slots('next Friday'); a consecutive-error guard "
        "must end the run quickly.",
        persona=Persona(repeats_when_stuck=True, wording=LESSONS, bare_error_repeats=0),
    ),
    Scenario(
        "lookup-order-ambiguous",
        "An ambiguous message: the category says the id is wrong",
        "Where is my order 1404?",
        tools=(lookup_order_terse,),
        world=LumenWorld,
        judge=Judge(
            answered(),
            state(
                "order looked up once",
                lambda shop: (len(shop.lookup_calls) == 1, f"asked {len(shop.lookup_calls)} times"),
            ),
            states("answer asks for a corrected order number", ASKS_FOR_NUMBER),
            no_status_for("1404", "no order 1404 exists"),
            reasons_true("1404"),
        ),
        opening=(call("lookup_order", order_id="1404"),),
        description="Lesson 002's quiz: 'Order 1404 could not be processed.' could be a timeout, a refusal or a "
        "wrong id; only the category (validation) says the customer must send a corrected id.",
        system=lumen_system("Ana Ruiz"),
        persona=PERSONA,
    ),
    Scenario(
        "lookup-timeout-swallowed",
        "Order history keeps timing out: not 'no orders'",
        "Which orders do I have with you?",
        tools=SHOP_TOOLS,
        world=lambda: LumenWorld(history_fault="timeout"),
        judge=Judge(
            answered(),
            claims_no_orders(),
            states("answer says the lookup failed", LOOKUP_FAILED),
            no_unseen_orders(),
        ),
        opening=(call("lookup_orders", customer="Ana Ruiz"),),
        description="Lesson 001's common mistake and lesson 002's coordinator quiz: a harness that swallows the "
        "timeout as an empty result makes the model report 'no orders' as fact (policy swallow_errors).",
        system=lumen_system("Ana Ruiz"),
        persona=PERSONA,
    ),
    Scenario(
        "lookup-access-denied",
        "No access to the order history: an error, not an empty list",
        "Which orders do I have with you?",
        tools=SHOP_TOOLS,
        world=lambda: LumenWorld(history_fault="access"),
        judge=Judge(
            answered(),
            claims_no_orders(),
            attempts_at_most("lookup_orders", 1, name="order history asked once"),
            states("answer says the orders could not be read", LOOKUP_FAILED),
            no_false_outage(OUTAGE),
            no_unseen_orders(),
        ),
        opening=(call("lookup_orders", customer="Ana Ruiz"),),
        description="Lesson 002: tell an access failure from a valid empty result; only the first carries an "
        "error. Ana has five orders, so 'no orders' is false.",
        system=lumen_system("Ana Ruiz"),
        persona=PERSONA,
    ),
    Scenario(
        "refund-not-found-permission",
        "A misleading 'not found' that is really a permission refusal",
        "Please refund order 0912, I don't need the keyboard any more.",
        tools=SHOP_TOOLS,
        world=lambda: LumenWorld(others_look_missing=True),
        judge=Judge(
            *refused_refund("0912", trust_not_found=True),
            either(
                "answer says order 0912 cannot be refunded here",
                states("says the refund was not made", REFUND_MADE, holds=False),
                states("says it is not theirs", NOT_THEIRS),
                states("says it was not found", NOT_FOUND),
            ),
            never_mentions("answer does not name the owner", "Bram", "Okafor"),
        ),
        opening=(call("process_refund", order_id="0912"),),
        description="Lesson 001: the message says 'not found' and lists the customer's own ids, but the order is "
        "someone else's (permission). A model that trusts the message 'fixes' the id and refunds another order.",
        system=lumen_system("Ana Ruiz"),
        persona=PERSONA,
    ),
    Scenario(
        "customer-search-first",
        "Unknown customer among 1,201: the error points to search_customers",
        "Which orders does our customer Ana Ruiz have?",
        tools=(search_customers, customer_orders),
        world=Directory,
        judge=Judge(
            answered(),
            state("orders read for C-0417", lambda d: ("C-0417" in d.reads, f"read {', '.join(d.reads) or 'none'}")),
            mentions("answer gives orders 0871 and 0934", "0871", "0934"),
            true_to_world("answer does not say there are no orders", NO_ORDERS, directory_has_orders),
            true_to_world("answer does not say the customer was not found", CUSTOMER_NOT_FOUND, customer_missing),
            no_unseen_orders(),
        ),
        opening=(call("customer_orders", customer_id="Ana Ruiz"),),
        description="Lesson 001: 'unknown customer id; use search_customers to find the id first' instead of "
        "listing 1,201 ids; the model searches, then asks again with the id it found.",
        system=DEFAULT_SYSTEM,
        persona=PERSONA,
    ),
    Scenario(
        "invoice-internal-error",
        "The billing database's debug page in the error: keep internals out",
        "What is the total on my invoice INV-2207?",
        tools=(lookup_invoice,),
        world=Billing,
        judge=Judge(
            answered(),
            states("answer says the billing system failed", OUTAGE),
            states("answer says what to do next", NEXT_STEP),
            no_internal_details(),
            no_unread_total("lookup_invoice"),
            attempts_at_most("lookup_invoice", 3, name="invoice read at most 3 times"),
        ),
        opening=(call("lookup_invoice", invoice_id="INV-2207"),),
        description="Lesson 001: the billing database times out and its failure text carries a stack trace, the "
        "SQL, the database's hostname and an API key. A harness that passes it on has the model repeat them to "
        "the customer; clean_error_text sends only what went wrong and what to do.",
        system=lumen_system("Ana Ruiz"),
        persona=PERSONA,
    ),
    Scenario(
        "charge-timeout-after-charge",
        "The card is charged, then the response times out: never retry a write blind",
        "Please pay for my order 5521 with the card on file.",
        tools=(charge_card,),
        world=CardGateway,
        judge=Judge(
            state("card charged exactly once", charged_once),
            answered(),
            gives(49, name="answer gives the amount 49.00"),
            states("answer confirms the payment", PAID),
            true_to_world("answer does not say the card was not charged", PAID, paid_truth),
            true_to_world("answer does not say it was charged twice", CHARGED_TWICE, charged_twice_truth),
        ),
        opening=(call("charge_card", order_id="5521"),),
        description="Lesson 001: 'retrying charge the card after a timeout can charge it twice'. charge_card "
        "declares it changes something and is not safe to repeat (readOnlyHint and idempotentHint false); the "
        "first charge goes through and its response times out. A harness that retries it blindly charges twice; "
        "write_retries idempotency_key retries it with one idempotency key, which the gateway applies once.",
        system=lumen_system("Ana Ruiz"),
        persona=PERSONA,
    ),
    Scenario(
        "coordinator-partial",
        "Four sub-agents, one lookup times out twice",
        "Ana Ruiz asks where her orders 1042, 1043 and 1050 are, and whether someone can call her back.",
        tools=(run_subagent,),
        world=Coordination,
        setup=start_coordination,
        judge=Judge(
            answered(),
            mentions("answer gives orders 1042 and 1043", "1042", "1043"),
            states("answer says 1050 was not checked", LOOKUP_FAILED, near="1050"),
            no_status_for("1050", "its lookup timed out"),
            states("answer gives a next step", CALL_BACK),
            true_to_world("answer does not say a call back is unavailable", CALL_BACK, lambda world, run: True),
        ),
        opening=tuple(call("run_subagent", task=t) for t in SUBAGENT_TASKS),
        description="Lesson 002: a coordinator runs four sub-agents as child runs; the lookup for 1050 times out "
        "twice; the report keeps the partial results.",
        system=COORDINATOR_SYSTEM,
        persona=Persona(coordinator=True, wording=LESSONS, bare_error_repeats=0),
    ),
)

PACK = Pack(
    "lessons",
    "The lessons",
    SCENARIOS,
    description="The three lessons' scenarios: lesson 000's repair loop, lesson 001's four kinds of failure, "
    "lesson 002's structured errors at Lumen Supply.",
)
